//===- attrs/pool.h - typed attributes of the poolings --------------------===//
//
// The attributes of the 2-D poolings and their backward operators
// (lib/op/pool.cpp): windowed (Pool2DAttrs), global and adaptive.
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `MaxPool2DAttrs a; a.pool_size = {2, 2}; b.call(ops::max_pool2d, {x}, a)`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <string>
#include <vector>

namespace gradc {

struct Pool2DAttrs {
  Pair pool_size{1, 1};
  Pair strides{1, 1};
  Pair dilation{1, 1};
  Pad4 padding{0, 0, 0, 0};
  std::string layout = "NCHW", out_layout;
  bool ceil_mode = false;
  bool count_include_pad = false;
  template <class V> void visit_window(V &v) {
    v("pool_size", pool_size, "The window (KH, KW).", {.required = true, .min = 1, .max = kMaxElements});
    v("strides", strides, "The step of the window.", {.min = 1, .max = kMaxElements});
    v("dilation", dilation, "The spacing of the window's taps.", {.min = 1, .max = kMaxElements});
    v("padding", padding, "Implicit padding: 1 value (all sides), 2 (H, W) or 4 (top, left, bottom, right).",
      {.min = 0, .max = kMaxElements});
    v("layout", layout, "The data layout.", {.one_of = {"NCHW"}});
    v("out_layout", out_layout, "Empty (the data layout) or NCHW.", {.one_of = {"", "NCHW"}});
    v("ceil_mode", ceil_mode, "Round the output extent up.");
  }
};

struct MaxPool2DAttrs : Pool2DAttrs {
  template <class V> void visit(V &v) { visit_window(v); }
};

struct AvgPool2DAttrs : Pool2DAttrs {
  template <class V> void visit(V &v) {
    visit_window(v);
    v("count_include_pad", count_include_pad, "Divide by the taps in the padded data, not only in the data.");
  }
};

/// grad.max_pool2d_unpool: the pool's window and the pooled data's (H, W),
/// which the pool's output does not determine.
struct MaxUnpool2DAttrs : Pool2DAttrs {
  Pair data_size{1, 1};
  template <class V> void visit(V &v) {
    visit_window(v);
    v("data_size", data_size, "The pooled data's (H, W): the result's last two extents.",
      {.required = true, .min = 1, .max = kMaxElements});
  }
};

struct GlobalPool2DAttrs {
  std::string layout = "NCHW", out_layout;
  template <class V> void visit(V &v) {
    v("layout", layout, "The data layout.", {.one_of = {"NCHW"}});
    v("out_layout", out_layout, "Empty (the data layout) or NCHW.", {.one_of = {"", "NCHW"}});
  }
};

struct AdaptivePool2DAttrs {
  std::optional<std::vector<int64_t>> output_size; // None: the input's (H, W)
  std::string layout = "NCHW", out_layout;
  template <class V> void visit(V &v) {
    v("output_size", output_size, "(OH, OW), one value for both, or None for the input's.",
      {.min = 1, .max = kMaxElements});
    v("layout", layout, "The data layout.", {.one_of = {"NCHW"}});
    v("out_layout", out_layout, "Empty (the data layout) or NCHW.", {.one_of = {"", "NCHW"}});
  }
};

} // namespace gradc
