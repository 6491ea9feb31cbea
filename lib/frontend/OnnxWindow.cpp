//===- OnnxWindow.cpp - Conv, ConvTranspose and the pools, 1-D to 3-D -----===//
//
// gradc's window operators are 2-D (nn.conv2d, nn.conv2d_transpose,
// nn.max_pool2d, nn.avg_pool2d over NCHW). The other ranks are built from
// them, so that every gradient comes from operators that have their own:
//
//  * 1-D: an (N, C, L) tensor is (N, C, 1, L), the window 1 high.
//  * 3-D: the (H, W) window goes to the 2-D operator and the depth axis is
//    taken apart. A convolution gathers the depth taps into channels: the
//    input's KD depth slices for each output depth become (N·D', G·KD·C/G,
//    H, W) — an im2col along depth only — and one 2-D convolution with the
//    weight's (KD, C/G) axes merged computes every output depth at once. A
//    transposed convolution is the same on the input with zeros inserted
//    between its depth slices (stride), padded by the kernel's extent less
//    the pads, with the kernel reversed along depth. A pool runs the 2-D
//    pool on (N, C·D, H, W) and reduces the KD depth slices with maximum or
//    a sum divided by each output depth's count.
//
//===----------------------------------------------------------------------===//
#include "OnnxMapping.h"
#include "gradc/op/Ops.h"
#include "gradc/op/attrs/conv.h"
#include "gradc/op/attrs/elementwise.h"
#include "gradc/op/attrs/linear.h"
#include "gradc/op/attrs/pool.h"
#include "gradc/op/attrs/shape.h"
#include "gradc/op/attrs/slice.h"

#include <algorithm>
#include <limits>

