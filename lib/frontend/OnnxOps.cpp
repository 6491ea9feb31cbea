//===- OnnxOps.cpp - the ONNX operators gradc maps, one entry each --------===//
//
// Each entry turns one node into typed calls through NodeCtx (OnnxOps.h),
// for opsets 11 to 17 (where an opset moved an attribute to an input, both
// are read). What an entry cannot map it reports with ctx.unsupported(),
// naming the attribute and its value; the importer reports every one at
// once. Types come from each operator's relation as the call is built.
//
//===----------------------------------------------------------------------===//
#include "OnnxMapping.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Relations.h"
#include "gradc/op/attrs/activation.h"
#include "gradc/op/attrs/conv.h"
#include "gradc/op/attrs/elementwise.h"
#include "gradc/op/attrs/index.h"
#include "gradc/op/attrs/linear.h"
#include "gradc/op/attrs/loss.h"
#include "gradc/op/attrs/norm.h"
#include "gradc/op/attrs/pool.h"
#include "gradc/op/attrs/random.h"
#include "gradc/op/attrs/reduce.h"
#include "gradc/op/attrs/scan.h"
#include "gradc/op/attrs/shape.h"
#include "gradc/op/attrs/slice.h"
#include "gradc/op/attrs/softmax.h"

#include <algorithm>
#include <cmath>

namespace gradc::onnx_import {

std::string ints(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// `axis` of a rank-`r` input, in [-r, r) (or [-r, r] where `end` is allowed:
/// Flatten), made non-negative; nullopt after reporting it.
std::optional<int64_t> checked_axis(NodeCtx &ctx, const char *name, int64_t axis, int64_t r, bool end) {
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
    const ConstValue *c = ctx.constant(input);
    if (!c) {
      ctx.unsupported("input " + std::to_string(input + 1) + " ('" + name + "') must be a constant");
      return std::nullopt;
    }
    return c->integers();
  }
  if (!ctx.has_attr(name))
    return std::nullopt;
  return ctx.attr_ints(name, {});
}

/// Input i's scalar constant value, or nullopt after reporting it as `what`.
std::optional<double> scalar_input(NodeCtx &ctx, size_t i, const std::string &what) {
  const ConstValue *c = ctx.constant(i);
  if (!c || c->size() != 1) {
    ctx.unsupported(what + " that is not a scalar constant");
    return std::nullopt;
  }
  return c->number(0);
}

ExprPtr iota(Builder &b, int64_t n, DType dtype) {
  ExprPtr ones = b.call(ops::ones, {}, CreateAttrs{.shape = {n}, .dtype = dtype});
  return b.call(ops::cumsum, {ones}, CumsumAttrs{.axis = 0, .exclusive = true});
}

ExprPtr slice_axis(Builder &b, ExprPtr x, int64_t axis, int64_t begin, int64_t end, int64_t step) {
  StridedSliceAttrs a;
  a.begin = {begin};
  a.end = {end};
  a.strides = std::vector<int64_t>{step};
  a.axes = std::vector<int64_t>{axis};
  return b.call(ops::strided_slice, {x}, a);
}

namespace {


Mapping unary(const OpRef &op) {
  return [&op](NodeCtx &ctx) { return Mapped{ctx.b().call(op, {ctx.input(0)})}; };
}

Mapping binary(const OpRef &op) {
  return [&op](NodeCtx &ctx) { return Mapped{ctx.b().call(op, {ctx.input(0), ctx.input(1)})}; };
}

/// Min, Max, Sum and Mean take any number of inputs: folded left.
Mapping variadic(const OpRef &op) {
  return [&op](NodeCtx &ctx) {
    ExprPtr e = ctx.input(0);
    for (size_t i = 1; i < ctx.num_inputs(); ++i)
      e = ctx.b().call(op, {e, ctx.input(i)});
    return Mapped{e};
  };
}


Mapped gemm(NodeCtx &ctx) {
  double alpha = ctx.attr_float("alpha", 1), beta = ctx.attr_float("beta", 1);
  DType dt = ctx.input_type(0).dtype;
  Builder &b = ctx.b();
  ExprPtr a = ctx.input(0), w = ctx.input(1);
  if (ctx.attr_int("transA", 0))
    a = b.transpose(a, {1, 0});
  // dense computes a·bᵀ: the transposed B as it is stored.
  ExprPtr e = ctx.attr_int("transB", 0) ? b.call(ops::dense, {a, w}) : b.call(ops::matmul, {a, w});
  if (alpha != 1)
    e = b.mul(e, ctx.literal(alpha, dt));
  if (ctx.has_input(2) && beta != 0) {
    ExprPtr c = ctx.input(2);
    if (beta != 1)
      c = b.mul(c, ctx.literal(beta, dt));
    e = b.add(e, c);
  }
  return {e};
}

Mapped softmax(NodeCtx &ctx, const OpRef &op) {
  const Type &x = ctx.input_type(0);
  int64_t r = rank(x);
  std::optional<int64_t> checked = checked_axis(ctx, "axis", ctx.attr_int("axis", ctx.opset() >= 13 ? -1 : 1), r);
  if (!checked)
    return {};
  int64_t axis = *checked;
  Builder &b = ctx.b();
  if (ctx.opset() >= 13 || axis == r - 1)
    return {b.call(op, {ctx.input(0)}, SoftmaxAttrs{.axis = axis})};
  // Before opset 13: over every axis from `axis` on, as one.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d)
    (d < axis ? outer : inner) *= x.shape[size_t(d)];
  ExprPtr flat = b.reshape(ctx.input(0), {outer, inner});
  return {b.reshape(b.call(op, {flat}, SoftmaxAttrs{.axis = 1}), x.shape)};
}

/// The ONNX reductions: `op` over the axes (an attribute, an input from
/// opset `moved`: ReduceSum's 13, the others' 18), its input first mapped by
/// `pre` (ReduceL2: x·x) and its result by `post` (sqrt).
using Unary = std::function<ExprPtr(Builder &, ExprPtr)>;
/// Axes given as a runtime input, read off the declared output where that
/// is exact: with keepdims, the axes of length 1 there (reducing an axis of
/// length 1 or not computes the same values).
std::optional<std::vector<int64_t>> runtime_axes(NodeCtx &ctx, bool keep) {
  std::optional<Type> out = ctx.declared_output(0);
  const Shape &in = ctx.input_type(0).shape;
  if (!keep || !out || out->shape.size() != in.size()) {
    ctx.unsupported("axes computed at run time (gradc reads them off a declared output only with keepdims = 1)");
    return std::nullopt;
  }
  std::vector<int64_t> axes;
  for (size_t d = 0; d < in.size(); ++d) {
    if (out->shape[d] != in[d] && out->shape[d] != 1) {
      ctx.unsupported("a declared output " + shape_str(out->shape) + " that is not the input " + shape_str(in) +
                      " reduced");
      return std::nullopt;
    }
    if (out->shape[d] == 1)
      axes.push_back(int64_t(d));
  }
  return axes;
}

Mapped reduce(NodeCtx &ctx, const OpRef &op, int64_t moved, Unary pre = {}, Unary post = {}) {
  std::optional<bool> keep = flag(ctx, "keepdims", 1), noop = flag(ctx, "noop_with_empty_axes", 0);
  if (!keep || !noop)
    return {};
  std::optional<std::vector<int64_t>> axes;
  bool none = *noop; // no axes: the identity (else every axis)
  if (ctx.opset() >= moved && ctx.has_input(1) && !ctx.constant(1)) {
    axes = runtime_axes(ctx, *keep);
    if (!axes)
      return {};
    none = none || axes->empty(); // no axis of length 1 in the result: none reduced
  } else {
    axes = ints_attr_or_input(ctx, "axes", 1, moved);
  }
  ReduceAttrs a;
  a.keepdims = *keep;
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0);
  if (pre)
    x = pre(b, x);
  if (!axes || axes->empty()) {
    if (none)
      return {post ? post(b, x) : x};
  } else {
    a.axis = *axes;
  }
  ExprPtr r = b.call(op, {x}, a);
  return {post ? post(b, r) : r};
}

Mapping reduce_of(const OpRef &op, Unary pre = {}, Unary post = {}, int64_t moved = 18) {
  return [&op, pre, post, moved](NodeCtx &ctx) { return reduce(ctx, op, moved, pre, post); };
}

ExprPtr square(Builder &b, ExprPtr x) { return b.mul(x, x); }

/// ArgMax and ArgMin: int64 positions along one axis.
Mapping arg_reduce(const OpRef &op) {
  return [&op](NodeCtx &ctx) {
    std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 0), rank(ctx.input_type(0)));
    std::optional<bool> keep = flag(ctx, "keepdims", 1), last = flag(ctx, "select_last_index", 0);
    if (!axis || !keep || !last)
      return Mapped{};
    ArgReduceAttrs a;
    a.axis = std::vector<int64_t>{*axis};
    a.keepdims = *keep;
    a.select_last_index = *last;
    Builder &b = ctx.b();
    return Mapped{b.cast(b.call(op, {ctx.input(0)}, a), DType::Int64)};
  };
}

