//===- grad.cpp - gradient-control operators: no_grad and checkpoints ----===//
//
// Identities at run time. grad.no_grad stops the gradient; the checkpoint
// markers delimit a segment whose values the backward pass recomputes
// instead of keeping (transform/Remat.h). grad.nll_loss_backward lives with
// nll_loss in nn.cpp.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

/// What the two markers mean together (SPEC §6), on both reference pages.
/// transform/TypeInfer.cpp checks these rules; transform/Remat.cpp applies them.
const char *const kSegmentRules = R"(checkpoint segments (--remat=manual; identities under --remat=none):
  A segment is every value on a path from a grad.start_checkpoint to a
  grad.end_checkpoint. The adjoint does not keep those values: it recomputes
  them from the segment's inputs before their first use in the backward pass.
  Results are bitwise those of --remat=none.
  adjacent:   grad.start_checkpoint(grad.end_checkpoint(%v)) closes one
              segment and opens the next, on the same value.
  nested:     a grad.start_checkpoint whose input is inside an open segment is
              an error: segments do not nest or cross.
  duplicated: equal grad.start_checkpoint calls on one value are one marker
              (calls are pure): one segment, closed when any of them reaches
              a grad.end_checkpoint; values only the others reach are kept.
  escaping:   a value of a segment that is also read after the segment, other
              than through grad.end_checkpoint, is read as computed by the
              forward pass and still recomputed for the backward pass.
  unclosed:   a grad.start_checkpoint from which no grad.end_checkpoint is
              reached, or an end that no start reaches, is an error.)";

} // namespace

void register_grad_ops(OpRegistry &reg) {
  reg.add("grad.no_grad")
      .describe("The identity, through which no gradient flows.")
      .arg("input", "Tensor", "The input.")
      .support_level(10)
      .relation("Identity", identity_rel)
      .no_gradient()
      .element([](ElementCtx &c) { return c.in(0); });

  reg.add("grad.start_checkpoint")
      .describe("The identity; marks an input of a recomputed checkpoint segment.")
      .arg("input", "Tensor", "The input.")
      .support_level(10)
      .relation("Identity", identity_rel)
      .notes(kSegmentRules)
      .checkpoint_marker(CheckpointMarker::Start)
      .gradient([](GradCtx &g) -> Grads { return {g.grad}; })
      .element([](ElementCtx &c) { return c.in(0); })
      .example("%x: Tensor[(2, 3), float64]", "grad.end_checkpoint(exp(grad.start_checkpoint(%x)))");

  reg.add("grad.end_checkpoint")
      .describe("The identity; marks an output of a recomputed checkpoint segment.")
      .arg("input", "Tensor", "The input.")
      .support_level(10)
      .relation("Identity", identity_rel)
      .notes(kSegmentRules)
      .checkpoint_marker(CheckpointMarker::End)
      .gradient([](GradCtx &g) -> Grads { return {g.grad}; })
      .element([](ElementCtx &c) { return c.in(0); })
      .example("%x: Tensor[(2, 3), float64]", "grad.end_checkpoint(sin(grad.start_checkpoint(%x)))");
}

} // namespace gradc