namespace gradc::onnx_import {
namespace {

/// The depth axis of a 3-D window, kept apart from the (H, W) window that
/// the 2-D operators take (a 1-D or 2-D window has kernel 1 and no pads).
struct Depth {
  int64_t kernel = 1, stride = 1, dilation = 1, lo = 0, hi = 0, out_pad = 0;
  int64_t extent() const { return (kernel - 1) * dilation + 1; }
};

/// The window attributes of Conv and the pools as 2-D ones plus the depth
/// axis, or a reason they are not: a 1-D window (an (N, C, L) input) is a
/// 2-D one of height 1 over (N, C, 1, L), so its kernel, strides and
/// dilations gain a leading 1 and its pads and output padding a leading 0.
struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations, out_pad;
  Depth depth;
  bool three_d = false;
  Pair pair(const std::vector<int64_t> &v) const { return {v[0], v[1]}; }
  Pad4 pad4() const { return {pads[0], pads[1], pads[2], pads[3]}; }
};

std::optional<Window> window(NodeCtx &ctx, const Type &in, std::vector<int64_t> kernel, bool transposed = false) {
  int64_t spatial = rank(in) - 2;
  if (spatial < 1 || spatial > 3) {
    ctx.unsupported("a " + std::to_string(spatial) + "-D window (only 1-D, 2-D and 3-D, NC...)");
    return std::nullopt;
  }
  size_t n = size_t(spatial);
  Window w;
  w.kernel = kernel;
  w.strides = ctx.attr_ints("strides", std::vector<int64_t>(n, 1));
  w.dilations = ctx.attr_ints("dilations", std::vector<int64_t>(n, 1));
  w.pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  w.out_pad = ctx.attr_ints("output_padding", std::vector<int64_t>(n, 0));
  // Checked before any is read: SAME padding divides by the strides.
  auto length = [&](const char *name, const std::vector<int64_t> &v, size_t want) {
    if (v.size() == want)
      return true;
    ctx.unsupported(std::string(name) + " of " + std::to_string(v.size()) + " values (a " + std::to_string(n) +
                    "-D window takes " + std::to_string(want) + ")");
    return false;
  };
  if (!length("kernel_shape", w.kernel, n) || !length("strides", w.strides, n) ||
      !length("dilations", w.dilations, n) || !length("pads", w.pads, 2 * n) ||
      (transposed && !length("output_padding", w.out_pad, n)))
    return std::nullopt;
  for (size_t d = 0; d < n; ++d)
    if (w.kernel[d] < 1 || w.strides[d] < 1 || w.dilations[d] < 1 || w.pads[d] < 0 || w.pads[d + n] < 0 ||
        w.out_pad[d] < 0) {
      ctx.unsupported("kernel_shape " + ints(w.kernel) + ", strides " + ints(w.strides) + " and dilations " +
                      ints(w.dilations) + " must be positive, pads " + ints(w.pads) + " and output_padding " +
                      ints(w.out_pad) + " not negative");
      return std::nullopt;
    }
  std::string pad = ctx.attr_string("auto_pad", "NOTSET");
  if (transposed && ctx.has_attr("output_shape")) {
    // The pads follow from the output's extent (ONNX: the larger half at the
    // end with SAME_UPPER, else at the start); a larger output than the
    // unpadded one takes the difference as output padding.
    std::vector<int64_t> want = ctx.attr_ints("output_shape", {});
    if (want.size() == n + 2)
      want.erase(want.begin(), want.begin() + 2);
    if (want.size() != n) {
      ctx.unsupported("output_shape " + ints(want) + " (" + std::to_string(n) + " spatial extents)");
      return std::nullopt;
    }
    for (size_t d = 0; d < n; ++d) {
      __int128 total = __int128(w.strides[d]) * (in.shape[d + 2] - 1) + w.out_pad[d] +
                       __int128(w.kernel[d] - 1) * w.dilations[d] + 1 - want[d];
      if (want[d] < 1 || total > INT64_MAX || total < -kMaxElements) {
        ctx.unsupported("output_shape " + ints(want) + " for an input of extent " + shape_str(in.shape));
        return std::nullopt;
      }
      int64_t all = int64_t(std::max<__int128>(total, 0)), half = all / 2;
      w.out_pad[d] += total < 0 ? -int64_t(total) : 0;
      w.pads[d] = pad == "SAME_UPPER" ? half : all - half;
      w.pads[d + n] = pad == "SAME_UPPER" ? all - half : half;
    }
    pad = "NOTSET";
  } else if (pad == "SAME_UPPER" || pad == "SAME_LOWER") {
    w.pads.assign(2 * n, 0);
    for (size_t d = 0; d < n; ++d) {
      // In 128 bits: attributes up to 2^63 multiply past it.
      __int128 in_d = in.shape[d + 2], s = w.strides[d], out = (in_d + s - 1) / s;
      __int128 extent = __int128(w.kernel[d] - 1) * w.dilations[d] + 1;
      // A transposed convolution's output is in * stride: its padding is taken from that.
      __int128 total = transposed ? s * (in_d - 1) + w.out_pad[d] + extent - in_d * s : (out - 1) * s + extent - in_d;
      total = std::max<__int128>(0, total);
      if (total > INT64_MAX) {
        ctx.unsupported("a window of " + ints(w.kernel) + " dilated by " + ints(w.dilations) +
                        " (its SAME padding is over 2^63)");
        return std::nullopt;
      }
      int64_t small = int64_t(total / 2), big = int64_t(total) - small;
      w.pads[d] = pad == "SAME_UPPER" ? small : big;
      w.pads[d + n] = pad == "SAME_UPPER" ? big : small;
    }
  } else if (pad == "VALID") {
    w.pads.assign(2 * n, 0);
  } else if (pad != "NOTSET") {
    ctx.unsupported("auto_pad = " + printable(pad));
    return std::nullopt;
  }
  if (n == 1) {
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    w.pads = {0, w.pads[0], 0, w.pads[1]};
    w.out_pad.insert(w.out_pad.begin(), 0);
  } else if (n == 3) {
    w.three_d = true;
    w.depth = {w.kernel[0], w.strides[0], w.dilations[0], w.pads[0], w.pads[3], w.out_pad[0]};
    for (std::vector<int64_t> *v : {&w.kernel, &w.strides, &w.dilations, &w.out_pad})
      v->erase(v->begin());
    w.pads = {w.pads[1], w.pads[2], w.pads[4], w.pads[5]};
  }
  return w;
}

/// An (N, C, L) tensor as (N, C, 1, L), for the 2-D operators.
ExprPtr lift_1d(Builder &b, ExprPtr x) {
  Shape s = x->type.shape;
  s.insert(s.begin() + 2, 1);
  return b.reshape(x, s);
}

/// A 2-D operator's (N, C, 1, L') result as (N, C, L').
ExprPtr drop_1d(Builder &b, ExprPtr y) {
  Shape s = y->type.shape;
  if (s.size() == 4)
    s.erase(s.begin() + 2);
  return b.reshape(y, s);
}

/// `x` (N, C, D, H, W) padded along depth with `value`: lo before, hi after.
ExprPtr pad_depth(Builder &b, ExprPtr x, int64_t lo, int64_t hi, double value = 0) {
  if (lo == 0 && hi == 0)
    return x;
  PadAttrs a;
  a.pad_width = {{0, 0}, {0, 0}, {lo, hi}, {0, 0}, {0, 0}};
  a.pad_value = value;
  return b.call(ops::pad, {x}, a);
}

/// Tap t of a depth window over `x` (N, C, D, ...): the depth slices
/// o·stride + t·dilation for the `out` output depths.
ExprPtr depth_tap(Builder &b, ExprPtr x, const Depth &d, int64_t t, int64_t out) {
  int64_t begin = t * d.dilation;
  return slice_axis(b, x, 2, begin, begin + (out - 1) * d.stride + 1, d.stride);
}

/// The `taps` depth slices of `x` (N, C, D, H, W) each output depth reads
/// (output o, tap t: depth o·stride + t·dilation), for `out` outputs, as
/// channels: (N·out, C·taps, H, W), the channels ordered (group, tap,
/// channel of the group) so that a grouped 2-D convolution sees each
/// group's taps together.
ExprPtr depth_taps(Builder &b, ExprPtr x, const Depth &d, int64_t out, int64_t groups) {
  const Shape &s = x->type.shape;
  int64_t n = s[0], c = s[1], h = s[3], w = s[4], per_group = c / groups;
  std::vector<ExprPtr> taps;
  for (int64_t t = 0; t < d.kernel; ++t)
    taps.push_back(b.reshape(depth_tap(b, x, d, t, out), {n, groups, 1, per_group, out, h, w}));
  ExprPtr all = taps.size() == 1 ? taps[0] : b.call(ops::concatenate, {b.tuple(taps)}, ConcatenateAttrs{.axis = 2});
  all = b.transpose(all, {0, 4, 1, 2, 3, 5, 6}); // (N, out, G, taps, C/G, H, W)
  return b.reshape(all, {n * out, c * d.kernel, h, w});
}

/// A 2-D operator's (N·D', O, H', W') result as (N, O, D', H', W').
ExprPtr undo_depth(Builder &b, ExprPtr y, int64_t n, int64_t depth) {
  const Shape &s = y->type.shape;
  return b.transpose(b.reshape(y, {n, depth, s[1], s[2], s[3]}), {0, 2, 1, 3, 4});
}

/// A 3-D convolution: `x` (N, C, D, H, W), `wt` (O, C/G, KD, KH, KW).
ExprPtr conv3d(NodeCtx &ctx, const Window &w, ExprPtr x, ExprPtr wt, int64_t groups) {
  Builder &b = ctx.b();
  const Depth &d = w.depth;
  int64_t n = x->type.shape[0], padded = x->type.shape[2] + d.lo + d.hi;
  if (padded < d.extent()) {
    ctx.unsupported("a depth window of extent " + std::to_string(d.extent()) + " over a padded depth of " +
                    std::to_string(padded));
    return nullptr;
  }
  int64_t out = (padded - d.extent()) / d.stride + 1;
  ExprPtr taps = depth_taps(b, pad_depth(b, x, d.lo, d.hi), d, out, groups);
  const Shape &ws = wt->type.shape; // (O, C/G, KD, KH, KW) -> (O, KD·C/G, KH, KW)
  ExprPtr w2 = b.reshape(b.transpose(wt, {0, 2, 1, 3, 4}), {ws[0], ws[2] * ws[1], ws[3], ws[4]});
  Conv2DAttrs a;
  a.strides = w.pair(w.strides);
  a.padding = w.pad4();
  a.dilation = w.pair(w.dilations);
  a.groups = groups;
  return undo_depth(b, b.call(ops::conv2d, {taps, w2}, a), n, out);
}

/// A 3-D transposed convolution: `x` (N, C, D, H, W), `wt` (C, O/G, KD, KH, KW).
ExprPtr conv3d_transpose(NodeCtx &ctx, const Window &w, ExprPtr x, ExprPtr wt, int64_t groups) {
  Builder &b = ctx.b();
  const Depth &d = w.depth;
  const Shape &s = x->type.shape, &ws = wt->type.shape;
  int64_t n = s[0], c = s[1], depth = s[2], h = s[3], wd = s[4];
  int64_t out = (depth - 1) * d.stride - d.lo - d.hi + d.extent() + d.out_pad;
  if (out < 1) {
    ctx.unsupported("an output depth of " + std::to_string(out));
    return nullptr;
  }
  // Zeros between the depth slices: (N, C, D, 1, H, W) padded to (N, C, D, S, H, W).
  ExprPtr z = x;
  if (d.stride > 1) {
    PadAttrs a;
    a.pad_width = {{0, 0}, {0, 0}, {0, 0}, {0, d.stride - 1}, {0, 0}, {0, 0}};
    z = b.reshape(b.call(ops::pad, {b.reshape(x, {n, c, depth, 1, h, wd})}, a), {n, c, depth * d.stride, h, wd});
  }
  // The stretched input holds (D - 1)·S + 1 slices, then S - 1 zeros.
  z = pad_depth(b, z, d.extent() - 1 - d.lo, d.extent() - 1 - d.hi + d.out_pad - (d.stride - 1));
  Depth unit = d;
  unit.stride = 1;
  ExprPtr taps = depth_taps(b, z, unit, out, groups);
  // (C, O/G, KD, KH, KW) -> (G, KD reversed, C/G, O/G, KH, KW) -> (G·KD·C/G, O/G, KH, KW).
  int64_t per_group = c / groups;
  ExprPtr w6 = b.reverse(b.reshape(wt, {groups, per_group, ws[1], ws[2], ws[3], ws[4]}), 3);
  ExprPtr w2 = b.reshape(b.transpose(w6, {0, 3, 1, 2, 4, 5}), {c * ws[2], ws[1], ws[3], ws[4]});
  Conv2DTransposeAttrs a;
  a.strides = w.pair(w.strides);
  a.padding = w.pad4();
  a.dilation = w.pair(w.dilations);
  a.groups = groups;
  a.output_padding = w.pair(w.out_pad);
  return undo_depth(b, b.call(ops::conv2d_transpose, {taps, w2}, a), n, out);
}

/// The output length of a pool along one axis: ONNX's and PyTorch's rule
/// (with ceil_mode, a last window that starts in the end padding is dropped).
int64_t pooled_length(int64_t in, int64_t lo, int64_t hi, int64_t extent, int64_t stride, bool ceil_mode) {
  int64_t span = in + lo + hi - extent;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + lo)
    --out;
  return out;
}

