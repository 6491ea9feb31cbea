//===- attrs/slice.h - typed attributes of joining and slicing ------------===//
//
// The attributes of concatenate, split, stack and strided_slice (and
// grad.strided_slice_backward) (lib/op/slice.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::concatenate, {parts}, ConcatenateAttrs{.axis = 1})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <string>
#include <vector>

namespace gradc {

struct ConcatenateAttrs {
  int64_t axis = 0;
  template <class V> void visit(V &v) { v("axis", axis, "The axis to join along (negative counts from the end)."); }
};

struct SplitAttrs {
  IntOrList indices_or_sections{1, {}};
  int64_t axis = 0;
  template <class V> void visit(V &v) {
    v("indices_or_sections", indices_or_sections,
      "An int: that many equal parts; a list: the indices where parts start (numpy's split).", {.required = true});
    v("axis", axis, "The axis to split.", {.axis_of = 0});
  }
};

struct StackAttrs {
  int64_t axis = 0;
  template <class V> void visit(V &v) { v("axis", axis, "The new axis, an axis of the result."); }
};

struct StridedSliceAttrs {
  std::vector<int64_t> begin, end;
  std::optional<std::vector<int64_t>> strides, axes;
  std::string slice_mode = "end";
  template <class V> void visit(V &v) {
    v("begin", begin, "The first index per axis (negative counts from the end).", {.required = true});
    v("end", end, "The end per axis, exclusive (clipped as numpy); with slice_mode=\"size\", the size (-1: to the end).",
      {.required = true});
    v("strides", strides,
      "The step per axis (negative walks backwards); one value applies to every axis, missing entries are 1.");
    v("axes", axes, "The axes begin/end/strides apply to (default: the first len(begin)).", {.axis_of = 0});
    v("slice_mode", slice_mode, "\"end\": end is an index; \"size\": end is a size.", {.one_of = {"end", "size"}});
  }
};

} // namespace gradc