/// Where a shape-only operator's shape is not a constant: the declared
/// output type's shape, or nullopt after reporting it.
std::optional<Shape> declared_shape(NodeCtx &ctx, const std::string &what) {
  std::optional<Type> t = ctx.declared_output(0);
  if (!t) {
    ctx.unsupported(what + " that is not a constant, and no declared output shape");
    return std::nullopt;
  }
  return t->shape;
}

Mapped reshape(NodeCtx &ctx) {
  const ConstValue *shape = ctx.constant(1);
  if (!shape) {
    std::optional<Shape> declared = declared_shape(ctx, "a shape (input 2)");
    return declared ? Mapped{ctx.b().reshape(ctx.input(0), *declared)} : Mapped{};
  }
  std::vector<int64_t> dims = shape->integers();
  for (int64_t d : dims)
    if (d < -1) {
      ctx.unsupported("a shape entry " + std::to_string(d) + " (ONNX allows -1 and dimensions)");
      return {};
    }
  return {ctx.b().call(ops::reshape, {ctx.input(0)},
                       ReshapeAttrs{.newshape = dims, .allowzero = ctx.attr_int("allowzero", 0) != 0})};
}

/// Unsqueeze: size-1 axes inserted where the output's `axes` say.
Mapped unsqueeze(NodeCtx &ctx) {
  if (ctx.opset() >= 13 && ctx.has_input(1) && !ctx.constant(1)) {
    std::optional<Shape> declared = declared_shape(ctx, "axes");
    return declared ? Mapped{ctx.b().reshape(ctx.input(0), *declared)} : Mapped{};
  }
  std::optional<std::vector<int64_t>> axes = ints_attr_or_input(ctx, "axes", 1, 13);
  if (!axes) {
    ctx.unsupported("no axes");
    return {};
  }
  const Shape &in = ctx.input_type(0).shape;
  int64_t r = int64_t(in.size() + axes->size());
  std::vector<bool> unit(size_t(r), false);
  for (int64_t a : *axes) {
    std::optional<int64_t> k = checked_axis(ctx, "axes entry", a, r);
    if (!k)
      return {};
    if (unit[size_t(*k)]) {
      ctx.unsupported("axes " + ints(*axes) + " (a repeated axis)");
      return {};
    }
    unit[size_t(*k)] = true;
  }
  Shape shape;
  size_t from = 0;
  for (int64_t k = 0; k < r; ++k)
    shape.push_back(unit[size_t(k)] ? 1 : in[from++]);
  return {ctx.b().reshape(ctx.input(0), shape)};
}

Mapped squeeze(NodeCtx &ctx) {
  if (ctx.opset() >= 13 && ctx.has_input(1) && !ctx.constant(1)) {
    std::optional<Shape> declared = declared_shape(ctx, "axes");
    return declared ? Mapped{ctx.b().reshape(ctx.input(0), *declared)} : Mapped{};
  }
  std::optional<std::vector<int64_t>> axes = ints_attr_or_input(ctx, "axes", 1, 13);
  SqueezeAttrs a;
  if (axes)
    a.axis = *axes;
  return {ctx.b().call(ops::squeeze, {ctx.input(0)}, a)};
}

Mapped split(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 0), rank(x));
  if (!axis)
    return {};
  std::optional<std::vector<int64_t>> sizes;
  if (ctx.opset() >= 13 && ctx.has_input(1) && !ctx.constant(1)) {
    // The parts' sizes from the declared outputs.
    sizes.emplace();
    for (size_t i = 0; i < ctx.num_outputs(); ++i) {
      std::optional<Type> t = ctx.declared_output(i);
      if (!t || rank(*t) != rank(x)) {
        ctx.unsupported("split sizes that are not a constant, and no declared output shapes");
        return {};
      }
      sizes->push_back(t->shape[size_t(*axis)]);
    }
  } else {
    sizes = ints_attr_or_input(ctx, "split", 1, 13);
  }
  SplitAttrs a;
  a.axis = *axis;
  if (!sizes) {
    a.indices_or_sections = IntOrList{int64_t(ctx.num_outputs()), {}};
  } else {
    std::vector<int64_t> starts;
    int64_t at = 0;
    for (size_t i = 0; i + 1 < sizes->size(); ++i)
      starts.push_back(at += (*sizes)[i]);
    a.indices_or_sections = IntOrList{std::nullopt, starts};
  }
  Builder &b = ctx.b();
  ExprPtr parts = b.call(ops::split, {ctx.input(0)}, a);
  Mapped out;
  for (size_t i = 0; i < ctx.num_outputs(); ++i)
    out.push_back(ctx.wants_output(i) ? b.get(parts, int(i)) : nullptr);
  return out;
}

