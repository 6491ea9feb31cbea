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
#include <unordered_map>
#include <utility>
#include <vector>

namespace gradc {

/// Every buffer of the arena starts at a multiple of this (the ABI's alignment).
constexpr int64_t kBufferAlignment = 64;

/// The bytes a buffer of `bytes` takes in the arena: rounded up to the alignment.
constexpr int64_t arena_bytes(int64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

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

/// First fit: each lifetime at the lowest offset free of the placed
/// lifetimes that overlap its own, in the best of three orders (the one of
/// smallest peak; the first on ties): the largest first; the lifetimes live
/// during the busiest kernel first; the most bytes times kernels first (the
/// earlier first kernel on ties, then the order given). The search stops at
/// a plan as small as the bytes live during the busiest kernel. Sizes round
/// up to kBufferAlignment. Offsets and the peak saturate just past
/// kMaxWorkspaceBytes (the pipeline rejects those).
/// Deterministic: the same lifetimes in the same order give the same plan.
Placement place(const std::vector<Lifetime> &lifetimes);

/// What lowering makes of one top-level Call binding of a fused function,
/// as the memory plan sees it (lower/Footprint.cpp reads it off a lowered
/// function by provenance; transform/MemoryModel.h composes footprints into
/// a function's plan without lowering it). It depends only on the binding's
/// value, so a recomputed copy has its original's.
struct Footprint {
  /// A buffer a kernel touches, by role: leaf `index` of the binding's
  /// inputs (the Vars its value reads, in first-use order, each's leaves in
  /// turn), leaf `index` of its result, its `index`-th buffer of its own
  /// (created[index]), the function's status word, or parameter `index`
  /// itself where a Var the binding reads was written into it in place (an
  /// optimizer's new state, read by the parameter's update).
  enum class Role { Input, Result, Own, Status, Param };
  struct Touch {
    Role role;
    size_t index;
  };
  /// A buffer of its own (scratch, a scan's states), or the status word
  /// where this binding is the first to ask for it: in creation order,
  /// which is the arena's order (placement breaks ties by it).
  struct Created {
    DType dtype;
    Shape shape;
    bool status;
  };
  std::vector<std::vector<Touch>> kernels;
  /// Per kernel, its Kernel::overwrites as positions in its touches
  /// (stored, read over).
  std::vector<std::vector<std::pair<size_t, size_t>>> overwrites;
  std::vector<Created> created;
  std::vector<TimeLoop> time_loops; // kernel indices relative to the first kernel
};

/// Whether kernel `k`, which stores `to` over `from` (Kernel::overwrites),
/// hands `from`'s bytes to `to`: `to` is first written by kernel k, k is the
/// last to read `from`, `from` holds a value from before k, and both are of
/// one size. The plan places such a pair in one place (plan_arena; an
/// output's bytes, Buffer::host) and the verifier lets only such pairs
/// share bytes while both are live (loops/Verify.h). `life` is
/// buffer_lifetimes(fn).
bool hands_over(const std::unordered_map<const Buffer *, std::pair<size_t, size_t>> &life, size_t k, const Buffer &from,
                const Buffer &to);

/// The arena of `fn` placed: each arena buffer's lifetime (buffer_lifetimes),
/// in the arena's order, through place(). Writes the offsets into the
/// buffers and returns the peak.
int64_t plan_arena(LoweredFunction &fn);

} // namespace gradc
