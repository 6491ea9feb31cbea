//===- Memory.h - placing buffer lifetimes in one workspace arena ---------===//
//
// The one placement every memory figure of gradc comes from: the plan that
// lowering writes into the arena buffers (lower/MemoryPlan.cpp) and the
// estimate that rematerialization plans with before anything is lowered
// (transform/MemoryModel.h). Both hand it (size, first kernel, last kernel)
// intervals; what differs is only where the intervals come from.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

#include <cstdint>
#include <vector>

namespace gradc {

/// Every buffer of the arena starts at a multiple of this (the ABI's alignment).
constexpr int64_t kBufferAlignment = 64;

/// A buffer as placement sees it: its bytes and the first and last kernels
/// (in execution order) during which it holds a value.
struct Lifetime {
  int64_t bytes = 0;
  size_t first = 0, last = 0;
};

/// Where each lifetime lies (byte offsets, in the order given) and the size
/// of the arena that holds them all: the planned peak.
struct Placement {
  std::vector<int64_t> offsets;
  int64_t peak = 0;
};

/// Greedy by size: the largest first (the earlier first kernel on ties, then
/// the order given), each at the lowest offset free of the placed lifetimes
/// that overlap its own. Sizes round up to kBufferAlignment. Offsets and the
/// peak saturate just past kMaxWorkspaceBytes (the pipeline rejects those).
/// Deterministic: the same lifetimes in the same order give the same plan.
Placement place(const std::vector<Lifetime> &lifetimes);

/// The arena of `fn` placed: each arena buffer's lifetime (buffer_lifetimes),
/// in the arena's order, through place(). Writes the offsets into the
/// buffers and returns the peak.
int64_t plan_arena(LoweredFunction &fn);

} // namespace gradc
