//===- AutoRemat.h - what to keep and what to recompute, under a budget ---===//
//
// Selection for --remat=auto and --remat=sqrt, on a fused adjoint (its
// bindings are kernels: what memory and time are spent on). The forward
// pass is the bindings up to the one the result's field 0 (the primal
// value) is. Two families of schedules are proposed:
//  - chains: the forward pass is cut into blocks wherever a single value
//    crosses (a chain of layers: every layer; a residual network: every
//    block), and a dynamic program over the blocks (heterogeneous,
//    Rotor-style; on uniform chains binomial checkpointing's optimum) gives
//    a schedule per memory level, with values recomputed once per sweep;
//  - keep sets, for any graph (long skips leave a chain few cuts): which
//    forward kernels to keep, each dropped one recomputed once before its
//    first backward use; every subset where there are few, a greedy descent
//    by single flips, each measured, where there are many.
// Each schedule is rewritten (rematerialize) and its workspace taken from
// the memory model (exact: MemoryModel.h), its cost as the FLOPs of its
// copies; the plans beaten in both are dropped. A budget then picks the
// cheapest whose workspace fits: the plans do not depend on the budget, so
// a larger budget never costs more FLOPs, and the chosen workspace is the
// plan's. The number of plans measured is bounded by the function's size,
// so selection stays well under a second for thousands of kernels.
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
  std::string strategy;      // "none", "sqrt", "chain", "keep-set"
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

/// The forward kernels a keep set decides on (2^this many keep sets).
size_t remat_candidates(const Function &fn);

/// Keep sets are searched exhaustively up to this many candidates.
constexpr size_t kRematExhaustiveCandidates = 10;

/// The plans for `fn` (a fused adjoint) that selection chooses from, each
/// evaluated with `footprints` (one per binding of `fn`): none first, then
/// those no other plan beats in both workspace and FLOPs, from the chain's
/// program and from keep sets (every subset of the forward kernels up to
/// `exhaustive_up_to` of them, growing prefixes otherwise). With
/// `sqrt_only`, none and the √n schedule.
std::vector<RematPlan> remat_plans(const Function &fn, const std::vector<Footprint> &footprints, bool sqrt_only,
                                   size_t exhaustive_up_to = kRematExhaustiveCandidates);

/// A chain as the dynamic program sees it, per block: memory in levels
/// (its output x; keeping the block, its stash and x; its backward step
/// alone with its input at hand) and FLOPs (computing what keeping it
/// keeps, its step's recomputation, advancing through it to x).
struct ChainCosts {
  std::vector<int64_t> x, keep, base, keep_flops, base_flops, advance_flops;
};
/// The least FLOPs the program recomputes for the whole chain within m
/// levels (0 <= m <= 128), the first sweep being the forward pass itself;
/// a huge value where nothing fits. Exposed for tests.
int64_t chain_program_cost(const ChainCosts &costs, int64_t m);

/// The plan with the fewest extra FLOPs whose workspace is at most `budget`
/// (the smaller workspace on ties); null when none fits.
const RematPlan *choose_plan(const std::vector<RematPlan> &plans, int64_t budget);

} // namespace gradc
