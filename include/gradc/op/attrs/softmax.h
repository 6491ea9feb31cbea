//===- attrs/softmax.h - typed attributes of softmax ----------------------===//
//
// The attributes of nn.softmax and nn.log_softmax (lib/op/softmax.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::softmax, {x}, SoftmaxAttrs{.axis = 1})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

namespace gradc {

struct SoftmaxAttrs {
  int64_t axis = -1;
  template <class V> void visit(V &v) { v("axis", axis, "The axis to normalise.", {.axis_of = 0}); }
};

} // namespace gradc
