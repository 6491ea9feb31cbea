//===- CudaTarget.cpp - PTX kernels and the host stub that launches them --===//
//
// TargetKind::CUDA makes two modules: the device module, one PTX kernel per Kernel
// with libdevice linked in for math, and the host stub, whose entry points check
// their arguments and pass the embedded PTX and a description of each launch to
// the runtime's gradc_rt_cuda_run (runtime/cuda.c, linked in with every symbol
// internal), which opens libcuda at run time, loads the PTX once per CUDA
// context (a table of loaded modules, the object's one piece of state),
// launches the kernels in order on the caller's stream and waits (SPEC §8).
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "gradc/support/Diagnostics.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Transforms/IPO/Internalize.h>

#include <cstdlib>

using namespace llvm;

namespace gradc::codegen {
namespace {

const char *const kPass = "codegen (CUDA)";
const char *const kNvptxTriple = "nvptx64-nvidia-cuda";

/// The kernel symbols of each function, in launch order.
using KernelSymbols = std::vector<std::vector<std::string>>;

std::unique_ptr<TargetMachine> create_gpu_target_machine(const CodegenOptions &opts) {
  initialize_llvm();
  std::string error;
  const llvm::Target *target = TargetRegistry::lookupTarget(kNvptxTriple, error);
  GRADC_CHECK(target, kPass, "LLVM was built without NVPTX: " + error);
  std::unique_ptr<MCSubtargetInfo> info(target->createMCSubtargetInfo(kNvptxTriple, "", ""));
  if (!info->isCPUStringValid(opts.gpu_arch))
    option_error("unknown GPU architecture '" + opts.gpu_arch + "'");
  // The PTX ISA version is the lowest that the architecture needs.
  return create_target_machine(kNvptxTriple, opts.gpu_arch, "", opts.opt_level);
}

std::unique_ptr<Module> build_device_module(const LoweredModule &module, const CodegenOptions &opts, LLVMContext &ctx,
                                            const TargetMachine &tm, KernelSymbols &symbols) {
  auto m = std::make_unique<Module>(opts.prefix + "_kernels", ctx);
  m->setTargetTriple(kNvptxTriple);
  m->setDataLayout(tm.createDataLayout());
  NamedMDNode *annotations = m->getOrInsertNamedMetadata("nvvm.annotations");
  auto annotate = [&](Function *fn, const char *key, int64_t value) {
    Metadata *fields[] = {ValueAsMetadata::get(fn), MDString::get(ctx, key),
                          ConstantAsMetadata::get(ConstantInt::get(Type::getInt32Ty(ctx), value))};
    annotations->addOperand(MDNode::get(ctx, fields));
  };
  for (const LoweredFunction &fn : module.functions) {
    symbols.emplace_back();
    for (const Kernel &kernel : fn.kernels) {
      const Dim3 &g = kernel.grid, &t = kernel.block;
      GRADC_CHECK(g.x >= 1 && g.x < (int64_t(1) << 31) && g.y >= 1 && g.y <= 65535 && g.z >= 1 && g.z <= 65535 &&
                      t.x >= 1 && t.y >= 1 && t.z >= 1 && t.count() <= 1024 && t.z <= 64,
                  kPass, "kernel " + kernel.name + " has an impossible launch shape");
      std::string symbol = unique_symbol(*m, opts.prefix + "_" + fn.name + "_" + kernel.name);
      Function *f = emit_kernel(*m, kernel, symbol, {Device::GPU, false, false});
      f->setCallingConv(CallingConv::PTX_Kernel);
      annotate(f, "kernel", 1);
      annotate(f, "maxntidx", t.x); // lets ptxas budget registers for the real block
      annotate(f, "maxntidy", t.y);
      annotate(f, "maxntidz", t.z);
      symbols.back().push_back(symbol);
    }
  }
  return m;
}

std::string find_libdevice() {
  std::vector<std::string> roots;
  if (const char *home = std::getenv("CUDA_HOME"))
    roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  for (const std::string &root : roots) {
    std::string path = root + "/nvvm/libdevice/libdevice.10.bc";
    if (sys::fs::exists(path))
      return path;
  }
  option_error("libdevice not found: looked for nvvm/libdevice/libdevice.10.bc under $CUDA_HOME "
               "and /usr/local/cuda (the CUDA toolkit is needed for math functions on the GPU)");
}

/// Links the libdevice functions that `m` calls (__nv_expf, ...), then makes
/// everything but the kernels internal so the unused rest is deleted.
void link_libdevice(Module &m) {
  bool needed =
      any_of(m.functions(), [](const Function &f) { return f.isDeclaration() && f.getName().starts_with("__nv_"); });
  if (needed) {
    std::string path = find_libdevice();
    ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
    if (!file)
      option_error("cannot read libdevice " + path + ": " + file.getError().message());
    Expected<std::unique_ptr<Module>> lib = parseBitcodeFile((*file)->getMemBufferRef(), m.getContext());
    if (!lib)
      internal_error(kPass, "cannot parse " + path + ": " + toString(lib.takeError()));
    (*lib)->setTargetTriple(m.getTargetTriple());
    (*lib)->setDataLayout(m.getDataLayout());
    if (Linker::linkModules(m, std::move(*lib), Linker::LinkOnlyNeeded))
      internal_error(kPass, "cannot link " + path);
  }
  // Denormals are kept, as on the CPU (libdevice asks __nvvm_reflect("__CUDA_FTZ")).
  m.addModuleFlag(Module::Override, "nvvm-reflect-ftz", uint32_t(0));
  internalizeModule(m, [](const GlobalValue &gv) {
    auto *f = dyn_cast<Function>(&gv);
    return f && f->getCallingConv() == CallingConv::PTX_Kernel;
  });
}

//===----------------------------------------------------------------------===//
// The host stub
//===----------------------------------------------------------------------===//

/// The body of one entry point after its argument checks: describe every
/// launch in entry-block allocas, then hand them to the runtime's launcher,
/// whose status the entry returns: 0, 3 or 4, or the nonzero code a kernel
/// wrote to the status word (kStatusIndexOutOfRange).
void emit_launches(IRBuilder<> &b, const LoweredFunction &fn, const BufferValues &buffers,
                   const std::vector<std::string> &symbols, Value *ptx) {
  if (fn.kernels.empty()) {
    b.CreateRet(b.getInt32(0));
    return;
  }
  Function *entry = b.GetInsertBlock()->getParent();
  Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty();
  // gradc_rt_cuda_launch (runtime/gradc_runtime.h): kernel name, grid x/y/z, block x/y/z, args, their count.
  StructType *launch_type = StructType::get(ptr, ArrayType::get(i64, 3), ArrayType::get(i64, 3), ptr, i64);
  IRBuilder<> ab(&entry->getEntryBlock(), entry->getEntryBlock().begin());
  Value *launches = ab.CreateAlloca(launch_type, b.getInt32(fn.kernels.size()), "launches");
  for (size_t k = 0; k < fn.kernels.size(); ++k) {
    const Kernel &kernel = fn.kernels[k];
    // cuLaunchKernel's kernelParams: the address of each argument's value. Every
    // launch has its own arrays, since all are described before the first runs.
    std::vector<Value *> args = kernel_arguments(buffers, kernel);
    Value *arg_pointers = ConstantPointerNull::get(b.getPtrTy());
    if (!args.empty()) {
      Value *arg_values = ab.CreateAlloca(ptr, b.getInt32(args.size()), kernel.name + "_arg_values");
      arg_pointers = ab.CreateAlloca(ptr, b.getInt32(args.size()), kernel.name + "_args");
      for (size_t i = 0; i < args.size(); ++i) {
        GRADC_CHECK(args[i]->getType() == ptr, kPass, "kernel " + kernel.name + " has a non-pointer argument");
        Value *slot = b.CreateConstInBoundsGEP1_64(ptr, arg_values, i);
        b.CreateStore(args[i], slot);
        b.CreateStore(slot, b.CreateConstInBoundsGEP1_64(ptr, arg_pointers, i));
      }
    }
    Value *launch = b.CreateConstInBoundsGEP1_64(launch_type, launches, k);
    b.CreateStore(b.CreateGlobalString(symbols[k], "kernel_name"), b.CreateStructGEP(launch_type, launch, 0));
    for (int d = 0; d < kMaxLaunchDims; ++d) {
      for (unsigned field : {1u, 2u}) { // launch->grid[d], launch->block[d]
        Value *at = b.CreateInBoundsGEP(launch_type, launch, {b.getInt32(0), b.getInt32(field), b.getInt32(d)});
        b.CreateStore(b.getInt64((field == 1 ? kernel.grid : kernel.block)[d]), at);
      }
    }
    b.CreateStore(arg_pointers, b.CreateStructGEP(launch_type, launch, 3));
    b.CreateStore(b.getInt64(args.size()), b.CreateStructGEP(launch_type, launch, 4));
  }
  // A thread with no current context borrows the one that owns the buffers.
  GRADC_CHECK(!fn.results.empty(), kPass, "function " + fn.name + " has no results");
  Value *context_owner = buffers.lookup(fn.results[0].get());
  // The status word kernels report into (LoweredFunction::status), if any.
  Value *status_word = fn.status ? buffers.lookup(fn.status.get()) : ConstantPointerNull::get(b.getPtrTy());
  // The time loops (gradc_rt_cuda_loop: first, last, extent, trips, num_trips), outer first, as a constant.
  Value *loops = ConstantPointerNull::get(b.getPtrTy());
  std::vector<Constant *> rows;
  StructType *loop_type = StructType::get(b.getInt32Ty(), b.getInt32Ty(), i64, b.getPtrTy(), i64);
  Module &module = *entry->getParent();
  walk_schedule(
      fn,
      [&](const TimeLoop &l) {
        Constant *trips = ConstantPointerNull::get(b.getPtrTy());
        if (l.streamed()) {
          ArrayRef<uint64_t> counts(reinterpret_cast<const uint64_t *>(l.trips.data()), l.trips.size());
          trips = new GlobalVariable(module, ArrayType::get(i64, l.trips.size()), true, GlobalValue::PrivateLinkage,
                                     ConstantDataArray::get(module.getContext(), counts), fn.name + "_trips");
        }
        rows.push_back(ConstantStruct::get(loop_type, {b.getInt32(uint32_t(l.first)), b.getInt32(uint32_t(l.last)),
                                                       b.getInt64(uint64_t(l.extent)), trips,
                                                       b.getInt64(uint64_t(l.trips.size()))}));
      },
      [](size_t) {}, [](const TimeLoop &) {});
  if (!rows.empty()) {
    auto *table = ArrayType::get(loop_type, rows.size());
    loops = new GlobalVariable(*entry->getParent(), table, true, GlobalValue::PrivateLinkage,
                               ConstantArray::get(table, rows), fn.name + "_time_loops");
  }
  Value *status = b.CreateCall(runtime_function(*entry->getParent(), RuntimeFn::CudaRun),
                               {ptx, launches, b.getInt32(fn.kernels.size()), loops, b.getInt32(rows.size()),
                                entry->getArg(3), context_owner, status_word});
  b.CreateRet(status);
}

std::unique_ptr<Module> build_host_stub(const LoweredModule &module, const CodegenOptions &opts,
                                        const KernelSymbols &symbols, const std::string &ptx, LLVMContext &ctx,
                                        const TargetMachine &tm) {
  auto [m, entries] = create_host_module(module, opts.prefix, ctx, tm, true);
  auto *ptx_global =
      new GlobalVariable(*m, ArrayType::get(Type::getInt8Ty(ctx), ptx.size() + 1), true, GlobalValue::PrivateLinkage,
                         ConstantDataArray::getString(ctx, ptx, true), unique_symbol(*m, opts.prefix + "_ptx"));
  for (size_t i = 0; i < module.functions.size(); ++i) {
    IRBuilder<> b(BasicBlock::Create(ctx, "entry", entries[i]));
    BufferValues buffers = emit_entry_prologue(b, module.functions[i]);
    emit_launches(b, module.functions[i], buffers, symbols[i], ptx_global);
  }
  link_runtime(*m);
  return std::move(m);
}

} // namespace

CodegenOutput generate_cuda(const LoweredModule &module, const CodegenOptions &opts, const CodegenRequest &what) {
  std::unique_ptr<TargetMachine> gpu_tm = create_gpu_target_machine(opts);
  std::unique_ptr<TargetMachine> host_tm;
  if (what.object || what.assembly) {
    host_tm = create_cpu_target_machine(opts);
    // The host stub is a call into the runtime's launcher (runtime/cuda.c).
    if (!runtime_supports(host_tm->getTargetTriple()))
      option_error("the CUDA host stub needs gradc's runtime, which is built for x86-64 Linux only; --triple=" +
                   host_tm->getTargetTriple().str() + " can have PTX (--emit=ptx) but no host object");
  }
  LLVMContext ctx;
  quiet_diagnostics(ctx);
  KernelSymbols symbols;
  std::unique_ptr<Module> device = build_device_module(module, opts, ctx, *gpu_tm, symbols);
  link_libdevice(*device);
  optimize(*device, *gpu_tm, opts.opt_level);
  CodegenOutput out;
  if (what.llvm_ir)
    out.llvm_ir = print_module(*device);
  std::string ptx = emit_file(*device, *gpu_tm, CodeGenFileType::AssemblyFile);
  if (what.object || what.assembly) {
    std::unique_ptr<Module> host = build_host_stub(module, opts, symbols, ptx, ctx, *host_tm);
    optimize(*host, *host_tm, opts.opt_level);
    if (what.object)
      out.object = emit_file(*host, *host_tm, CodeGenFileType::ObjectFile);
    if (what.assembly)
      out.assembly = emit_file(*host, *host_tm, CodeGenFileType::AssemblyFile);
  }
  if (what.ptx)
    out.ptx = std::move(ptx);
  return out;
}

} // namespace gradc::codegen
