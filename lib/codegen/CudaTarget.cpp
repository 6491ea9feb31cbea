//===- CudaTarget.cpp - PTX kernels and the host stub that launches them --===//
//
// TargetKind::CUDA makes two modules: the device module, one PTX kernel per Kernel
// with libdevice linked in for math, and the host stub, whose entry points open
// libcuda at run time, load the embedded PTX, launch the kernels in order on the
// caller's stream, wait and unload, keeping no global state (SPEC §8).
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
      GRADC_CHECK(kernel.grid >= 1 && kernel.grid < (int64_t(1) << 31) && kernel.block >= 1 && kernel.block <= 1024,
                  kPass, "kernel " + kernel.name + " has an impossible launch shape");
      std::string symbol = unique_symbol(*m, opts.prefix + "_" + fn.name + "_" + kernel.name);
      Function *f = emit_kernel(*m, kernel, symbol, {Device::GPU, false});
      f->setCallingConv(CallingConv::PTX_Kernel);
      annotate(f, "kernel", 1);
      annotate(f, "maxntidx", kernel.block); // lets ptxas budget registers for the real block
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

/// The driver entry points the stub resolves with dlsym, by their versioned
/// names where libcuda exports several ABIs.
enum Driver {
  Init,
  CtxGetCurrent,
  PointerGetAttribute,
  CtxPushCurrent,
  CtxPopCurrent,
  ModuleLoadData,
  ModuleGetFunction,
  LaunchKernel,
  StreamSynchronize,
  ModuleUnload,
  NumDriverFunctions
};
const char *const kDriverNames[NumDriverFunctions] = {
    "cuInit",           "cuCtxGetCurrent",     "cuPointerGetAttribute", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
    "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel",        "cuStreamSynchronize", "cuModuleUnload"};
const int kCuPointerAttributeContext = 1; // CU_POINTER_ATTRIBUTE_CONTEXT
const int kRtldNow = 2;

/// The C signature of a driver function (CUresult is an int; handles are pointers).
FunctionType *driver_type(LLVMContext &ctx, Driver d) {
  Type *i32 = Type::getInt32Ty(ctx), *i64 = Type::getInt64Ty(ctx), *ptr = PointerType::get(ctx, 0);
  auto type = [&](std::vector<Type *> params) { return FunctionType::get(i32, params, false); };
  switch (d) {
  case Init:
    return type({i32});
  case PointerGetAttribute:
    return type({ptr, i32, i64});
  case ModuleLoadData:
    return type({ptr, ptr});
  case ModuleGetFunction:
    return type({ptr, ptr, ptr});
  case LaunchKernel:
    return type({ptr, i32, i32, i32, i32, i32, i32, i32, ptr, ptr, ptr});
  default:
    return type({ptr});
  }
}

/// `int32_t P_cuda_open(void **table)`: dlopen libcuda and fill `table` with
/// the driver functions; 0, or 3 if the library or a function is missing.
/// dlopen is reference counted, so calling it per call is cheap; the handle is
/// never closed because unloading the driver under live contexts is unsafe.
Function *emit_driver_open(Module &m, const std::string &symbol) {
  LLVMContext &ctx = m.getContext();
  IRBuilder<> b(ctx);
  Type *ptr = b.getPtrTy();
  FunctionCallee dlopen = m.getOrInsertFunction("dlopen", ptr, ptr, b.getInt32Ty());
  FunctionCallee dlsym = m.getOrInsertFunction("dlsym", ptr, ptr, ptr);
  Function *fn =
      Function::Create(FunctionType::get(b.getInt32Ty(), {ptr}, false), GlobalValue::InternalLinkage, symbol, m);
  b.SetInsertPoint(BasicBlock::Create(ctx, "entry", fn));
  BasicBlock *missing = BasicBlock::Create(ctx, "missing", fn);
  BasicBlock *found = BasicBlock::Create(ctx, "found", fn);
  Value *lib = b.CreateCall(dlopen, {b.CreateGlobalString("libcuda.so.1"), b.getInt32(kRtldNow)});
  b.CreateCondBr(b.CreateIsNull(lib), missing, found);
  b.SetInsertPoint(found);
  Value *any_missing = b.getFalse();
  for (int d = 0; d < NumDriverFunctions; ++d) {
    Value *f = b.CreateCall(dlsym, {lib, b.CreateGlobalString(kDriverNames[d])});
    b.CreateStore(f, b.CreateConstInBoundsGEP1_64(ptr, fn->getArg(0), d));
    any_missing = b.CreateOr(any_missing, b.CreateIsNull(f));
  }
  b.CreateRet(b.CreateSelect(any_missing, b.getInt32(3), b.getInt32(0)));
  b.SetInsertPoint(missing);
  b.CreateRet(b.getInt32(3));
  return fn;
}

