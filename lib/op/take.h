//===- take.h - take's geometry, for the strategies -----------------------===//
//
// Internal to lib/op (index.cpp defines take and grad.take_backward).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Kernel.h"

#include <functional>
#include <string>

namespace gradc {

/// take's geometry: data seen as (pre, n, post) around the axis (the
/// flattened data for axis=None), indices as (batch, rest).
struct TakeShape {
  Shape data, indices, out;
  int64_t axis = 0, batch = 0; // the axis of `data` (flattened when None)
  std::string mode;
};

TakeShape take_shape(const Expr &call, const Type &data, const Type &indices);

/// The data index that output index `o` reads (data seen as t.data), with
/// the index value read through `index` and brought into range by the mode.
Index data_index(const TakeShape &t, const Index &o, const std::function<LExprPtr(const Index &)> &index);

/// An index of the real data from one of t.data (the flattened data for axis=None).
Index real_index(const Shape &data, const TakeShape &t, const Index &d);

} // namespace gradc