/// The depth part of a 3-D pool over `y` (N, C, D, H', W'), the (H, W)
/// part already pooled: the maximum of each window's depth slices, or
/// their sum over the count PyTorch divides by (the padded window clipped
/// to the end padding with count_include_pad, else the slices inside).
ExprPtr pool_depth(NodeCtx &ctx, ExprPtr y, const Depth &d, bool average, bool ceil_mode, bool include_pad) {
  Builder &b = ctx.b();
  const Shape &s = y->type.shape;
  int64_t depth = s[2];
  if (depth + d.lo + d.hi < d.extent()) {
    ctx.unsupported("a depth window of extent " + std::to_string(d.extent()) + " over a padded depth of " +
                    std::to_string(depth + d.lo + d.hi));
    return nullptr;
  }
  int64_t out = pooled_length(depth, d.lo, d.hi, d.extent(), d.stride, ceil_mode);
  // Windows that ceil_mode adds reach past the end padding.
  int64_t beyond = std::max<int64_t>(0, (out - 1) * d.stride + d.extent() - (depth + d.lo + d.hi));
  DType dt = y->type.dtype;
  double lowest = dt == DType::Float64 ? -std::numeric_limits<double>::max() : -double(std::numeric_limits<float>::max());
  if (dt == DType::Float16)
    lowest = -65504.0;
  ExprPtr p = pad_depth(b, y, d.lo, d.hi + beyond, average ? 0 : lowest);
  ExprPtr acc;
  for (int64_t t = 0; t < d.kernel; ++t) {
    ExprPtr slice = depth_tap(b, p, d, t, out);
    acc = !acc ? slice : b.call(average ? ops::add : ops::maximum, {acc, slice});
  }
  if (!average)
    return acc;
  // The counts, pooled the same way from ones: (1, 1, out, 1, 1).
  CreateAttrs ones{.shape = {1, 1, depth, 1, 1}, .dtype = dt};
  ExprPtr one = b.call(ops::ones, {}, ones);
  PadAttrs a;
  a.pad_width = {{0, 0}, {0, 0}, {d.lo, d.hi}, {0, 0}, {0, 0}};
  a.pad_value = include_pad ? 1 : 0;
  ExprPtr counted = d.lo || d.hi ? b.call(ops::pad, {one}, a) : one;
  counted = pad_depth(b, counted, 0, beyond);
  ExprPtr count;
  for (int64_t t = 0; t < d.kernel; ++t) {
    ExprPtr slice = depth_tap(b, counted, d, t, out);
    count = !count ? slice : b.add(count, slice);
  }
  return b.div(acc, count);
}

} // namespace