Mapped slice(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::vector<int64_t> starts, ends, axes, steps;
  auto get = [&](size_t i, const char *what, std::vector<int64_t> &out) {
    if (!ctx.has_input(i))
      return true;
    const ConstValue *c = ctx.constant(i);
    if (!c) {
      ctx.unsupported(std::string(what) + " that are not constants");
      return false;
    }
    out = c->integers();
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
  StridedSliceAttrs a;
  a.begin = starts;
  a.end = ends;
  a.strides = steps;
  a.axes = axes;
  return {ctx.b().call(ops::strided_slice, {ctx.input(0)}, a)};
}


/// Edge and reflect padding of `x` along `axis` by (lo, hi), from slices
/// of x: its edge element repeated (edge), or the elements next to the edge
/// in reverse order, the edge itself not repeated (reflect, numpy's).
ExprPtr pad_axis(Builder &b, ExprPtr x, int64_t axis, int64_t lo, int64_t hi, bool reflect) {
  int64_t n = x->type.shape[size_t(axis)];
  auto side = [&](int64_t count, bool before) -> ExprPtr {
    if (!reflect) {
      ExprPtr edge = before ? slice_axis(b, x, axis, 0, 1) : slice_axis(b, x, axis, n - 1, n);
      Shape shape = x->type.shape;
      shape[size_t(axis)] = count;
      return b.broadcast_to(edge, shape);
    }
    return b.reverse(before ? slice_axis(b, x, axis, 1, count + 1) : slice_axis(b, x, axis, n - 1 - count, n - 1), axis);
  };
  std::vector<ExprPtr> parts;
  if (lo > 0)
    parts.push_back(side(lo, true));
  parts.push_back(x);
  if (hi > 0)
    parts.push_back(side(hi, false));
  return parts.size() == 1 ? x : b.call(ops::concatenate, {b.tuple(parts)}, ConcatenateAttrs{.axis = axis});
}

Mapped pad(NodeCtx &ctx) {
  std::string mode = ctx.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") {
    ctx.unsupported("mode = " + printable(mode));
    return {};
  }
  std::optional<std::vector<int64_t>> pads = ints_attr_or_input(ctx, "pads", 1, 11);
  const Type &x = ctx.input_type(0);
  size_t r = size_t(rank(x));
  if (!pads || pads->size() != 2 * r) {
    ctx.unsupported("pads of the wrong length");
    return {};
  }
  if (ctx.has_input(3)) {
    ctx.unsupported("the axes input");
    return {};
  }
  if (mode != "constant") {
    Builder &b = ctx.b();
    ExprPtr y = ctx.input(0);
    for (size_t d = 0; d < r; ++d) {
      int64_t lo = (*pads)[d], hi = (*pads)[d + r], n = x.shape[d];
      if (lo < 0 || hi < 0 || n == 0 || (mode == "reflect" && (lo >= n || hi >= n))) {
        ctx.unsupported("pads " + ints(*pads) + " in mode " + mode + " of a " + shape_str(x.shape) +
                        " input (non-negative; reflect: under the axis' size)");
        return {};
      }
      y = pad_axis(b, y, int64_t(d), lo, hi, mode == "reflect");
    }
    return {y};
  }
  PadAttrs a;
  if (ctx.has_input(2)) {
    std::optional<double> v = scalar_input(ctx, 2, "a constant_value");
    if (!v)
      return {};
    a.pad_value = *v;
  }
  for (size_t d = 0; d < r; ++d)
    a.pad_width.push_back({(*pads)[d], (*pads)[d + r]});
  return {ctx.b().call(ops::pad, {ctx.input(0)}, a)};
}

Mapped clip(NodeCtx &ctx) {
  // An absent bound is the dtype's extreme (ONNX's numeric_limits); a bound
  // that is a runtime tensor is a maximum or a minimum.
  DType dt = ctx.input_type(0).dtype;
  ClipAttrs a{.a_min = -dtype_info(dt).max_finite, .a_max = dtype_info(dt).max_finite};
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0);
  bool dynamic = false, constant = false;
  for (size_t i : {size_t(1), size_t(2)}) {
    if (!ctx.has_input(i))
      continue;
    const ConstValue *c = ctx.constant(i);
    if (c && c->size() == 1) {
      (i == 1 ? a.a_min : a.a_max) = c->number(0);
      constant = true;
      continue;
    }
    if (ctx.input_type(i).rank() != 0) {
      ctx.unsupported(std::string(i == 1 ? "min" : "max") + " that is not a scalar");
      return {};
    }
    x = b.call(i == 1 ? ops::maximum : ops::minimum, {x, ctx.input(i)});
    dynamic = true;
  }
  if (dynamic && !constant)
    return {x};
  return {b.call(ops::clip, {x}, a)};
}

Mapped cumsum(NodeCtx &ctx) {
  const ConstValue *c = ctx.constant(1);
  if (!c || c->size() != 1) {
    ctx.unsupported("an axis that is not a scalar constant");
    return {};
  }
  std::optional<int64_t> axis = checked_axis(ctx, "axis", c->integer(0), rank(ctx.input_type(0)));
  std::optional<bool> exclusive = flag(ctx, "exclusive", 0), reverse = flag(ctx, "reverse", 0);
  if (!axis || !exclusive || !reverse)
    return {};
  Builder &b = ctx.b();
  CumsumAttrs a{.axis = *axis, .exclusive = *exclusive};
  if (!*reverse)
    return {b.call(ops::cumsum, {ctx.input(0)}, a)};
  return {b.reverse(b.call(ops::cumsum, {b.reverse(ctx.input(0), *axis)}, a), *axis)};
}

Mapped batch_norm(NodeCtx &ctx) {
  BatchNormAttrs a;
  a.epsilon = ctx.attr_float("epsilon", 1e-5);
  // From opset 14 the attribute training_mode tells training; before, the
  // outputs do: Y alone in inference; Y, the running mean and variance, the
  // saved mean and variance in training.
  std::optional<bool> training =
      ctx.opset() >= 14 ? flag(ctx, "training_mode", 0) : std::optional<bool>(ctx.num_outputs() > 1);
  if (!training)
    return {};
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0);
  if (!*training) {
    if (ctx.num_outputs() > 1) {
      ctx.unsupported("the running statistics outputs without training_mode");
      return {};
    }
    return {b.get(b.call(ops::batch_norm, {x, ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4)}, a), 0)};
  }
  // Training: the batch's own statistics over every axis but the channels;
  // the running statistics move toward them by 1 - momentum; the saved
  // statistics (before opset 14) are the batch's.
  std::vector<int64_t> axes{0};
  for (int64_t d = 2; d < rank(ctx.input_type(0)); ++d)
    axes.push_back(d);
  ReduceAttrs over;
  over.axis = axes;
  ExprPtr mean = b.call(ops::mean, {x}, over), var = b.call(ops::variance, {x}, VarianceAttrs{over});
  Mapped m{b.get(b.call(ops::batch_norm, {x, ctx.input(1), ctx.input(2), mean, var}, a), 0)};
  DType dt = ctx.input_type(0).dtype;
  double momentum = ctx.attr_float("momentum", 0.9);
  for (size_t i = 1; i < 3; ++i) {
    bool wanted = ctx.wants_output(i);
    ExprPtr updated;
    if (wanted || ctx.keeps_state())
      updated = b.add(b.mul(ctx.input(i + 2), ctx.literal(momentum, dt)),
                      b.mul(i == 1 ? mean : var, ctx.literal(1 - momentum, dt)));
    if (ctx.keeps_state())
      ctx.update_in_place(ctx.input(i + 2), updated);
    if (i < ctx.num_outputs())
      m.push_back(wanted ? updated : nullptr);
  }
  for (size_t i = 3; i < ctx.num_outputs(); ++i)
    m.push_back(i == 3 ? mean : var);
  return m;
}

