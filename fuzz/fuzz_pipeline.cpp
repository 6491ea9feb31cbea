//===- fuzz_pipeline.cpp - libFuzzer target: the whole pipeline -----------===//
//
// Any byte string is a model given to the whole compiler, as
//
//   gradc compile fuzz.relay --grad=FN -O0 --emit=llvm,header,manifest \
//       --verify-each --dump-ir=parse,typed,grad,remat,fused,loops
//
// would give it: parse, type inference (plus the printer round trip of the
// typed module, as fuzz_frontend.cpp checks it), normalize, composites,
// inline, reverse-mode differentiation, remat, DCE, fusion, lowering to loop
// IR, scheduling and memory planning, with the tensor-IR and loop-IR verifiers
// after every pass, the --remat=none re-lowering the manifest wants, LLVM IR
// generation with LLVM's module verifier (generate_code, -O0), the C header
// and the JSON manifest.
//
// A located error (CompileError, a FileError from the header) is an expected
// outcome. An InternalError, a crash, a sanitizer report, an uncaught
// exception, a hang or running out of memory is a finding.
//
// Options come from the input's own text, the way a lit RUN line gives them,
// so that a finding reproduces from its file alone and survives minimization:
//   --grad=FN     differentiate @FN (otherwise @main if defined, else the first
//                 function; if that fails with a located error, the module is
//                 compiled again without --grad)
//   --wrt=%a,%b   the parameters to differentiate against (default: all)
//   --remat=none  no rematerialization (default: manual checkpoints)
//   --remat=sqrt  the sqrt(n) segments plan; --remat=auto with
//                 --memory-budget=N (bytes; default: no limit) the budget's plan
//   --target=cuda GPU binding and the NVPTX code generator (default: the host CPU)
// GRADC_FUZZ_VERBOSE=1 prints the options chosen, the equivalent gradc command
// and the diagnostics (for reproducing one input: ./gradc_fuzz_pipeline FILE).
//
// The cost of one input is bounded, so that the fuzzer looks for logic bugs,
// not for big models: inputs over kMaxInputBytes, and modules that would have
// more than kFuzzMaxInlinedBindings bindings once inlined, are rejected (returned
// -1: not added to the corpus); code is not generated for a module whose
// buffers hold more than kMaxTotalElements elements (the loop IR still is).
//
//===----------------------------------------------------------------------===//
#include "gradc/codegen/Codegen.h"
#include "gradc/driver/Artifacts.h"
#include "gradc/driver/Pipeline.h"
#include "gradc/text/Parser.h"
#include "gradc/text/Printer.h"
#include "gradc/transform/Passes.h"
#include "gradc/transform/TypeInfer.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

using namespace gradc;

