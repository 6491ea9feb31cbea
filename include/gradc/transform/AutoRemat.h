//===- AutoRemat.h - what to keep and what to recompute, under a budget ---===//
//
// Selection for --remat=auto and --remat=sqrt, on a fused adjoint (its
// bindings are kernels: what memory and time are spent on). The forward
// pass is the bindings up to the one the result's field 0 (the primal
// value) is; it is cut into a chain of blocks wherever a single value
// crosses from one binding to the next (a chain of layers: every layer; a
// residual network: every block). A dynamic program over the chain
// (heterogeneous, Rotor-style: keep a block's values, or advance from a
// checkpoint without keeping and recompute later, at every memory level)
// gives a family of schedules, from keeping everything to the leanest.
// Each is rewritten (rematerialize) and its workspace taken from the memory
// model (exact: MemoryModel.h), its cost as the FLOPs of its copies.
// A budget then picks the cheapest whose workspace fits: the family does
// not depend on the budget, so a larger budget never costs more FLOPs, and
// the chosen workspace is the plan's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"
#include "gradc/loops/Memory.h"
#include "gradc/transform/Remat.h"

#include <string>
#include <vector>

namespace gradc {

/// One way to run a fused adjoint, evaluated.
struct RematPlan {
  std::string strategy;      // "none", "sqrt", "chain"
  RematSchedule schedule;
  int64_t workspace = 0;     // the planned workspace (memory model)
  int64_t extra_flops = 0;   // the FLOPs of the recomputed copies
  std::vector<std::string> recomputed; // the values recomputed (each once, in order of first copy)
};

/// The forward pass of `fn` and its chain of blocks (exposed for tests).
struct RematChain {
  size_t forward_end = 0;                  // bindings [0, forward_end) are the forward pass
  std::vector<size_t> block_begin;         // block k is [block_begin[k], block_begin[k + 1]); the last ends at forward_end
};
/// Empty (no blocks) where `fn` is not an adjoint whose result is (primal, ...).
RematChain remat_chain(const Function &fn);

/// Every plan for `fn` (a fused adjoint) that selection chooses from: none,
/// then the chain's schedules; distinct, each evaluated with `footprints`
/// (one per binding of `fn`). With `sqrt_only`, none and the √n schedule.
std::vector<RematPlan> remat_plans(const Function &fn, const std::vector<Footprint> &footprints, bool sqrt_only);

/// The plan with the fewest extra FLOPs whose workspace is at most `budget`
/// (the smaller workspace on ties); null when none fits.
const RematPlan *choose_plan(const std::vector<RematPlan> &plans, int64_t budget);

} // namespace gradc
