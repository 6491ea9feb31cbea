//===- test_remat.cpp - auto rematerialization against exact answers -------===//
//
// transform/AutoRemat.h: the chain program reaches binomial checkpointing's
// optimum on uniform chains, and on small graphs with skip connections,
// several uses and tuples the chosen plan is never worse than an exhaustive
// search of its own, which drops every subset of the forward kernels and
// measures each by lowering it; the greedy descent that large graphs get is
// compared with the exhaustive search.
//
//===----------------------------------------------------------------------===//
#include "PipelineHelpers.h"
#include "gradc/op/Revolve.h"
#include "gradc/ir/Functor.h"
#include "gradc/transform/AutoRemat.h"
#include "gradc/text/Parser.h"
#include "gradc/transform/Remat.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace gradc;
using namespace gradc::testing;

namespace {

/// n equal blocks: one step each, whose backward step reads only its input.
ChainCosts uniform(int n) {
  ChainCosts c;
  for (int i = 0; i < n; ++i) {
    c.x.push_back(1);
    c.keep.push_back(1);
    c.base.push_back(0);
    c.keep_flops.push_back(1);
    c.base_flops.push_back(0);
    c.advance_flops.push_back(1);
  }
  return c;
}

struct Fused {
  CompiledModule compiled;
  const Function *adjoint = nullptr;
  std::vector<Footprint> footprints;
};

Fused fused_adjoint(const std::string &text) {
  Fused f{compile_text("graph.relay", text, TargetKind::CPU)};
  for (size_t i = 0; i < f.compiled.module.functions.size(); ++i)
    if (f.compiled.module.functions[i]->name == "main_adjoint") {
      f.adjoint = f.compiled.module.functions[i].get();
      f.footprints = binding_footprints(*f.adjoint, f.compiled.lowered.functions[i]);
    }
  REQUIRE(f.adjoint);
  return f;
}

struct Measured {
  int64_t workspace, extra_flops;
};

/// Every subset of the forward kernels dropped (RematSet: recomputed once,
/// before the first backward use), each lowered and planned.
std::vector<Measured> exhaustive(const Function &fn) {
  size_t n = fn.body.bindings.size(), end = remat_chain(fn).forward_end;
  REQUIRE(end > 0);
  std::vector<size_t> kernels;
  for (size_t i = 0; i + 1 < end; ++i)
    if (fn.body.bindings[i].value->kind == ExprKind::Call)
      kernels.push_back(i);
  REQUIRE(kernels.size() <= 12);
  Target target = describe_target(CodegenOptions{});
  std::vector<Measured> out;
  for (uint32_t mask = 0; mask < (uint32_t(1) << kernels.size()); ++mask) {
    RematSet set{std::vector<bool>(n), std::vector<bool>(n)};
    for (size_t i = 0; i < end; ++i)
      set.reads_original[i] = true;
    for (size_t c = 0; c < kernels.size(); ++c)
      set.dropped[kernels[c]] = mask >> c & 1;
    RematStats stats;
    FunctionPtr rewritten = rematerialize(fn, set, stats);
    out.push_back({lower_and_plan(rewritten, target).workspace_bytes, stats.extra_flops});
  }
  return out;
}

/// The fewest FLOPs of `all` within `budget`; -1 where none fits.
int64_t least_flops(const std::vector<Measured> &all, int64_t budget) {
  int64_t best = -1;
  for (const Measured &m : all)
    if (m.workspace <= budget && (best < 0 || m.extra_flops < best))
      best = m.extra_flops;
  return best;
}

// Skip connections (a residual and one across three layers), a value read
// twice by the loss, and a tuple split and joined again.
const char *kResidual = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(256, 32), float32], %w0: Tensor[(32, 32), float32], %w1: Tensor[(32, 32), float32],
          %w2: Tensor[(32, 32), float32], %w3: Tensor[(32, 32), float32], %w4: Tensor[(32, 32), float32],
          %w5: Tensor[(32, 32), float32], %w6: Tensor[(32, 32), float32], %w7: Tensor[(32, 32), float32]) -> float32 {
  %0 = tanh(nn.dense(%x, %w0, units=32));
  %1 = tanh(nn.dense(%0, %w1, units=32));
  %2 = tanh(nn.dense(%1, %w2, units=32)) + %0;
  %3 = tanh(nn.dense(%2, %w3, units=32));
  %4 = tanh(nn.dense(%3, %w4, units=32)) + %2;
  %5 = tanh(nn.dense(%4, %w5, units=32));
  %6 = tanh(nn.dense(%5, %w6, units=32)) + %x;
  %7 = tanh(nn.dense(%6, %w7, units=32));
  sum(%7 * %3)
})";

