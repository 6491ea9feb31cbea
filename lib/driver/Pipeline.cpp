//===- Pipeline.cpp - the gradc pipeline, read top to bottom --------------===//
//
//   parse -> typed -> (normalize, expand, inline) -> grad (+ expand, CSE) -> fused -> remat -> loops
//
// Each stage is one pass function; what each needs from the one before is in
// the comment where it is called. Code generation (llvm, asm, ptx) follows in
// the driver, because `compile` and `run` want different outputs from it.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Ops.h"
#include "gradc/driver/ArtifactKinds.h"
#include "gradc/driver/Pipeline.h"
#include "gradc/text/Printer.h"
#include "gradc/lower/Lower.h"
#include "gradc/lower/Passes.h"
#include "gradc/op/Registry.h"
#include "gradc/support/Log.h"
#include "gradc/loops/Verify.h"
#include "gradc/transform/Verify.h"
#include "gradc/text/Parser.h"
#include "gradc/transform/Fuse.h"
#include "gradc/transform/AutoRemat.h"
#include "gradc/transform/Gradient.h"
#include "gradc/transform/MemoryModel.h"
#include "gradc/transform/Passes.h"
#include "gradc/transform/Remat.h"
#include "gradc/transform/TypeInfer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>

namespace gradc {

const std::vector<std::string> &dump_stage_names() {
  static const std::vector<std::string> names = {"parse", "typed", "grad", "fused", "remat",
                                                 "loops", "llvm",  "asm",  "ptx"};
  return names;
}

std::string Dumper::path(const std::string &stage) const {
  if (opts_.dump_dir.empty())
    return "";
  const auto &names = dump_stage_names();
  size_t n = std::find(names.begin(), names.end(), stage) - names.begin() + 1;
  // llvm, asm and ptx are artifacts too: their dumps take the artifact's extension.
  const ArtifactKind *artifact = find_artifact(stage);
  const char *ext = artifact ? artifact->extension : stage == "loops" ? ".txt" : ".relay";
  char file[64];
  snprintf(file, sizeof file, "%02zu-%s%s", n, stage.c_str(), ext);
  return (std::filesystem::path(opts_.dump_dir) / file).string();
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
  std::filesystem::create_directories(opts_.dump_dir);
  write_file_atomic(path(stage), text);
}

namespace {

/// What every pass of the pipeline sees: the options, the diagnostics, and
/// the per-function results that reports are built from afterwards.
struct PassContext {
  const PipelineOptions &opts;
  DiagEngine &diag;
  Target target;                 // what the loop passes schedule for
  std::vector<RematStats> remat; // one per function after the remat stage
  /// What the remat stage lowered to measure: per function, its lowering
  /// without recomputation (the --remat=none peak; empty where nothing is
  /// recomputed, when the final lowering is it), and the lowerings of the
  /// functions it leaves, which the loops stage takes instead of lowering
  /// them again.
  std::vector<std::optional<LoweredFunction>> unrematerialized;
  std::unordered_map<const Function *, LoweredFunction> measured;
  /// The module fusion took, kept where a remat plan may need the function
  /// fused again, leaner (remat_stage).
  std::optional<Module> unfused;
};

/// One pass shape for the tensor IR: a module in, a new module out.
using ModulePass = Module (*)(const Module &, PassContext &);
/// And one for the loop IR.
using LoopPass = void (*)(LoweredFunction &, PassContext &);

/// Applies a function-level transformation to every function.
template <typename F> Module each_function(const Module &m, F &&f) {
  Module out{m.source, {}};
  for (const FunctionPtr &fn : m.functions)
    out.functions.push_back(f(*fn));
  return out;
}

// The passes, in pipeline order. Each comment says what it needs.

/// Every relation runs; all independent errors are reported.
Module type_check(const Module &m, PassContext &ctx) {
  Module typed = infer_types(m, ctx.diag);
  ctx.diag.check();
  return typed;
}

/// Every function becomes an entry point of the object, whose ABI passes one
/// pointer per tensor parameter: a tuple parameter has no ABI yet.
Module check_entry_points(const Module &m, PassContext &ctx) {
  for (const FunctionPtr &fn : m.functions)
    for (const ExprPtr &p : fn->params)
      if (!p->type.is_tensor())
        ctx.diag.error(p->span, "parameter %" + p->name + " of type " + p->type.str() +
                                    ": only tensor parameters are supported yet (every function is an entry point "
                                    "of the compiled object)");
  ctx.diag.check();
  return m;
}

/// The gradient pass wants straight-line ANF bodies with no `@f(...)` calls.
Module normalize_all(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return normalize(fn); });
}
Module inline_all(const Module &m, PassContext &ctx) {
  if (!check_inline_size(m, ctx.diag))
    ctx.diag.check();
  return each_function(m, [&](const Function &fn) { return inline_calls(fn, m); });
}

