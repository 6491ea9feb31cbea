//===- attrs/conv.h - typed attributes of the convolutions ----------------===//
//
// The attributes of nn.conv2d, nn.conv2d_transpose and
// nn.conv2d_backward_weight (lib/op/conv.cpp), which share ConvAttrs.
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `Conv2DAttrs a; a.groups = 2; b.call(ops::conv2d, {x, w}, a)`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>
#include <string>
#include <vector>

namespace gradc {

/// The attributes every convolution shares (Relay's Conv2DAttrs; the
/// informational ones are checked against the operands).
struct ConvAttrs {
  Pair strides{1, 1};
  Pad4 padding{0, 0, 0, 0};
  Pair dilation{1, 1};
  Pair output_padding{0, 0}; // conv2d_transpose only
  int64_t groups = 1;
  std::optional<int64_t> channels;
  std::optional<std::vector<int64_t>> kernel_size;
  std::string data_layout = "NCHW", kernel_layout = "OIHW", out_layout, out_dtype;

  template <class V> void visit_common(V &v) {
    v("strides", strides, "The step of the window along H and W.", {.min = 1, .max = kMaxElements});
    v("padding", padding, "Implicit zeros: 1 value (all sides), 2 (H, W) or 4 (top, left, bottom, right).",
      {.min = 0, .max = kMaxElements});
    v("dilation", dilation, "The spacing of the kernel's taps along H and W.", {.min = 1, .max = kMaxElements});
    v("groups", groups, "Channel groups (the input channels for a depthwise convolution).", {.min = 1});
    v("channels", channels, "The output channels, checked against the weight if given.", {.min = 1});
    v("kernel_size", kernel_size, "(KH, KW), checked against the weight if given.", {.min = 1});
    v("data_layout", data_layout, "The data layout.", {.one_of = {"NCHW"}});
  }
  template <class V> void visit_output(V &v) {
    v("out_layout", out_layout, "The output layout: empty (the data layout) or NCHW.", {.one_of = {"", "NCHW"}});
    v("out_dtype", out_dtype, "Empty or the input dtype (float16 accumulates in float32 either way).");
  }
};

struct Conv2DAttrs : ConvAttrs {
  template <class V> void visit(V &v) {
    visit_common(v);
    v("kernel_layout", kernel_layout, "The weight layout.", {.one_of = {"OIHW"}});
    visit_output(v);
  }
};

struct Conv2DTransposeAttrs : ConvAttrs {
  Conv2DTransposeAttrs() { kernel_layout = "IOHW"; }
  template <class V> void visit(V &v) {
    visit_common(v);
    v("output_padding", output_padding, "Extra rows and columns at the bottom and right of the output.",
      {.min = 0, .max = kMaxElements});
    v("kernel_layout", kernel_layout, "The weight layout.", {.one_of = {"IOHW"}});
    visit_output(v);
  }
};

struct Conv2DBackwardWeightAttrs : ConvAttrs {
  template <class V> void visit(V &v) {
    visit_common(v);
    v("kernel_layout", kernel_layout, "The weight layout.", {.one_of = {"OIHW"}});
    visit_output(v);
  }
};

} // namespace gradc