namespace {

constexpr size_t kMaxInputBytes = 16 * 1024;
constexpr int64_t kFuzzMaxInlinedBindings = 20'000;
constexpr int64_t kMaxTotalElements = int64_t(1) << 36;

/// What became of the inputs, printed at exit with GRADC_FUZZ_STATS=1.
struct Outcomes {
  long rejected = 0, syntax = 0, type = 0, grad_error = 0, located = 0, no_codegen = 0, compiled = 0;
  ~Outcomes() {
    const char *env = std::getenv("GRADC_FUZZ_STATS");
    if (env && std::string(env) == "1")
      fprintf(stderr,
              "gradc-fuzz outcomes: rejected %ld, syntax error %ld, type error %ld, compiled without --grad after a "
              "located error with it %ld, located error later %ld, compiled to loop IR only %ld, compiled to LLVM IR %ld\n",
              rejected, syntax, type, grad_error, located, no_codegen, compiled);
  }
} outcomes;

bool verbose() {
  static const bool v = [] {
    const char *env = std::getenv("GRADC_FUZZ_VERBOSE");
    return env && std::string(env) == "1";
  }();
  return v;
}

struct FuzzOptions {
  std::string grad_fn; // empty: no --grad
  bool grad_given = false;
  std::vector<std::string> wrt;
  RematMode remat = RematMode::Manual;
  int64_t budget = -1; // --remat=auto: bytes
  bool cuda = false;
};

bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.'; }

/// The value after the first `flag` in `text` (up to whitespace), or nullopt.
std::optional<std::string> flag_value(const std::string &text, const std::string &flag) {
  size_t at = text.find(flag);
  if (at == std::string::npos)
    return std::nullopt;
  size_t begin = at + flag.size(), end = begin;
  while (end < text.size() && !isspace((unsigned char)text[end]))
    ++end;
  return text.substr(begin, end - begin);
}

FuzzOptions read_options(const std::string &text, const Module &typed) {
  FuzzOptions o;
  if (auto fn = flag_value(text, "--grad=")) {
    size_t n = 0;
    while (n < fn->size() && ident_char((*fn)[n]))
      ++n;
    o.grad_fn = fn->substr(0, n);
    o.grad_given = !o.grad_fn.empty();
  }
  if (o.grad_fn.empty() && !typed.functions.empty())
    o.grad_fn = typed.find("main") ? "main" : typed.functions.front()->name;
  if (auto list = flag_value(text, "--wrt=")) {
    std::stringstream ss(*list);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty())
        o.wrt.push_back(item[0] == '%' ? item.substr(1) : item);
  }
  if (text.find("--remat=none") != std::string::npos)
    o.remat = RematMode::None;
  else if (text.find("--remat=sqrt") != std::string::npos)
    o.remat = RematMode::Sqrt;
  else if (text.find("--remat=auto") != std::string::npos)
    o.remat = RematMode::Auto;
  if (o.remat == RematMode::Auto) {
    o.budget = int64_t(1) << 60;
    if (auto b = flag_value(text, "--memory-budget=")) {
      size_t n = 0;
      while (n < b->size() && n < 15 && isdigit((unsigned char)(*b)[n]))
        ++n;
      if (n > 0)
        o.budget = std::stoll(b->substr(0, n));
    }
  }
  o.cuda = text.find("--target=cuda") != std::string::npos;
  return o;
}

std::string command_line(const FuzzOptions &o, bool with_grad) {
  std::string cmd = "gradc compile fuzz.relay";
  if (with_grad && !o.grad_fn.empty()) {
    cmd += " --grad=" + o.grad_fn;
    if (!o.wrt.empty()) {
      cmd += " --wrt=";
      for (size_t i = 0; i < o.wrt.size(); ++i)
        cmd += (i ? ",%" : "%") + o.wrt[i];
    }
  }
  if (o.remat == RematMode::None)
    cmd += " --remat=none";
  if (o.remat == RematMode::Sqrt)
    cmd += " --remat=sqrt";
  if (o.remat == RematMode::Auto)
    cmd += " --remat=auto --memory-budget=" + std::to_string(o.budget);
  if (o.cuda)
    cmd += " --target=cuda";
  return cmd + " -O0 --emit=llvm,header,manifest --verify-each --dump-ir=parse,typed,grad,remat,fused,loops";
}

/// Whether every function stays within `limit` bindings once `@f(...)` calls
/// are inlined (transform/Passes.h: inlined_size, with a smaller limit).
bool inlined_size_within(const Module &anf, int64_t limit) {
  std::unordered_map<std::string, int64_t> memo;
  for (const FunctionPtr &fn : anf.functions)
    if (inlined_size(anf, *fn, limit, memo) > limit)
      return false;
  return true;
}

int64_t total_elements(const LoweredModule &lowered) {
  int64_t total = 0;
  for (const LoweredFunction &fn : lowered.functions)
    for (const auto *list : {&fn.inputs, &fn.outputs, &fn.arena})
      for (const BufferPtr &b : *list)
        total = std::min(total + b->numel(), kMaxTotalElements + 1);
  return total;
}

[[noreturn]] void finding(const std::string &what) {
  std::cerr << "==gradc-fuzz== FINDING: " << what << "\n";
  std::cerr.flush();
  abort();
}

