//===- conv.cpp - nn.conv2d, nn.conv2d_transpose, nn.conv2d_backward_weight ===//
//
// Two-dimensional convolutions in NCHW, weights OIHW (conv2d) and IOHW
// (conv2d_transpose, as Relay's default and PyTorch's), with strides,
// asymmetric padding, dilation and groups (depthwise included).
//
// The generic kernel of each is a matrix product per (batch index, group)
// as an implicit im2col: the product reads the data at each (channel,
// kernel tap) row and output-pixel column through index arithmetic, padding
// reads as zero (a clamped load under a select, so nothing reads out of
// bounds). A target's strategy (cpu/conv.cpp, cuda/conv.cpp) schedules the
// same products or replaces them. So:
//
//   conv2d            out[n, g·Og + o, p] = Σ_(c,kh,kw) w[g·Og + o, c, kh, kw] · x[n, g·Cg + c, tap(p, kh, kw)]
//   conv2d_transpose  out[n, g·Og + o, p] = Σ_(c,kh,kw) w[g·Cg + c, o, kh, kw] · x[n, g·Cg + c, (p + pad - kh·d) / s]
//   backward_weight   dw[g·Og + o, (c,kh,kw)] = Σ_(n,p) dy[n, g·Og + o, p] · x[n, g·Cg + c, tap(p, kh, kw)]
//
// conv2d's gradients are conv2d_transpose (data) and conv2d_backward_weight
// (weight); conv2d_transpose's are conv2d and conv2d_backward_weight with
// the roles of its data and the adjoint swapped. Every output is summed in
// a fixed order, so a recomputed value is bitwise identical.
//
//===----------------------------------------------------------------------===//
#include "conv.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Gemm.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

//===--- relations --------------------------------------------------------===//

/// The checks every convolution makes on data and weight: rank 4, one
/// floating dtype, groups dividing the channels, out_dtype.
bool conv_operands(RelationCtx &ctx, const ConvAttrs &a, const Type *&x, const Type *&w) {
  x = ctx.tensor(0);
  w = x ? ctx.tensor(1) : nullptr;
  if (!w)
    return false;
  if (x->rank() != 4 || w->rank() != 4) {
    ctx.fail("expects data and weight of rank 4 (NCHW and " + a.kernel_layout + "), found " + x->str() + " and " +
             w->str());
    return false;
  }
  if (!require_float(ctx, *x))
    return false;
  if (x->dtype != w->dtype) {
    ctx.fail(std::string("dtypes ") + dtype_name(x->dtype) + " and " + dtype_name(w->dtype) + " differ");
    return false;
  }
  if (!a.out_dtype.empty() && a.out_dtype != dtype_name(x->dtype)) {
    ctx.fail_attr("out_dtype", "out_dtype \"" + a.out_dtype + "\" differs from the input dtype " +
                                   dtype_name(x->dtype));
    return false;
  }
  if (x->shape[1] % a.groups) {
    ctx.fail_attr("groups", "groups=" + std::to_string(a.groups) + " does not divide the " +
                                std::to_string(x->shape[1]) + " input channels");
    return false;
  }
  return true;
}

/// channels and kernel_size, where given, against the weight's.
bool conv_informational(RelationCtx &ctx, const ConvAttrs &a, int64_t out_channels, int64_t KH, int64_t KW) {
  if (a.channels && *a.channels != out_channels) {
    ctx.fail_attr("channels", "channels=" + std::to_string(*a.channels) + " but the output has " +
                                  std::to_string(out_channels));
    return false;
  }
  if (a.kernel_size) {
    const std::vector<int64_t> &ks = *a.kernel_size;
    if (ks.size() != 1 && ks.size() != 2) {
      ctx.fail_attr("kernel_size", "kernel_size expects 1 or 2 values, found " + std::to_string(ks.size()));
      return false;
    }
    if (ks[0] != KH || ks.back() != KW) {
      ctx.fail_attr("kernel_size", "kernel_size " + AttrValue::ints(ks).str() + " but the weight's kernel is (" +
                                       std::to_string(KH) + ", " + std::to_string(KW) + ")");
      return false;
    }
  }
  return true;
}

