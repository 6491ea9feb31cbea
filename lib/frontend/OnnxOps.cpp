//===- OnnxOps.cpp - the ONNX operators gradc maps, one entry each --------===//
//
// Each entry turns one node into Relay text through NodeCtx (OnnxOps.h), for
// opsets 11 to 17 (where an opset moved an attribute to an input, both are
// read). What an entry cannot map it reports with ctx.unsupported(), naming
// the attribute and its value; the importer reports every one at once.
//
//===----------------------------------------------------------------------===//
#include "OnnxOps.h"
#include "gradc/ir/Expr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gradc::onnx_import {

std::vector<int64_t> to_ints(const ConstValue &c) {
  constexpr int64_t kLimit = int64_t(1) << 62;
  std::vector<int64_t> out;
  if (!c.ints.empty())
    for (int64_t v : c.ints)
      out.push_back(std::clamp(v, -kLimit, kLimit));
  else
    for (double v : c.values)
      out.push_back(to_int(v));
  return out;
}

std::string printable(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string float_literal(double v, DType dtype) { return format_float(v, dtype) + dtype_info(dtype).literal_suffix; }

std::string literal_of(const ConstValue &c, size_t i) {
  if (c.dtype == DType::Bool)
    return c.values[i] != 0 ? "True" : "False";
  if (is_int(c.dtype))
    return std::to_string(c.ints[i]) + dtype_info(c.dtype).literal_suffix;
  return float_literal(c.values[i], c.dtype);
}

namespace {

std::string ints(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string call(const std::string &op, std::vector<std::string> args, const std::string &attrs = "") {
  std::string s = op + "(";
  for (size_t i = 0; i < args.size(); ++i)
    s += (i ? ", " : "") + args[i];
  if (!attrs.empty())
    s += (args.empty() ? "" : ", ") + attrs;
  return s + ")";
}

Mapped one(std::string e) { return {{std::move(e)}, false}; }

int64_t rank(const Type &t) { return int64_t(t.shape.size()); }

/// A floating-point attribute value as the printer writes it ("1e-05f",
/// "1e+300f64", "-inff", "nanf").
std::string float_attr(double v) { return AttrValue::of(v).str(); }

int64_t norm_axis(int64_t axis, int64_t r) { return axis < 0 ? axis + r : axis; }

/// `axis` of a rank-`r` input, in [-r, r) (or [-r, r] where `end` is allowed:
/// Flatten), made non-negative; nullopt after reporting it.
std::optional<int64_t> checked_axis(NodeCtx &ctx, const char *name, int64_t axis, int64_t r, bool end = false) {
  if (axis < -r || axis > (end ? r : r - 1)) {
    ctx.unsupported(std::string(name) + " = " + std::to_string(axis) + " (out of range for an input of rank " +
                    std::to_string(r) + ")");
    return std::nullopt;
  }
  return norm_axis(axis, r);
}

/// A 0/1 attribute (keepdims): another value is an error, not "true".
std::optional<bool> flag(NodeCtx &ctx, const char *name, int64_t fallback) {
  int64_t v = ctx.attr_int(name, fallback);
  if (v != 0 && v != 1) {
    ctx.unsupported(std::string(name) + " = " + std::to_string(v) + " (0 or 1)");
    return std::nullopt;
  }
  return v == 1;
}

/// The attribute `name`, or from opset `moved` on, the constant input `input`.
std::optional<std::vector<int64_t>> ints_attr_or_input(NodeCtx &ctx, const std::string &name, size_t input,
                                                       int64_t moved) {
  if (ctx.opset() >= moved) {
    if (!ctx.has_input(input))
      return std::nullopt;
    std::optional<ConstValue> c = ctx.constant(input);
    if (!c) {
      ctx.unsupported("input " + std::to_string(input + 1) + " ('" + name + "') must be a constant");
      return std::nullopt;
    }
    return to_ints(*c);
  }
  if (!ctx.has_attr(name))
    return std::nullopt;
  return ctx.attr_ints(name, {});
}

Mapping unary(const char *op) {
  return [op](NodeCtx &ctx) { return one(call(op, {ctx.input(0)})); };
}

Mapping binary(const char *op) {
  return [op](NodeCtx &ctx) { return one(call(op, {ctx.input(0), ctx.input(1)})); };
}

/// Min, Max, Sum and Mean take any number of inputs: folded left.
Mapping variadic(const char *op) {
  return [op](NodeCtx &ctx) {
    std::string e = ctx.input(0);
    for (size_t i = 1; i < ctx.num_inputs(); ++i)
      e = call(op, {e, ctx.input(i)});
    return one(e);
  };
}

/// The 2-D window attributes of Conv and the pools, or a reason they are not.
struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
};
std::optional<Window> window(NodeCtx &ctx, const Type &x, std::vector<int64_t> kernel, bool transposed = false) {
  if (rank(x) != 4) {
    ctx.unsupported("a " + std::to_string(rank(x) - 2) + "-D window (only 2-D, NCHW)");
    return std::nullopt;
  }
  Window w;
  w.kernel = kernel;
  w.strides = ctx.attr_ints("strides", {1, 1});
  w.dilations = ctx.attr_ints("dilations", {1, 1});
  w.pads = ctx.attr_ints("pads", {0, 0, 0, 0});
  std::vector<int64_t> out_pad = ctx.attr_ints("output_padding", {0, 0});
  // Checked before any is read: SAME padding divides by the strides.
  auto length = [&](const char *name, const std::vector<int64_t> &v, size_t n) {
    if (v.size() == n)
      return true;
    ctx.unsupported(std::string(name) + " of " + std::to_string(v.size()) + " values (a 2-D window takes " +
                    std::to_string(n) + ")");
    return false;
  };
  if (!length("kernel_shape", w.kernel, 2) || !length("strides", w.strides, 2) ||
      !length("dilations", w.dilations, 2) || !length("pads", w.pads, 4) ||
      (transposed && !length("output_padding", out_pad, 2)))
    return std::nullopt;
  for (size_t d = 0; d < 2; ++d)
    if (w.kernel[d] < 1 || w.strides[d] < 1 || w.dilations[d] < 1) {
      ctx.unsupported("kernel_shape " + ints(w.kernel) + ", strides " + ints(w.strides) + " and dilations " +
                      ints(w.dilations) + " must be positive");
      return std::nullopt;
    }
  std::string pad = ctx.attr_string("auto_pad", "NOTSET");
  if (pad == "SAME_UPPER" || pad == "SAME_LOWER") {
    w.pads.assign(4, 0);
    for (size_t d = 0; d < 2; ++d) {
      // In 128 bits: attributes up to 2^63 multiply past it.
      __int128 in = x.shape[d + 2], s = w.strides[d], out = (in + s - 1) / s;
      __int128 extent = __int128(w.kernel[d] - 1) * w.dilations[d] + 1;
      // A transposed convolution's output is in * stride: its padding is taken from that.
      __int128 total = transposed ? s * (in - 1) + out_pad[d] + extent - in * s : (out - 1) * s + extent - in;
      total = std::max<__int128>(0, total);
      if (total > INT64_MAX) {
        ctx.unsupported("a window of " + ints(w.kernel) + " dilated by " + ints(w.dilations) +
                        " (its SAME padding is over 2^63)");
        return std::nullopt;
      }
      int64_t small = int64_t(total / 2), big = int64_t(total) - small;
      w.pads[d] = pad == "SAME_UPPER" ? small : big;
      w.pads[d + 2] = pad == "SAME_UPPER" ? big : small;
    }
  } else if (pad == "VALID") {
    w.pads.assign(4, 0);
  } else if (pad != "NOTSET") {
    ctx.unsupported("auto_pad = " + printable(pad));
    return std::nullopt;
  }
  return w;
}

Mapped conv(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0), &wt = ctx.input_type(1);
  if (rank(wt) != 4) {
    ctx.unsupported("a weight of rank " + std::to_string(rank(wt)) + " (only 2-D convolutions)");
    return {};
  }
  std::optional<Window> w = window(ctx, x, ctx.attr_ints("kernel_shape", {wt.shape[2], wt.shape[3]}));
  if (!w)
    return {};
  std::string e = call("nn.conv2d", {ctx.input(0), ctx.input(1)},
                       "strides=" + ints(w->strides) + ", padding=" + ints(w->pads) + ", dilation=" +
                           ints(w->dilations) + ", groups=" + std::to_string(ctx.attr_int("group", 1)));
  if (ctx.has_input(2))
    e = call("nn.bias_add", {e, ctx.input(2)}, "axis=1");
  return one(e);
}

Mapped conv_transpose(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0), &wt = ctx.input_type(1);
  if (rank(wt) != 4) {
    ctx.unsupported("a weight of rank " + std::to_string(rank(wt)) + " (only 2-D convolutions)");
    return {};
  }
  if (ctx.has_attr("output_shape")) {
    ctx.unsupported("output_shape (give pads and output_padding)");
    return {};
  }
  std::optional<Window> w = window(ctx, x, ctx.attr_ints("kernel_shape", {wt.shape[2], wt.shape[3]}), true);
  if (!w)
    return {};
  std::string e = call("nn.conv2d_transpose", {ctx.input(0), ctx.input(1)},
                       "strides=" + ints(w->strides) + ", padding=" + ints(w->pads) + ", dilation=" +
                           ints(w->dilations) + ", groups=" + std::to_string(ctx.attr_int("group", 1)) +
                           ", output_padding=" + ints(ctx.attr_ints("output_padding", {0, 0})));
  if (ctx.has_input(2))
    e = call("nn.bias_add", {e, ctx.input(2)}, "axis=1");
  return one(e);
}

