//===- CpuTarget.cpp - native code for the host or a --triple/--cpu -------===//
//
// The CPU module: every kernel an internal function, every lowered function
// an exported entry point that checks its arguments and calls its kernels in
// order. The target chosen here is also the one the JIT and the CUDA host stub use.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "gradc/support/Diagnostics.h"
#include "gradc/support/Log.h"

#include <atomic>
#include <exception>
#include <map>
#include <numeric>
#include <set>
#include <thread>
#include <unordered_map>

#include <unistd.h>

#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>

using namespace llvm;

namespace gradc::codegen {

namespace {

/// The CPU targets gradc is tested on (test/codegen/triples.test compiles and
/// checks a model for each): Linux, ELF objects, glibc or musl. Anything else
/// is refused before LLVM is asked, where LLVM might abort or emit an object
/// nobody has linked.
struct TestedArch {
  Triple::ArchType arch;
  const char *triple;      // as the messages spell it
  const char *default_cpu; // for --triple without --cpu
};
const TestedArch kTestedArchs[] = {
    {Triple::x86_64, "x86_64-linux-gnu", "generic"},
    // As clang does for i686: x87 alone cannot select every float operation
    // gradc emits (a plain softmax aborted LLVM), so SSE2 is the baseline.
    {Triple::x86, "i686-linux-gnu", "pentium4"},
    {Triple::aarch64, "aarch64-linux-gnu", "generic"},
};

const TestedArch *tested_arch(const Triple &t) {
  if (!t.isOSLinux() || !t.isOSBinFormatELF())
    return nullptr;
  Triple::EnvironmentType env = t.getEnvironment();
  if (env != Triple::GNU && env != Triple::Musl && env != Triple::UnknownEnvironment)
    return nullptr; // x32, Android, ... : other ABIs
  for (const TestedArch &a : kTestedArchs)
    if (a.arch == t.getArch())
      return &a;
  return nullptr;
}

bool is_native(const std::string &cpu) { return cpu.empty() || cpu == "native"; }

/// The normalized --triple, or the host's.
std::string triple_of(const CodegenOptions &opts) {
  return opts.triple.empty() ? sys::getDefaultTargetTriple() : Triple::normalize(opts.triple);
}

} // namespace

} // namespace gradc::codegen

namespace gradc {

using codegen::is_native;
using codegen::tested_arch;
using codegen::triple_of;

std::string tested_triples() {
  using codegen::kTestedArchs;
  std::string list;
  for (const codegen::TestedArch &a : kTestedArchs)
    list += (list.empty() ? "" : ", ") + std::string(a.triple);
  return list;
}

std::optional<std::string> cpu_target_problem(const CodegenOptions &opts) {
  codegen::initialize_llvm();
  std::string triple = triple_of(opts);
  std::string error;
  const llvm::Target *target = TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return "unknown target triple '" + opts.triple + "'";
  Triple t(triple);
  if (t.isNVPTX())
    return "--triple=" + opts.triple + ": gradc cannot emit object files for " + triple +
           " (for GPU kernels use --target=cuda)";
  if (!tested_arch(t))
    return "--triple=" + opts.triple + ": gradc is not tested on " + triple + "; it compiles for " + tested_triples();
  if (is_native(opts.cpu)) {
    if (!opts.triple.empty() && opts.cpu == "native" && t.getArch() != Triple(sys::getProcessTriple()).getArch())
      return "--cpu=native names this machine's CPU, which cannot run " + triple + " code";
    return std::nullopt;
  }
  std::unique_ptr<MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, "", ""));
  if (!info->isCPUStringValid(opts.cpu))
    return "unknown target CPU '" + opts.cpu + "' for " + triple;
  std::unique_ptr<MCSubtargetInfo> cpu(target->createMCSubtargetInfo(triple, opts.cpu, ""));
  if (t.getArch() == Triple::x86_64 && !cpu->checkFeatures("+64bit"))
    return "--cpu=" + opts.cpu + " cannot run x86_64 code (" + triple + "): it has no 64-bit mode";
  if (t.getArch() == Triple::x86 && !cpu->checkFeatures("+sse2"))
    return "--cpu=" + opts.cpu + " has no SSE2, which gradc's 32-bit x86 code needs (" + triple + ")";
  return std::nullopt;
}

} // namespace gradc

