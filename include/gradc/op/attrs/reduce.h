//===- attrs/reduce.h - typed attributes of the reductions ----------------===//
//
// The attributes of the reductions (lib/op/reduce.cpp): sum, mean, max,
// min and logsumexp (ReduceAttrs), argmax and argmin, variance and std;
// passes that build or read reductions use ReduceAttrs too.
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::sum, {x}, ReduceAttrs{.axis = std::vector<int64_t>{1}})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <vector>

namespace gradc {

/// The attributes of the reduce operators (sum, mean, max, min).
struct ReduceAttrs {
  std::optional<std::vector<int64_t>> axis; // normalised; None or [] reduces every axis
  bool keepdims = false;
  bool exclude = false;
  template <class V> void visit(V &v) {
    v("axis", axis, "Axes to reduce; None reduces all.", {.axis_of = 0});
    v("keepdims", keepdims, "Keep reduced axes with size 1.");
    v("exclude", exclude, "Reduce every axis except `axis`.");
  }
  /// The axes reduced in a tensor of `rank`, sorted.
  std::vector<int64_t> reduced(int64_t rank) const;
};

/// argmax / argmin: the reduction's attributes and select_last_index.
struct ArgReduceAttrs : ReduceAttrs {
  bool select_last_index = false;
  template <class V> void visit(V &v) {
    ReduceAttrs::visit(v);
    v("select_last_index", select_last_index, "On ties, the last position instead of the first.");
  }
};

/// The reduction's attributes and `unbiased`.
struct VarianceAttrs : ReduceAttrs {
  bool unbiased = false;
  template <class V> void visit(V &v) {
    ReduceAttrs::visit(v);
    v("unbiased", unbiased, "Divide by n - 1 (Bessel's correction) instead of n.");
  }
  /// The reduction with keepdims = `keep`.
  ReduceAttrs reduce(bool keep) const {
    ReduceAttrs r = *this;
    r.keepdims = keep;
    return r;
  }
};

} // namespace gradc