/// The body of one entry point after its argument checks.
void emit_launches(IRBuilder<> &b, const LoweredFunction &fn, const BufferValues &buffers,
                   const std::vector<std::string> &symbols, Function *driver_open, Value *ptx) {
  if (fn.kernels.empty()) {
    b.CreateRet(b.getInt32(0));
    return;
  }
  Function *entry = b.GetInsertBlock()->getParent();
  LLVMContext &ctx = entry->getContext();
  Type *ptr = b.getPtrTy();
  size_t max_args = 1;
  for (const Kernel &k : fn.kernels)
    max_args = std::max(max_args, k.buffers.size());
  IRBuilder<> ab(&entry->getEntryBlock(), entry->getEntryBlock().begin());
  Value *table = ab.CreateAlloca(ptr, b.getInt32(NumDriverFunctions), "driver");
  Value *status = ab.CreateAlloca(b.getInt32Ty(), nullptr, "status");
  Value *pushed = ab.CreateAlloca(b.getInt1Ty(), nullptr, "pushed");
  Value *context = ab.CreateAlloca(ptr, nullptr, "context");
  Value *cu_module = ab.CreateAlloca(ptr, nullptr, "module");
  Value *function = ab.CreateAlloca(ptr, nullptr, "function");
  Value *arg_values = ab.CreateAlloca(ptr, b.getInt32(max_args), "arg_values");
  Value *arg_pointers = ab.CreateAlloca(ptr, b.getInt32(max_args), "arg_pointers");

  BasicBlock *unload = BasicBlock::Create(ctx, "unload", entry);
  BasicBlock *done = BasicBlock::Create(ctx, "done", entry);
  auto call = [&](Driver d, ArrayRef<Value *> args) {
    Value *f = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, table, d), kDriverNames[d]);
    return b.CreateCall(driver_type(ctx, d), f, args);
  };
  // On failure: status 4, then leave through `cleanup`.
  auto check = [&](Value *result, BasicBlock *cleanup) {
    Value *failed = b.CreateICmpNE(result, b.getInt32(0));
    b.CreateStore(b.CreateSelect(failed, b.getInt32(4), b.getInt32(0)), status);
    BasicBlock *next = BasicBlock::Create(ctx, "ok", entry);
    b.CreateCondBr(failed, cleanup, next);
    b.SetInsertPoint(next);
  };

  b.CreateStore(b.getFalse(), pushed);
  Value *opened = b.CreateCall(driver_open, {table});
  b.CreateStore(opened, status);
  BasicBlock *opened_bb = BasicBlock::Create(ctx, "opened", entry);
  b.CreateCondBr(b.CreateICmpNE(opened, b.getInt32(0)), done, opened_bb);
  b.SetInsertPoint(opened_bb);
  check(call(Init, {b.getInt32(0)}), done);
  check(call(CtxGetCurrent, {context}), done);
  // A thread without a current context (say, one on which the caller never
  // used the runtime API) borrows the context that owns the buffers.
  BasicBlock *borrow = BasicBlock::Create(ctx, "borrow_context", entry);
  BasicBlock *have_context = BasicBlock::Create(ctx, "have_context", entry);
  b.CreateCondBr(b.CreateIsNull(b.CreateLoad(ptr, context)), borrow, have_context);
  b.SetInsertPoint(borrow);
  GRADC_CHECK(!fn.outputs.empty(), kPass, "function " + fn.name + " has no outputs");
  Value *owned = b.CreatePtrToInt(buffers.at(fn.outputs[0].get()), b.getInt64Ty());
  check(call(PointerGetAttribute, {context, b.getInt32(kCuPointerAttributeContext), owned}), done);
  check(call(CtxPushCurrent, {b.CreateLoad(ptr, context)}), done);
  b.CreateStore(b.getTrue(), pushed);
  b.CreateBr(have_context);
  b.SetInsertPoint(have_context);

  check(call(ModuleLoadData, {cu_module, ptx}), done);
  for (size_t k = 0; k < fn.kernels.size(); ++k) {
    const Kernel &kernel = fn.kernels[k];
    Value *name = b.CreateGlobalString(symbols[k], "kernel_name");
    check(call(ModuleGetFunction, {function, b.CreateLoad(ptr, cu_module), name}), unload);
    // cuLaunchKernel takes a pointer to each argument's value.
    std::vector<Value *> args = kernel_arguments(buffers, kernel);
    for (size_t i = 0; i < args.size(); ++i) {
      Value *slot = b.CreateConstInBoundsGEP1_64(ptr, arg_values, i);
      b.CreateStore(args[i], slot);
      b.CreateStore(slot, b.CreateConstInBoundsGEP1_64(ptr, arg_pointers, i));
    }
    Value *one = b.getInt32(1);
    check(call(LaunchKernel,
               {b.CreateLoad(ptr, function), b.getInt32(kernel.grid), one, one, b.getInt32(kernel.block), one, one,
                b.getInt32(0), entry->getArg(3), arg_pointers, ConstantPointerNull::get(b.getPtrTy())}),
          unload);
  }
  check(call(StreamSynchronize, {entry->getArg(3)}), unload);
  b.CreateBr(unload);

  b.SetInsertPoint(unload);
  call(ModuleUnload, {b.CreateLoad(ptr, cu_module)});
  b.CreateBr(done);

  b.SetInsertPoint(done);
  BasicBlock *pop = BasicBlock::Create(ctx, "pop_context", entry);
  BasicBlock *ret = BasicBlock::Create(ctx, "return", entry);
  b.CreateCondBr(b.CreateLoad(b.getInt1Ty(), pushed), pop, ret);
  b.SetInsertPoint(pop);
  call(CtxPopCurrent, {context});
  b.CreateBr(ret);
  b.SetInsertPoint(ret);
  b.CreateRet(b.CreateLoad(b.getInt32Ty(), status));
}