/// A pool's output extent along one axis by gradc's rule (nn.max_pool2d's
/// relation, PyTorch's): with ceil_mode a last window that would start in the
/// trailing padding is dropped, where ONNX 1.12's shape inference keeps it.
int64_t pool_extent(int64_t n, int64_t k, int64_t s, int64_t d, int64_t lo, int64_t hi, bool ceil_mode) {
  __int128 num = __int128(n) + lo + hi - __int128(d) * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  __int128 out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= __int128(n) + lo)
    --out;
  return int64_t(std::clamp<__int128>(out, 0, INT64_MAX));
}

Mapped pool(NodeCtx &ctx, const char *op, bool average) {
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
  std::string attrs = "pool_size=" + ints(w->kernel) + ", strides=" + ints(w->strides) + ", dilation=" +
                      ints(w->dilations) + ", padding=" + ints(w->pads) +
                      ", ceil_mode=" + (*ceil_mode ? "True" : "False");
  if (average)
    attrs += std::string(", count_include_pad=") + (*include_pad ? "True" : "False");
  Mapped m = one(call(op, {ctx.input(0)}, attrs));
  Shape shape = x.shape;
  for (size_t d = 0; d < 2; ++d)
    shape[d + 2] = pool_extent(x.shape[d + 2], w->kernel[d], w->strides[d], w->dilations[d], w->pads[d],
                               w->pads[d + 2], *ceil_mode);
  if (shape[2] >= 1 && shape[3] >= 1) // else the relation says why
    m.types = {Type::tensor(shape, x.dtype)};
  return m;
}