/// The output extents of a convolution over (H, W), or a failure when the
/// dilated kernel is larger than the padded data.
std::optional<std::pair<int64_t, int64_t>> conv_extents(RelationCtx &ctx, const ConvShape &s, int64_t H, int64_t W,
                                                        int64_t KH, int64_t KW) {
  // in 128 bits: a dilation and a kernel within the limits multiply past 2^63
  __int128 eh = __int128(s.d[0]) * (KH - 1) + 1, ew = __int128(s.d[1]) * (KW - 1) + 1;
  __int128 ph = __int128(H) + s.p[0] + s.p[2], pw = __int128(W) + s.p[1] + s.p[3];
  if (ph < eh || pw < ew) {
    auto str = [](__int128 v) { return v > INT64_MAX ? std::string("over 2^63") : std::to_string(int64_t(v)); };
    ctx.fail("the dilated kernel (" + str(eh) + ", " + str(ew) + ") is larger than the padded data (" + str(ph) + ", " +
             str(pw) + ")");
    return std::nullopt;
  }
  return std::make_pair(s.out_extent(0, H, KH), s.out_extent(1, W, KW));
}

/// The scratch a convolution's CPU kernels may take (a padded copy, the
/// im2col of the batch, the product over an extended grid), within the
/// limits on a tensor, or a failure: `rows` taps by `pixels`, and the padded
/// planes.
bool conv_scratch_fits(RelationCtx &ctx, __int128 rows, __int128 pixels, __int128 padded) {
  __int128 most = std::max(rows * pixels, padded);
  if (most <= kMaxElements)
    return true;
  ctx.fail("the convolution's im2col or padded copy would hold more than 2^44 elements (gradc's limit on a tensor)");
  return false;
}

Type conv2d_rel(RelationCtx &ctx) {
  auto a = ctx.attrs_as<Conv2DAttrs>();
  const Type *x, *w;
  if (!conv_operands(ctx, a, x, w))
    return Type::unknown();
  int64_t C = x->shape[1], O = w->shape[0];
  if (w->shape[1] != C / a.groups)
    return ctx.fail("the weight " + w->str() + " has " + std::to_string(w->shape[1]) +
                    " input channels per group; the data's " + std::to_string(C) + " channels with groups=" +
                    std::to_string(a.groups) + " need " + std::to_string(C / a.groups));
  if (O % a.groups)
    return ctx.fail_attr("groups", "groups=" + std::to_string(a.groups) + " does not divide the " + std::to_string(O) +
                                       " output channels");
  if (!conv_informational(ctx, a, O, w->shape[2], w->shape[3]))
    return Type::unknown();
  auto out = conv_extents(ctx, ConvShape(a), x->shape[2], x->shape[3], w->shape[2], w->shape[3]);
  if (!out || !conv_scratch_fits(ctx, __int128(x->shape[1]) * w->shape[2] * w->shape[3],
                                 __int128(x->shape[0]) * out->first * out->second,
                                 (__int128(x->shape[2]) + a.padding[0] + a.padding[2]) *
                                     (__int128(x->shape[3]) + a.padding[1] + a.padding[3]) *
                                     std::max(x->shape[0] * x->shape[1], x->shape[0] * O)))
    return Type::unknown();
  return Type::tensor({x->shape[0], O, out->first, out->second}, x->dtype);
}