/// LayerNormalization over the axes from `axis` on: those flattened into one
/// row of nn.layer_norm (its scale and bias flattened alike) and the result
/// shaped back; the Mean and InvStdDev outputs (1/sqrt(variance + epsilon))
/// keep the normalized axes as 1s, in float32 for a float16 input.
Mapped layer_norm(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::optional<int64_t> checked = checked_axis(ctx, "axis", ctx.attr_int("axis", -1), rank(x));
  if (!checked)
    return {};
  int64_t axis = *checked, outer = 1, inner = 1;
  for (int64_t d = 0; d < rank(x); ++d)
    (d < axis ? outer : inner) *= x.shape[size_t(d)];
  Builder &b = ctx.b();
  LayerNormAttrs a;
  a.axis = -1;
  a.epsilon = ctx.attr_float("epsilon", 1e-5);
  a.center = ctx.has_input(2);
  ExprPtr rows = b.reshape(ctx.input(0), {outer, inner});
  ExprPtr scale = b.reshape(ctx.input(1), {inner});
  ExprPtr bias = ctx.has_input(2) ? b.reshape(ctx.input(2), {inner}) : scale;
  Mapped m{b.reshape(b.call(ops::layer_norm, {rows, scale, bias}, a), x.shape)};
  if (ctx.num_outputs() > 1) {
    DType stats = x.dtype == DType::Float16 ? DType::Float32 : x.dtype;
    ExprPtr xs = b.cast(ctx.input(0), stats);
    std::vector<int64_t> axes;
    for (int64_t d = axis; d < rank(x); ++d)
      axes.push_back(d);
    ReduceAttrs over;
    over.axis = axes;
    over.keepdims = true;
    ExprPtr mean = b.call(ops::mean, {xs}, over);
    ExprPtr inv = b.call(ops::rsqrt, {b.add(b.call(ops::variance, {xs}, VarianceAttrs{over}),
                                            ctx.literal(a.epsilon, stats))});
    auto as_declared = [&](size_t i, ExprPtr v) {
      std::optional<Type> t = ctx.declared_output(i);
      return t && t->dtype != stats ? b.cast(v, t->dtype) : v;
    };
    m.push_back(ctx.wants_output(1) ? as_declared(1, mean) : nullptr);
    if (ctx.num_outputs() > 2)
      m.push_back(ctx.wants_output(2) ? as_declared(2, inv) : nullptr);
  }
  return m;
}

/// InstanceNormalization: each (sample, channel) normalized over its
/// spatial positions: nn.group_norm with one group per channel.
Mapped instance_norm(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  if (rank(x) < 3) {
    ctx.unsupported("an input of rank " + std::to_string(rank(x)) + " (N, C and at least one spatial axis)");
    return {};
  }
  GroupNormAttrs a;
  a.num_groups = x.shape[1];
  a.epsilon = ctx.attr_float("epsilon", 1e-5);
  return {ctx.b().call(ops::group_norm, {ctx.input(0), ctx.input(1), ctx.input(2)}, a)};
}

/// DepthToSpace (DCR or CRD) and SpaceToDepth: a reshape, a transpose and a reshape.
Mapped depth_space(NodeCtx &ctx, bool to_space) {
  const Type &x = ctx.input_type(0);
  int64_t bs = ctx.attr_int("blocksize", 0);
  if (rank(x) != 4 || bs < 1) {
    ctx.unsupported("blocksize = " + std::to_string(bs) + " on an input of rank " + std::to_string(rank(x)));
    return {};
  }
  int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  Builder &b = ctx.b();
  if (to_space) {
    if (c % (bs * bs)) {
      ctx.unsupported("C = " + std::to_string(c) + " not divisible by blocksize^2");
      return {};
    }
    bool crd = ctx.attr_string("mode", "DCR") == "CRD";
    ExprPtr r = crd ? b.reshape(ctx.input(0), {n, c / (bs * bs), bs, bs, h, w})
                    : b.reshape(ctx.input(0), {n, bs, bs, c / (bs * bs), h, w});
    ExprPtr t = crd ? b.transpose(r, {0, 1, 4, 2, 5, 3}) : b.transpose(r, {0, 3, 4, 1, 5, 2});
    return {b.reshape(t, {n, c / (bs * bs), h * bs, w * bs})};
  }
  if (h % bs || w % bs) {
    ctx.unsupported("H and W not divisible by blocksize");
    return {};
  }
  ExprPtr r = b.reshape(ctx.input(0), {n, c, h / bs, bs, w / bs, bs});
  return {b.reshape(b.transpose(r, {0, 3, 5, 1, 2, 4}), {n, c * bs * bs, h / bs, w / bs})};
}

/// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over (N, C) or
/// (N, C, d1, ...): the classes moved last and every position made a row of
/// nn.nll_loss; the per-position losses (reduction "none") shaped back to
/// (N, d1, ...). SoftmaxCrossEntropyLoss's log_prob output is the
/// log-softmax over C, in the input's layout.
Mapped nll_loss(NodeCtx &ctx, bool from_logits) {
  const Type &x = ctx.input_type(0), &t = ctx.input_type(1);
  if (rank(x) < 2 || rank(t) != rank(x) - 1) {
    ctx.unsupported("input of rank " + std::to_string(rank(x)) + " and target of rank " + std::to_string(rank(t)) +
                    " (an (N, C, d...) input and an (N, d...) target)");
    return {};
  }
  NllAttrs a;
  a.reduction = ctx.attr_string("reduction", "mean");
  if (a.reduction != "none" && a.reduction != "sum" && a.reduction != "mean") {
    ctx.unsupported("reduction = " + printable(a.reduction) + " (none, sum or mean)");
    return {};
  }
  // No ignore_index: no target is ignored (int64's lowest is no class).
  a.ignore_index = ctx.has_attr("ignore_index") ? ctx.attr_int("ignore_index", -100) : -9223372036854775807;
  Builder &b = ctx.b();
  ExprPtr p = from_logits ? b.call(ops::log_softmax, {ctx.input(0)}, SoftmaxAttrs{.axis = 1}) : ctx.input(0);
  ExprPtr target = ctx.input(1);
  int64_t positions = 1;
  for (int64_t d : t.shape)
    positions *= d;
  if (rank(x) > 2) {
    std::vector<int64_t> classes_last{0};
    for (int64_t d = 2; d < rank(x); ++d)
      classes_last.push_back(d);
    classes_last.push_back(1);
    p = b.reshape(b.transpose(p, classes_last), {positions, x.shape[1]});
    target = b.reshape(target, {positions});
  }
  std::vector<ExprPtr> args{p, target};
  if (ctx.has_input(2))
    args.push_back(ctx.input(2));
  ExprPtr loss = b.call(ops::nll_loss, args, a);
  if (a.reduction == "none")
    loss = b.reshape(loss, t.shape);
  Mapped m{loss};
  if (from_logits && ctx.num_outputs() > 1)
    m.push_back(ctx.wants_output(1) ? b.call(ops::log_softmax, {ctx.input(0)}, SoftmaxAttrs{.axis = 1}) : nullptr);
  return m;
}

Mapped gelu(NodeCtx &ctx) {
  std::string approx = ctx.attr_string("approximate", "none");
  if (approx != "none") {
    ctx.unsupported("approximate = " + printable(approx));
    return {};
  }
  return {ctx.b().call(ops::gelu, {ctx.input(0)})};
}

Mapped flatten(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 1), rank(x), /*end=*/true);
  if (!axis)
    return {};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank(x); ++d)
    (d < *axis ? outer : inner) *= x.shape[size_t(d)];
  return {ctx.b().reshape(ctx.input(0), {outer, inner})};
}

Mapped transpose(NodeCtx &ctx) {
  TransposeAttrs a;
  if (ctx.has_attr("perm"))
    a.axes = ctx.attr_ints("perm", {});
  return {ctx.b().call(ops::transpose, {ctx.input(0)}, a)};
}