/// The rest of the pipeline; false after a located error.
bool compile(const std::shared_ptr<SourceFile> &file, const FuzzOptions &o, bool with_grad, std::ostream &diags) {
  PipelineOptions opts;
  if (with_grad) {
    opts.grad_fn = o.grad_fn;
    opts.wrt = o.wrt;
  }
  opts.remat = o.remat;
  opts.memory_budget = o.budget;
  opts.codegen.target = o.cuda ? TargetKind::CUDA : TargetKind::CPU;
  opts.codegen.opt_level = 0;
  opts.codegen.prefix = "fuzz";
  opts.dumps = {"parse", "typed", "grad", "remat", "fused", "loops"};
  opts.verify_each = true;
  opts.want_unrematerialized_peak = true; // as --emit=manifest asks

  std::ostringstream dumps;
  DiagEngine diag(file, diags);
  Dumper dumper(opts, dumps);
  CompiledModule compiled;
  try {
    compiled = compile_to_loops(file, opts, diag, dumper);
  } catch (const CompileError &) {
    if (!diag.error_count())
      finding("CompileError without a diagnostic");
    return false;
  }
  if (total_elements(compiled.lowered) > kMaxTotalElements) {
    if (verbose())
      std::cerr << "gradc-fuzz: over 2^36 elements in buffers: no code generated\n";
    ++outcomes.no_codegen;
    return true;
  }
  CodegenOutput code;
  try {
    code = generate_code(compiled.lowered, opts.codegen, CodegenRequest{.llvm_ir = true});
  } catch (const CompileError &) {
    return false;
  }
  if (code.llvm_ir.empty())
    finding("generate_code returned no LLVM IR");
  try {
    ManifestInfo info;
    info.target = o.cuda ? "cuda" : "cpu";
    info.opt_level = 0;
    info.remat = o.remat == RematMode::None   ? "none"
                 : o.remat == RematMode::Sqrt ? "sqrt"
                 : o.remat == RematMode::Auto ? "auto"
                                              : "manual";
    info.memory_budget = o.budget;
    std::string header = emit_c_header(compiled.lowered, compiled.reports, opts.codegen.prefix, opts.codegen.target);
    std::string manifest = build_manifest(compiled.lowered, compiled.reports, info, opts.codegen.prefix).dump(2);
  } catch (const FileError &e) {
    print_error(diags, e.what());
    return false;
  }
  ++outcomes.compiled;
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes) {
    ++outcomes.rejected;
    return -1;
  }
  std::string text(reinterpret_cast<const char *>(data), size);
  auto file = std::make_shared<SourceFile>("fuzz.relay", text);
  std::ostringstream diags;
  try {
    // Front end first, on its own: the options need the module's functions,
    // and the cost bound its inlined size.
    DiagEngine diag(file, diags);
    std::optional<Module> parsed = parse_module(file, diag);
    if (!parsed) {
      ++outcomes.syntax;
      return 0;
    }
    Module typed = infer_types(*parsed, diag);
    if (diag.error_count()) {
      if (verbose())
        std::cerr << diags.str();
      ++outcomes.type;
      return 0;
    }
    // A well-typed module round-trips through the printer.
    std::string printed = print_module(typed, {true});
    auto again = std::make_shared<SourceFile>("again.relay", printed);
    std::ostringstream sink;
    DiagEngine diag2(again, sink);
    std::optional<Module> reparsed = parse_module(again, diag2);
    if (!reparsed)
      finding("the printed typed module does not parse:\n" + sink.str() + "\n" + printed);
    Module retyped = infer_types(*reparsed, diag2);
    if (diag2.error_count())
      finding("the printed typed module does not type-check:\n" + sink.str() + "\n" + printed);
    if (print_module(retyped, {true}) != printed)
      finding("printing the reparsed module gives a different text:\n" + printed);

    Module anf{typed.source, {}};
    for (const FunctionPtr &fn : typed.functions)
      anf.functions.push_back(normalize(*fn));
    if (!inlined_size_within(anf, kFuzzMaxInlinedBindings)) {
      ++outcomes.rejected;
      return -1;
    }

    FuzzOptions o = read_options(text, typed);
    bool ok = false;
    if (!o.grad_fn.empty()) {
      if (verbose())
        std::cerr << "gradc-fuzz: " << command_line(o, true) << "\n";
      ok = compile(file, o, true, diags);
    }
    if (!ok && !o.grad_given) { // without --grad: the forward functions alone
      if (verbose())
        std::cerr << diags.str() << "gradc-fuzz: " << command_line(o, false) << "\n";
      diags.str("");
      ok = compile(file, o, false, diags);
      outcomes.grad_error += ok && !o.grad_fn.empty();
    }
    outcomes.located += !ok;
    if (verbose())
      std::cerr << diags.str() << "gradc-fuzz: " << (ok ? "compiled" : "located error") << "\n";
  } catch (const InternalError &e) {
    std::cerr << diags.str();
    finding(e.what());
  }
  return 0;
}