/// Appends @FN_adjoint (forward bindings first, then backward), and with
/// --train @FN_train_step built from it (without --grad, in its place).
Module differentiate(const Module &m, PassContext &ctx) {
  if (!ctx.opts.grad_fn)
    return m;
  const std::string &name = *ctx.opts.grad_fn;
  FunctionPtr primal = m.find(name);
  if (!primal) {
    ctx.diag.error(std::string(ctx.opts.train ? "--train" : "--grad") + " names @" + name +
                   ", which is not defined in " + m.source->path());
    ctx.diag.check();
  }
  auto refuse_defined = [&](const std::string &added) {
    if (m.find(added)) {
      ctx.diag.error(primal->span, "@" + added + " is already defined");
      ctx.diag.check();
    }
  };
  if (ctx.opts.adjoint)
    refuse_defined(name + "_adjoint");
  if (ctx.opts.train)
    refuse_defined(name + "_train_step");
  if (ctx.opts.train) {
    const Type &r = primal->body.result->type;
    const Type &loss = r.is_tuple() && !r.fields.empty() ? r.fields[0] : r;
    if (!loss.is_tensor() || loss.rank() != 0 || !is_float(loss.dtype)) {
      ctx.diag.error(primal->body.result->span.valid() ? primal->body.result->span : primal->span,
                     "--train: @" + name + " must return a floating-point scalar loss (or a tuple whose field 0 is "
                     "one), found " + r.str());
      ctx.diag.check();
    }
  }
  std::vector<std::string> wrt = ctx.opts.wrt;
  if (ctx.opts.train && wrt.empty()) {
    wrt = default_trained_params(*primal, ctx.opts.weights);
    std::string names;
    for (const std::string &w : wrt)
      names += (names.empty() ? "%" : ", %") + w;
    log(LogLevel::Info, "train", "updating " + (names.empty() ? std::string("no parameter") : names));
    if (wrt.empty()) {
      ctx.diag.error(primal->span, "--train: @" + name + " has no floating-point parameter to train");
      ctx.diag.check();
    }
  }
  Module out = m;
  FunctionPtr adjoint = build_adjoint(*primal, wrt, ctx.diag);
  if (ctx.opts.adjoint)
    out.functions.push_back(adjoint);
  if (ctx.opts.train)
    out.functions.push_back(build_train_step(*adjoint, wrt, *ctx.opts.train, primal->attrs));
  return out;
}

/// Fusion needs typed ANF without dead bindings; each binding becomes a kernel.
/// Composite operators become their parts, so the gradient pass and lowering
/// see only operators with rules and kernels of their own.
Module expand_composites_all(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return expand_composites(fn); });
}

/// Before differentiation: the composites whose gradient is their parts'.
Module expand_composites_without_rule(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return expand_composites(fn, Composites::WithoutGradientRule); });
}

Module eliminate_common_subexpressions_all(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return eliminate_common_subexpressions(fn); });
}

Module project_fields_all(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return project_fields(fn); });
}
Module transpose_products_all(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return transpose_products(fn); });
}

Module pair_sibling_sums_all(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return pair_sibling_sums(fn); });
}
Module eliminate_dead_code_all(const Module &m, PassContext &) {
  return each_function(m, [](const Function &fn) { return eliminate_dead_code(fn); });
}
/// Whether selection plans what to keep (auto and sqrt), from footprints.
bool plans_remat(const PipelineOptions &opts) {
  return opts.remat == RematMode::Auto || opts.remat == RematMode::Sqrt;
}

