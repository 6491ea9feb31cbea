//===- Pipeline.cpp - the gradc pipeline, read top to bottom --------------===//
//
//   parse -> typed -> (normalize, inline) -> grad -> remat -> fused -> loops
//
// Each stage is one pass function; what each needs from the one before is in
// the comment where it is called. Code generation (llvm, asm, ptx) follows in
// the driver, because `compile` and `run` want different outputs from it.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Ops.h"
#include "gradc/driver/Pipeline.h"
#include "gradc/text/Printer.h"
#include "gradc/lower/Lower.h"
#include "gradc/lower/Passes.h"
#include "gradc/op/Registry.h"
#include "gradc/text/Parser.h"
#include "gradc/transform/Fuse.h"
#include "gradc/transform/Gradient.h"
#include "gradc/transform/Passes.h"
#include "gradc/transform/Remat.h"
#include "gradc/transform/TypeInfer.h"

#include <cstdio>
#include <filesystem>
#include <iomanip>

namespace gradc {

const std::vector<std::string> &dump_stage_names() {
  static const std::vector<std::string> names = {"parse", "typed", "grad", "remat", "fused",
                                                 "loops", "llvm",  "asm",  "ptx"};
  return names;
}

void Dumper::dump(const std::string &stage, const std::string &text) {
  if (!wants(stage))
    return;
  if (opts_.dump_dir.empty()) {
    err_ << "// ===== gradc --dump-ir=" << stage << " =====\n" << text;
    if (!text.empty() && text.back() != '\n')
      err_ << "\n";
    return;
  }
  const auto &names = dump_stage_names();
  size_t n = std::find(names.begin(), names.end(), stage) - names.begin() + 1;
  const char *ext = stage == "loops"  ? "txt"
                    : stage == "llvm" ? "ll"
                    : stage == "asm"  ? "s"
                    : stage == "ptx"  ? "ptx"
                                      : "relay";
  char file[64];
  snprintf(file, sizeof file, "%02zu-%s.%s", n, stage.c_str(), ext);
  std::filesystem::create_directories(opts_.dump_dir);
  write_file_atomic((std::filesystem::path(opts_.dump_dir) / file).string(), text);
}

namespace {

class Timer {
public:
  explicit Timer(std::vector<StageTime> &times) : times_(times) {}
  void lap(const std::string &stage) {
    auto now = std::chrono::steady_clock::now();
    times_.push_back({stage, std::chrono::duration<double>(now - last_).count()});
    last_ = now;
  }

private:
  std::vector<StageTime> &times_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

Module clone_module(const Module &m) {
  Module out;
  out.source = m.source;
  for (const FunctionPtr &f : m.functions)
    out.functions.push_back(clone_function(*f));
  return out;
}

/// The operation count of every call, as each operator's record states it.
int64_t estimate_flops(const Function &fn) {
  int64_t flops = 0;
  for (const Binding &b : fn.body.bindings)
    if (b.value->kind == ExprKind::Call)
      flops += b.value->op->flops(*b.value);
  return flops;
}

/// The tensor-level passes after differentiation and the lowering, shared by
/// the real compilation and the --remat=none measurement.
LoweredModule fuse_and_lower(Module &m, const PipelineOptions &opts, Dumper *dumper, Timer *timer) {
  // fuse: needs typed ANF without dead bindings; makes each binding a kernel.
  for (const FunctionPtr &fn : m.functions) {
    eliminate_dead_code(*fn);
    fuse_injective(*fn);
  }
  if (dumper)
    dumper->dump("fused", print_module(m, {true}));
  if (timer)
    timer->lap("fuse");
  // lower: one kernel per binding; then plan the arena, then bind GPU threads.
  LoweredModule lowered = lower_module(m, LowerOptions{opts.codegen.target == Target::CUDA});
  for (LoweredFunction &fn : lowered.functions) {
    plan_memory(fn);
    if (opts.codegen.target == Target::CUDA)
      bind_gpu_threads(fn);
  }
  if (dumper)
    dumper->dump("loops", print_loops(lowered));
  if (timer)
    timer->lap("lower");
  return lowered;
}

} // namespace

CompiledModule compile_to_loops(std::shared_ptr<const SourceFile> source, const PipelineOptions &opts, DiagEngine &diag,
                                Dumper &dumper) {
  CompiledModule out;
  Timer timer(out.times);

  // parse: text -> untyped module; stops at the first syntax error.
  std::optional<Module> parsed = parse_module(source, diag);
  diag.check();
  Module m = std::move(*parsed);
  dumper.dump("parse", print_module(m));
  timer.lap("parse");

  // typed: every relation runs; all independent errors are reported.
  infer_types(m, diag);
  diag.check();
  dumper.dump("typed", print_module(m, {true}));
  timer.lap("typecheck");

  // normalize + inline: the gradient pass wants straight-line ANF bodies.
  for (const FunctionPtr &fn : m.functions)
    normalize(*fn);
  for (const FunctionPtr &fn : m.functions)
    inline_calls(*fn, m);

  // grad: append @FN_adjoint (forward bindings first, then backward).
  if (opts.grad_fn) {
    FunctionPtr primal = m.find(*opts.grad_fn);
    if (!primal) {
      diag.error("--grad names @" + *opts.grad_fn + ", which is not defined in " + source->path());
      diag.check();
    }
    if (m.find(*opts.grad_fn + "_adjoint")) {
      diag.error(primal->span, "@" + *opts.grad_fn + "_adjoint is already defined");
      diag.check();
    }
    m.functions.push_back(build_adjoint(*primal, opts.wrt, diag));
  }
  dumper.dump("grad", print_module(m, {true}));
  timer.lap("grad");

  // The planned peak without rematerialization, for the report and manifest.
  Module unrematerialized = clone_module(m);
  LoweredModule baseline = fuse_and_lower(unrematerialized, opts, nullptr, nullptr);

  // remat: recompute checkpoint segments in the backward pass.
  std::vector<RematStats> remat(m.functions.size());
  if (opts.remat == RematMode::Auto) {
    diag.error("--remat=auto is not implemented yet; use --remat=manual (checkpoint markers) or none");
    diag.check();
  }
  if (opts.remat == RematMode::Manual)
    for (size_t i = 0; i < m.functions.size(); ++i)
      remat[i] = rematerialize_checkpoints(*m.functions[i]);
  dumper.dump("remat", print_module(m, {true}));
  timer.lap("remat");

  for (size_t i = 0; i < m.functions.size(); ++i) {
    FunctionReport r;
    const Function &fn = *m.functions[i];
    r.name = fn.name;
    for (const ExprPtr &p : fn.params)
      r.param_names.push_back(p->name);
    r.flops = estimate_flops(fn);
    r.peak_before_remat = baseline.functions[i].workspace_bytes;
    r.remat_segments = remat[i].segments;
    r.remat_recomputed = remat[i].recomputed;
    r.is_adjoint = opts.grad_fn && fn.name == *opts.grad_fn + "_adjoint";
    out.reports.push_back(r);
  }

  out.lowered = fuse_and_lower(m, opts, &dumper, &timer);
  for (size_t i = 0; i < m.functions.size(); ++i)
    out.reports[i].peak_after_remat = out.lowered.functions[i].workspace_bytes;
  if (opts.memory_budget >= 0)
    for (size_t i = 0; i < out.reports.size(); ++i)
      if (out.reports[i].peak_after_remat > opts.memory_budget)
        diag.error(m.functions[i]->span, "@" + out.reports[i].name + " needs a workspace of " +
                                             std::to_string(out.reports[i].peak_after_remat) +
                                             " bytes, over the --memory-budget of " +
                                             std::to_string(opts.memory_budget) + " bytes");
  diag.check();
  out.module = std::move(m);
  return out;
}

void print_report(const CompiledModule &c, std::ostream &os) {
  os << "gradc report\n";
  os << std::left << std::setw(24) << "function" << std::right << std::setw(14) << "FLOPs" << std::setw(16)
     << "peak (none)" << std::setw(16) << "peak (remat)" << std::setw(10) << "kernels" << std::setw(10) << "remat"
     << "\n";
  for (size_t i = 0; i < c.reports.size(); ++i) {
    const FunctionReport &r = c.reports[i];
    os << std::left << std::setw(24) << ("@" + r.name) << std::right << std::setw(14) << r.flops << std::setw(16)
       << r.peak_before_remat << std::setw(16) << r.peak_after_remat << std::setw(10)
       << c.lowered.functions[i].kernels.size() << std::setw(10) << r.remat_recomputed << "\n";
  }
  os << "stage times:";
  for (const StageTime &t : c.times)
    os << " " << t.stage << "=" << std::fixed << std::setprecision(2) << t.seconds * 1e3 << "ms";
  os << "\n";
}

} // namespace gradc
