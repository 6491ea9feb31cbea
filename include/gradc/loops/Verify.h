//===- Verify.h - the loop-IR verifier ------------------------------------===//
//
// Checks a lowered function after each loop pass (with --verify-each; always
// in debug builds and in the tests). A violation is a gradc bug: it throws
// InternalError naming the pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

#include <string>

namespace gradc {

struct LoopVerifyOptions {
  bool scheduled = false; // after the schedule pass: no Spatial/Reduce loop left
  bool planned = false;   // after memory planning: arena offsets assigned
};

/// Checks every kernel of `fn`: loop variables used only inside their loop
/// (each loop has its own variable, extents >= 0); buffers are the kernel's
/// listed buffers or a Local of an enclosing Alloc; every Load and Store index
/// whose range is statically known (interval arithmetic over loop extents,
/// refined by `if (e < c)` guards) lies inside the buffer; Input buffers are
/// never stored to, and an InOut one as InPlace.h's rule says. When scheduled: only scheduled loop kinds, no Parallel
/// loop inside another or under an Alloc, Vectorized loops innermost. When
/// planned: arena offsets aligned, inside the workspace, and no two arena
/// buffers whose bytes overlap are live in a common kernel. GPU kernels
/// (LoopIR.h): a block loop is the whole kernel (before scheduling, inside
/// data-parallel loops that GPU binding makes more blocks) and holds only Shared
/// allocations and one thread loop; barriers and shuffles are inside the
/// thread loop and under no condition that depends on the thread (its index,
/// its Local buffers, memory at an index that does) nor in a loop other than
/// a serial or unrolled one; a shuffle only in a stored value.
void verify(const LoweredFunction &fn, const LoopVerifyOptions &opts, const std::string &after_pass);

} // namespace gradc
