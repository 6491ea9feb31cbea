//===- Jit.cpp - in-process compilation for `gradc run` -------------------===//
//
// Builds and optimizes the same CPU module as generate_code, with the same
// target and options, and hands it to an ORC LLJIT, so that `gradc run`
// computes exactly what the compiled object would.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "gradc_runtime.h"

#include "gradc/support/Diagnostics.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/TargetParser/SubtargetFeature.h>

using namespace llvm;

namespace gradc {
namespace {

const char *const kPass = "JIT";

template <typename T> T check(Expected<T> value) {
  if (!value)
    internal_error(kPass, toString(value.takeError()));
  return std::move(*value);
}

void check(Error error) {
  if (error)
    internal_error(kPass, toString(std::move(error)));
}

class LlvmJitSession : public JitSession {
public:
  LlvmJitSession(std::unique_ptr<orc::LLJIT> jit, std::string prefix)
      : jit_(std::move(jit)), prefix_(std::move(prefix)) {}

  Entry lookup(const std::string &name) override { return check(jit_->lookup(prefix_ + "_" + name)).toPtr<Entry>(); }

private:
  std::unique_ptr<orc::LLJIT> jit_;
  std::string prefix_;
};

} // namespace

std::unique_ptr<JitSession> JitSession::create(const LoweredModule &module, const CodegenOptions &opts) {
  GRADC_CHECK(opts.target == TargetKind::CPU, kPass, "only the CPU target can run in process");
  GRADC_CHECK(opts.opt_level >= 0 && opts.opt_level <= 3, kPass, "bad optimization level");
  codegen::HostTarget host = codegen::resolve_cpu_target(opts);
  orc::JITTargetMachineBuilder jtmb{Triple(host.triple)};
  jtmb.setCPU(host.cpu)
      .addFeatures(SubtargetFeatures(host.features).getFeatures())
      .setOptions(codegen::target_options())
      .setCodeGenOptLevel(codegen::codegen_opt_level(opts.opt_level));
  std::unique_ptr<TargetMachine> tm = check(jtmb.createTargetMachine());

  auto ctx = std::make_unique<LLVMContext>();
  codegen::quiet_diagnostics(*ctx);
  std::unique_ptr<Module> m = codegen::build_cpu_module(module, opts, *ctx, *tm, codegen::RuntimeSource::Process);
  codegen::optimize(*m, *tm, opts.opt_level);

  std::unique_ptr<orc::LLJIT> jit = check(orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create());
  // libm (tanhf, erff, expf, ...) resolves from the running process.
  jit->getMainJITDylib().addGenerator(
      check(orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit->getDataLayout().getGlobalPrefix())));
  // The runtime is gradc's own native copy: its pool threads never run code
  // that lives in JIT memory, which is freed with the session.
  orc::MangleAndInterner mangle(jit->getExecutionSession(), jit->getDataLayout());
  orc::SymbolMap runtime;
  auto define = [&](const char *name, auto *fn) {
    runtime[mangle(name)] = {orc::ExecutorAddr::fromPtr(fn), JITSymbolFlags::Exported | JITSymbolFlags::Callable};
  };
  define("gradc_rt_parallel_for", &gradc_rt_parallel_for);
  define("gradc_rt_set_num_threads", &gradc_rt_set_num_threads);
  define("gradc_rt_get_num_threads", &gradc_rt_get_num_threads);
  check(jit->getMainJITDylib().define(orc::absoluteSymbols(std::move(runtime))));
  check(jit->addIRModule(orc::ThreadSafeModule(std::move(m), std::move(ctx))));
  return std::make_unique<LlvmJitSession>(std::move(jit), opts.prefix);
}

} // namespace gradc
