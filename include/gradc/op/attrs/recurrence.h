//===- attrs/recurrence.h - typed attributes of scan and its gradient -----===//
//
// The attributes of scan and grad.scan_backward (lib/op/recurrence.cpp):
// time checkpointing, and what the gradient rule records for the backward
// scan.
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::scan, args, ScanAttrs{.checkpoint_every = 4})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <vector>

namespace gradc {

struct ScanAttrs {
  int64_t checkpoint_every = 1;
  int64_t checkpoint_slots = 0;
  template <class V> void visit(V &v) {
    v("checkpoint_every", checkpoint_every,
      "Time checkpointing (SPEC §6; with --remat=manual, the default): the backward pass keeps every k-th "
      "state and recomputes the others a segment at a time from it, bitwise the same; 1 keeps every state.",
      {.min = 1});
    v("checkpoint_slots", checkpoint_slots,
      "Binomial time checkpointing (Griewank's revolve; with --remat=manual): the backward pass holds at most "
      "this many states at once, state 0 included, and recomputes the fewest forward steps that allows, bitwise "
      "the same; 0 does not use it.",
      {.min = 0});
  }
};

struct ScanBackwardAttrs {
  int64_t sequences = 1;
  int64_t saved = 0;
  bool recompute_saved = false;
  int64_t checkpoint_every = 1;
  int64_t checkpoint_slots = 0;
  int64_t steps = 0;
  std::vector<int64_t> unsummed;
  int64_t emitted = 0;
  template <class V> void visit(V &v) {
    v("sequences", sequences, "How many of the arguments after the adjoint are sequences (the rest are captured).",
      {.min = 1});
    v("saved", saved,
      "How many values of each forward step the vjp reads after the sequences' steps (op/VjpSplit.h): the "
      "forward scan's products, stored by it or recomputed.",
      {.min = 0});
    v("recompute_saved", recompute_saved,
      "False: the saved values are the last `saved` sequences, which the forward scan stored; they get no "
      "adjoint, and the body does not take them. True: the body returns them after the next state, and the "
      "backward pass recomputes them from the states it has (each step's, or each segment's when "
      "time-checkpointed).");
    v("checkpoint_every", checkpoint_every, "The scan's checkpoint_every: what --remat=manual makes of it.",
      {.min = 1});
    v("checkpoint_slots", checkpoint_slots, "The scan's checkpoint_slots: what --remat=manual makes of it.",
      {.min = 0});
    v("steps", steps,
      "0: `states` holds every state. T > 0 (after time checkpointing): the scan had T steps and `states` "
      "holds every checkpoint_every-th state of the first T - 1, the ones its reverse steps start from; with "
      "checkpoint_slots, the states the binomial schedule's forward sweep keeps (op/Revolve.h).",
      {.min = 0});
    v("unsummed", unsummed,
      "The captured values (their positions among them) the vjp returns no adjoint for: scan's gradient sums "
      "them after the loop, as one contraction over every step (op/TimeSums.h).");
    v("emitted", emitted,
      "How many step values the vjp returns after the adjoints, which the result stacks over time (step 0: "
      "zeros), as it stacks the sequences' adjoints: the operands of those sums that have no history otherwise.",
      {.min = 0});
  }
};

} // namespace gradc