Mapped gemm(NodeCtx &ctx) {
  double alpha = ctx.attr_float("alpha", 1), beta = ctx.attr_float("beta", 1);
  DType dt = ctx.input_type(0).dtype;
  std::string a = ctx.input(0), b = ctx.input(1);
  if (ctx.attr_int("transA", 0))
    a = call("transpose", {a}, "axes=[1, 0]");
  // dense computes a·bᵀ: the transposed B as it is stored.
  std::string e = ctx.attr_int("transB", 0) ? call("nn.dense", {a, b}) : call("matmul", {a, b});
  if (alpha != 1)
    e = call("multiply", {e, ctx.literal(alpha, dt)});
  if (ctx.has_input(2) && beta != 0) {
    std::string c = ctx.input(2);
    if (beta != 1)
      c = call("multiply", {c, ctx.literal(beta, dt)});
    e = call("add", {e, c});
  }
  return one(e);
}

Mapped softmax(NodeCtx &ctx, const char *op) {
  const Type &x = ctx.input_type(0);
  int64_t r = rank(x);
  std::optional<int64_t> checked = checked_axis(ctx, "axis", ctx.attr_int("axis", ctx.opset() >= 13 ? -1 : 1), r);
  if (!checked)
    return {};
  int64_t axis = *checked;
  if (ctx.opset() >= 13)
    return one(call(op, {ctx.input(0)}, "axis=" + std::to_string(axis)));
  // Before opset 13: over every axis from `axis` on, as one.
  if (axis == r - 1)
    return one(call(op, {ctx.input(0)}, "axis=" + std::to_string(axis)));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d)
    (d < axis ? outer : inner) *= x.shape[size_t(d)];
  std::string flat = call("reshape", {ctx.input(0)}, "newshape=" + ints({outer, inner}));
  return one(call("reshape", {call(op, {flat}, "axis=1")}, "newshape=" + ints(x.shape)));
}