/// conv2d_transpose: out = (H - 1)·s - pad + d·(KH - 1) + output_padding + 1.
Type conv2d_transpose_rel(RelationCtx &ctx) {
  auto a = ctx.attrs_as<Conv2DTransposeAttrs>();
  const Type *x, *w;
  if (!conv_operands(ctx, a, x, w))
    return Type::unknown();
  int64_t C = x->shape[1], O = w->shape[1] * a.groups;
  if (w->shape[0] != C)
    return ctx.fail("the weight " + w->str() + " (IOHW) has " + std::to_string(w->shape[0]) +
                    " input channels; the data has " + std::to_string(C));
  if (!conv_informational(ctx, a, O, w->shape[2], w->shape[3]))
    return Type::unknown();
  for (int i = 0; i < 2; ++i)
    if (a.output_padding[i] >= a.strides[i])
      return ctx.fail_attr("output_padding", "output_padding " + ctx.attrs.get("output_padding").str() +
                                                 " must be less than the strides " + ctx.attrs.get("strides").str());
  Shape out{x->shape[0], O, 0, 0};
  for (int i = 0; i < 2; ++i) {
    __int128 extent = __int128(x->shape[2 + i] - 1) * a.strides[i] - a.padding[i] - a.padding[i + 2] +
                      __int128(a.dilation[i]) * (w->shape[2 + i] - 1) + a.output_padding[i] + 1;
    if (extent < 1)
      return ctx.fail("the padding " + ctx.attrs.get("padding").str() + " leaves an empty output");
    if (extent > kMaxElements)
      return ctx.fail("the output would be over 2^44 elements along an axis (gradc's limit on a tensor)");
    out[2 + i] = int64_t(extent);
  }
  // the padded (and stride-spread) data and the columns of its taps
  __int128 padded = __int128(out[2] + a.dilation[0] * (w->shape[2] - 1)) * (out[3] + a.dilation[1] * (w->shape[3] - 1));
  if (!conv_scratch_fits(ctx, __int128(O / a.groups) * w->shape[2] * w->shape[3] + x->shape[1],
                         __int128(x->shape[0]) * x->shape[2] * x->shape[3], padded * x->shape[0] * std::max(C, O)))
    return Type::unknown();
  return Type::tensor(out, x->dtype);
}

/// conv2d_backward_weight(dy, x): the weight (O, C / groups, KH, KW) of the
/// convolution of x that produced dy.
Type conv2d_backward_weight_rel(RelationCtx &ctx) {
  auto a = ctx.attrs_as<Conv2DBackwardWeightAttrs>();
  const Type *dy, *x;
  if (!conv_operands(ctx, a, dy, x)) // (dy, x): both rank 4, one floating dtype
    return Type::unknown();
  if (!a.kernel_size || a.kernel_size->size() > 2 || a.kernel_size->empty())
    return ctx.fail_attr("kernel_size", "kernel_size (KH, KW) is required");
  int64_t KH = (*a.kernel_size)[0], KW = a.kernel_size->back(), O = dy->shape[1];
  if (x->shape[1] % a.groups || O % a.groups)
    return ctx.fail_attr("groups", "groups=" + std::to_string(a.groups) + " does not divide the channels");
  if (dy->shape[0] != x->shape[0])
    return ctx.fail("the batch of the adjoint " + dy->str() + " differs from the data's " + x->str());
  auto out = conv_extents(ctx, ConvShape(a), x->shape[2], x->shape[3], KH, KW);
  if (!out)
    return Type::unknown();
  if (!conv_scratch_fits(ctx, __int128(x->shape[1]) * KH * KW, __int128(x->shape[0]) * out->first * out->second,
                         (__int128(x->shape[2]) + a.padding[0] + a.padding[2]) *
                             (__int128(x->shape[3]) + a.padding[1] + a.padding[3]) * x->shape[0] *
                             std::max(x->shape[1], O)))
    return Type::unknown();
  if (dy->shape[2] != out->first || dy->shape[3] != out->second)
    return ctx.fail("the adjoint " + dy->str() + " is not the output of a convolution of " + x->str() +
                    " with kernel (" + std::to_string(KH) + ", " + std::to_string(KW) + ") (expected (" +
                    std::to_string(out->first) + ", " + std::to_string(out->second) + ") pixels)");
  if (a.channels && *a.channels != O)
    return ctx.fail_attr("channels", "channels=" + std::to_string(*a.channels) + " but the adjoint has " +
                                         std::to_string(O));
  return Type::tensor({O, x->shape[1] / a.groups, KH, KW}, x->dtype);
}

} // namespace

//===--- the generic kernels ----------------------------------------------===//

StmtPtr conv_product_nest(KernelCtx &k, const ConvProduct &p) { return conv_products(k, p, gemm_nest); }