Mapped concat(NodeCtx &ctx) {
  std::vector<ExprPtr> parts;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    parts.push_back(ctx.input(i));
  Builder &b = ctx.b();
  return {b.call(ops::concatenate, {b.tuple(parts)}, ConcatenateAttrs{.axis = ctx.attr_int("axis", 0)})};
}

Mapped where(NodeCtx &ctx) { return {ctx.b().call(ops::where, {ctx.input(0), ctx.input(1), ctx.input(2)})}; }

Mapped prelu(NodeCtx &ctx) {
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0), slope = ctx.input(1);
  const Type &xt = ctx.input_type(0), &st = ctx.input_type(1);
  // Older exporters give one slope per channel, (C,), for an (N, C, ...) input.
  if (rank(st) == 1 && rank(xt) > 2 && st.shape[0] == xt.shape[1] && st.shape[0] != xt.shape.back()) {
    Shape shape(size_t(rank(xt) - 1), 1);
    shape[0] = st.shape[0];
    slope = b.reshape(slope, shape);
  }
  return {b.call(ops::where, {b.call(ops::greater, {x, ctx.literal(0, xt.dtype)}), x, b.mul(x, slope)})};
}

/// Elu and Selu: x above 0, alpha·(eᕽ − 1) below, times gamma (Selu).
Mapping elu(double default_alpha, double default_gamma) {
  return [default_alpha, default_gamma](NodeCtx &ctx) {
    DType dt = ctx.input_type(0).dtype;
    double alpha = ctx.attr_float("alpha", default_alpha), gamma = ctx.attr_float("gamma", default_gamma);
    Builder &b = ctx.b();
    ExprPtr x = ctx.input(0);
    ExprPtr neg = b.mul(b.sub(b.call(ops::exp, {x}), ctx.literal(1, dt)), ctx.literal(alpha, dt));
    ExprPtr e = b.call(ops::where, {b.call(ops::greater, {x, ctx.literal(0, dt)}), x, neg});
    return Mapped{gamma == 1 ? e : b.mul(e, ctx.literal(gamma, dt))};
  };
}

Mapped leaky_relu(NodeCtx &ctx) {
  return {ctx.b().call(ops::leaky_relu, {ctx.input(0)}, LeakyReluAttrs{.alpha = ctx.attr_float("alpha", 0.01)})};
}

Mapped cast(NodeCtx &ctx) {
  int64_t to = ctx.attr_int("to", 0);
  std::optional<DType> dt = dtype_of(to);
  if (!dt) {
    ctx.unsupported("to = " + elem_name(to) + " (no gradc dtype)");
    return {};
  }
  return {ctx.b().cast(ctx.input(0), *dt)};
}

/// Dropout: the identity in inference. In training mode (input 3), the
/// mask is nn.dropout_mask of the model's seed with a stream of its own, and
/// the kept elements are scaled by 1 / (1 - ratio), as PyTorch does; the
/// mask output is that mask. A ratio of 0 keeps everything (PyTorch exports
/// nn.Dropout(0.0) in training mode so).
Mapped dropout(NodeCtx &ctx) {
  bool training = false;
  if (ctx.has_input(2)) {
    std::optional<double> t = scalar_input(ctx, 2, "a training_mode");
    if (!t)
      return {};
    training = *t != 0;
  }
  // The ratio matters in training only (in inference it may be a runtime input).
  double ratio = ctx.opset() >= 12 ? 0.5 : ctx.attr_float("ratio", 0.5);
  if (training && ctx.opset() >= 12 && ctx.has_input(1)) {
    std::optional<double> r = scalar_input(ctx, 1, "a ratio");
    if (!r)
      return {};
    ratio = *r;
  }
  if (training && !(ratio >= 0 && ratio < 1)) {
    ctx.unsupported("ratio = " + std::to_string(ratio) + " (in [0, 1) in training mode)");
    return {};
  }
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0);
  const Type &xt = ctx.input_type(0);
  ExprPtr mask, y = x;
  if (training && ratio > 0) {
    DropoutMaskAttrs a{.shape = xt.shape, .rate = ratio, .stream = ctx.next_stream()};
    mask = b.call(ops::dropout_mask, {ctx.seed()}, a);
    y = b.call(ops::where, {mask, b.mul(x, ctx.literal(1 / (1 - ratio), xt.dtype)), ctx.literal(0, xt.dtype)});
  } else if (ctx.wants_output(1)) {
    mask = b.broadcast_to(make_int_constant(1, DType::Bool), xt.shape);
  }
  Mapped m{y};
  if (ctx.num_outputs() > 1)
    m.push_back(ctx.wants_output(1) ? mask : nullptr);
  return m;
}

/// x shifted by one along `axis` (toward higher indices for -1: element i
/// reads i - 1), the edge element repeated: numpy's edge padding.
ExprPtr shift_edge(Builder &b, ExprPtr x, int64_t axis, int step) {
  int64_t n = x->type.shape[size_t(axis)];
  if (n == 1)
    return x;
  std::vector<ExprPtr> parts = step < 0 ? std::vector<ExprPtr>{slice_axis(b, x, axis, 0, 1), slice_axis(b, x, axis, 0, n - 1)}
                                        : std::vector<ExprPtr>{slice_axis(b, x, axis, 1, n), slice_axis(b, x, axis, n - 1, n)};
  return b.call(ops::concatenate, {b.tuple(parts)}, ConcatenateAttrs{.axis = axis});
}

/// x upsampled by the integer `scale` along `axis`. Nearest: each element
/// repeated. Linear: output o = scale·i + r reads input coordinate i + d_r
/// (d_r = (r + 1/2)/scale - 1/2 for half-pixel coordinates, r/scale for
/// asymmetric ones), interpolated between its two neighbours, the edges
/// repeated (coordinates clamped); each phase r is a weighted sum of x and
/// a shifted x, and the phases are interleaved.
ExprPtr upsample_axis(NodeCtx &ctx, ExprPtr x, int64_t axis, int64_t scale, bool linear, bool half_pixel) {
  if (scale == 1)
    return x;
  Builder &b = ctx.b();
  DType dt = x->type.dtype;
  Shape shape = x->type.shape, split = shape, wide = shape;
  split.insert(split.begin() + axis + 1, 1);
  wide.insert(wide.begin() + axis + 1, scale);
  Shape out = shape;
  out[size_t(axis)] *= scale;
  if (!linear)
    return b.reshape(b.broadcast_to(b.reshape(x, split), wide), out);
  std::vector<ExprPtr> phases;
  ExprPtr before = nullptr, after = nullptr;
  for (int64_t r = 0; r < scale; ++r) {
    double d = half_pixel ? (double(r) + 0.5) / double(scale) - 0.5 : double(r) / double(scale);
    ExprPtr phase = x;
    if (d < 0) {
      before = before ? before : shift_edge(b, x, axis, -1);
      phase = b.add(b.mul(before, ctx.literal(-d, dt)), b.mul(x, ctx.literal(1 + d, dt)));
    } else if (d > 0) {
      after = after ? after : shift_edge(b, x, axis, +1);
      phase = b.add(b.mul(x, ctx.literal(1 - d, dt)), b.mul(after, ctx.literal(d, dt)));
    }
    phases.push_back(b.reshape(phase, split));
  }
  return b.reshape(b.call(ops::concatenate, {b.tuple(phases)}, ConcatenateAttrs{.axis = axis + 1}), out);
}