Mapped reduce(NodeCtx &ctx, const char *op) {
  // ReduceSum took axes as an input from opset 13, the others from 18.
  std::optional<std::vector<int64_t>> axes =
      ints_attr_or_input(ctx, "axes", 1, std::string(op) == "sum" ? 13 : 18);
  std::optional<bool> keep = flag(ctx, "keepdims", 1), noop = flag(ctx, "noop_with_empty_axes", 0);
  if (!keep || !noop)
    return {};
  std::string k = std::string(", keepdims=") + (*keep ? "True" : "False");
  if (!axes || axes->empty()) {
    if (*noop)
      return one(ctx.input(0));
    return one(call(op, {ctx.input(0)}, "axis=None" + k));
  }
  return one(call(op, {ctx.input(0)}, "axis=" + ints(*axes) + k));
}

Mapped reshape_to_output(NodeCtx &ctx) {
  return one(call("reshape", {ctx.input(0)}, "newshape=" + ints(ctx.output_type(0).shape)));
}

Mapped reshape(NodeCtx &ctx) {
  std::optional<ConstValue> shape = ctx.constant(1);
  if (!shape) {
    ctx.unsupported("a shape that is not a constant (input 2)");
    return {};
  }
  bool allowzero = ctx.attr_int("allowzero", 0) != 0;
  return one(call("reshape", {ctx.input(0)},
                  "newshape=" + ints(to_ints(*shape)) + (allowzero ? ", allowzero=True" : "")));
}

Mapped squeeze(NodeCtx &ctx) {
  std::optional<std::vector<int64_t>> axes = ints_attr_or_input(ctx, "axes", 1, 13);
  if (!axes)
    return one(call("squeeze", {ctx.input(0)}));
  return one(call("squeeze", {ctx.input(0)}, "axis=" + ints(*axes)));
}

Mapped split(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 0), rank(x));
  if (!axis)
    return {};
  std::optional<std::vector<int64_t>> sizes = ints_attr_or_input(ctx, "split", 1, 13);
  std::string sections;
  if (!sizes) {
    sections = std::to_string(ctx.num_outputs());
  } else {
    std::vector<int64_t> starts;
    int64_t at = 0;
    for (size_t i = 0; i + 1 < sizes->size(); ++i)
      starts.push_back(at += (*sizes)[i]);
    sections = ints(starts);
  }
  return {{call("split", {ctx.input(0)}, "indices_or_sections=" + sections + ", axis=" + std::to_string(*axis))},
          true};
}

Mapped slice(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::vector<int64_t> starts, ends, axes, steps;
  auto get = [&](size_t i, const char *what, std::vector<int64_t> &out) {
    if (!ctx.has_input(i))
      return true;
    std::optional<ConstValue> c = ctx.constant(i);
    if (!c) {
      ctx.unsupported(std::string(what) + " that are not constants");
      return false;
    }
    out = to_ints(*c);
    return true;
  };
  if (!get(1, "starts", starts) || !get(2, "ends", ends) || !get(3, "axes", axes) || !get(4, "steps", steps))
    return {};
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    ctx.unsupported("starts, ends, axes and steps of different lengths");
    return {};
  }
  for (int64_t &a : axes)
    if (a < -rank(x) || a >= rank(x)) {
      ctx.unsupported("axis " + std::to_string(a) + " of a rank-" + std::to_string(rank(x)) + " input");
      return {};
    }
  // Clamped as numpy does, so that INT64_MAX-style ends stay in range.
  for (size_t i = 0; i < axes.size(); ++i) {
    axes[i] = norm_axis(axes[i], rank(x));
    int64_t dim = x.shape[size_t(axes[i])];
    starts[i] = std::clamp<int64_t>(starts[i], -dim - 1, dim);
    ends[i] = std::clamp<int64_t>(ends[i], -dim - 1, dim);
  }
  return one(call("strided_slice", {ctx.input(0)},
                  "begin=" + ints(starts) + ", end=" + ints(ends) + ", strides=" + ints(steps) + ", axes=" + ints(axes)));
}

