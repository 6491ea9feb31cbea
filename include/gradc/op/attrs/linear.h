//===- attrs/linear.h - typed attributes of the linear operators ----------===//
//
// The attributes of nn.dense, nn.batch_matmul and nn.bias_add
// (lib/op/linear.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::batch_matmul, {a, c}, BatchMatmulAttrs{.transpose_b = false})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <string>

namespace gradc {

struct DenseAttrs {
  std::optional<int64_t> units;
  std::string out_dtype;
  template <class V> void visit(V &v) {
    v("units", units, "N, checked against the weight if given.", {.min = 0});
    v("out_dtype", out_dtype, "Must be empty or the input dtype.");
  }
};

struct BatchMatmulAttrs {
  std::string out_dtype;
  bool transpose_a = false;
  bool transpose_b = true;
  template <class V> void visit(V &v) {
    v("out_dtype", out_dtype, "Must be empty or the input dtype.");
    v("transpose_a", transpose_a, "Use each matrix of a transposed.");
    v("transpose_b", transpose_b, "Use each matrix of b transposed (Relay's default: a·bᵀ).");
  }
};

struct BiasAddAttrs {
  int64_t axis = 1;
  template <class V> void visit(V &v) { v("axis", axis, "The axis the bias runs along.", {.axis_of = 0}); }
};

} // namespace gradc