Mapped conv(NodeCtx &ctx, bool transposed) {
  const Type &x = ctx.input_type(0), &wt = ctx.input_type(1);
  if (rank(wt) != rank(x) || rank(wt) < 3 || rank(wt) > 5) {
    ctx.unsupported("a weight of rank " + std::to_string(rank(wt)) + " for an input of rank " +
                    std::to_string(rank(x)) + " (only 1-D, 2-D and 3-D convolutions)");
    return {};
  }
  std::vector<int64_t> kernel(wt.shape.begin() + 2, wt.shape.end());
  std::optional<Window> w = window(ctx, x, ctx.attr_ints("kernel_shape", kernel), transposed);
  if (!w)
    return {};
  Builder &b = ctx.b();
  int64_t groups = ctx.attr_int("group", 1);
  if (w->three_d && (groups < 1 || x.shape[1] % groups != 0)) {
    ctx.unsupported("group = " + std::to_string(groups) + " (must divide the " + std::to_string(x.shape[1]) +
                    " input channels)");
    return {};
  }
  bool one_d = rank(x) == 3;
  ExprPtr data = one_d ? lift_1d(b, ctx.input(0)) : ctx.input(0);
  ExprPtr weight = one_d ? lift_1d(b, ctx.input(1)) : ctx.input(1);
  ExprPtr e;
  if (w->three_d) {
    e = transposed ? conv3d_transpose(ctx, *w, data, weight, groups) : conv3d(ctx, *w, data, weight, groups);
    if (!e)
      return {};
  } else if (transposed) {
    Conv2DTransposeAttrs a;
    a.strides = w->pair(w->strides);
    a.padding = w->pad4();
    a.dilation = w->pair(w->dilations);
    a.groups = groups;
    a.output_padding = w->pair(w->out_pad);
    e = b.call(ops::conv2d_transpose, {data, weight}, a);
  } else {
    Conv2DAttrs a;
    a.strides = w->pair(w->strides);
    a.padding = w->pad4();
    a.dilation = w->pair(w->dilations);
    a.groups = groups;
    e = b.call(ops::conv2d, {data, weight}, a);
  }
  if (ctx.has_input(2))
    e = b.call(ops::bias_add, {e, ctx.input(2)}, BiasAddAttrs{.axis = 1});
  return {one_d ? drop_1d(b, e) : e};
}

