//===- attrs/loss.h - typed attributes of the losses ----------------------===//
//
// The attributes of nn.nll_loss and of its backward operators
// (lib/op/loss.cpp), which take the forward call's.
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::nll_loss, {logp, target}, NllAttrs{.reduction = "sum"})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <string>

namespace gradc {

struct NllAttrs {
  std::string reduction = "mean";
  int64_t ignore_index = -100;
  template <class V> void visit(V &v) {
    v("reduction", reduction, "\"mean\", \"sum\" or \"none\".", {.one_of = {"mean", "sum", "none"}});
    v("ignore_index", ignore_index, "A target value that contributes nothing.");
  }
};

} // namespace gradc