Module fuse_all(const Module &m, PassContext &ctx) {
  if (plans_remat(ctx.opts))
    ctx.unfused = m;
  return each_function(m, [](const Function &fn) { return fuse_operators(fn); });
}
/// Lowering writes a result into its parameter where nothing reads the old
/// value after it. (A function with nothing to move stays the same node.)
Module order_in_place_updates_all(const Module &m, PassContext &) {
  Module out{m.source, {}};
  for (const FunctionPtr &fn : m.functions)
    out.functions.push_back(fn->attrs.inplace.empty() ? fn : order_in_place_updates(*fn));
  return out;
}

void plan_memory_pass(LoweredFunction &fn, PassContext &) { plan_memory(fn); }
void simplify_indices_pass(LoweredFunction &fn, PassContext &) { simplify_indices(fn); }
void schedule_pass(LoweredFunction &fn, PassContext &ctx) {
  if (ctx.target.is_gpu())
    bind_gpu_threads(fn, ctx.target);
  else
    schedule_cpu(fn, ctx.target);
}

struct LoopPassEntry {
  const char *name;
  LoopPass run;
  LoopVerifyOptions after; // what holds once it has run
};
const LoopPassEntry kLoopPasses[] = {
    {"simplify indices", simplify_indices_pass, {/*scheduled=*/false, /*planned=*/false}},
    {"schedule", schedule_pass, {/*scheduled=*/true, /*planned=*/false}},
    {"memory planning", plan_memory_pass, {/*scheduled=*/true, /*planned=*/true}},
};

/// The memory model (transform/MemoryModel.h), given the footprints of this
/// very lowering, plans the workspace lowering planned, byte for byte.
void verify_memory_estimate(const Function &fused, const LoweredFunction &lowered) {
  std::vector<Footprint> footprints = binding_footprints(fused, lowered);
  int64_t estimate = estimate_workspace(fused, [&](size_t i) -> const Footprint & { return footprints.at(i); });
  GRADC_CHECK(estimate == lowered.workspace_bytes, "memory model",
              "@" + fused.name + ": the estimate from its bindings' footprints is " + std::to_string(estimate) +
                  " bytes, the plan " + std::to_string(lowered.workspace_bytes));
}

/// Lowering and the loop passes for one fused function.
LoweredFunction lower_function(const Module &m, const FunctionPtr &fn, PassContext &ctx) {
  Module one{m.source, {fn}};
  LoweredFunction lowered = std::move(lower_module(one, LowerOptions{ctx.target}).functions[0]);
  if (ctx.opts.verify_each)
    verify(lowered, {}, "lowering");
  for (const LoopPassEntry &pass : kLoopPasses) {
    pass.run(lowered, ctx);
    if (ctx.opts.verify_each)
      verify(lowered, pass.after, pass.name);
  }
  if (ctx.opts.verify_each)
    verify_memory_estimate(*fn, lowered);
  return lowered;
}

