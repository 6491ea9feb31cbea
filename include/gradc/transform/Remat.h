//===- Remat.h - checkpoint rematerialization (SPEC §6) -------------------===//
#pragma once

#include "gradc/ir/Expr.h"

namespace gradc {

struct RematStats {
  int segments = 0;   // checkpoint segments found
  int recomputed = 0; // bindings duplicated into the backward pass
  int time_checkpointed = 0; // scans whose backward pass keeps every k-th state
};

/// Manual rematerialization (Relax semantics). A checkpoint segment is every
/// binding on a path from a grad.start_checkpoint output to a
/// grad.end_checkpoint input. Its values are not kept for later use: each use
/// outside the segment (other than by end_checkpoint) is rewritten to a copy
/// recomputed from the segment's inputs, emitted right before the first such
/// use. The forward copies then die at the segment's end.
///
/// Pre: typed ANF. Post: typed ANF computing bitwise the same results.
FunctionPtr rematerialize_checkpoints(const Function &fn, RematStats &stats);

/// Time checkpointing (also --remat=manual): every grad.scan_backward of a
/// scan written with checkpoint_every=k > 1 reads only every k-th state and
/// recomputes the rest (transform/TimeCheckpoint.cpp). Pre and post: typed
/// ANF, bitwise the same results.
FunctionPtr checkpoint_scans(const Function &fn, RematStats &stats);

} // namespace gradc