namespace gradc::codegen {

HostTarget resolve_cpu_target(const CodegenOptions &opts) {
  if (std::optional<std::string> problem = cpu_target_problem(opts))
    option_error(*problem);
  HostTarget host;
  host.triple = triple_of(opts);
  if (is_native(opts.cpu) && (opts.triple.empty() || opts.cpu == "native")) {
    // The host itself, with every feature it has (AVX-512 included).
    host.cpu = sys::getHostCPUName().str();
    SubtargetFeatures features;
    for (const auto &feature : sys::getHostCPUFeatures())
      features.AddFeature(feature.getKey(), feature.getValue());
    host.features = features.getString();
    return host;
  }
  host.cpu = opts.cpu.empty() ? tested_arch(Triple(host.triple))->default_cpu : opts.cpu;
  return host;
}

} // namespace gradc::codegen

namespace gradc {

Target describe_target(const CodegenOptions &opts) {
  codegen::HostTarget host = codegen::resolve_cpu_target(opts);
  Target t;
  t.kind = opts.target;
  t.triple = host.triple;
  t.cpu = host.cpu;
  std::string error;
  const llvm::Target *target = TargetRegistry::lookupTarget(host.triple, error);
  std::unique_ptr<MCSubtargetInfo> info(target->createMCSubtargetInfo(host.triple, host.cpu, host.features));
  Triple triple(host.triple);
  if (triple.isX86()) {
    bool avx512 = info->checkFeatures("+avx512f");
    t.vector_bytes = avx512 ? 64 : info->checkFeatures("+avx") ? 32 : 16;
    t.vector_registers = avx512 && triple.isArch64Bit() ? 32 : triple.isArch64Bit() ? 16 : 8;
    t.has_fma = info->checkFeatures("+fma");
  } else {
    t.vector_bytes = 16; // NEON, and a safe register-tile width elsewhere
    t.vector_registers = triple.isAArch64() ? 32 : 16;
    t.has_fma = triple.isAArch64();
  }
  if (opts.triple.empty() && is_native(opts.cpu)) {
    t.cores = int(std::thread::hardware_concurrency());
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l1 >= (4 << 10))
      t.l1d_bytes = l1;
    if (l2 >= (64 << 10))
      t.l2_bytes = l2;
  }
  if (t.is_gpu()) {
    t.gpu_arch = opts.gpu_arch; // warp 32, 48 KiB static shared memory, 1024 threads on every sm_* gradc targets
    t.tf32 = opts.gpu_tf32;
  }
  return t;
}

} // namespace gradc

namespace gradc::codegen {

std::unique_ptr<TargetMachine> create_cpu_target_machine(const CodegenOptions &opts) {
  HostTarget host = resolve_cpu_target(opts);
  return create_target_machine(host.triple, host.cpu, host.features, opts.opt_level);
}

namespace {

/// `void P_set_num_threads(int32_t)`, `int32_t P_get_num_threads(void)` and
/// `void P_shutdown_threads(void)` (see the header): the pool's size, or 1
/// and nothing to stop where the runtime is not linked.
void emit_thread_count_functions(Module &m, const std::string &prefix, bool threads) {
  LLVMContext &ctx = m.getContext();
  Type *i32 = Type::getInt32Ty(ctx), *void_ty = Type::getVoidTy(ctx);
  auto define = [&](const std::string &name, FunctionType *type) {
    Function *f = Function::Create(type, GlobalValue::ExternalLinkage, prefix + name, m);
    GRADC_CHECK(f->getName() == prefix + name, "codegen", "the symbol " + prefix + name + " is taken");
    return f;
  };
  Function *set = define("_set_num_threads", FunctionType::get(void_ty, {i32}, false));
  Function *get = define("_get_num_threads", FunctionType::get(i32, {}, false));
  Function *stop = define("_shutdown_threads", FunctionType::get(void_ty, {}, false));
  IRBuilder<> sb(BasicBlock::Create(ctx, "entry", set));
  if (threads)
    sb.CreateCall(runtime_function(m, RuntimeFn::SetNumThreads), {set->getArg(0)});
  sb.CreateRetVoid();
  IRBuilder<> gb(BasicBlock::Create(ctx, "entry", get));
  gb.CreateRet(threads ? static_cast<Value *>(gb.CreateCall(runtime_function(m, RuntimeFn::GetNumThreads)))
                       : gb.getInt32(1));
  IRBuilder<> tb(BasicBlock::Create(ctx, "entry", stop));
  if (threads)
    tb.CreateCall(runtime_function(m, RuntimeFn::Shutdown));
  tb.CreateRetVoid();
}

/// The kernels of a module as functions: one per template (loops/Templates.h),
/// so that compile time grows with the templates only (a model's repeated
/// layers share one, and so do layers that differ in their channel count).
struct KernelTable {
  ModuleTemplates templates;
  std::vector<std::string> symbols; // per template