/// --remat=auto and sqrt on one function with a forward and a backward pass
/// (an adjoint, a training step), fused and without markers
/// (transform/AutoRemat.h): its plans, each measured by the memory model
/// from the footprints of its lowering; the cheapest that fits the budget
/// (auto) or the √n one (sqrt) replaces it. `lowered` is its lowering; the
/// result's, when the plan recomputes, is left in ctx.measured. Where no
/// plan fits: null, or with `last_try` the error naming the least workspace.
FunctionPtr plan_remat(const Module &m, const FunctionPtr &fn, const LoweredFunction &lowered, RematStats &stats,
                       PassContext &ctx, bool last_try) {
  auto start = std::chrono::steady_clock::now();
  std::vector<Footprint> footprints = binding_footprints(*fn, lowered);
  bool sqrt_only = ctx.opts.remat == RematMode::Sqrt;
  std::vector<RematPlan> plans = remat_plans(*fn, footprints, sqrt_only, ctx.opts.remat_exhaustive);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const RematPlan *chosen = sqrt_only ? &plans.back() : choose_plan(plans, ctx.opts.memory_budget);
  const RematPlan *least = &plans[0];
  for (const RematPlan &p : plans)
    if (p.workspace < least->workspace)
      least = &p;
  if (!chosen && !last_try) {
    log(LogLevel::Info, "remat",
        "@" + fn->name + ": no plan fits the budget as fused (the least: " + std::to_string(least->workspace) +
            " bytes)");
    return nullptr;
  }
  if (!chosen) {
    ctx.diag.error(fn->span, "@" + fn->name + ": no plan fits the --memory-budget of " +
                                 std::to_string(ctx.opts.memory_budget) + " bytes; the smallest workspace " +
                                 "gradc can plan is " + std::to_string(least->workspace) + " bytes (" +
                                 std::to_string(least->extra_flops) + " FLOPs recomputed)");
    ctx.diag.check();
  }
  if (log_enabled(LogLevel::Debug))
    for (const RematPlan &p : plans)
      log(LogLevel::Debug, "remat",
          "  " + p.strategy + ": workspace " + std::to_string(p.workspace) + " bytes, " +
              std::to_string(p.extra_flops) + " FLOPs recomputed, " + std::to_string(p.recomputed.size()) + " values");
  log(LogLevel::Info, "remat",
      "@" + fn->name + ": " + std::to_string(plans.size()) + " plans in " + std::to_string(int(seconds * 1000)) +
          " ms (" + std::to_string(remat_candidates(*fn)) + " forward kernels); chose " + chosen->strategy +
          ": workspace " + std::to_string(chosen->workspace) + " bytes, " + std::to_string(chosen->extra_flops) +
          " FLOPs recomputed (keeping everything: " + std::to_string(plans[0].workspace) + " bytes)");
  stats.strategy = chosen->strategy;
  stats.plans = int(plans.size());
  stats.solver_seconds = seconds;
  if (chosen->recomputed.empty())
    return fn; // keeps everything: the function and its lowering stand
  FunctionPtr rewritten = rematerialize(*fn, chosen->schedule, stats);
  LoweredFunction relowered = lower_function(m, rewritten, ctx);
  GRADC_CHECK(relowered.workspace_bytes == chosen->workspace, "remat",
              "@" + fn->name + ": the plan's workspace is " + std::to_string(chosen->workspace) +
                  " bytes by the memory model, " + std::to_string(relowered.workspace_bytes) + " as lowered");
  ctx.measured[rewritten.get()] = std::move(relowered);
  return rewritten;
}

/// The remat stage (SPEC §6), after fusion, where every binding is a kernel
/// and the checkpoint markers are bindings of their own: each function's
/// checkpoint segments recomputed and its scans' states checkpointed
/// (checkpoint_every, checkpoint_slots) under manual, and under auto and
/// sqrt first; the markers dropped with what only they kept; then the plan
/// of auto or sqrt for a function with a backward pass. The --remat=none
/// peak is the lowering of the function as fusion left it.
Module remat_stage(const Module &m, PassContext &ctx) {
  Module out{m.source, {}};
  ctx.remat.assign(m.functions.size(), {});
  ctx.unrematerialized.assign(m.functions.size(), std::nullopt);
  for (size_t i = 0; i < m.functions.size(); ++i) {
    const FunctionPtr &fused = m.functions[i];
    RematStats &stats = ctx.remat.at(i);
    // the checkpoint segments and scan states recomputed, the markers dropped
    auto prepare = [&](const FunctionPtr &f) {
      FunctionPtr g = f;
      if (ctx.opts.remat != RematMode::None)
        g = checkpoint_scans(*rematerialize_checkpoints(*g, stats), stats);
      return eliminate_dead_code(*drop_checkpoint_markers(*g));
    };
    FunctionPtr fn = prepare(fused);
    bool planned = plans_remat(ctx.opts) && fn->attrs.role != FunctionRole::Primal;
    auto plan = [&](const FunctionPtr &f, bool last_try) {
      LoweredFunction lowered = lower_function(m, f, ctx);
      FunctionPtr chosen = plan_remat(m, f, lowered, stats, ctx, last_try);
      if (chosen == f)
        ctx.measured[f.get()] = std::move(lowered);
      return chosen;
    };
    bool lean = false;
    if (planned) {
      FunctionPtr chosen = plan(fn, /*last_try=*/!ctx.unfused);
      if (!chosen) {
        // No plan fits as fused: fuse again, leaner (FuseOptions::lean), and plan that.
        stats = RematStats{};
        lean = true;
        fn = prepare(fuse_operators(*ctx.unfused->functions.at(i), {.lean = true}));
        chosen = plan(fn, /*last_try=*/true);
      }
      fn = chosen;
    }
    bool recomputes = lean || stats.segments > 0 || stats.time_checkpointed > 0 || stats.recomputed > 0;
    if (ctx.opts.want_unrematerialized_peak && recomputes)
      ctx.unrematerialized[i] = lower_function(m, eliminate_dead_code(*drop_checkpoint_markers(*fused)), ctx);
    out.functions.push_back(fn);
  }
  return out;
}