Mapped pad(NodeCtx &ctx) {
  std::string mode = ctx.attr_string("mode", "constant");
  if (mode != "constant") {
    ctx.unsupported("mode = " + printable(mode));
    return {};
  }
  std::optional<std::vector<int64_t>> pads = ints_attr_or_input(ctx, "pads", 1, 11);
  size_t r = size_t(rank(ctx.input_type(0)));
  if (!pads || pads->size() != 2 * r) {
    ctx.unsupported("pads of the wrong length");
    return {};
  }
  if (ctx.has_input(3)) {
    ctx.unsupported("the axes input");
    return {};
  }
  double value = 0;
  if (ctx.has_input(2)) {
    std::optional<ConstValue> v = ctx.constant(2);
    if (!v || v->values.size() != 1) {
      ctx.unsupported("a constant_value that is not a scalar constant");
      return {};
    }
    value = v->values[0];
  }
  std::string widths = "[";
  for (size_t d = 0; d < r; ++d)
    widths += (d ? ", [" : "[") + std::to_string((*pads)[d]) + ", " + std::to_string((*pads)[d + r]) + "]";
  return one(call("nn.pad", {ctx.input(0)}, "pad_width=" + widths + "], pad_value=" + float_attr(value)));
}

Mapped clip(NodeCtx &ctx) {
  // An absent bound is the dtype's extreme (ONNX's numeric_limits).
  DType dt = ctx.input_type(0).dtype;
  double lo = -dtype_info(dt).max_finite, hi = dtype_info(dt).max_finite;
  for (size_t i : {size_t(1), size_t(2)}) {
    if (!ctx.has_input(i))
      continue;
    std::optional<ConstValue> c = ctx.constant(i);
    if (!c || c->values.size() != 1) {
      ctx.unsupported(std::string(i == 1 ? "min" : "max") + " that is not a scalar constant");
      return {};
    }
    (i == 1 ? lo : hi) = c->values[0];
  }
  return one(call("clip", {ctx.input(0)}, "a_min=" + float_attr(lo) + ", a_max=" + float_attr(hi)));
}

Mapped cumsum(NodeCtx &ctx) {
  std::optional<ConstValue> a = ctx.constant(1);
  if (!a || a->values.size() != 1) {
    ctx.unsupported("an axis that is not a scalar constant");
    return {};
  }
  std::optional<int64_t> axis = checked_axis(ctx, "axis", to_ints(*a)[0], rank(ctx.input_type(0)));
  std::optional<bool> exclusive = flag(ctx, "exclusive", 0), reverse = flag(ctx, "reverse", 0);
  if (!axis || !exclusive || !reverse)
    return {};
  std::string ax = "axis=" + std::to_string(*axis);
  std::string excl = std::string(", exclusive=") + (*exclusive ? "True" : "False");
  if (!*reverse)
    return one(call("cumsum", {ctx.input(0)}, ax + excl));
  return one(call("reverse", {call("cumsum", {call("reverse", {ctx.input(0)}, ax)}, ax + excl)}, ax));
}