  size_t size() const { return templates.templates.size(); }
  const Kernel &kernel(size_t t) const { return *templates.templates[t].kernel; }
  KernelOptions options(size_t t, bool threads, bool fma) const {
    return {Device::CPU, threads, fma, &templates.templates[t].params};
  }
};

KernelTable distinct_kernels(const LoweredModule &module, const std::string &prefix) {
  KernelTable table{kernel_templates(module), {}};
  std::set<std::string> taken = {prefix + "_set_num_threads", prefix + "_get_num_threads",
                                 prefix + "_shutdown_threads"};
  for (const LoweredFunction &fn : module.functions)
    taken.insert(prefix + "_" + fn.name);
  table.symbols.resize(table.size());
  for (size_t f = 0; f < module.functions.size(); ++f)
    for (size_t k = 0; k < module.functions[f].kernels.size(); ++k) {
      size_t t = table.templates.use[f][k];
      if (!table.symbols[t].empty())
        continue;
      std::string base = prefix + "_" + module.functions[f].name + "_" + module.functions[f].kernels[k].name,
                  symbol = base;
      for (int n = 1; taken.count(symbol); ++n)
        symbol = base + "_" + std::to_string(n);
      taken.insert(symbol);
      table.symbols[t] = symbol;
    }
  return table;
}

void log_shared(const KernelTable &table) {
  const ModuleTemplates &t = table.templates;
  if (t.shared)
    log(LogLevel::Info, "codegen",
        std::to_string(t.shared) + " kernels reuse an earlier kernel's function (" + std::to_string(t.identical) +
            " identical, " + std::to_string(t.shared - t.identical) + " differing only in constants passed as arguments; " +
            std::to_string(table.size()) + " distinct)");
}

/// The type of a CPU kernel's function: one pointer per buffer, and one to
/// the table of its template's arguments where it has any.
FunctionType *kernel_type(LLVMContext &ctx, const KernelTable &table, size_t t) {
  size_t pointers = table.kernel(t).buffers.size() + (table.templates.templates[t].params.count > 0 ? 1 : 0);
  return FunctionType::get(Type::getVoidTy(ctx), SmallVector<Type *, 8>(pointers, PointerType::get(ctx, 0)), false);
}

/// Fills in the entry points of `m` (declared by create_host_module): the
/// argument checks, then each kernel in order, a time loop's kernels in a
/// counted loop. `kernel_fn(d)` is the function of distinct kernel d.
void emit_entries(Module &m, const std::vector<Function *> &entries, const LoweredModule &module,
                  const KernelTable &table, const std::function<Function *(size_t)> &kernel_fn) {
  LLVMContext &ctx = m.getContext();
  std::map<std::pair<size_t, KernelArgs>, GlobalVariable *> arg_tables; // one per template and arguments
  for (size_t i = 0; i < module.functions.size(); ++i) {
    const LoweredFunction &fn = module.functions[i];
    IRBuilder<> b(BasicBlock::Create(ctx, "entry", entries[i]));
    BufferValues buffers = emit_entry_prologue(b, fn);
    Value *status = fn.status ? buffers.lookup(fn.status.get()) : nullptr;
    if (status) // what the kernels report into (LoweredFunction::status)
      b.CreateMemSet(status, b.getInt8(0), kStatusWords * 8, MaybeAlign(64));
    // A loop with trip counts reads its count for this entry from a constant
    // table, through a cursor that each entry advances, back to the table's
    // start after its last count (TimeLoop: the table is one run of the
    // operator, which a loop around it may run again).
    struct OpenLoop {
      PHINode *step;
      BasicBlock *body, *exit;
      Value *trips;
    };
    std::vector<OpenLoop> open;
    walk_schedule(
        fn,
        [&](const TimeLoop &l) {
          BasicBlock *exit = BasicBlock::Create(ctx, "time.end", entries[i]);
          Value *trips = b.getInt64(l.extent);
          if (l.streamed()) {
            auto *type = ArrayType::get(b.getInt64Ty(), l.trips.size());
            auto *table = new GlobalVariable(m, type, true, GlobalValue::PrivateLinkage,
                                             ConstantDataArray::get(ctx, ArrayRef<uint64_t>(
                                                                             reinterpret_cast<const uint64_t *>(
                                                                                 l.trips.data()),
                                                                             l.trips.size())),
                                             entries[i]->getName() + ".trips");
            IRBuilder<> at_entry(&entries[i]->getEntryBlock(), entries[i]->getEntryBlock().begin());
            AllocaInst *cursor = at_entry.CreateAlloca(b.getInt64Ty(), nullptr, "trips.cursor");
            at_entry.CreateStore(b.getInt64(0), cursor);
            Value *at = b.CreateLoad(b.getInt64Ty(), cursor);
            Value *next = b.CreateAdd(at, b.getInt64(1));
            Value *wrapped = b.CreateICmpEQ(next, b.getInt64(int64_t(l.trips.size())));
            b.CreateStore(b.CreateSelect(wrapped, b.getInt64(0), next), cursor);
            trips = b.CreateLoad(b.getInt64Ty(), b.CreateInBoundsGEP(type, table, {b.getInt64(0), at}), "trips");
          }
          BasicBlock *before = b.GetInsertBlock();
          BasicBlock *body = BasicBlock::Create(ctx, "time", entries[i]);
          b.CreateCondBr(b.CreateICmpSGT(trips, b.getInt64(0)), body, exit);
          b.SetInsertPoint(body);
          PHINode *step = b.CreatePHI(b.getInt64Ty(), 2, "step");
          step->addIncoming(b.getInt64(0), before);
          open.push_back({step, body, exit, trips});
        },
        [&](size_t k) {
          const Kernel &kernel = fn.kernels[k];
          std::vector<Value *> args = kernel_arguments(buffers, kernel);
          const KernelArgs &values = table.templates.args[i][k];
          if (!values.empty()) { // the template's arguments for this kernel: a constant table
            GlobalVariable *&at = arg_tables[{table.templates.use[i][k], values}];
            if (!at)
              at = new GlobalVariable(m, ArrayType::get(b.getInt64Ty(), values.size()), true,
                                      GlobalValue::PrivateLinkage,
                                      ConstantDataArray::get(ctx, ArrayRef<uint64_t>(
                                                                      reinterpret_cast<const uint64_t *>(values.data()),
                                                                      values.size())),
                                      table.symbols[table.templates.use[i][k]] + ".args");
            args.push_back(at);
          }
          b.CreateCall(kernel_fn(table.templates.use[i][k]), args);
        },
        [&](const TimeLoop &) {
          OpenLoop loop = open.back();
          open.pop_back();
          Value *next = b.CreateAdd(loop.step, b.getInt64(1), "step.next");
          b.CreateCondBr(b.CreateICmpSLT(next, loop.trips), loop.body, loop.exit);
          loop.step->addIncoming(next, b.GetInsertBlock());
          b.SetInsertPoint(loop.exit);
        });
    if (status) {
      Value *code = b.CreateLoad(b.getInt64Ty(), status, "status");
      b.CreateRet(b.CreateTrunc(code, b.getInt32Ty()));
      continue;
    }
    b.CreateRet(b.getInt32(0));
  }
}

bool has_fma(const TargetMachine &tm) {
  const Triple &triple = tm.getTargetTriple();
  return triple.isAArch64() || (triple.isX86() && tm.getMCSubtargetInfo()->checkFeatures("+fma"));
}

void log_threads(const TargetMachine &tm, const CodegenOptions &opts, bool threads) {
  log(LogLevel::Info, "threads",
      threads ? "parallel loops use the runtime's thread pool: one thread per online CPU by default (" +
                    std::to_string(std::thread::hardware_concurrency()) + " here), set by " + opts.prefix +
                    "_set_num_threads"
              : "no thread pool for " + tm.getTargetTriple().str() + ": parallel loops run serially");
}

//===----------------------------------------------------------------------===//
// Partitions: a large module compiled by several threads
//===----------------------------------------------------------------------===//

/// A rough count of the LLVM instructions a statement becomes: its statements
/// and expression nodes, an unrolled loop's body once per index (the packed
/// products' register tiles are most of a model's code).
double emitted_size(const Stmt &s, std::unordered_map<const LExpr *, double> &memo) {
  std::function<double(const LExprPtr &)> expr = [&](const LExprPtr &e) -> double {
    if (!e)
      return 0;
    auto [it, fresh] = memo.try_emplace(e.get(), 0.0);
    if (!fresh)
      return it->second;
    double n = 1;
    for (const LExprPtr &o : e->operands)
      n += expr(o);
    memo[e.get()] = n;
    return n;
  };
  switch (s.kind) {
  case StmtKind::For:
    return 2 + emitted_size(*s.body, memo) * (s.for_kind == ForKind::Unrolled ? double(s.extent) : 1.0);
  case StmtKind::Store:
    return 1 + expr(s.index) + expr(s.value);
  case StmtKind::Seq: {
    double n = 0;
    for (const StmtPtr &c : s.seq)
      n += emitted_size(*c, memo);
    return n;
  }
  case StmtKind::If:
    return 1 + expr(s.value) + emitted_size(*s.body, memo) + (s.else_body ? emitted_size(*s.else_body, memo) : 0);
  case StmtKind::Alloc:
    return 1 + emitted_size(*s.body, memo);
  case StmtKind::Barrier:
    return 1;
  case StmtKind::Mma: {
    double n = 2 + expr(s.index);
    for (const LExprPtr &e : s.inputs)
      n += expr(e);
    return n;
  }
  }
  return 1;
}

/// Code per partition: below it, a partition's fixed costs (its target
/// machine, the pass pipelines' set-up, its object) outweigh what another
/// thread saves.
constexpr double kPartitionSize = 4000;
/// At most this many partitions, whatever the cores: the object is the same
/// on every machine (the partitions depend on the module only).
constexpr size_t kMaxPartitions = 32;

/// What a partition holds. A module of more than one partition's code is
/// split: its entry points alone (Entries), the runtime and the thread-count
/// functions with kernels (Runtime), kernels (Kernels).
enum class Part { Whole, Entries, Runtime, Kernels };

Part part_of(size_t p, size_t parts) {
  return parts == 1 ? Part::Whole : p == 0 ? Part::Entries : p == 1 ? Part::Runtime : Part::Kernels;
}

/// The distinct kernels of each partition (part_of): the largest kernels
/// first, each into the kernels' partition with the least code so far (ties
/// to the lowest index), then each partition's kernels in their first-use
/// order. Partition 0 of a split module holds none.
std::vector<std::vector<size_t>> partition_kernels(const KernelTable &table, const LoweredModule &module) {
  std::vector<double> size(table.size());
  double total = 0, entries = 0;
  for (size_t d = 0; d < table.size(); ++d) {
    std::unordered_map<const LExpr *, double> memo;
    size[d] = emitted_size(*table.kernel(d).body, memo);
    total += size[d];
  }
  for (const LoweredFunction &fn : module.functions) // a call per kernel, checks per buffer
    entries += double(fn.kernels.size()) * 4 + double(fn.inputs.size() + fn.outputs.size() + fn.arena.size()) * 4;
  if (table.size() < 2 || total + entries < 2 * kPartitionSize) {
    std::vector<std::vector<size_t>> whole(1);
    for (size_t d = 0; d < table.size(); ++d)
      whole[0].push_back(d);
    return whole;
  }
  const size_t parts = std::clamp<size_t>(size_t(total / kPartitionSize), 2, std::min(kMaxPartitions - 1, table.size()));
  std::vector<std::vector<size_t>> kernels(parts + 1);
  std::vector<double> load(parts, 0.0);
  std::vector<size_t> order(table.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return size[a] > size[b]; });
  for (size_t d : order) {
    size_t p = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[p] += size[d];
    kernels[p + 1].push_back(d);
  }
  for (std::vector<size_t> &k : kernels)
    std::sort(k.begin(), k.end());
  return kernels;
}

/// One partition's object (Part). A kernel that another partition's entry
/// calls is a hidden global until merge_objects makes it local again; so is
/// the runtime's task scheduler, which every partition's parallel loops call.
std::string compile_partition(const LoweredModule &module, const CodegenOptions &opts, const KernelTable &table,
                              const std::vector<size_t> &kernels, Part part) {
  std::unique_ptr<TargetMachine> tm = create_cpu_target_machine(opts);
  // The entry points are never optimized (optnone: they check the arguments
  // and call the kernels), but at -O2 the code generator still allocated
  // their registers with the greedy allocator, whose interference checks
  // grow with the calls a value lives across: 3.8 s for densenet201's
  // entries (9975 kernel calls), 0.5 s at -O0.
  if (part == Part::Entries)
    tm->setOptLevel(CodeGenOptLevel::None);
  LLVMContext ctx;
  quiet_diagnostics(ctx);
  bool threads = runtime_supports(tm->getTargetTriple());
  const bool entries = part == Part::Whole || part == Part::Entries;
  const bool runtime = part == Part::Whole || part == Part::Runtime;
  const bool partitioned = part != Part::Whole;
  HostModule host;
  if (entries) {
    host = create_host_module(module, opts.prefix, ctx, *tm, false);
  } else {
    host.module = std::make_unique<Module>(opts.prefix, ctx);
    host.module->setTargetTriple(tm->getTargetTriple().str());
    host.module->setDataLayout(tm->createDataLayout());
  }
  Module &m = *host.module;
  std::vector<Function *> functions(table.size(), nullptr);
  for (size_t d : kernels) {
    functions[d] = emit_kernel(m, table.kernel(d), table.symbols[d], table.options(d, threads, has_fma(*tm)));
    if (partitioned) {
      functions[d]->setLinkage(GlobalValue::ExternalLinkage);
      functions[d]->setVisibility(GlobalValue::HiddenVisibility);
    }
  }
  if (entries)
    emit_entries(m, host.entries, module, table, [&](size_t d) {
      if (!functions[d]) { // in another partition
        functions[d] = Function::Create(kernel_type(ctx, table, d), GlobalValue::ExternalLinkage,
                                        table.symbols[d], m);
        GRADC_CHECK(functions[d]->getName() == table.symbols[d], "codegen",
                    "kernel symbol " + table.symbols[d] + " is taken");
        functions[d]->setVisibility(GlobalValue::HiddenVisibility);
        functions[d]->addFnAttr(Attribute::NoUnwind);
      }
      return functions[d];
    });
  if (runtime) {
    emit_thread_count_functions(m, opts.prefix, threads);
    if (threads) {
      if (partitioned) // linked for the other partitions' parallel loops too
        runtime_function(m, RuntimeFn::ParallelFor);
      link_runtime(m);
      if (partitioned)
        if (Function *f = m.getFunction("gradc_rt_parallel_for"); f && !f->isDeclaration()) {
          f->setLinkage(GlobalValue::ExternalLinkage);
          f->setVisibility(GlobalValue::HiddenVisibility);
        }
    }
  }
  optimize(m, *tm, opts.opt_level);
  return emit_file(m, *tm, CodeGenFileType::ObjectFile);
}

/// Compiles the partitions on up to `threads` threads (the largest first)
/// and returns their objects in partition order.
std::vector<std::string> compile_partitions(const LoweredModule &module, const CodegenOptions &opts,
                                            const KernelTable &table,
                                            const std::vector<std::vector<size_t>> &partitions, size_t threads) {
  std::vector<std::string> objects(partitions.size());
  std::vector<std::exception_ptr> errors(partitions.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t p; (p = next++) < partitions.size();) {
      try {
        objects[p] = compile_partition(module, opts, table, partitions[p], part_of(p, partitions.size()));
      } catch (...) {
        errors[p] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
  return objects;
}

} // namespace

std::unique_ptr<Module> build_cpu_module(const LoweredModule &module, const CodegenOptions &opts, LLVMContext &ctx,
                                         const TargetMachine &tm, RuntimeSource runtime) {
  auto [m, entries] = create_host_module(module, opts.prefix, ctx, tm, false);
  bool threads = runtime_supports(tm.getTargetTriple());
  KernelTable table = distinct_kernels(module, opts.prefix);
  std::vector<Function *> functions;
  for (size_t d = 0; d < table.size(); ++d)
    functions.push_back(emit_kernel(*m, table.kernel(d), table.symbols[d], table.options(d, threads, has_fma(tm))));
  emit_entries(*m, entries, module, table, [&](size_t d) { return functions[d]; });
  log_shared(table);
  emit_thread_count_functions(*m, opts.prefix, threads);
  if (threads && runtime == RuntimeSource::Bitcode)
    link_runtime(*m);
  log_threads(tm, opts, threads);
  return std::move(m);
}

CodegenOutput generate_cpu(const LoweredModule &module, const CodegenOptions &opts, const CodegenRequest &what) {
  CodegenOutput out;
  StepTimer timer(out.times);
  std::unique_ptr<TargetMachine> tm = create_cpu_target_machine(opts);
  // Text of the whole module (LLVM IR, assembly) comes from one module; an
  // object alone is compiled in partitions on several threads where the
  // module is large and its objects can be merged.
  if (what.object && !what.llvm_ir && !what.assembly && can_merge_objects(tm->getTargetTriple())) {
    KernelTable table = distinct_kernels(module, opts.prefix);
    std::vector<std::vector<size_t>> partitions = partition_kernels(table, module);
    // With the log on, one thread: the decisions print in order.
    size_t threads = log_enabled(LogLevel::Info)
                         ? 1
                         : std::min<size_t>(partitions.size(), std::max(1u, std::thread::hardware_concurrency()));
    log_shared(table);
    log(LogLevel::Info, "codegen",
        std::to_string(table.size()) + " kernels in " + std::to_string(partitions.size()) +
            " partition(s), compiled on " + std::to_string(threads) + " thread(s)");
    timer.step("llvm-plan");
    std::vector<std::string> objects = compile_partitions(module, opts, table, partitions, threads);
    timer.step("llvm-partitions");
    log_threads(*tm, opts, runtime_supports(tm->getTargetTriple()));
    out.object = merge_objects(objects);
    timer.step("llvm-merge");
    return out;
  }
  LLVMContext ctx;
  quiet_diagnostics(ctx);
  std::unique_ptr<Module> m = build_cpu_module(module, opts, ctx, *tm, RuntimeSource::Bitcode);
  timer.step("llvm-ir");
  optimize(*m, *tm, opts.opt_level);
  timer.step("llvm-opt");
  if (what.llvm_ir)
    out.llvm_ir = print_module(*m);
  if (what.assembly)
    out.assembly = emit_file(*m, *tm, CodeGenFileType::AssemblyFile);
  if (what.object)
    out.object = emit_file(*m, *tm, CodeGenFileType::ObjectFile);
  timer.step("llvm-emit");
  return out;
}

} // namespace gradc::codegen
