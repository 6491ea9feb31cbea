//===- attrs/elementwise.h - typed attributes of creation, cast and clip --===//
//
// The attributes of zeros and ones, full, cast and clip
// (lib/op/elementwise.cpp); the other elementwise operators take none.
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::clip, {x}, ClipAttrs{.a_min = 0, .a_max = 6})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <vector>

namespace gradc {

struct CreateAttrs {
  std::vector<int64_t> shape;
  DType dtype = DType::Float32;
  template <class V> void visit(V &v) {
    v("shape", shape, "The output shape.", {.required = true, .shape = true});
    v("dtype", dtype, "The output dtype.", {.required = true});
  }
};

struct FullAttrs {
  std::vector<int64_t> shape;
  std::optional<DType> dtype; // fill_value's when None
  template <class V> void visit(V &v) {
    v("shape", shape, "The output shape.", {.required = true, .shape = true});
    v("dtype", dtype, "The output dtype (default: fill_value's).");
  }
};

struct CastAttrs {
  DType dtype = DType::Float32;
  template <class V> void visit(V &v) { v("dtype", dtype, "The output dtype.", {.required = true}); }
};

struct ClipAttrs {
  double a_min = 0, a_max = 0;
  template <class V> void visit(V &v) {
    v("a_min", a_min, "The lower bound.", {.required = true});
    v("a_max", a_max, "The upper bound.", {.required = true});
  }
};

} // namespace gradc