const char *kTuple = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(128, 24), float64], %w: Tensor[(24, 24), float64]) -> float64 {
  %0 = exp(nn.dense(%x, %w, units=24));
  %1 = split(%0, indices_or_sections=[12], axis=1);
  %2 = (sigmoid(%1.0), tanh(%1.1));
  %3 = concatenate((%2.1, %2.0), axis=1);
  %4 = nn.dense(%3, %w, units=24) * %0;
  sum(%4 * %4)
})";

// A long skip: the first layer's output is read by the last, so two values
// cross every cut and the chain has none to split at.
const char *kLongSkip = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(256, 32), float32], %a: Tensor[(32, 32), float32], %b: Tensor[(32, 32), float32],
          %c: Tensor[(32, 32), float32], %d: Tensor[(32, 32), float32]) -> float32 {
  %0 = tanh(nn.dense(%x, %a, units=32));
  %1 = tanh(nn.dense(%0, %b, units=32));
  %2 = tanh(nn.dense(%1, %c, units=32));
  %3 = tanh(nn.dense(%2, %d, units=32));
  %4 = tanh(nn.dense(%3, %b, units=32));
  %5 = tanh(nn.dense(%4, %c, units=32));
  %6 = tanh(nn.dense(%5, %d, units=32));
  %7 = tanh(nn.dense(%6, %b, units=32)) + %0;
  sum(%7 * %7)
})";

} // namespace

TEST_CASE("chain program: binomial checkpointing's optimum on uniform chains", "[remat]") {
  // m levels hold m values: the block being worked from is one of them,
  // so revolve's slots are m and its first sweep (L - 1 steps) is free here.
  for (int L = 1; L <= 40; ++L)
    for (int64_t m = 1; m <= 10; ++m) {
      INFO("L = " << L << ", m = " << m);
      CHECK(chain_program_cost(uniform(L), m) == revolve_cost(L, m) - (L - 1));
    }
  CHECK(chain_program_cost(uniform(100), 4) == revolve_cost(100, 4) - 99);
}

TEST_CASE("auto remat: never worse than an exhaustive search on small graphs", "[remat]") {
  for (const char *text : {kResidual, kTuple, kLongSkip}) {
    Fused f = fused_adjoint(text);
    INFO(text);
    std::vector<Measured> all = exhaustive(*f.adjoint);
    std::vector<RematPlan> plans = remat_plans(*f.adjoint, f.footprints, false);
    int64_t previous = -1;
    std::vector<int64_t> budgets;
    for (const Measured &m : all)
      budgets.push_back(m.workspace);
    std::sort(budgets.begin(), budgets.end());
    budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
    REQUIRE(budgets.size() > 1); // something to trade
    for (auto it = budgets.rbegin(); it != budgets.rend(); ++it) {
      int64_t budget = *it, exact = least_flops(all, budget);
      const RematPlan *chosen = choose_plan(plans, budget);
      INFO("budget " << budget);
      REQUIRE(chosen);
      CHECK(chosen->workspace <= budget);
      CHECK(chosen->extra_flops <= exact);
      CHECK(chosen->extra_flops >= previous); // monotone
      previous = chosen->extra_flops;
    }
  }
}

TEST_CASE("auto remat: the greedy descent of large graphs against the exhaustive search", "[remat]") {
  // Forced greedy (no exhaustive search) on the small graphs: within 25% of
  // the exhaustive plan's FLOPs wherever it fits the same budget.
  for (const char *text : {kResidual, kLongSkip}) {
    INFO(text);
    Fused f = fused_adjoint(text);
    std::vector<RematPlan> exact = remat_plans(*f.adjoint, f.footprints, false, 16);
    std::vector<RematPlan> greedy = remat_plans(*f.adjoint, f.footprints, false, 0);
    REQUIRE(exact.size() > 2);
    for (const RematPlan &e : exact) {
      INFO("budget " << e.workspace);
      const RematPlan *g = choose_plan(greedy, e.workspace);
      REQUIRE(g);
      CHECK(double(g->extra_flops) <= 1.25 * double(e.extra_flops));
    }
  }
}