/// A tensor pass in the stage table: its name (for the verifier's messages)
/// and the form its output has.
struct TensorPass {
  const char *name;
  ModulePass run;
  IRForm form;
};

/// A stage is what `--dump-ir` and `--report` name: one or more passes, then
/// one dump and one timing under the stage's name.
struct Stage {
  const char *name;
  std::vector<TensorPass> passes;
};

const Stage kTensorStages[] = {
    {"typed", {{"type inference", type_check, IRForm::Typed}, {"entry points", check_entry_points, IRForm::Typed}}},
    {"grad",
     {{"normalize", normalize_all, IRForm::ANF},
      {"expand composites", expand_composites_without_rule, IRForm::ANF},
      {"inline", inline_all, IRForm::ANF},
      {"differentiate", differentiate, IRForm::ANF},
      // the composites differentiated by their own rule, then their parts
      // shared with the rest (a variance's mean with a batch norm's)
      {"expand composites", expand_composites_all, IRForm::ANF},
      {"common subexpressions", eliminate_common_subexpressions_all, IRForm::ANF}}},
    {"fused",
     {{"expand composites", expand_composites_all, IRForm::ANF}, // gradient rules may emit composites
      {"transpose products", transpose_products_all, IRForm::ANF},
      {"dead-code elimination", eliminate_dead_code_all, IRForm::ANF},
      {"project tuple fields", project_fields_all, IRForm::ANF},
      // sums over one shape reading common values in one pass (a batch
      // norm's gradient's Σ g and Σ g·(x - mean)), before in-place updates
      // are placed after the reads
      {"pair sibling sums", pair_sibling_sums_all, IRForm::ANF},
      // each update next to its gradient, so that fusion sees what fusing
      // the gradient's product into it keeps alive (and remat plans that)
      {"order in-place updates", order_in_place_updates_all, IRForm::ANF},
      {"fuse", fuse_all, IRForm::Fused}}}, // checkpoint markers stay bindings of their own
    {"remat",
     {{"rematerialize", remat_stage, IRForm::Fused},
      {"order in-place updates", order_in_place_updates_all, IRForm::Fused}}},
};

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

/// One tensor stage: its passes (each verified with --verify-each), then its dump and timing.
void run_stage(Module &m, const Stage &stage, PassContext &ctx, Dumper *dumper, Timer *timer) {
  for (const TensorPass &pass : stage.passes) {
    m = pass.run(m, ctx);
    if (ctx.opts.verify_each)
      verify(m, pass.form, pass.name);
  }
  if (dumper && dumper->wants(stage.name))
    dumper->dump(stage.name, print_module(m, {true}));
  if (timer)
    timer->lap(stage.name);
}

/// The loops stage: every function lowered with the loop passes, or as the
/// remat stage already lowered it.
LoweredModule lower_all(const Module &m, PassContext &ctx) {
  LoweredModule lowered;
  for (const FunctionPtr &fn : m.functions) {
    auto it = ctx.measured.find(fn.get());
    lowered.functions.push_back(it != ctx.measured.end() ? std::move(it->second) : lower_function(m, fn, ctx));
  }
  ctx.measured.clear();
  return lowered;
}

} // namespace

bool verify_each_by_default() {
#ifndef NDEBUG
  return true;
#else
  const char *env = std::getenv("GRADC_VERIFY_EACH");
  return env && std::string(env) == "1";
#endif
}