Mapped batch_norm(NodeCtx &ctx) {
  std::string eps = "epsilon=" + float_attr(ctx.attr_float("epsilon", 1e-5));
  // From opset 14 the attribute training_mode tells training; before, the
  // outputs do: Y alone in inference; Y, the running mean and variance, the
  // saved mean and variance in training.
  std::optional<bool> training =
      ctx.opset() >= 14 ? flag(ctx, "training_mode", 0) : std::optional<bool>(ctx.num_outputs() > 1);
  if (!training)
    return {};
  if (!*training) {
    if (ctx.num_outputs() > 1) {
      ctx.unsupported("the running statistics outputs without training_mode");
      return {};
    }
    return one(call("nn.batch_norm", {ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4)}, eps) +
               ".0");
  }
  // Training: the batch's own statistics over every axis but the channels;
  // the running statistics move toward them by 1 - momentum; the saved
  // statistics (before opset 14) are the batch's.
  const Type &x = ctx.input_type(0);
  std::vector<int64_t> axes{0};
  for (int64_t d = 2; d < rank(x); ++d)
    axes.push_back(d);
  std::string ax = "axis=" + ints(axes);
  std::string mean = call("mean", {ctx.input(0)}, ax), var = call("variance", {ctx.input(0)}, ax);
  Mapped m = one(call("nn.batch_norm", {ctx.input(0), ctx.input(1), ctx.input(2), mean, var}, eps) + ".0");
  DType dt = x.dtype;
  double momentum = ctx.attr_float("momentum", 0.9);
  for (size_t i = 1; i < ctx.num_outputs() && i < 3; ++i)
    m.outputs.push_back(call("add", {call("multiply", {ctx.input(i + 2), ctx.literal(momentum, dt)}),
                                     call("multiply", {i == 1 ? mean : var, ctx.literal(1 - momentum, dt)})}));
  for (size_t i = 3; i < ctx.num_outputs(); ++i)
    m.outputs.push_back(i == 3 ? mean : var);
  return m;
}

Mapped layer_norm(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::optional<int64_t> checked = checked_axis(ctx, "axis", ctx.attr_int("axis", -1), rank(x));
  if (!checked)
    return {};
  int64_t axis = *checked;
  if (axis != rank(x) - 1) {
    ctx.unsupported("axis = " + std::to_string(ctx.attr_int("axis", -1)) + " (only the last axis)");
    return {};
  }
  if (ctx.num_outputs() > 1) {
    ctx.unsupported("the Mean and InvStdDev outputs");
    return {};
  }
  std::string attrs = "axis=" + std::to_string(axis) + ", epsilon=" + float_attr(ctx.attr_float("epsilon", 1e-5));
  if (!ctx.has_input(2))
    attrs += ", center=False";
  std::string b = ctx.has_input(2) ? ctx.input(2) : ctx.input(1);
  return one(call("nn.layer_norm", {ctx.input(0), ctx.input(1), b}, attrs));
}

Mapped nll_loss(NodeCtx &ctx, bool from_logits) {
  const Type &x = ctx.input_type(0);
  if (rank(x) != 2) {
    ctx.unsupported("input of rank " + std::to_string(rank(x)) + " (only (N, C))");
    return {};
  }
  if (from_logits && ctx.num_outputs() > 1) {
    ctx.unsupported("the log_prob output");
    return {};
  }
  std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    ctx.unsupported("reduction = " + printable(reduction) + " (none, sum or mean)");
    return {};
  }
  std::string attrs = "reduction=\"" + reduction + "\"";
  if (ctx.has_attr("ignore_index"))
    attrs += ", ignore_index=" + std::to_string(ctx.attr_int("ignore_index", -100));
  else
    attrs += ", ignore_index=-9223372036854775807";
  std::string p = from_logits ? call("nn.log_softmax", {ctx.input(0)}, "axis=1") : ctx.input(0);
  std::vector<std::string> args{p, ctx.input(1)};
  if (ctx.has_input(2))
    args.push_back(ctx.input(2));
  return one(call("nn.nll_loss", args, attrs));
}

Mapped gelu(NodeCtx &ctx) {
  std::string approx = ctx.attr_string("approximate", "none");
  if (approx != "none") {
    ctx.unsupported("approximate = " + printable(approx));
    return {};
  }
  return one(call("nn.gelu", {ctx.input(0)}));
}

Mapped flatten(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 1), rank(x), /*end=*/true);
  if (!axis)
    return {};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank(x); ++d)
    (d < *axis ? outer : inner) *= x.shape[size_t(d)];
  return one(call("reshape", {ctx.input(0)}, "newshape=" + ints({outer, inner})));
}

