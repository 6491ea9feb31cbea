//===- attrs/scan.h - typed attributes of cumsum and cumprod --------------===//
//
// The attributes of the cumulative operators cumsum and cumprod
// (lib/op/scan.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::cumsum, {x}, CumsumAttrs{.axis = 0})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>

namespace gradc {

struct CumsumAttrs {
  std::optional<int64_t> axis; // None: over the flattened input
  bool exclusive = false;
  template <class V> void visit(V &v) {
    v("axis", axis, "The scanned axis.", {.axis_of = 0});
    v("exclusive", exclusive, "Exclude the current element.");
  }
};

} // namespace gradc
