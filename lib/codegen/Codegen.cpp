//===- Codegen.cpp - generate_code and the target plumbing it shares -------===//
//
// The entry of the last pipeline stage: dispatches to the CPU or CUDA code
// generator, and holds what both (and the JIT) share: target machines with
// strict FP options, the optimization pipeline, and file emission.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "gradc/support/Diagnostics.h"

#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/StandardInstrumentations.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <iostream>
#include <mutex>

using namespace llvm;

namespace gradc {

CodegenOutput generate_code(const LoweredModule &module, const CodegenOptions &opts, const CodegenRequest &what) {
  GRADC_CHECK(opts.opt_level >= 0 && opts.opt_level <= 3, "codegen", "bad optimization level");
  switch (opts.target) {
  case TargetKind::CPU:
    return codegen::generate_cpu(module, opts, what);
  case TargetKind::CUDA:
    return codegen::generate_cuda(module, opts, what);
  }
  internal_error("codegen", "unknown target");
}

const char *status_message(int32_t code) {
  switch (code) {
  case 0:
    return "success";
  case 1:
    return "a buffer argument is null";
  case 2:
    return "a buffer argument is not 64-byte aligned";
  case 3:
    return "the CUDA driver library libcuda.so.1 could not be loaded";
  case 4:
    return "a CUDA driver call failed";
  case kStatusIndexOutOfRange:
    return "an index input is out of range (a class index of nn.nll_loss)";
  default:
    return "unknown status code";
  }
}

namespace codegen {

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    InitializeAllTargetInfos();
    InitializeAllTargets();
    InitializeAllTargetMCs();
    InitializeAllAsmPrinters();
  });
}

namespace {

struct QuietDiagnostics : DiagnosticHandler {
  std::string errors;
  bool handleDiagnostics(const DiagnosticInfo &info) override {
    if (info.getSeverity() == DS_Error) {
      raw_string_ostream os(errors);
      DiagnosticPrinterRawOStream printer(os);
      info.print(printer);
      os << "\n";
    }
    return true;
  }
};

void check_diagnostics(LLVMContext &ctx) {
  const auto *handler = dynamic_cast<const QuietDiagnostics *>(ctx.getDiagHandlerPtr());
  if (handler && !handler->errors.empty())
    internal_error("codegen", "LLVM: " + handler->errors);
}

} // namespace

void quiet_diagnostics(LLVMContext &ctx) { ctx.setDiagnosticHandler(std::make_unique<QuietDiagnostics>()); }

void option_error(const std::string &message) {
  print_error(std::cerr, message);
  throw CompileError();
}

TargetOptions target_options() {
  TargetOptions options;
  options.AllowFPOpFusion = FPOpFusion::Strict;
  // The runtime's destructor (it stops the thread pool on dlclose) goes in
  // .fini_array, as clang puts it on Linux, not in the legacy .dtors.
  options.UseInitArray = true;
  return options;
}

CodeGenOptLevel codegen_opt_level(int opt_level) {
  static const CodeGenOptLevel levels[] = {CodeGenOptLevel::None, CodeGenOptLevel::Less, CodeGenOptLevel::Default,
                                           CodeGenOptLevel::Aggressive};
  return levels[opt_level];
}

/// Turns off LLVM's post-register-allocation list scheduler, which X86 runs
/// where the CPU's scheduling model asks for it (AMD's Zen): its dependence
/// graph is quadratic in a basic block's length, and a register tile or a
/// Winograd transform is one long block (22% of densenet121's compile time
/// on a Zen 5, 12.4 -> 8.9 s), while the out-of-order cores that reorder
/// those instructions anyway ran the steps no slower without it (resnet18,
/// googlenet, densenet121). Process-wide, as LLVM's options are; once.
void disable_post_ra_scheduler() {
  static std::once_flag once;
  std::call_once(once, [] {
    StringMap<cl::Option *> &options = cl::getRegisteredOptions();
    auto it = options.find("post-RA-scheduler");
    if (it != options.end())
      it->second->addOccurrence(1, "post-RA-scheduler", "false");
  });
}

std::unique_ptr<TargetMachine> create_target_machine(const std::string &triple, const std::string &cpu,
                                                     const std::string &features, int opt_level) {
  disable_post_ra_scheduler();
  std::string error;
  const llvm::Target *target = TargetRegistry::lookupTarget(triple, error);
  GRADC_CHECK(target, "codegen", error);
  // PIC, so that the object links into the position-independent executables
  // that distributions' compilers produce by default.
  std::unique_ptr<TargetMachine> tm(target->createTargetMachine(triple, cpu, features, target_options(), Reloc::PIC_,
                                                                std::nullopt, codegen_opt_level(opt_level)));
  GRADC_CHECK(tm, "codegen", "no target machine for " + triple);
  return tm;
}

void optimize(Module &m, TargetMachine &tm, int opt_level) {
  std::string errors;
  raw_string_ostream error_stream(errors);
  if (verifyModule(m, &error_stream))
    internal_error("codegen", "invalid LLVM IR: " + errors);

  PipelineTuningOptions tuning;
  // gradc's loop nests vectorize themselves (Vectorized loops: the register
  // tiles, every lane-wise loop), so LLVM's loop and SLP vectorizers, which
  // analyse every remaining loop and block again, run only at -O3: at -O2
  // they took a quarter of googlenet's compile (21.7 -> 16.3 s of CPU,
  // 10.7 -> 9.0 s on two cores of a Zen 5) for steps the same within the
  // VM's noise (googlenet 116.6 against 118.1 ms on one thread, resnet50
  // 276.7 and 279.4, transformer_encoder 34.2 and 33.6, the MLP steps
  // alike). LLVM's loop unroller stays: without it the batch-16 MLP step
  // took 0.080-0.083 ms against 0.069-0.073 (it would save another fifth
  // of googlenet's compile).
  tuning.LoopVectorization = tuning.SLPVectorization = opt_level >= 3;
  // The instrumentation is what makes the pass managers skip `optnone`
  // functions (the entry points): without it, -O2 optimized an entry's
  // thousands of argument checks and kernel calls as one block, quadratic in
  // the number of kernels (SLP vectorization and DAG combining of the checks).
  PassInstrumentationCallbacks callbacks;
  StandardInstrumentations instrumentations(m.getContext(), /*DebugLogging=*/false);
  PassBuilder pb(&tm, tuning, std::nullopt, &callbacks);
  LoopAnalysisManager lam;
  FunctionAnalysisManager fam;
  CGSCCAnalysisManager cgam;
  ModuleAnalysisManager mam;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  instrumentations.registerCallbacks(callbacks, &mam);
  static const OptimizationLevel levels[] = {OptimizationLevel::O0, OptimizationLevel::O1, OptimizationLevel::O2,
                                             OptimizationLevel::O3};
  ModulePassManager mpm = opt_level == 0 ? pb.buildO0DefaultPipeline(OptimizationLevel::O0)
                                         : pb.buildPerModuleDefaultPipeline(levels[opt_level]);
  mpm.run(m, mam);
  check_diagnostics(m.getContext());
}

std::string emit_file(const Module &m, TargetMachine &tm, CodeGenFileType type) {
  std::unique_ptr<Module> copy = CloneModule(m);
  SmallString<0> buffer;
  raw_svector_ostream os(buffer);
  legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    internal_error("codegen", "the target cannot emit this kind of file");
  pm.run(*copy);
  check_diagnostics(m.getContext());
  return std::string(buffer.str());
}

std::string print_module(const Module &m) {
  std::string text;
  raw_string_ostream os(text);
  m.print(os, nullptr);
  return text;
}

} // namespace codegen
} // namespace gradc