Mapped transpose(NodeCtx &ctx) {
  if (!ctx.has_attr("perm"))
    return one(call("transpose", {ctx.input(0)}));
  return one(call("transpose", {ctx.input(0)}, "axes=" + ints(ctx.attr_ints("perm", {}))));
}

Mapped concat(NodeCtx &ctx) {
  std::string parts = "(";
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    parts += (i ? ", " : "") + ctx.input(i);
  if (ctx.num_inputs() == 1)
    parts += ",";
  return one(call("concatenate", {parts + ")"}, "axis=" + std::to_string(ctx.attr_int("axis", 0))));
}

Mapped where(NodeCtx &ctx) { return one(call("where", {ctx.input(0), ctx.input(1), ctx.input(2)})); }

Mapped prelu(NodeCtx &ctx) {
  std::string x = ctx.input(0), slope = ctx.input(1);
  const Type &xt = ctx.input_type(0), &st = ctx.input_type(1);
  // Older exporters give one slope per channel, (C,), for an (N, C, ...) input.
  if (rank(st) == 1 && rank(xt) > 2 && st.shape[0] == xt.shape[1] && st.shape[0] != xt.shape.back()) {
    std::vector<int64_t> shape(size_t(rank(xt) - 1), 1);
    shape[0] = st.shape[0];
    slope = call("reshape", {slope}, "newshape=" + ints(shape));
  }
  return one(call("where", {call("greater", {x, ctx.literal(0, xt.dtype)}), x, call("multiply", {x, slope})}));
}

/// Elu and Selu: x above 0, alpha·(eᕽ − 1) below, times gamma (Selu).
Mapping elu(double default_alpha, double default_gamma) {
  return [default_alpha, default_gamma](NodeCtx &ctx) {
    DType dt = ctx.input_type(0).dtype;
    double alpha = ctx.attr_float("alpha", default_alpha), gamma = ctx.attr_float("gamma", default_gamma);
    std::string x = ctx.input(0);
    std::string neg = call("multiply", {call("subtract", {call("exp", {x}), ctx.literal(1, dt)}), ctx.literal(alpha, dt)});
    std::string e = call("where", {call("greater", {x, ctx.literal(0, dt)}), x, neg});
    return one(gamma == 1 ? e : call("multiply", {e, ctx.literal(gamma, dt)}));
  };
}

Mapped leaky_relu(NodeCtx &ctx) {
  return one(call("nn.leaky_relu", {ctx.input(0)}, "alpha=" + float_attr(ctx.attr_float("alpha", 0.01))));
}

Mapped cast(NodeCtx &ctx) {
  int64_t to = ctx.attr_int("to", 0);
  std::optional<DType> dt = dtype_of(to);
  if (!dt) {
    ctx.unsupported("to = " + elem_name(to) + " (no gradc dtype)");
    return {};
  }
  return one(call("cast", {ctx.input(0)}, std::string("dtype=\"") + dtype_name(*dt) + "\""));
}

Mapped gather(NodeCtx &ctx) {
  std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 0), rank(ctx.input_type(0)));
  if (!axis)
    return {};
  // Negative indices count from the end: "wrap" (in-range indices are as given).
  return one(call("take", {ctx.input(0), ctx.input(1)}, "axis=" + std::to_string(*axis) + ", mode=\"wrap\""));
}

Mapped dropout(NodeCtx &ctx) {
  if (ctx.num_outputs() > 1) {
    ctx.unsupported("the mask output");
    return {};
  }
  if (ctx.has_input(2)) {
    std::optional<ConstValue> t = ctx.constant(2);
    if (!t || t->values.size() != 1 || t->values[0] != 0) {
      ctx.unsupported("training_mode (only inference)");
      return {};
    }
  }
  return one(ctx.input(0));
}

Mapped constant_of_shape(NodeCtx &ctx) {
  const Type &out = ctx.output_type(0);
  std::string value = ctx.literal(0, out.dtype);
  if (std::optional<ConstValue> v = ctx.attr_tensor("value"); v && !v->values.empty())
    value = v->dtype == out.dtype ? literal_of(*v, 0) : ctx.literal(v->values[0], out.dtype);
  return one(call("broadcast_to", {value}, "shape=" + ints(out.shape)));
}

