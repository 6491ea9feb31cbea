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
      .checkpoint_marker(CheckpointMarker::Start)
      .gradient([](GradCtx &g) -> Grads { return {g.grad}; })
      .element([](ElementCtx &c) { return c.in(0); })
      .example("%x: Tensor[(2, 3), float64]", "grad.end_checkpoint(exp(grad.start_checkpoint(%x)))");

  reg.add("grad.end_checkpoint")
      .describe("The identity; marks an output of a recomputed checkpoint segment.")
      .arg("input", "Tensor", "The input.")
      .support_level(10)
      .relation("Identity", identity_rel)
      .checkpoint_marker(CheckpointMarker::End)
      .gradient([](GradCtx &g) -> Grads { return {g.grad}; })
      .element([](ElementCtx &c) { return c.in(0); })
      .example("%x: Tensor[(2, 3), float64]", "grad.end_checkpoint(sin(grad.start_checkpoint(%x)))");
}

} // namespace gradc