// Regression (zoo timing, resnet18 at half its peak): a schedule may copy a
// value for a segment whose readers of it use an earlier copy, or read
// nothing of it; the copy was made all the same (batch norm's 6.4 MB output
// in resnet18's stem) and counted in the workspace and the FLOPs.
TEST_CASE("rematerialize: a copy nobody reads is not made", "[remat]") {
  Fused f = fused_adjoint(kResidual);
  const Function &fn = *f.adjoint;
  size_t n = fn.body.bindings.size(), end = remat_chain(fn).forward_end;
  REQUIRE(end > 1);
  size_t kernel = 0; // the first forward kernel
  while (fn.body.bindings[kernel].value->kind != ExprKind::Call)
    ++kernel;
  RematSchedule schedule{std::vector<bool>(n, true), std::vector<std::vector<size_t>>(n + 1)};
  // Copied before the result, which every binding before it reads in the original: dead.
  schedule.before[n].push_back(kernel);
  RematStats stats;
  std::vector<size_t> source;
  FunctionPtr rewritten = rematerialize(fn, schedule, stats, &source);
  CHECK(rewritten->body.bindings.size() == n);
  CHECK(stats.recomputed == 0);
  CHECK(stats.extra_flops == 0);
  CHECK(stats.recomputed_values.empty());
  REQUIRE(source.size() == n);
  for (size_t i = 0; i < n; ++i)
    CHECK(source[i] == i);
  // Copied before the first binding that reads it, which now reads the copy: made.
  size_t reader = kernel + 1;
  auto reads = [&](size_t j) {
    for (const ExprPtr &v : free_vars(fn.body.bindings[j].value))
      if (v.get() == fn.body.bindings[kernel].var.get())
        return true;
    return false;
  };
  while (reader < n && !reads(reader))
    ++reader;
  REQUIRE(reader < n);
  RematSchedule used{std::vector<bool>(n, true), std::vector<std::vector<size_t>>(n + 1)};
  used.reads_original[reader] = false;
  used.before[reader].push_back(kernel);
  RematStats used_stats;
  FunctionPtr with_copy = rematerialize(fn, used, used_stats);
  CHECK(with_copy->body.bindings.size() == n + 1);
  CHECK(used_stats.recomputed == 1);
}

TEST_CASE("checkpoint segments: one definition, for rematerialization and dead-code elimination", "[remat]") {
  // Parsed as written (no pass has run): %3 escapes its segment (read by the
  // result), %5 lies past the end, and the second start is never closed.
  auto src = std::make_shared<SourceFile>("seg.relay", R"(#[version = "0.0.5"]
def @main(%x: Tensor[(4,), float32]) {
  %0 = grad.start_checkpoint(%x);
  %1 = tanh(%0);
  %2 = exp(tanh(%1));
  %3 = grad.end_checkpoint(%2);
  %4 = grad.start_checkpoint(%3);
  %5 = sin(%4);
  (%5, %1)
}
)");
  std::ostringstream errors;
  DiagEngine diag(src, errors);
  std::optional<Module> m = parse_module(src, diag);
  REQUIRE(m);
  const Function &fn = *m->functions[0];
  CheckpointReach all = checkpoint_reach(fn, [](size_t) { return true; });
  CHECK(all.from_start == std::vector<bool>{true, true, true, true, true, true});
  CHECK(all.to_end == std::vector<bool>{false, true, true, false, false, false});
  CHECK(all.segment() == std::vector<bool>{false, true, true, false, false, false});
  // Opened by the first start only: the second start and what follows it are outside.
  CheckpointReach first = checkpoint_reach(fn, [](size_t i) { return i == 0; });
  CHECK(first.from_start == std::vector<bool>{true, true, true, true, false, false});
  RematStats stats;
  RematSet set = checkpoint_segments(fn, stats);
  CHECK(stats.segments == 2);
  CHECK(set.dropped == std::vector<bool>{false, true, true, false, false, false});
  CHECK(set.reads_original == std::vector<bool>{false, true, true, true, false, false});
}