Mapped identity(NodeCtx &ctx) { return one(ctx.input(0)); }

/// The exponent may have another dtype than the base: cast to the base's.
Mapped pow(NodeCtx &ctx) {
  std::string y = ctx.input(1);
  DType base = ctx.input_type(0).dtype;
  if (ctx.input_type(1).dtype != base)
    y = call("cast", {y}, std::string("dtype=\"") + dtype_name(base) + "\"");
  return one(call("power", {ctx.input(0), y}));
}

} // namespace

const std::vector<OpEntry> &op_table() {
  static const std::vector<OpEntry> table = {
      {"Abs", unary("abs")},
      {"Add", binary("add")},
      {"And", binary("logical_and")},
      {"AveragePool", [](NodeCtx &c) { return pool(c, "nn.avg_pool2d", true); }},
      {"BatchNormalization", batch_norm},
      {"Cast", cast},
      {"Clip", clip},
      {"Concat", concat},
      {"ConstantOfShape", constant_of_shape},
      {"Conv", conv},
      {"ConvTranspose", conv_transpose},
      {"Cos", unary("cos")},
      {"CumSum", cumsum},
      {"Div", binary("divide")},
      {"Dropout", dropout},
      {"Elu", elu(1.0, 1.0)},
      {"Equal", binary("equal")},
      {"Erf", unary("erf")},
      {"Exp", unary("exp")},
      {"Flatten", flatten},
      {"Gather", gather},
      {"Gelu", gelu},
      {"Gemm", gemm},
      {"GlobalAveragePool", unary("nn.global_avg_pool2d")},
      {"GlobalMaxPool", unary("nn.global_max_pool2d")},
      {"Greater", binary("greater")},
      {"GreaterOrEqual", binary("greater_equal")},
      {"Identity", identity},
      {"LayerNormalization", layer_norm},
      {"LeakyRelu", leaky_relu},
      {"Less", binary("less")},
      {"LessOrEqual", binary("less_equal")},
      {"Log", unary("log")},
      {"LogSoftmax", [](NodeCtx &c) { return softmax(c, "nn.log_softmax"); }},
      {"MatMul", binary("matmul")},
      {"Max", variadic("maximum")},
      {"MaxPool", [](NodeCtx &c) { return pool(c, "nn.max_pool2d", false); }},
      {"Min", variadic("minimum")},
      {"Mul", binary("multiply")},
      {"Neg", unary("negative")},
      {"NegativeLogLikelihoodLoss", [](NodeCtx &c) { return nll_loss(c, false); }},
      {"Not", unary("logical_not")},
      {"Or", binary("logical_or")},
      {"Pad", pad},
      {"Pow", pow},
      {"PRelu", prelu},
      {"ReduceMax", [](NodeCtx &c) { return reduce(c, "max"); }},
      {"ReduceMean", [](NodeCtx &c) { return reduce(c, "mean"); }},
      {"ReduceMin", [](NodeCtx &c) { return reduce(c, "min"); }},
      {"ReduceSum", [](NodeCtx &c) { return reduce(c, "sum"); }},
      {"Relu", unary("nn.relu")},
      {"Reshape", reshape},
      {"Selu", elu(1.67326319217681884765625, 1.05070102214813232421875)},
      {"Sigmoid", unary("sigmoid")},
      {"Sin", unary("sin")},
      {"Slice", slice},
      {"Softmax", [](NodeCtx &c) { return softmax(c, "nn.softmax"); }},
      {"SoftmaxCrossEntropyLoss", [](NodeCtx &c) { return nll_loss(c, true); }},
      {"Softplus", unary("nn.softplus")},
      {"Split", split},
      {"Sqrt", unary("sqrt")},
      {"Squeeze", squeeze},
      {"Sub", binary("subtract")},
      {"Sum", variadic("add")},
      {"Tanh", unary("tanh")},
      {"Transpose", transpose},
      {"Unsqueeze", reshape_to_output},
      {"Where", where},
  };
  return table;
}

} // namespace gradc::onnx_import