/// The input coordinate each output position of one axis reads (ONNX's
/// coordinate transformations), in float64: (out) from iota = 0, 1, ...
ExprPtr source_coordinates(NodeCtx &ctx, int64_t in, int64_t out, double scale, const std::string &coords) {
  Builder &b = ctx.b();
  DType f64 = DType::Float64;
  ExprPtr o = iota(b, out, f64);
  if (coords == "align_corners")
    return b.mul(o, ctx.literal(out > 1 ? double(in - 1) / double(out - 1) : 0.0, f64));
  if (coords == "asymmetric")
    return b.mul(o, ctx.literal(1 / scale, f64));
  if (coords == "pytorch_half_pixel" && out == 1)
    return b.mul(o, ctx.literal(0, f64));
  return b.sub(b.mul(b.add(o, ctx.literal(0.5, f64)), ctx.literal(1 / scale, f64)), ctx.literal(0.5, f64));
}

/// x resampled to `out` positions along `axis`, any ratio: each output
/// position's input coordinate computed at run time from an iota, then read
/// with take (its gradient scatters and adds) — the nearest element (by
/// `nearest`'s rounding) or the two around it, weighted (linear), the
/// coordinates clamped to the input.
ExprPtr resample_axis(NodeCtx &ctx, ExprPtr x, int64_t axis, int64_t out, double scale, bool linear,
                      const std::string &coords, const std::string &nearest) {
  Builder &b = ctx.b();
  int64_t in = x->type.shape[size_t(axis)];
  DType f64 = DType::Float64, i64 = DType::Int64;
  ExprPtr src = source_coordinates(ctx, in, out, scale, coords);
  if (!linear && nearest == "round_prefer_floor")
    src = b.sub(src, ctx.literal(0.5, f64)); // then rounded up
  else if (!linear && nearest == "round_prefer_ceil")
    src = b.add(src, ctx.literal(0.5, f64)); // then rounded down
  src = b.call(ops::maximum, {src, ctx.literal(0, f64)});
  // floor of a non-negative coordinate: truncation; ceil: one more where it had a fraction.
  ExprPtr low = b.cast(src, i64);
  ExprPtr last = ctx.literal(double(in - 1), i64);
  TakeAttrs a;
  a.axis = axis;
  if (!linear) {
    if (nearest == "ceil" || nearest == "round_prefer_floor")
      low = b.add(low, b.cast(b.call(ops::less, {b.cast(low, f64), src}), i64));
    return b.call(ops::take, {x, b.call(ops::minimum, {low, last})}, a);
  }
  ExprPtr i0 = b.call(ops::minimum, {low, last});
  ExprPtr i1 = b.call(ops::minimum, {b.add(i0, ctx.literal(1, i64)), last});
  // The weight of the upper neighbour, shaped to broadcast along `axis`.
  Shape along(x->type.shape.size(), 1);
  along[size_t(axis)] = out;
  DType dt = x->type.dtype;
  ExprPtr w = b.reshape(b.cast(b.call(ops::minimum, {b.sub(src, b.cast(i0, f64)), ctx.literal(1, f64)}), dt), along);
  ExprPtr lo = b.call(ops::take, {x, i0}, a), hi = b.call(ops::take, {x, i1}, a);
  return b.add(lo, b.mul(b.sub(hi, lo), w));
}

/// Resize (upsampling and downsampling, as UNet, FPN and segmentation heads
/// use), axis by axis. Integer upsampling factors with PyTorch's
/// coordinates repeat elements or blend shifted copies (upsample_axis);
/// any other ratio reads computed coordinates (resample_axis): nearest with
/// any nearest_mode, linear; half_pixel, pytorch_half_pixel, asymmetric or
/// align_corners coordinates. The sizes come from `scales` or `sizes`,
/// constants.
Mapped resize(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::string mode = ctx.attr_string("mode", "nearest");
  std::string coords = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  std::string nearest = ctx.attr_string("nearest_mode", "round_prefer_floor");
  bool half = coords == "half_pixel" || coords == "pytorch_half_pixel";
  bool known_coords = half || coords == "asymmetric" || coords == "align_corners";
  bool known_nearest = nearest == "floor" || nearest == "ceil" || nearest == "round_prefer_floor" ||
                       nearest == "round_prefer_ceil";
  if (!known_coords || (mode != "linear" && mode != "nearest") || (mode == "nearest" && !known_nearest)) {
    ctx.unsupported("mode = " + printable(mode) + " with coordinate_transformation_mode = " + printable(coords) +
                    (mode == "nearest" ? " and nearest_mode = " + printable(nearest) : std::string()) +
                    " (nearest or linear; half_pixel, pytorch_half_pixel, asymmetric or align_corners)");
    return {};
  }
  bool linear = mode == "linear";
  // Integer factors with these coordinates need no computed positions.
  bool repeats = !linear && ((coords == "asymmetric" && nearest == "floor") ||
                             (half && (nearest == "round_prefer_floor" || nearest == "round_prefer_ceil")));
  bool blends = linear && (half || coords == "asymmetric");
  std::vector<int64_t> out;
  std::vector<double> scale;
  const ConstValue *scales = ctx.constant(2), *sizes = ctx.constant(3);
  if (scales && scales->size() == size_t(rank(x))) {
    for (size_t d = 0; d < scales->size(); ++d) {
      double f = scales->number(d), m = std::floor(double(x.shape[d]) * f);
      if (!(f > 0 && m >= 1 && m <= double(kMaxElements))) {
        ctx.unsupported("scales " + std::to_string(f) + " (positive, at least one output element)");
        return {};
      }
      out.push_back(int64_t(m));
      scale.push_back(f);
    }
  } else if (sizes && sizes->size() == size_t(rank(x))) {
    for (size_t d = 0; d < sizes->size(); ++d) {
      int64_t n = x.shape[d], m = sizes->integer(d);
      if (n < 1 || m < 1 || m > kMaxElements) {
        ctx.unsupported("sizes " + ints(sizes->integers()) + " (positive, of a non-empty input)");
        return {};
      }
      out.push_back(m);
      scale.push_back(double(m) / double(n));
    }
  } else if (ctx.has_input(3) && !sizes && ctx.declared_output(0) && rank(*ctx.declared_output(0)) == rank(x)) {
    // Sizes computed at run time: the declared output's (a scale is then each ratio exactly).
    for (int64_t d = 0; d < rank(x); ++d) {
      out.push_back(ctx.declared_output(0)->shape[size_t(d)]);
      scale.push_back(double(out.back()) / double(x.shape[size_t(d)]));
    }
  } else {
    ctx.unsupported("scales or sizes that are not constants of the input's rank (sizes computed at run time need "
                    "a declared output shape)");
    return {};
  }
  if (ctx.has_attr("axes")) {
    ctx.unsupported("axes (give every axis's scale or size)");
    return {};
  }
  ExprPtr y = ctx.input(0);
  for (int64_t d = 0; d < rank(x); ++d) {
    int64_t n = x.shape[size_t(d)], m = out[size_t(d)];
    double f = scale[size_t(d)];
    if (m == n && f == 1)
      continue;
    if ((repeats || blends) && m % n == 0 && f == double(m / n))
      y = upsample_axis(ctx, y, d, m / n, linear, half);
    else
      y = resample_axis(ctx, y, d, m, f, linear, coords, nearest);
  }
  return {y};
}