Gemm conv_gemm(KernelCtx &k, const ConvProduct &p, const Index &at) {
  Gemm g;
  g.M = p.M;
  g.N = p.N;
  g.K = p.K;
  g.dtype = k.call.type.dtype;
  g.epilogue = k.has_epilogue();
  g.a_contiguous_in_k = p.a_contiguous_in_k;
  g.b_contiguous_in_k = p.b_contiguous_in_k;
  g.b_gathered = true; // every convolution gathers its B operand
  // The operands arrive in the accumulator dtype already (Gemm casts
  // again, a no-op): padding selects a zero of that dtype.
  KernelCtx *kp = &k;
  const ConvProduct *pp = &p;
  g.a = [pp, at](const LExprPtr &m, const LExprPtr &kk) { return pp->a(at, m, kk); };
  g.b = [pp, at](const LExprPtr &kk, const LExprPtr &n) { return pp->b(at, kk, n); };
  g.store = [kp, pp, at](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
    return kp->put(pp->out_index(at, m, n), pp->out_flat(at, m, n), v);
  };
  g.load = [kp, pp, at](const LExprPtr &m, const LExprPtr &n) { return load(kp->out(), pp->out_flat(at, m, n)); };
  if (k.output_holds_partials(g.dtype))
    g.store_raw = [kp, pp, at](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
      return store(kp->out(), pp->out_flat(at, m, n), v);
    };
  return g;
}

StmtPtr conv_products(KernelCtx &k, const ConvProduct &p, GemmStrategy strategy) {
  return loop_nest(p.loops, [&](const Index &at) { return strategy(k, conv_gemm(k, p, at)); }, ForKind::Spatial);
}

ConvShape conv2d_shape(const KernelCtx &k) {
  ConvShape s(k.attrs_as<Conv2DAttrs>());
  const Shape &xs = k.arg_type(0).shape, &ws = k.arg_type(1).shape;
  s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3], s.O = ws[0], s.KH = ws[2], s.KW = ws[3];
  s.OH = k.call.type.shape[2], s.OW = k.call.type.shape[3];
  return s;
}

ConvShape conv2d_transpose_shape(const KernelCtx &k) {
  ConvShape s(k.attrs_as<Conv2DTransposeAttrs>());
  const Shape &xs = k.arg_type(0).shape, &ws = k.arg_type(1).shape, &os = k.call.type.shape;
  s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3], s.O = os[1], s.KH = ws[2], s.KW = ws[3];
  s.OH = os[2], s.OW = os[3];
  return s;
}

ConvShape conv2d_backward_weight_shape(const KernelCtx &k) {
  ConvShape s(k.attrs_as<Conv2DBackwardWeightAttrs>());
  const Shape &dys = k.arg_type(0).shape, &xs = k.arg_type(1).shape, &os = k.call.type.shape;
  s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3], s.O = os[0], s.KH = os[2], s.KW = os[3];
  s.OH = dys[2], s.OW = dys[3];
  return s;
}

StmtPtr conv2d_as_products(KernelCtx &k, ConvProductFn product) {
  ConvShape s = conv2d_shape(k);
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  ConvProduct p;
  p.loops = {s.N, s.groups};
  p.M = s.Og(), p.N = s.OH * s.OW, p.K = s.Cg() * s.taps();
  p.a = [&](const Index &at, const LExprPtr &m, const LExprPtr &kk) { // w as (O, Cg·KH·KW)
    return cast(acc, k.in_flat(1, add(mul(add(mul(at[1], imm(s.Og())), m), imm(p.K)), kk)));
  };
  p.b = [&](const Index &at, const LExprPtr &kk, const LExprPtr &n) {
    TapIndex t(kk, s.KH, s.KW);
    auto [oh, ow] = pixel(n, s.OW);
    return s.data_at(k, 0, at[0], add(mul(at[1], imm(s.Cg())), t.c), oh, ow, t.kh, t.kw, acc);
  };
  p.out_index = [&](const Index &at, const LExprPtr &m, const LExprPtr &n) {
    auto [oh, ow] = pixel(n, s.OW);
    return Index{at[0], add(mul(at[1], imm(s.Og())), m), oh, ow};
  };
  p.out_flat = [&](const Index &at, const LExprPtr &m, const LExprPtr &n) { // out as (N, O, OH·OW)
    return add(mul(add(mul(at[0], imm(s.O)), add(mul(at[1], imm(s.Og())), m)), imm(p.N)), n);
  };
  return product(k, p);
}