std::unique_ptr<Module> build_host_stub(const LoweredModule &module, const CodegenOptions &opts,
                                        const KernelSymbols &symbols, const std::string &ptx, LLVMContext &ctx,
                                        const TargetMachine &tm) {
  auto [m, entries] = create_host_module(module, opts.prefix, ctx, tm, true);
  auto *ptx_global =
      new GlobalVariable(*m, ArrayType::get(Type::getInt8Ty(ctx), ptx.size() + 1), true, GlobalValue::PrivateLinkage,
                         ConstantDataArray::getString(ctx, ptx, true), unique_symbol(*m, opts.prefix + "_ptx"));
  Function *driver_open = emit_driver_open(*m, unique_symbol(*m, opts.prefix + "_cuda_open"));
  for (size_t i = 0; i < module.functions.size(); ++i) {
    IRBuilder<> b(BasicBlock::Create(ctx, "entry", entries[i]));
    BufferValues buffers = emit_entry_prologue(b, module.functions[i]);
    emit_launches(b, module.functions[i], buffers, symbols[i], driver_open, ptx_global);
  }
  return std::move(m);
}

} // namespace

CodegenOutput generate_cuda(const LoweredModule &module, const CodegenOptions &opts, const CodegenRequest &what) {
  std::unique_ptr<TargetMachine> gpu_tm = create_gpu_target_machine(opts);
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
    std::unique_ptr<TargetMachine> host_tm = create_cpu_target_machine(opts);
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
