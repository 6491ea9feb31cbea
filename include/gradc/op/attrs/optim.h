//===- attrs/optim.h - typed attributes of the optimizer updates ----------===//
//
// The attributes of optim.sgd_momentum and optim.adam (lib/op/optim.cpp),
// which the training step (transform/TrainStep.cpp) builds:
// `b.call(ops::adam, {p, g, m, v, step_size, bias2_sqrt, decay}, AdamAttrs{.beta1 = 0.9})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

namespace gradc {

struct SgdMomentumAttrs {
  double momentum = 0.9;
  bool nesterov = false;
  template <class V> void visit(V &v) {
    v("momentum", momentum, "The factor of the previous buffer.");
    v("nesterov", nesterov, "Step along grad + momentum * buffer instead of the buffer.");
  }
};

struct AdamAttrs {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  template <class V> void visit(V &v) {
    v("beta1", beta1, "The first moment's decay.");
    v("beta2", beta2, "The second moment's decay.");
    v("eps", eps, "Added to the denominator.");
  }
};

} // namespace gradc