/// out[n, g·Og + o, oh, ow] = Σ x[n, g·Cg + c, ih, iw] w[g·Cg + c, o, kh, kw]
/// over the taps with oh = ih·s - pad + kh·d (ih whole and in range).
StmtPtr conv2d_transpose_as_products(KernelCtx &k, ConvProductFn product) {
  ConvShape s = conv2d_transpose_shape(k);
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  ConvProduct p;
  p.loops = {s.N, s.groups};
  p.M = s.Og(), p.N = s.OH * s.OW, p.K = s.Cg() * s.taps();
  p.a_contiguous_in_k = false;
  p.a = [&](const Index &at, const LExprPtr &m, const LExprPtr &kk) {
    TapIndex t(kk, s.KH, s.KW);
    return cast(acc, k.in(1, {add(mul(at[1], imm(s.Cg())), t.c), m, t.kh, t.kw}));
  };
  // The data pixel an output pixel reads at a tap: (o + pad - t·d) / s where
  // that is whole and inside the data.
  p.b = [&](const Index &at, const LExprPtr &kk, const LExprPtr &n) {
    TapIndex t(kk, s.KH, s.KW);
    auto [oh, ow] = pixel(n, s.OW);
    LExprPtr valid;
    LExprPtr ih = s.source(0, oh, t.kh, s.H, valid), iw = s.source(1, ow, t.kw, s.W, valid);
    LExprPtr x = cast(acc, k.in(0, {at[0], add(mul(at[1], imm(s.Cg())), t.c), ih, iw}));
    return select(valid, x, constant_of(0, acc));
  };
  p.out_index = [&](const Index &at, const LExprPtr &m, const LExprPtr &n) {
    auto [oh, ow] = pixel(n, s.OW);
    return Index{at[0], add(mul(at[1], imm(s.Og())), m), oh, ow};
  };
  p.out_flat = [&](const Index &at, const LExprPtr &m, const LExprPtr &n) {
    return add(mul(add(mul(at[0], imm(s.O)), add(mul(at[1], imm(s.Og())), m)), imm(p.N)), n);
  };
  return product(k, p);
}

/// dw[g·Og + o, c, kh, kw] = Σ_(n, oh, ow) dy[n, g·Og + o, oh, ow] · x[n, g·Cg + c, tap(oh, kh), tap(ow, kw)]
StmtPtr conv2d_backward_weight_as_products(KernelCtx &k, ConvProductFn product) {
  ConvShape s = conv2d_backward_weight_shape(k);
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  int64_t pixels = s.OH * s.OW;
  ConvProduct p;
  p.loops = {s.groups};
  p.M = s.Og(), p.N = s.Cg() * s.taps(), p.K = s.N * pixels;
  p.b_contiguous_in_k = false;
  p.a = [&](const Index &at, const LExprPtr &m, const LExprPtr &kk) { // dy[n, g·Og + m, q], kk = n·P + q
    LExprPtr n = binary(BinaryOp::FloorDiv, kk, imm(pixels)), q = binary(BinaryOp::FloorMod, kk, imm(pixels));
    return cast(acc, k.in_flat(0, add(mul(add(mul(n, imm(s.O)), add(mul(at[0], imm(s.Og())), m)), imm(pixels)), q)));
  };
  p.b = [&](const Index &at, const LExprPtr &kk, const LExprPtr &n) {
    TapIndex t(n, s.KH, s.KW);
    LExprPtr q = binary(BinaryOp::FloorMod, kk, imm(pixels));
    auto [oh, ow] = pixel(q, s.OW);
    return s.data_at(k, 1, binary(BinaryOp::FloorDiv, kk, imm(pixels)), add(mul(at[0], imm(s.Cg())), t.c), oh, ow,
                     t.kh, t.kw, acc);
  };
  p.out_index = [&](const Index &at, const LExprPtr &m, const LExprPtr &n) {
    TapIndex t(n, s.KH, s.KW);
    return Index{add(mul(at[0], imm(s.Og())), m), t.c, t.kh, t.kw};
  };
  p.out_flat = [&](const Index &at, const LExprPtr &m, const LExprPtr &n) { // dw as (O, Cg·KH·KW)
    return add(mul(add(mul(at[0], imm(s.Og())), m), imm(p.N)), n);
  };
  return product(k, p);
}

