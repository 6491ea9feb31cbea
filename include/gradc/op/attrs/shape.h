//===- attrs/shape.h - typed attributes of the shape operators ------------===//
//
// The attributes of reshape, transpose, expand_dims, squeeze,
// broadcast_to and collapse_sum_to, nn.pad and reverse (lib/op/shape.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::reshape, {x}, ReshapeAttrs{.newshape = {6, 4}})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <string>
#include <vector>

namespace gradc {

struct ReshapeAttrs {
  std::vector<int64_t> newshape;
  bool allowzero = false;
  template <class V> void visit(V &v) {
    v("newshape", newshape, "The new shape.", {.required = true});
    v("allowzero", allowzero,
      "A 0 in newshape is a dimension of size 0, not a copy of the input's (TVM's allowzero).");
  }
};

struct TransposeAttrs {
  std::optional<std::vector<int64_t>> axes;
  template <class V> void visit(V &v) { v("axes", axes, "The permutation.", {.axis_of = 0}); }
  /// The permutation of a tensor of `rank`: the given one, else reversed axes.
  std::vector<int64_t> permutation(int64_t rank) const {
    if (axes)
      return *axes;
    std::vector<int64_t> reversed;
    for (int64_t i = rank - 1; i >= 0; --i)
      reversed.push_back(i);
    return reversed;
  }
};

struct ExpandDimsAttrs {
  int64_t axis = 0; // an axis of the result: the new axes start there
  int64_t num_newaxis = 1;
  template <class V> void visit(V &v) {
    v("axis", axis, "Where to insert.", {.required = true, .axis_of = 0, .extra_rank = 1});
    v("num_newaxis", num_newaxis, "How many axes to insert.", {.min = 0});
  }
};

struct SqueezeAttrs {
  std::optional<std::vector<int64_t>> axis;
  template <class V> void visit(V &v) { v("axis", axis, "The axes to remove.", {.axis_of = 0}); }
};

struct ShapeAttrs {
  std::vector<int64_t> shape;
  template <class V> void visit(V &v) { v("shape", shape, "The target shape.", {.required = true, .shape = true}); }
};

struct PadAttrs {
  IntPairs pad_width;
  double pad_value = 0;
  std::string pad_mode = "constant";
  template <class V> void visit(V &v) {
    v("pad_width", pad_width, "[before, after] per axis; a negative width crops.", {.required = true});
    v("pad_value", pad_value, "The value of the padding, unless given as the second argument.");
    v("pad_mode", pad_mode, "The padding mode.", {.one_of = {"constant"}});
  }
};

struct ReverseAttrs {
  int64_t axis = 0;
  template <class V> void visit(V &v) { v("axis", axis, "The axis to reverse.", {.required = true, .axis_of = 0}); }
};

} // namespace gradc