/// GlobalAveragePool and GlobalMaxPool over (N, C, ...): the spatial axes
/// as one, (N, C, 1, L), for the 2-D operator.
Mapped global_pool(NodeCtx &ctx, bool average) {
  Builder &b = ctx.b();
  const OpRef &op = average ? ops::global_avg_pool2d : ops::global_max_pool2d;
  const Shape &s = ctx.input_type(0).shape;
  if (s.size() == 4)
    return {b.call(op, {ctx.input(0)})};
  if (s.size() < 3) {
    ctx.unsupported("an input of rank " + std::to_string(s.size()) + " (N, C and a spatial axis at least)");
    return {};
  }
  int64_t spatial = 1;
  for (size_t i = 2; i < s.size(); ++i)
    spatial *= s[i];
  ExprPtr y = b.call(op, {b.reshape(ctx.input(0), {s[0], s[1], 1, spatial})});
  Shape out(s.size(), 1);
  out[0] = s[0];
  out[1] = s[1];
  return {b.reshape(y, out)};
}

Mapped pool(NodeCtx &ctx, bool average) {
  const Type &x = ctx.input_type(0);
  if (ctx.num_outputs() > 1) {
    ctx.unsupported("the Indices output");
    return {};
  }
  if (ctx.attr_int("storage_order", 0) != 0) {
    ctx.unsupported("storage_order = 1");
    return {};
  }
  std::optional<Window> w = window(ctx, x, ctx.attr_ints("kernel_shape", {}));
  std::optional<bool> ceil_mode = flag(ctx, "ceil_mode", 0);
  std::optional<bool> include_pad = flag(ctx, "count_include_pad", 0);
  if (!w || !ceil_mode || !include_pad)
    return {};
  auto fill = [&](Pool2DAttrs &a) {
    a.pool_size = w->pair(w->kernel);
    a.strides = w->pair(w->strides);
    a.dilation = w->pair(w->dilations);
    a.padding = w->pad4();
    a.ceil_mode = *ceil_mode;
  };
  Builder &b = ctx.b();
  bool one_d = rank(x) == 3;
  ExprPtr data = one_d ? lift_1d(b, ctx.input(0)) : ctx.input(0), y;
  const Shape &s = x.shape;
  if (w->three_d) // (N, C, D, H, W) -> (N, C·D, H, W)
    data = b.reshape(data, {s[0], s[1] * s[2], s[3], s[4]});
  if (average) {
    AvgPool2DAttrs a;
    fill(a);
    a.count_include_pad = *include_pad;
    y = b.call(ops::avg_pool2d, {data}, a);
  } else {
    MaxPool2DAttrs a;
    fill(a);
    y = b.call(ops::max_pool2d, {data}, a);
  }
  if (w->three_d) {
    const Shape &p = y->type.shape;
    y = pool_depth(ctx, b.reshape(y, {s[0], s[1], s[2], p[2], p[3]}), w->depth, average, *ceil_mode, *include_pad);
    if (!y)
      return {};
  }
  return {one_d ? drop_1d(b, y) : y};
}

} // namespace gradc::onnx_import
