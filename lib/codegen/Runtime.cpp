//===- Runtime.cpp - link gradc's C runtime (runtime/*.c) into a module ---===//
//
// The runtime is compiled to LLVM bitcode at build time and embedded in the
// compiler. Only what a module uses is linked, and every runtime symbol is
// made internal, so each object carries its own thread pool (its only global
// state) and two gradc objects link into one program without clashing.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "gradc/support/Diagnostics.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/TargetParser/Triple.h>

extern "C" const unsigned char gradc_runtime_bitcode[];
extern "C" const unsigned long gradc_runtime_bitcode_size;

using namespace llvm;

namespace gradc::codegen {

bool runtime_supports(const Triple &triple) {
  // The bitcode was compiled for x86-64 Linux (glibc's pthread types have
  // that target's layout); on other targets parallel loops run serially, and
  // there is no CUDA host stub.
  return triple.getArch() == Triple::x86_64 && triple.isOSLinux();
}

void link_runtime(Module &m) {
  StringRef bytes(reinterpret_cast<const char *>(gradc_runtime_bitcode), gradc_runtime_bitcode_size);
  Expected<std::unique_ptr<Module>> runtime =
      parseBitcodeFile(MemoryBufferRef(bytes, "gradc_runtime"), m.getContext());
  if (!runtime)
    internal_error("codegen (runtime)", toString(runtime.takeError()));
  (*runtime)->setTargetTriple(m.getTargetTriple());
  (*runtime)->setDataLayout(m.getDataLayout());
  // The module's own CPU and features apply to the runtime too.
  for (Function &f : **runtime) {
    f.removeFnAttr("target-cpu");
    f.removeFnAttr("target-features");
    f.removeFnAttr("tune-cpu");
  }
  if (Linker::linkModules(m, std::move(*runtime), Linker::LinkOnlyNeeded))
    internal_error("codegen (runtime)", "linking the runtime bitcode failed");
  for (Function &f : m)
    if (f.getName().starts_with("gradc_rt_") && !f.isDeclaration())
      f.setLinkage(GlobalValue::InternalLinkage);
  for (GlobalVariable &g : m.globals())
    if (!g.isDeclaration() && g.hasExternalLinkage() && g.getName().starts_with("gradc_rt_"))
      g.setLinkage(GlobalValue::InternalLinkage);
}

FunctionCallee runtime_function(Module &m, RuntimeFn which) {
  LLVMContext &ctx = m.getContext();
  Type *i32 = Type::getInt32Ty(ctx), *i64 = Type::getInt64Ty(ctx), *ptr = PointerType::get(ctx, 0);
  Type *void_ty = Type::getVoidTy(ctx);
  switch (which) {
  case RuntimeFn::ParallelFor: // void (i64 n, i64 grain, task, closure)
    return m.getOrInsertFunction("gradc_rt_parallel_for", FunctionType::get(void_ty, {i64, i64, ptr, ptr}, false));
  case RuntimeFn::SetNumThreads:
    return m.getOrInsertFunction("gradc_rt_set_num_threads", FunctionType::get(void_ty, {i32}, false));
  case RuntimeFn::GetNumThreads:
    return m.getOrInsertFunction("gradc_rt_get_num_threads", FunctionType::get(i32, {}, false));
  case RuntimeFn::Shutdown:
    return m.getOrInsertFunction("gradc_rt_shutdown", FunctionType::get(void_ty, {}, false));
  case RuntimeFn::CudaRun: // i32 (ptx, launches, i32 num_launches, loops, i32 num_loops, stream, context_owner,
                           // status_word)
    return m.getOrInsertFunction("gradc_rt_cuda_run_loops",
                                 FunctionType::get(i32, {ptr, ptr, i32, ptr, i32, ptr, ptr, ptr}, false));
  }
  internal_error("codegen (runtime)", "unknown runtime function");
}

} // namespace gradc::codegen