/// Trilu on data (on constants it folds): x where column - row >= k (upper)
/// or <= k (lower) in the last two axes, 0 elsewhere; the comparison from
/// two iotas (k may be computed at run time).
Mapped trilu(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  if (rank(x) < 2) {
    ctx.unsupported("an input of rank " + std::to_string(rank(x)) + " (a matrix or a batch of them)");
    return {};
  }
  std::optional<bool> upper = flag(ctx, "upper", 1);
  if (!upper)
    return {};
  Builder &b = ctx.b();
  ExprPtr k = ctx.literal(0, DType::Int64);
  if (ctx.has_input(1)) { // a constant, or a scalar computed at run time
    const Type &kt = ctx.input_type(1);
    if (num_elements(kt.shape) != 1 || kt.dtype != DType::Int64) {
      ctx.unsupported("k of " + kt.str() + " (a scalar int64)");
      return {};
    }
    k = ctx.constant(1) ? ctx.literal(double(ctx.constant(1)->integer(0)), DType::Int64) : b.reshape(ctx.input(1), {});
  }
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  ExprPtr diff = b.sub(b.reshape(iota(b, cols, DType::Int64), {1, cols}),
                       b.reshape(iota(b, rows, DType::Int64), {rows, 1})); // column - row
  ExprPtr keep = b.call(*upper ? ops::greater_equal : ops::less_equal, {diff, k});
  return {b.call(ops::where, {keep, ctx.input(0), ctx.literal(0, x.dtype)})};
}

/// Tile on data (on constants it folds): each axis d as (repeats[d], n_d)
/// broadcast from (1, n_d), then merged. Repeats computed at run time are
/// read off the declared output shape.
Mapped tile(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::vector<int64_t> repeats;
  if (const ConstValue *c = ctx.constant(1)) {
    repeats = c->integers();
  } else { // repeats computed at run time: the declared output's shape over the input's
    std::optional<Shape> out = declared_shape(ctx, "repeats");
    if (!out)
      return {};
    for (size_t d = 0; d < out->size() && d < x.shape.size(); ++d)
      repeats.push_back(x.shape[d] > 0 && (*out)[d] % x.shape[d] == 0 ? (*out)[d] / x.shape[d] : -1);
  }
  if (int64_t(repeats.size()) != rank(x) ||
      std::any_of(repeats.begin(), repeats.end(), [](int64_t r) { return r < 0 || r > kMaxElements; })) {
    ctx.unsupported("repeats " + ints(repeats) + " for an input of rank " + std::to_string(rank(x)));
    return {};
  }
  Shape lifted, wide, out;
  for (size_t d = 0; d < repeats.size(); ++d) {
    lifted.insert(lifted.end(), {1, x.shape[d]});
    wide.insert(wide.end(), {repeats[d], x.shape[d]});
    out.push_back(repeats[d] * x.shape[d]);
  }
  if (auto problem = shape_problem(out)) {
    ctx.unsupported("repeats " + ints(repeats) + ": " + *problem);
    return {};
  }
  Builder &b = ctx.b();
  return {b.reshape(b.broadcast_to(b.reshape(ctx.input(0), lifted), wide), out)};
}

/// Mod on data (on constants it folds). The quotient truncated toward zero
/// (a cast to int64; for integers, gradc's division truncates), r = x - y·q;
/// with fmod = 0 (integers only) a remainder whose sign differs from the
/// divisor's moves by y. The quotient is held constant for the gradient:
/// d r/dx = 1, d r/dy = -q.
Mapped mod(NodeCtx &ctx) {
  std::optional<bool> fmod = flag(ctx, "fmod", 0);
  if (!fmod)
    return {};
  DType dt = ctx.input_type(0).dtype;
  bool floating = is_float(dt);
  if (floating && !*fmod) {
    ctx.unsupported(std::string("fmod = 0 on ") + dtype_name(dt) + " (floating-point Mod takes fmod = 1)");
    return {};
  }
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0), y = ctx.input(1), q = b.div(x, y);
  if (floating)
    q = b.call(ops::no_grad, {b.cast(b.cast(q, DType::Int64), dt)});
  ExprPtr r = b.sub(x, b.mul(y, q));
  if (*fmod)
    return {r};
  ExprPtr zero = ctx.literal(0, dt);
  ExprPtr moved = b.call(ops::logical_and, {b.call(ops::not_equal, {r, zero}),
                                            b.call(ops::not_equal, {b.call(ops::less, {r, zero}),
                                                                    b.call(ops::less, {y, zero})})});
  return {b.call(ops::where, {moved, b.add(r, y), r})};
}

/// Range with a start, limit or delta computed at run time (on constants it
/// folds): its length from the declared output, start + delta·i.
Mapped range(NodeCtx &ctx) {
  std::optional<Shape> shape = declared_shape(ctx, "a length");
  if (!shape)
    return {};
  if (shape->size() != 1) {
    ctx.unsupported("a declared output of shape " + shape_str(*shape));
    return {};
  }
  for (size_t i = 0; i < 3; ++i)
    if (rank(ctx.input_type(i)) != 0) {
      ctx.unsupported("input " + std::to_string(i + 1) + " of shape " + shape_str(ctx.input_type(i).shape) +
                      " (a scalar)");
      return {};
    }
  Builder &b = ctx.b();
  DType dt = ctx.input_type(0).dtype;
  return {b.add(ctx.input(0), b.mul(iota(b, (*shape)[0], dt), ctx.input(2)))};
}


/// A tensor of the shape input 0 gives, filled with the `value` attribute
/// (float32 0 by default).
Mapped constant_of_shape(NodeCtx &ctx) {
  const ConstValue *dims = ctx.constant(0);
  std::optional<Shape> shape = dims ? std::optional<Shape>(dims->integers()) : declared_shape(ctx, "a shape");
  if (!shape)
    return {};
  ConstValue fill = scalar_of(0, DType::Float32);
  if (std::optional<ConstValue> v = ctx.attr_tensor("value"); v && v->size() == 1)
    fill = *v;
  ExprPtr value = fill.is_float() ? ctx.literal(fill.number(0), fill.dtype())
                                  : make_int_constant(fill.exact(0), fill.dtype());
  return {ctx.b().broadcast_to(value, *shape)};
}

Mapped identity(NodeCtx &ctx) { return {ctx.input(0)}; }

/// Expand: numpy broadcasting both ways (a dimension of the shape may be 1
/// where the input's is not), as broadcast_to of the broadcast shape.
Mapped expand(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0);
  std::optional<Shape> shape;
  if (const ConstValue *dims = ctx.constant(1)) {
    shape = broadcast_shapes(x.shape, dims->integers());
    if (!shape) {
      ctx.unsupported("shape " + ints(dims->integers()) + " (it does not broadcast with " + shape_str(x.shape) + ")");
      return {};
    }
  } else {
    shape = declared_shape(ctx, "a shape");
  }
  if (!shape)
    return {};
  return {x.shape == *shape ? ctx.input(0) : ctx.b().broadcast_to(ctx.input(0), *shape)};
}

