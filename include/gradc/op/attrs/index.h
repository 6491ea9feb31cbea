//===- attrs/index.h - typed attributes of take and one_hot ---------------===//
//
// The attributes of take (and grad.take_backward) and one_hot
// (lib/op/index.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::take, {data, indices}, TakeAttrs{.axis = 0})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <string>

namespace gradc {

struct TakeAttrs {
  std::optional<int64_t> axis;
  int64_t batch_dims = 0;
  std::string mode = "clip";
  template <class V> void visit(V &v) {
    v("axis", axis, "The axis to take along; None: the flattened input.");
    v("batch_dims", batch_dims, "Leading axes of indices and data that are batch axes (matched, not indexed).",
      {.min = 0});
    v("mode", mode,
      "Out-of-range indices: \"clip\" to the ends, \"wrap\" around; \"fast\" unchecked: promised in range, an "
      "index outside is clipped (memory stays safe) and not reported (the status stays 0).",
      {.one_of = {"clip", "wrap", "fast"}});
  }
};

struct OneHotAttrs {
  int64_t depth = 1;
  int64_t axis = -1;
  std::optional<DType> dtype;
  template <class V> void visit(V &v) {
    v("depth", depth, "The length of the new axis.", {.required = true, .min = 0, .max = kMaxElements});
    v("axis", axis, "Where the new axis goes (-1: last).");
    v("dtype", dtype, "The result's dtype, the values cast to it (default: on_value's).");
  }
};

} // namespace gradc
