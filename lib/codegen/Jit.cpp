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
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>
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
  void set_num_threads(int32_t n) override { gradc_rt_set_num_threads(n); }

private:
  std::unique_ptr<orc::LLJIT> jit_;
  std::string prefix_;
};

} // namespace

namespace {

/// Whether an x86 feature of LLVM's names instructions that gradc's code can
/// contain: vector ISA levels, FMA, F16C, the scalar bit-manipulation and
/// move extensions, and the vector crypto/GF(2^8) instructions that LLVM
/// selects for plain shuffles and shifts. System instructions (invpcid,
/// xsaves, rdseed, pku, mwaitx, ...) are never emitted, and a VM often hides
/// them, so a CPU that implies them still runs here without them.
bool is_code_feature(StringRef f) {
  static const char *const exact[] = {"64bit", "cmov",  "cx8",   "cx16",  "x87",        "mmx",     "sse",
                                      "sse2",  "sse3",  "ssse3", "sse4.1", "sse4.2",    "sse4a",   "popcnt",
                                      "crc32", "avx",   "avx2",  "fma",   "fma4",       "xop",     "f16c",
                                      "bmi",   "bmi2",  "lzcnt", "tbm",   "movbe",      "adx",     "sahf",
                                      "aes",   "pclmul", "sha",  "vaes",  "vpclmulqdq", "gfni",    "evex512"};
  for (const char *e : exact)
    if (f == e)
      return true;
  return f.starts_with("avx512") || f.starts_with("avx10") || f.starts_with("avxvnni") || f == "avxifma" ||
         f == "avxneconvert";
}

} // namespace

std::optional<std::string> JitSession::cannot_run_here(const CodegenOptions &opts) {
  codegen::HostTarget wanted = codegen::resolve_cpu_target(opts);
  Triple here(sys::getProcessTriple()), there(wanted.triple);
  if (there.getArch() != here.getArch() || there.getOS() != here.getOS() ||
      there.getEnvironment() != here.getEnvironment() || there.getObjectFormat() != here.getObjectFormat())
    return "run executes the code on this machine (" + here.str() + "), which cannot run " + there.str() +
           " code; use `gradc compile` for another target";
  if (opts.cpu.empty() || opts.cpu == "native" || !here.isX86())
    return std::nullopt;
  // Every code feature the chosen CPU implies must be one this CPU has.
  std::string error;
  const llvm::Target *target = TargetRegistry::lookupTarget(wanted.triple, error);
  std::unique_ptr<MCSubtargetInfo> cpu(target->createMCSubtargetInfo(wanted.triple, opts.cpu, ""));
  StringMap<bool> host_features = sys::getHostCPUFeatures();
  std::string missing;
  for (const SubtargetFeatureKV &f : cpu->getAllProcessorFeatures()) {
    std::string key = f.Key;
    if (!is_code_feature(key) || !cpu->checkFeatures("+" + key))
      continue;
    auto it = host_features.find(key);
    if (it != host_features.end() && !it->second)
      missing += (missing.empty() ? "" : ", ") + key;
  }
  if (!missing.empty())
    return "run executes the code on this machine, whose CPU lacks what --cpu=" + opts.cpu + " uses (" + missing +
           "); use `gradc compile` for another CPU";
  return std::nullopt;
}

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
  define("gradc_rt_shutdown", &gradc_rt_shutdown);
  check(jit->getMainJITDylib().define(orc::absoluteSymbols(std::move(runtime))));
  check(jit->addIRModule(orc::ThreadSafeModule(std::move(m), std::move(ctx))));
  return std::make_unique<LlvmJitSession>(std::move(jit), opts.prefix);
}

} // namespace gradc
