//===- Passes.h - the loop-IR passes --------------------------------------===//
//
// Each runs on one lowered function after lowering (driver/Pipeline.cpp lists
// them). The schedule passes turn the operators' schedule-neutral nests
// (Spatial and Reduce loops) into what the target runs; afterwards no
// unscheduled loop is left (loops/Verify.h checks it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"
#include "gradc/loops/Memory.h"
#include "gradc/loops/Range.h"
#include "gradc/loops/Target.h"

namespace gradc {

/// Offsets of the arena buffers in the workspace (MemoryPlan.cpp): each
/// kernel's Kernel::overwrites listed first, then loops/Memory.h's plan.
void plan_memory(LoweredFunction &fn);

/// Removes index arithmetic the loop variables' ranges prove redundant:
/// divisions and remainders of a sum by a constant that divides part of it,
/// nested divisions, clamps of an index already in range (Simplify.cpp).
void simplify_indices(LoweredFunction &fn);
/// The same for one expression, its loop variables in the given ranges.
LExprPtr simplify_index(const LExprPtr &e, const std::unordered_map<const LVar *, Range> &vars);

/// CPU (Schedule.cpp): the outermost profitable data-parallel loop of a
/// kernel becomes Parallel (a cost rule: small loops stay serial), the
/// innermost Vectorized, a loop that is both is split into a Parallel loop of
/// Vectorized strips; reductions run in order.
void schedule_cpu(LoweredFunction &fn, const Target &target);

/// CUDA (BindGpu.cpp): the data-parallel loops at the top of a kernel become
/// one flat index over blockIdx/threadIdx; everything inside runs per thread.
/// A kernel a strategy bound itself (a BlockIdx loop at the top, LoopIR.h)
/// keeps its schedule and gets its launch shape from its loops (up to three
/// dimensions each); data-parallel loops around it become a spare grid
/// dimension, or more blocks of a flat grid.
void bind_gpu_threads(LoweredFunction &fn, const Target &target);

/// `run --target=cuda --simulate` (SimulateGpu.cpp): a bound function as a
/// CPU program with the same results: blocks as a parallel loop, their
/// threads one after another, cut at barriers and shuffles; every access to
/// shared memory checked for a race between threads of a block (the status
/// word kStatusGpuRace = {code, site, element, thread}). Returns what each
/// site names ("shared buffer B of kernel K").
std::vector<std::string> simulate_gpu(LoweredFunction &fn, const Target &target);

} // namespace gradc
