//===- attrs/norm.h - typed attributes of the normalisations --------------===//
//
// The attributes of nn.batch_norm, nn.layer_norm and nn.group_norm
// (lib/op/norm.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::layer_norm, {x, g, beta}, LayerNormAttrs{.epsilon = 1e-6})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

namespace gradc {

struct BatchNormAttrs {
  int64_t axis = 1;
  double epsilon = 1e-5;
  bool center = true;
  bool scale = true;
  template <class V> void visit(V &v) {
    v("axis", axis, "The channel axis.", {.axis_of = 0});
    v("epsilon", epsilon, "Added to the variance.");
    v("center", center, "Add beta.");
    v("scale", scale, "Multiply by gamma.");
  }
};

struct LayerNormAttrs {
  int64_t axis = -1;
  double epsilon = 1e-5;
  bool center = true;
  bool scale = true;
  template <class V> void visit(V &v) {
    v("axis", axis, "The normalised axis.", {.axis_of = 0});
    v("epsilon", epsilon, "Added to the variance.");
    v("center", center, "Add beta.");
    v("scale", scale, "Multiply by gamma.");
  }
};

struct GroupNormAttrs {
  int64_t num_groups = 1;
  int64_t axis = 1;
  double epsilon = 1e-5;
  bool center = true;
  bool scale = true;
  template <class V> void visit(V &v) {
    v("num_groups", num_groups, "Groups of channels normalised together.", {.required = true, .min = 1});
    v("axis", axis, "The channel axis.", {.axis_of = 0});
    v("epsilon", epsilon, "Added to the variance.");
    v("center", center, "Add beta.");
    v("scale", scale, "Multiply by gamma.");
  }
};

} // namespace gradc