CompiledModule compile_to_loops(std::shared_ptr<const SourceFile> source, const PipelineOptions &opts, DiagEngine &diag,
                                Dumper &dumper) {
  CompiledModule out;
  Timer timer(out.times);
  PassContext ctx{opts, diag, describe_target(opts.codegen), {}};
  log(LogLevel::Info, "target", ctx.target.describe());

  // parse: text -> untyped module; stops at the first syntax error.
  std::optional<Module> parsed = parse_module(source, diag);
  diag.check();
  Module m = std::move(*parsed);
  if (dumper.wants("parse"))
    dumper.dump("parse", print_module(m));
  timer.lap("parse");

  for (const Stage &stage : kTensorStages)
    run_stage(m, stage, ctx, &dumper, &timer);
  // loops: lowering, the loop passes, memory planning.
  out.lowered = lower_all(m, ctx);
  if (dumper.wants("loops"))
    dumper.dump("loops", print_loops(out.lowered));
  timer.lap("loops");

  // Reports are built from the results, outside the pass list. The
  // --remat=none plan of a function that recomputes nothing is its own.
  if (opts.want_unrematerialized_peak)
    for (size_t i = 0; i < m.functions.size(); ++i)
      out.unrematerialized.functions.push_back(ctx.unrematerialized[i] ? std::move(*ctx.unrematerialized[i])
                                                                       : out.lowered.functions[i]);
  for (size_t i = 0; i < m.functions.size(); ++i) {
    FunctionReport r;
    const Function &fn = *m.functions[i];
    r.name = fn.name;
    for (const ExprPtr &p : fn.params)
      r.param_names.push_back(p->name);
    r.flops = function_flops(fn);
    r.peak_after_remat = out.lowered.functions[i].workspace_bytes;
    r.peak_before_remat = out.unrematerialized.functions.empty() ? -1 : out.unrematerialized.functions[i].workspace_bytes;
    r.remat_segments = ctx.remat[i].segments;
    r.remat_recomputed = ctx.remat[i].recomputed;
    r.attrs = fn.attrs;
    r.extra_flops = ctx.remat[i].extra_flops;
    r.recomputed = ctx.remat[i].recomputed_values;
    r.remat_strategy = !ctx.remat[i].strategy.empty() ? ctx.remat[i].strategy
                       : ctx.remat[i].recomputed > 0 ? "manual"
                                                     : "none";
    r.budget_bytes = opts.memory_budget;
    r.remat_plans = ctx.remat[i].plans;
    r.remat_solver_seconds = ctx.remat[i].solver_seconds;
    size_t end = fn.attrs.role == FunctionRole::Adjoint ? remat_chain(fn).forward_end : fn.body.bindings.size();
    for (size_t b = 0; b < end; ++b)
      r.forward_flops += expr_flops(*fn.body.bindings[b].value);
    out.reports.push_back(r);
  }
  for (size_t i = 0; i < out.reports.size(); ++i)
    if (out.reports[i].peak_after_remat > kMaxWorkspaceBytes)
      diag.error(m.functions[i]->span, "@" + out.reports[i].name + " needs a workspace of more than 2^50 bytes");
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
     << std::setw(14) << "extra FLOPs" << std::setw(10) << "plan" << std::setw(14) << "budget"
     << "\n";
  for (size_t i = 0; i < c.reports.size(); ++i) {
    const FunctionReport &r = c.reports[i];
    os << std::left << std::setw(24) << ("@" + r.name) << std::right << std::setw(14) << r.flops << std::setw(16)
       << r.peak_before_remat << std::setw(16) << r.peak_after_remat << std::setw(10)
       << c.lowered.functions[i].kernels.size() << std::setw(10) << r.remat_recomputed << std::setw(14)
       << r.extra_flops << std::setw(10) << r.remat_strategy << std::setw(14)
       << (r.budget_bytes >= 0 ? std::to_string(r.budget_bytes) : "-") << "\n";
  }
  for (const FunctionReport &r : c.reports)
    if (!r.recomputed.empty()) {
      os << "@" << r.name << " recomputes (" << r.forward_flops << " FLOPs forward):";
      for (const std::string &v : r.recomputed)
        os << " %" << v;
      os << "\n";
    }
  os << "stage times:";
  for (const StageTime &t : c.times)
    os << " " << t.stage << "=" << std::fixed << std::setprecision(2) << t.seconds * 1e3 << "ms";
  os << "\n";
}

} // namespace gradc