namespace {

//===--- gradients --------------------------------------------------------===//

/// The attributes of conv2d_backward_weight for a convolution with `a`'s
/// geometry and a (KH, KW) kernel.
Conv2DBackwardWeightAttrs backward_weight_attrs(const ConvAttrs &a, int64_t KH, int64_t KW) {
  Conv2DBackwardWeightAttrs w;
  w.strides = a.strides, w.padding = a.padding, w.dilation = a.dilation, w.groups = a.groups;
  w.kernel_size = std::vector<int64_t>{KH, KW};
  return w;
}

/// The data gradient of a convolution of x (shape xs) by w (ws) with
/// `a`'s geometry, for the output's adjoint dy: conv2d_transpose(dy, w) with
/// the output padding that restores x's size.
ExprPtr conv2d_data_grad(Builder &b, const ConvAttrs &a, const ExprPtr &dy, const ExprPtr &w, const Shape &xs) {
  const Shape &ws = w->type.shape, &ys = dy->type.shape;
  Conv2DTransposeAttrs t;
  t.strides = a.strides, t.padding = a.padding, t.dilation = a.dilation, t.groups = a.groups;
  for (int i = 0; i < 2; ++i)
    t.output_padding[i] = xs[2 + i] - ((ys[2 + i] - 1) * a.strides[i] - a.padding[i] - a.padding[i + 2] +
                                       a.dilation[i] * (ws[2 + i] - 1) + 1);
  return b.call(ops::conv2d_transpose, {dy, w}, t);
}

/// d conv2d(x, w): dx = the data gradient; dw = conv2d_backward_weight(dy, x).
Grads conv2d_grad(GradCtx &g) {
  auto a = g.attrs_as<Conv2DAttrs>();
  const Shape &ws = g.arg(1)->type.shape;
  ExprPtr dx = conv2d_data_grad(g.b, a, g.grad, g.arg(1), g.arg(0)->type.shape);
  ExprPtr dw = g.b.call(ops::conv2d_backward_weight, {g.grad, g.arg(0)}, backward_weight_attrs(a, ws[2], ws[3]));
  return {dx, dw};
}

/// dw = conv2d_backward_weight(dy, x) is bilinear: <G, dw> = <dy,
/// conv2d(x, G)>, so for an adjoint G of dw: d dy = conv2d(x, G), and d x =
/// the data gradient of that convolution for dy (second-order gradients
/// through a convolution's weight).
Grads conv2d_backward_weight_grad(GradCtx &g) {
  auto a = g.attrs_as<Conv2DBackwardWeightAttrs>();
  Conv2DAttrs c;
  c.strides = a.strides, c.padding = a.padding, c.dilation = a.dilation, c.groups = a.groups;
  ExprPtr d_dy = g.b.call(ops::conv2d, {g.arg(1), g.grad}, c);
  ExprPtr d_x = conv2d_data_grad(g.b, c, g.arg(0), g.grad, g.arg(1)->type.shape);
  return {d_dy, d_x};
}

/// d conv2d_transpose(x, w): dx = conv2d(dy, w); dw[c, o] pairs x's channel
/// c with dy's channel o as a convolution of dy by x would:
/// conv2d_backward_weight(x, dy).
Grads conv2d_transpose_grad(GradCtx &g) {
  auto a = g.attrs_as<Conv2DTransposeAttrs>();
  const Shape &ws = g.arg(1)->type.shape;
  Conv2DAttrs c;
  c.strides = a.strides, c.padding = a.padding, c.dilation = a.dilation, c.groups = a.groups;
  ExprPtr dx = g.b.call(ops::conv2d, {g.grad, g.arg(1)}, c);
  ExprPtr dw = g.b.call(ops::conv2d_backward_weight, {g.arg(0), g.grad}, backward_weight_attrs(a, ws[2], ws[3]));
  return {dx, dw};
}

/// Two per multiply-add of the product.
int64_t conv2d_flops(const Expr &call) {
  const Shape &ws = call.args[1]->type.shape;
  return 2 * num_elements(call.type.shape) * ws[1] * ws[2] * ws[3];
}
int64_t conv2d_transpose_flops(const Expr &call) {
  const Shape &ws = call.args[1]->type.shape;
  return 2 * num_elements(call.args[0]->type.shape) * ws[1] * ws[2] * ws[3];
}
int64_t conv2d_backward_weight_flops(const Expr &call) {
  const Shape &dys = call.args[0]->type.shape;
  return 2 * num_elements(call.type.shape) * dys[0] * dys[2] * dys[3];
}

constexpr const char *kConvTypes = "%x: Tensor[(2, 4, 6, 5), float64], %w: Tensor[(6, 2, 3, 2), float64]";

} // namespace

