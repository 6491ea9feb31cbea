//===- slice.h - concatenate's and split's parts, for the strategies ------===//
//
// Internal to lib/op (slice.cpp defines the operators).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/attrs/slice.h"
#include "gradc/op/Kernel.h"

#include <utility>
#include <vector>

namespace gradc {

/// concatenate's axis, made non-negative.
int64_t concat_axis(const Expr &call);
/// A concatenate call's parts: its axis, the input types and where each
/// input starts along the axis (offsets[j], offsets.back() the total).
struct ConcatParts {
  explicit ConcatParts(const Expr &call);
  int64_t axis;
  std::vector<Type> inputs;
  std::vector<int64_t> offsets;
};
/// The parts of split: [begin, end) along the axis for each.
std::vector<std::pair<int64_t, int64_t>> split_parts(const SplitAttrs &a, int64_t n);

} // namespace gradc