/// HardSigmoid: max(0, min(1, alpha·x + beta)); HardSwish: x times it with
/// alpha 1/6, beta 1/2.
Mapped hard_sigmoid(NodeCtx &ctx, bool swish) {
  DType dt = ctx.input_type(0).dtype;
  double alpha = swish ? 1.0 / 6 : ctx.attr_float("alpha", 0.2), beta = swish ? 0.5 : ctx.attr_float("beta", 0.5);
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0);
  ExprPtr gate = b.call(ops::clip, {b.add(b.mul(x, ctx.literal(alpha, dt)), ctx.literal(beta, dt))},
                        ClipAttrs{.a_min = 0, .a_max = 1});
  return {swish ? b.mul(x, gate) : gate};
}

/// Mean of any number of inputs: their sum over their count.
Mapped mean_of(NodeCtx &ctx) {
  Builder &b = ctx.b();
  ExprPtr e = ctx.input(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    e = b.add(e, ctx.input(i));
  return {ctx.num_inputs() == 1 ? e : b.div(e, ctx.literal(double(ctx.num_inputs()), ctx.input_type(0).dtype))};
}

Mapped cast_like(NodeCtx &ctx) { return {ctx.b().cast(ctx.input(0), ctx.input_type(1).dtype)}; }

Mapped thresholded_relu(NodeCtx &ctx) {
  DType dt = ctx.input_type(0).dtype;
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0);
  return {b.call(ops::where, {b.call(ops::greater, {x, ctx.literal(ctx.attr_float("alpha", 1), dt)}), x,
                              ctx.literal(0, dt)})};
}

Mapped softsign(NodeCtx &ctx) {
  Builder &b = ctx.b();
  ExprPtr x = ctx.input(0);
  return {b.div(x, b.add(ctx.literal(1, ctx.input_type(0).dtype), b.call(ops::abs, {x})))};
}

Mapped reciprocal(NodeCtx &ctx) {
  return {ctx.b().div(ctx.literal(1, ctx.input_type(0).dtype), ctx.input(0))};
}

/// The exponent may have another dtype than the base: cast to the base's.
Mapped pow(NodeCtx &ctx) {
  ExprPtr y = ctx.input(1);
  DType base = ctx.input_type(0).dtype;
  if (ctx.input_type(1).dtype != base)
    y = ctx.b().cast(y, base);
  return {ctx.b().call(ops::power, {ctx.input(0), y})};
}

} // namespace

const std::vector<OpEntry> &op_table() {
  static const std::vector<OpEntry> table = {
      {"Abs", unary(ops::abs)},
      {"Add", binary(ops::add)},
      {"And", binary(ops::logical_and)},
      {"ArgMax", arg_reduce(ops::argmax)},
      {"ArgMin", arg_reduce(ops::argmin)},
      {"AveragePool", [](NodeCtx &c) { return pool(c, true); }},
      {"BatchNormalization", batch_norm},
      {"Cast", cast},
      {"CastLike", cast_like},
      {"Clip", clip},
      {"Concat", concat},
      {"ConstantOfShape", constant_of_shape},
      {"Conv", [](NodeCtx &c) { return conv(c, false); }},
      {"ConvTranspose", [](NodeCtx &c) { return conv(c, true); }},
      {"Cos", unary(ops::cos)},
      {"CumSum", cumsum},
      {"DepthToSpace", [](NodeCtx &c) { return depth_space(c, true); }},
      {"Div", binary(ops::divide)},
      {"Dropout", dropout},
      {"Einsum", einsum},
      {"Elu", elu(1.0, 1.0)},
      {"Equal", binary(ops::equal)},
      {"Erf", unary(ops::erf)},
      {"Exp", unary(ops::exp)},
      {"Expand", expand},
      {"Flatten", flatten},
      {"Gather", gather},
      {"GatherElements", gather_elements},
      {"GatherND", gather_nd},
      {"Gelu", gelu},
      {"Gemm", gemm},
      {"GlobalAveragePool", [](NodeCtx &c) { return global_pool(c, true); }},
      {"GlobalMaxPool", [](NodeCtx &c) { return global_pool(c, false); }},
      {"Greater", binary(ops::greater)},
      {"HardSigmoid", [](NodeCtx &c) { return hard_sigmoid(c, false); }},
      {"HardSwish", [](NodeCtx &c) { return hard_sigmoid(c, true); }},
      {"GreaterOrEqual", binary(ops::greater_equal)},
      {"Identity", identity},
      {"InstanceNormalization", instance_norm},
      {"LayerNormalization", layer_norm},
      {"LeakyRelu", leaky_relu},
      {"Less", binary(ops::less)},
      {"LessOrEqual", binary(ops::less_equal)},
      {"Log", unary(ops::log)},
      {"LogSoftmax", [](NodeCtx &c) { return softmax(c, ops::log_softmax); }},
      {"MatMul", binary(ops::matmul)},
      {"Max", variadic(ops::maximum)},
      {"MaxPool", [](NodeCtx &c) { return pool(c, false); }},
      {"Mean", mean_of},
      {"Mod", mod},
      {"Min", variadic(ops::minimum)},
      {"Mul", binary(ops::multiply)},
      {"Neg", unary(ops::negative)},
      {"NegativeLogLikelihoodLoss", [](NodeCtx &c) { return nll_loss(c, false); }},
      {"Not", unary(ops::logical_not)},
      {"Or", binary(ops::logical_or)},
      {"Pad", pad},
      {"Pow", pow},
      {"PRelu", prelu},
      {"Range", range},
      {"Reciprocal", reciprocal},
      {"ReduceL1", reduce_of(ops::sum, [](Builder &b, ExprPtr x) { return b.call(ops::abs, {x}); })},
      {"ReduceL2", reduce_of(ops::sum, square, [](Builder &b, ExprPtr x) { return b.call(ops::sqrt, {x}); })},
      {"ReduceLogSum", reduce_of(ops::sum, {}, [](Builder &b, ExprPtr x) { return b.call(ops::log, {x}); })},
      {"ReduceLogSumExp", reduce_of(ops::logsumexp)},
      {"ReduceMax", reduce_of(ops::max)},
      {"ReduceMean", reduce_of(ops::mean)},
      {"ReduceMin", reduce_of(ops::min)},
      {"ReduceSum", reduce_of(ops::sum, {}, {}, 13)},
      {"ReduceSumSquare", reduce_of(ops::sum, square)},
      {"Relu", unary(ops::relu)},
      {"Reshape", reshape},
      {"Resize", resize},
      {"ScatterND", scatter_nd},
      {"Selu", elu(1.67326319217681884765625, 1.05070102214813232421875)},
      {"Sigmoid", unary(ops::sigmoid)},
      {"Sin", unary(ops::sin)},
      {"Slice", slice},
      {"Softmax", [](NodeCtx &c) { return softmax(c, ops::softmax); }},
      {"SoftmaxCrossEntropyLoss", [](NodeCtx &c) { return nll_loss(c, true); }},
      {"Softplus", unary(ops::softplus)},
      {"Softsign", softsign},
      {"SpaceToDepth", [](NodeCtx &c) { return depth_space(c, false); }},
      {"Split", split},
      {"Sqrt", unary(ops::sqrt)},
      {"Squeeze", squeeze},
      {"Sub", binary(ops::subtract)},
      {"Sum", variadic(ops::add)},
      {"Tanh", unary(ops::tanh)},
      {"Tile", tile},
      {"ThresholdedRelu", thresholded_relu},
      {"Transpose", transpose},
      {"Trilu", trilu},
      {"Unsqueeze", unsqueeze},
      {"Where", where},
  };
  return table;
}

} // namespace gradc::onnx_import