void register_conv_ops(OpRegistry &reg) {
  reg.add("nn.conv2d")
      .describe("2-D convolution, NCHW data and OIHW weight, with strides, padding, dilation and groups.")
      .arg("data", "Tensor[(N, C, H, W)]", "The input.")
      .arg("weight", "Tensor[(O, C / groups, KH, KW)]", "The filters.")
      .attrs<Conv2DAttrs>()
      .support_level(2)
      .relation("Conv2D", conv2d_rel)
      .gradient(conv2d_grad)
      .kernel([](KernelCtx &k) { return conv2d_as_products(k, conv_product_nest); })
      .fuses_epilogue()
      .flops(conv2d_flops)
      .example(kConvTypes, "nn.conv2d(%x, %w, padding=[1, 0], groups=2)")
      .example("%x: Tensor[(1, 2, 7, 6), float64], %w: Tensor[(3, 2, 2, 3), float64]",
               "nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 0, 2], dilation=[2, 1])")
      .example("%x: Tensor[(2, 3, 5, 5), float64], %w: Tensor[(6, 1, 3, 3), float64]",
               "nn.conv2d(%x, %w, padding=1, groups=3, channels=6, kernel_size=[3, 3])"); // depthwise × 2

  reg.add("nn.conv2d_transpose")
      .describe("2-D transposed convolution (the data gradient of conv2d), NCHW data and IOHW weight.")
      .arg("data", "Tensor[(N, C, H, W)]", "The input.")
      .arg("weight", "Tensor[(C, O / groups, KH, KW)]", "The filters.")
      .attrs<Conv2DTransposeAttrs>()
      .support_level(2)
      .relation("Conv2DTranspose", conv2d_transpose_rel)
      .gradient(conv2d_transpose_grad)
      .kernel([](KernelCtx &k) { return conv2d_transpose_as_products(k, conv_product_nest); })
      .fuses_epilogue()
      .flops(conv2d_transpose_flops)
      .example("%x: Tensor[(2, 4, 3, 4), float64], %w: Tensor[(4, 3, 3, 2), float64]",
               "nn.conv2d_transpose(%x, %w, strides=[2, 3], padding=[1, 0, 0, 1], output_padding=[1, 2], groups=2)")
      .example("%x: Tensor[(1, 2, 4, 3), float64], %w: Tensor[(2, 2, 2, 2), float64]",
               "nn.conv2d_transpose(%x, %w, dilation=[2, 1], padding=1)");

  reg.add("nn.conv2d_backward_weight")
      .describe("The weight gradient of nn.conv2d: (output_grad, data) to the OIHW weight's shape.")
      .arg("grad", "Tensor[(N, O, OH, OW)]", "The adjoint of the convolution's output.")
      .arg("data", "Tensor[(N, C, H, W)]", "The convolution's input.")
      .attrs<Conv2DBackwardWeightAttrs>()
      .support_level(10)
      .relation("Conv2DBackwardWeight", conv2d_backward_weight_rel)
      .gradient(conv2d_backward_weight_grad)
      .kernel([](KernelCtx &k) { return conv2d_backward_weight_as_products(k, conv_product_nest); })
      .fuses_epilogue()
      .flops(conv2d_backward_weight_flops)
      .example("%g: Tensor[(2, 6, 6, 4), float64], %x: Tensor[(2, 4, 6, 5), float64]",
               "nn.conv2d_backward_weight(%g, %x, padding=[1, 0], groups=2, kernel_size=[3, 2])")
      .example("%g: Tensor[(1, 3, 4, 2), float64], %x: Tensor[(1, 2, 6, 5), float64]",
               "nn.conv2d_backward_weight(%g, %x, strides=2, padding=[1, 0], kernel_size=[2, 2])");
}

} // namespace gradc
