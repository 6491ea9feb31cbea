//===- conv.cpp - nn.conv2d, nn.conv2d_transpose, nn.conv2d_backward_weight ===//
//
// Two-dimensional convolutions in NCHW, weights OIHW (conv2d) and IOHW
// (conv2d_transpose, as Relay's default and PyTorch's), with strides,
// asymmetric padding, dilation and groups (depthwise included).
//
// Each is a matrix product per (batch index, group), lowered through the
// Gemm strategies (op/Gemm.h) as an implicit im2col: the product reads the
// data at each (channel, kernel tap) row and output-pixel column through
// index arithmetic, padding reads as zero (a clamped load under a select, so
// nothing reads out of bounds), and the packed CPU schedule copies those
// panels into registers-sized blocks as it does for nn.dense. So:
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
#include "gradc/op/attrs/conv.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Gemm.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

/// The shapes of one convolution in conv2d's terms: data (N, C, H, W),
/// weight (O, C / groups, KH, KW), output (N, O, OH, OW).
struct ConvShape {
  int64_t N = 0, C = 0, H = 0, W = 0, O = 0, KH = 0, KW = 0, OH = 0, OW = 0, groups = 1;
  Pair s{1, 1}, d{1, 1};
  Pad4 p{0, 0, 0, 0};
  int64_t Cg() const { return C / groups; }
  int64_t Og() const { return O / groups; }
  int64_t taps() const { return KH * KW; }

  ConvShape(const ConvAttrs &a) : groups(a.groups), s(a.strides), d(a.dilation), p(a.padding) {}
  /// The output extent of a window of k taps over n (with padding lo + hi).
  int64_t out_extent(int axis, int64_t n, int64_t k) const {
    return (n + p[axis] + p[axis + 2] - d[axis] * (k - 1) - 1) / s[axis] + 1;
  }
  /// The data row (axis 0) or column (axis 1) that output position `o` reads
  /// at kernel tap `t`: o · s + t · d - pad.
  LExprPtr tap(int axis, const LExprPtr &o, const LExprPtr &t) const {
    return sub(add(mul(o, imm(s[axis])), mul(t, imm(d[axis]))), imm(p[axis]));
  }
  /// The data position that transposed output position `o` reads at tap
  /// `t`: (o + pad - t·d) / s, clamped; `valid` gains "whole and inside n".
  LExprPtr source(int axis, const LExprPtr &o, const LExprPtr &t, int64_t n, LExprPtr &valid) const {
    LExprPtr num = sub(add(o, imm(p[axis])), mul(t, imm(d[axis])));
    LExprPtr q = binary(BinaryOp::FloorDiv, num, imm(s[axis]));
    LExprPtr ok = both(compare(CompareOp::EQ, binary(BinaryOp::FloorMod, num, imm(s[axis])), imm(0)), in_range(q, 0, n));
    valid = valid ? both(valid, ok) : ok;
    return clamp_index(q, n);
  }
  /// x[n, c, tap(oh, kh), tap(ow, kw)], zero in the padding.
  LExprPtr data_at(const KernelCtx &k, size_t arg, const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh,
                   const LExprPtr &ow, const LExprPtr &kh, const LExprPtr &kw, DType acc) const {
    LExprPtr ih = tap(0, oh, kh), iw = tap(1, ow, kw);
    LExprPtr inside = both(in_range(ih, 0, H), in_range(iw, 0, W));
    return select(inside, cast(acc, k.in(arg, {n, c, clamp_index(ih, H), clamp_index(iw, W)})), constant_of(0, acc));
  }
};

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

//===--- kernels ----------------------------------------------------------===//

/// A product per (batch loop index) whose result is stored at flat
/// out_flat(batch, m, n) of the output, with the epilogue at out_index.
struct ConvProduct {
  Shape loops; // the Serial (packed) or Spatial loops around each product
  int64_t M = 0, N = 0, K = 0;
  std::function<LExprPtr(const Index &, const LExprPtr &m, const LExprPtr &k)> a;
  std::function<LExprPtr(const Index &, const LExprPtr &k, const LExprPtr &n)> b;
  std::function<Index(const Index &, const LExprPtr &m, const LExprPtr &n)> out_index; // for the epilogue
  std::function<LExprPtr(const Index &, const LExprPtr &m, const LExprPtr &n)> out_flat;
  bool a_contiguous_in_k = true, b_contiguous_in_k = false;
};

StmtPtr conv_product(KernelCtx &k, GemmStrategy strategy, const ConvProduct &p) {
  // On a GPU, a product of few outputs and a long K (a weight gradient, K
  // summing over every image and pixel) in chunks of K by threads of their
  // own: one thread per output left most of the device idle.
  Shape all = p.loops;
  all.insert(all.end(), {p.M, p.N});
  auto split_at = [&](const LExprPtr &o) {
    Index i = unravel_index(o, all);
    LExprPtr m = i[i.size() - 2], n = i.back();
    i.resize(i.size() - 2);
    return std::tuple{i, m, n};
  };
  DType dt = k.call.type.dtype;
  if (StmtPtr split = gpu_split_sums(
          k, num_elements(all), p.K, dtype_info(dt).accumulator,
          [&](const LExprPtr &o, const LExprPtr &kk) {
            auto [at, m, n] = split_at(o);
            return mul(p.a(at, m, kk), p.b(at, kk, n));
          },
          [&](const LExprPtr &o, const LExprPtr &total) {
            auto [at, m, n] = split_at(o);
            return store(k.out(), p.out_flat(at, m, n), k.finish(p.out_index(at, m, n), cast(dt, total)));
          }))
    return split;
  return loop_nest(
      p.loops,
      [&](const Index &at) {
        Gemm g;
        g.M = p.M;
        g.N = p.N;
        g.K = p.K;
        g.dtype = k.call.type.dtype;
        g.epilogue = bool(k.epilogue);
        g.a_contiguous_in_k = p.a_contiguous_in_k;
        g.b_contiguous_in_k = p.b_contiguous_in_k;
        g.b_gathered = true; // every convolution gathers its B operand
        // The operands arrive in the accumulator dtype already (Gemm casts
        // again, a no-op): padding selects a zero of that dtype.
        g.a = [&](const LExprPtr &m, const LExprPtr &kk) { return p.a(at, m, kk); };
        g.b = [&](const LExprPtr &kk, const LExprPtr &n) { return p.b(at, kk, n); };
        auto flat = [&](const LExprPtr &m, const LExprPtr &n) { return p.out_flat(at, m, n); };
        g.store = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
          return store(k.out(), flat(m, n), k.finish(p.out_index(at, m, n), v));
        };
        g.load = [&](const LExprPtr &m, const LExprPtr &n) { return load(k.out(), flat(m, n)); };
        if (k.out()->dtype == g.dtype)
          g.store_raw = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
            return store(k.out(), flat(m, n), v);
          };
        return strategy(k, g);
      },
      // The packed schedule's jobs are Parallel loops already (which may not
      // nest): the products around them run one after another.
      strategy == gemm_cpu_packed ? ForKind::Serial : ForKind::Spatial);
}

/// Splits a flat (channel, kh, kw) row index.
struct TapIndex {
  LExprPtr c, kh, kw;
  TapIndex(const LExprPtr &k, int64_t KH, int64_t KW) {
    c = binary(BinaryOp::FloorDiv, k, imm(KH * KW));
    LExprPtr t = binary(BinaryOp::FloorMod, k, imm(KH * KW));
    kh = binary(BinaryOp::FloorDiv, t, imm(KW));
    kw = binary(BinaryOp::FloorMod, t, imm(KW));
  }
};

/// An output pixel (oh, ow) from its flat index.
std::pair<LExprPtr, LExprPtr> pixel(const LExprPtr &p, int64_t OW) {
  return {binary(BinaryOp::FloorDiv, p, imm(OW)), binary(BinaryOp::FloorMod, p, imm(OW))};
}

//===--- the CPU's stride-1 path ------------------------------------------===//
//
// With stride 1 the implicit im2col is contiguous once the data is padded:
// on a zero-padded copy xp (rows Hp, columns Wp), tap (kh, kw) of output
// pixel (oh, ow) is xp[c][oh + kh·dh][ow + kw·dw], that is xp_c[q + kh·dh·Wp
// + kw·dw] with q = oh·Wp + ow. So the product runs over an extended grid of
// OH × Wp pixels (the Wp - OW extra columns of each row are computed and
// dropped: 2 of 58 for a 3 × 3 kernel on 56 columns), and every packed
// panel is whole vectors of xp, with no index arithmetic per element and no
// select. The weight gradient uses the same grid along k. (Strided
// convolutions keep the gathering path: their taps are not contiguous.)

/// A zero-padded copy of argument `arg` (N, C, H, W) in kernel scratch, of
/// rows Hp and columns Wp with the data at (top, left) (negative offsets
/// crop), laid out (N, C, Hp, Wp), or (C, N, Hp, Wp) with `channel_major`,
/// then `slack` zeros (the extended grid reads up to that far past the last
/// row); in the accumulator dtype.
BufferPtr padded_copy(KernelCtx &k, size_t arg, int64_t top, int64_t left, int64_t Hp, int64_t Wp, int64_t slack,
                      bool channel_major, DType acc, std::vector<StmtPtr> &stmts) {
  const Shape &xs = k.arg_type(arg).shape;
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  BufferPtr xp = k.scratch(channel_major ? "padded_cm" : "padded", acc, N * C * Hp * Wp + slack);
  stmts.push_back(loop_nest({N * C * Hp * Wp + slack}, [&](const Index &i) { return store(xp, i[0], constant_of(0, acc)); }));
  // The data rows [h0, h1) and columns [w0, w1) land inside.
  int64_t h0 = std::max<int64_t>(0, -top), h1 = std::min(H, Hp - top);
  int64_t w0 = std::max<int64_t>(0, -left), w1 = std::min(W, Wp - left);
  if (h1 > h0 && w1 > w0)
    stmts.push_back(loop_nest({N, C, h1 - h0, w1 - w0}, [&](const Index &i) {
      LExprPtr h = add(i[2], imm(h0)), w = add(i[3], imm(w0));
      LExprPtr plane = channel_major ? add(mul(i[1], imm(N)), i[0]) : add(mul(i[0], imm(C)), i[1]);
      LExprPtr row = add(h, imm(top)), col = add(w, imm(left));
      LExprPtr at = add(mul(add(mul(plane, imm(Hp)), row), imm(Wp)), col);
      return store(xp, at, cast(acc, k.in(arg, {i[0], i[1], h, w})));
    }));
  return xp;
}

/// out[n, g·Og + m, oh, ow] = Σ_(c, kh, kw) weight(g·Og + m, (c, kh, kw)) ·
/// xp[g·Cg + c, n, oh + kh·dh, ow + kw·dw] on the extended grid of a chunk
/// of images at once (xp channel-major: the images of a channel follow each
/// other, so q runs over the chunk's Hp·Wp pixels each; the rows past OH of
/// an image are computed and dropped too): one packed product per chunk and
/// group, its result in scratch, then copied out through the epilogue. A
/// chunk's result fills about half the L2, so the copy reads it from there
/// (one 56 x 56 image of 64 channels: 21.5 -> 19.7 ms for the batch of 8
/// against all 8 at once), and small images share a product (32 x 32 images
/// one at a time: a fork-join each, two threads slower than one).
StmtPtr correlate_padded(KernelCtx &k, const BufferPtr &xp, int64_t N, int64_t C, int64_t Hp, int64_t Wp,
                         int64_t groups, int64_t KH, int64_t KW, int64_t dh, int64_t dw,
                         const std::function<LExprPtr(const LExprPtr &o, const LExprPtr &kk)> &weight) {
  const Shape &os = k.call.type.shape;
  int64_t O = os[1], OH = os[2], OW = os[3], Og = O / groups, Cg = C / groups, taps = KH * KW;
  int64_t plane = Hp * Wp, all = N * plane;
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  int64_t chunk = std::clamp<int64_t>(k.target.cpu_tuning().l2_bytes / 2 / std::max<int64_t>(1, Og * plane * dtype_bytes(acc)), 1, N);
  BufferPtr ext = k.scratch("extended", acc, Og * chunk * plane);
  // images [first, first + count) of group g
  auto product = [&](const LExprPtr &g, const LExprPtr &first, int64_t count) {
    int64_t grid = (count - 1) * plane + OH * Wp; // not the last image's rows past OH
    Gemm gm;
    gm.M = Og, gm.N = grid, gm.K = Cg * taps;
    gm.dtype = acc; // the scratch holds sums in the accumulator dtype
    gm.b_gathered = true;
    gm.a = [&, g](const LExprPtr &m, const LExprPtr &kk) { return weight(add(mul(g, imm(Og)), m), kk); };
    gm.b = [&, g, first](const LExprPtr &kk, const LExprPtr &q) {
      TapIndex t(kk, KH, KW);
      LExprPtr channel = add(mul(add(mul(g, imm(Cg)), t.c), imm(all)), mul(first, imm(plane)));
      LExprPtr offset = add(mul(t.kh, imm(dh * Wp)), mul(t.kw, imm(dw)));
      return load(xp, add(add(channel, offset), q));
    };
    auto at_ext = [grid](const LExprPtr &m, const LExprPtr &q) { return add(mul(m, imm(grid)), q); };
    gm.store = [&, at_ext](const LExprPtr &m, const LExprPtr &q, const LExprPtr &v) { return store(ext, at_ext(m, q), v); };
    gm.store_raw = gm.store;
    gm.load = [&, at_ext](const LExprPtr &m, const LExprPtr &q) { return load(ext, at_ext(m, q)); };
    StmtPtr run = gemm_cpu_packed(k, gm);
    StmtPtr copy_out = loop_nest({count, Og, OH, OW}, [&](const Index &i) {
      Index idx{add(first, i[0]), add(mul(g, imm(Og)), i[1]), i[2], i[3]};
      LExprPtr q = add(add(mul(i[0], imm(plane)), mul(i[2], imm(Wp))), i[3]);
      return store(k.out(), flat_index(os, idx), k.finish(idx, cast(dt, load(ext, at_ext(i[1], q)))));
    });
    return seq({run, copy_out});
  };
  int64_t full = N / chunk, rest = N % chunk;
  return loop_nest(
      {groups},
      [&](const Index &g) {
        StmtPtr chunks = loop_nest(
            {full}, [&](const Index &c) { return product(g[0], mul(c[0], imm(chunk)), chunk); }, ForKind::Serial,
            "chunk");
        return rest ? seq({chunks, product(g[0], imm(full * chunk), rest)}) : chunks;
      },
      ForKind::Serial);
}

/// dw[g·Og + m, (c, kh, kw)] = Σ_(n, q) dyx[g·Og + m, n, q] · xp[g·Cg + c, n, q + kh·dh·Wp + kw·dw]
/// over every image's extended grid of Hp × Wp pixels: dyx is dy spread
/// onto that grid with zeros elsewhere, xp the channel-major padded data, so
/// both operands are contiguous along k (the layout of x·wᵀ). The zeros of
/// dyx meet data that no tap of the output reads (the columns past OW and
/// the rows past OH); only a non-finite value there would show (NaN where
/// the exact sum is ±inf).
StmtPtr backward_weight_padded(KernelCtx &k, const ConvShape &s, DType dt, DType acc) {
  int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3], plane = Hp * Wp;
  int64_t K = s.N * plane, cols = s.Cg() * s.taps();
  std::vector<StmtPtr> stmts;
  BufferPtr xp = padded_copy(k, 1, s.p[0], s.p[1], Hp, Wp, s.d[0] * (s.KH - 1) * Wp + s.d[1] * (s.KW - 1), true, acc,
                             stmts);
  BufferPtr dyx = k.scratch("extended_grad", acc, s.O * K);
  stmts.push_back(loop_nest({s.O * K}, [&](const Index &i) { return store(dyx, i[0], constant_of(0, acc)); }));
  stmts.push_back(loop_nest({s.N, s.O, s.OH, s.OW}, [&](const Index &i) {
    LExprPtr at = add(add(mul(add(mul(i[1], imm(s.N)), i[0]), imm(plane)), mul(i[2], imm(Wp))), i[3]);
    return store(dyx, at, cast(acc, k.in(0, i)));
  }));
  stmts.push_back(loop_nest(
      {s.groups},
      [&](const Index &at) {
        Gemm g;
        g.M = s.Og(), g.N = cols, g.K = K;
        g.dtype = dt;
        g.epilogue = bool(k.epilogue);
        g.a_contiguous_in_k = g.b_contiguous_in_k = true;
        g.a = [&](const LExprPtr &m, const LExprPtr &kk) {
          return load(dyx, add(mul(add(mul(at[0], imm(s.Og())), m), imm(K)), kk));
        };
        g.b = [&](const LExprPtr &kk, const LExprPtr &col) {
          TapIndex t(col, s.KH, s.KW);
          LExprPtr base = mul(add(mul(at[0], imm(s.Cg())), t.c), imm(K));
          LExprPtr offset = add(mul(t.kh, imm(s.d[0] * Wp)), mul(t.kw, imm(s.d[1])));
          return load(xp, add(add(base, offset), kk));
        };
        auto flat = [&](const LExprPtr &m, const LExprPtr &col) {
          return add(mul(add(mul(at[0], imm(s.Og())), m), imm(cols)), col);
        };
        auto index = [&](const LExprPtr &m, const LExprPtr &col) {
          TapIndex t(col, s.KH, s.KW);
          return Index{add(mul(at[0], imm(s.Og())), m), t.c, t.kh, t.kw};
        };
        g.store = [&](const LExprPtr &m, const LExprPtr &col, const LExprPtr &v) {
          return store(k.out(), flat(m, col), k.finish(index(m, col), v));
        };
        g.load = [&](const LExprPtr &m, const LExprPtr &col) { return load(k.out(), flat(m, col)); };
        if (dt == acc)
          g.store_raw = [&](const LExprPtr &m, const LExprPtr &col, const LExprPtr &v) {
            return store(k.out(), flat(m, col), v);
          };
        return gemm_cpu_packed(k, g);
      },
      ForKind::Serial));
  return seq(stmts);
}

//===--- the CPU's strided path -------------------------------------------===//
//
// With strides the taps of neighbouring output pixels are not contiguous,
// but the output (or, transposed, the input) is s² times smaller than the
// data, so the im2col is materialised: one copy of the taps, C·KH·KW rows
// of a chunk of images' OH·OW pixels (a chunk fills about half the L2: small
// images share a product and a fork-join, large ones keep the scratch
// bounded), then one plain packed product per group over it; the weight
// gradient sums over the whole batch, so its im2col holds every image. A transposed convolution multiplies
// first, into per-tap rows over its input pixels (col = wᵀ·x), then gathers
// each output pixel's taps from them (col2im), in a fixed order. No zero is
// multiplied, where spreading the data by the strides would multiply s² as
// many.

/// col[(c, kh, kw), q] for the pixels q of an OH × OW output, c in
/// [0, C): x[n, c, tap(oh, kh), tap(ow, kw)], zero in the padding; `at`
/// maps (row, pixel) to its place in the scratch buffer.
StmtPtr im2col(const KernelCtx &k, size_t arg, const ConvShape &s, const LExprPtr &n, const BufferPtr &col,
               const std::function<LExprPtr(const LExprPtr &row, const LExprPtr &q)> &at, DType acc) {
  return loop_nest({s.C, s.KH, s.KW, s.OH, s.OW}, [&](const Index &i) {
    LExprPtr row = add(mul(add(mul(i[0], imm(s.KH)), i[1]), imm(s.KW)), i[2]);
    LExprPtr q = add(mul(i[3], imm(s.OW)), i[4]);
    return store(col, at(row, q), s.data_at(k, arg, n, i[0], i[3], i[4], i[1], i[2], acc));
  });
}

/// How many images one product of the strided paths takes: as many as keep
/// its `bytes_per_image` of scratch within half the L2, so a batch of small
/// images shares one fork-join and the scratch stays bounded for large ones.
int64_t images_per_chunk(const KernelCtx &k, int64_t bytes_per_image, int64_t N) {
  return std::clamp<int64_t>(k.target.cpu_tuning().l2_bytes / 2 / std::max<int64_t>(1, bytes_per_image), 1, N);
}

/// `body(first image, count)` over the batch in chunks of `chunk` images:
/// the full chunks in a serial loop, then the rest.
StmtPtr over_chunks(int64_t N, int64_t chunk, const std::function<StmtPtr(const LExprPtr &, int64_t)> &body) {
  int64_t full = N / chunk, rest = N % chunk;
  StmtPtr chunks = loop_nest({full}, [&](const Index &c) { return body(mul(c[0], imm(chunk)), chunk); },
                             ForKind::Serial, "chunk");
  return rest ? seq({chunks, body(imm(full * chunk), rest)}) : chunks;
}

/// conv2d with strides: per chunk of images, their im2col, rows (c, kh,
/// kw) by (n, q), then per group out = w · col.
StmtPtr conv2d_strided(KernelCtx &k, const ConvShape &s, DType acc) {
  int64_t P = s.OH * s.OW, K = s.Cg() * s.taps(), rows = s.C * s.taps();
  int64_t chunk = images_per_chunk(k, rows * P * dtype_bytes(acc), s.N);
  BufferPtr col = k.scratch("im2col", acc, rows * chunk * P);
  return over_chunks(s.N, chunk, [&](const LExprPtr &first, int64_t count) {
    int64_t NP = count * P;
    StmtPtr fill = loop_nest(
        {count},
        [&](const Index &n) {
          return im2col(k, 0, s, add(first, n[0]), col, [&](const LExprPtr &r, const LExprPtr &q) {
            return add(add(mul(r, imm(NP)), mul(n[0], imm(P))), q);
          }, acc);
        },
        ForKind::Spatial, "n");
    StmtPtr products = loop_nest(
        {s.groups},
        [&](const Index &g) {
          Gemm gm;
          gm.M = s.Og(), gm.N = NP, gm.K = K;
          gm.dtype = k.call.type.dtype;
          gm.epilogue = bool(k.epilogue);
          auto o = [&](const LExprPtr &m) { return add(mul(g[0], imm(s.Og())), m); };
          gm.a = [&](const LExprPtr &m, const LExprPtr &kk) { return cast(acc, k.in_flat(1, add(mul(o(m), imm(K)), kk))); };
          gm.b = [&](const LExprPtr &kk, const LExprPtr &j) {
            return load(col, add(mul(add(mul(g[0], imm(K)), kk), imm(NP)), j));
          };
          // pixel j of the chunk: image first + j / P, pixel j % P
          auto image = [&](const LExprPtr &j) { return add(first, binary(BinaryOp::FloorDiv, j, imm(P))); };
          auto flat = [&](const LExprPtr &m, const LExprPtr &j) {
            return add(mul(add(mul(image(j), imm(s.O)), o(m)), imm(P)), binary(BinaryOp::FloorMod, j, imm(P)));
          };
          gm.store = [&](const LExprPtr &m, const LExprPtr &j, const LExprPtr &v) {
            auto [oh, ow] = pixel(binary(BinaryOp::FloorMod, j, imm(P)), s.OW);
            return store(k.out(), flat(m, j), k.finish({image(j), o(m), oh, ow}, v));
          };
          gm.load = [&](const LExprPtr &m, const LExprPtr &j) { return load(k.out(), flat(m, j)); };
          if (k.out()->dtype == acc)
            gm.store_raw = [&](const LExprPtr &m, const LExprPtr &j, const LExprPtr &v) {
              return store(k.out(), flat(m, j), v);
            };
          return gemm_cpu_packed(k, gm);
        },
        ForKind::Serial);
    return seq({fill, products});
  });
}

/// conv2d_backward_weight with strides: the im2col of every image, rows
/// (c, kh, kw) by (n, q), and dy as (O, N·P); per group dw = dy · colᵀ,
/// both operands contiguous along k.
StmtPtr backward_weight_strided(KernelCtx &k, const ConvShape &s, DType dt, DType acc) {
  int64_t P = s.OH * s.OW, NP = s.N * P, cols = s.Cg() * s.taps(), rows = s.C * s.taps();
  BufferPtr col = k.scratch("im2col", acc, rows * NP), dyt = k.scratch("grad_rows", acc, s.O * NP);
  std::vector<StmtPtr> stmts;
  stmts.push_back(loop_nest(
      {s.N},
      [&](const Index &n) {
        return im2col(k, 1, s, n[0], col, [&](const LExprPtr &r, const LExprPtr &q) {
          return add(add(mul(r, imm(NP)), mul(n[0], imm(P))), q);
        }, acc);
      },
      ForKind::Spatial, "n"));
  stmts.push_back(loop_nest({s.N, s.O, P}, [&](const Index &i) {
    LExprPtr at = add(add(mul(i[1], imm(NP)), mul(i[0], imm(P))), i[2]);
    return store(dyt, at, cast(acc, k.in_flat(0, add(mul(add(mul(i[0], imm(s.O)), i[1]), imm(P)), i[2]))));
  }));
  stmts.push_back(loop_nest(
      {s.groups},
      [&](const Index &g) {
        Gemm gm;
        gm.M = s.Og(), gm.N = cols, gm.K = NP;
        gm.dtype = dt;
        gm.epilogue = bool(k.epilogue);
        gm.a_contiguous_in_k = gm.b_contiguous_in_k = true;
        auto o = [&](const LExprPtr &m) { return add(mul(g[0], imm(s.Og())), m); };
        gm.a = [&](const LExprPtr &m, const LExprPtr &kk) { return load(dyt, add(mul(o(m), imm(NP)), kk)); };
        gm.b = [&](const LExprPtr &kk, const LExprPtr &c) {
          return load(col, add(mul(add(mul(g[0], imm(cols)), c), imm(NP)), kk));
        };
        auto flat = [&](const LExprPtr &m, const LExprPtr &c) { return add(mul(o(m), imm(cols)), c); };
        gm.store = [&](const LExprPtr &m, const LExprPtr &c, const LExprPtr &v) {
          TapIndex t(c, s.KH, s.KW);
          return store(k.out(), flat(m, c), k.finish({o(m), t.c, t.kh, t.kw}, v));
        };
        gm.load = [&](const LExprPtr &m, const LExprPtr &c) { return load(k.out(), flat(m, c)); };
        if (dt == acc)
          gm.store_raw = [&](const LExprPtr &m, const LExprPtr &c, const LExprPtr &v) { return store(k.out(), flat(m, c), v); };
        return gemm_cpu_packed(k, gm);
      },
      ForKind::Serial));
  return seq(stmts);
}

/// conv2d_transpose with strides: per chunk of images and group,
/// col[(o, kh, kw), (n, p)] = Σ_c w[g·Cg + c, o, kh, kw] · x[n, g·Cg + c, p]
/// over the chunk's input pixels (x copied channel-major first, so the
/// product reads it along its rows), then each output pixel sums its taps'
/// rows (col2im, gathering: the taps in row-major order, so the order is
/// fixed).
StmtPtr conv2d_transpose_strided(KernelCtx &k, const ConvShape &s, DType acc) {
  int64_t P = s.H * s.W, rows = s.Og() * s.taps();
  int64_t chunk = images_per_chunk(k, (s.C + rows) * P * dtype_bytes(acc), s.N);
  BufferPtr xt = k.scratch("channel_major", acc, s.C * chunk * P), col = k.scratch("col", acc, rows * chunk * P);
  const Shape &os = k.call.type.shape;
  DType dt = k.call.type.dtype;
  return over_chunks(s.N, chunk, [&](const LExprPtr &first, int64_t count) {
    int64_t NP = count * P;
    std::vector<StmtPtr> stmts;
    stmts.push_back(loop_nest({count, s.C, P}, [&](const Index &i) {
      LExprPtr src = add(mul(add(mul(add(first, i[0]), imm(s.C)), i[1]), imm(P)), i[2]);
      return store(xt, add(add(mul(i[1], imm(NP)), mul(i[0], imm(P))), i[2]), cast(acc, k.in_flat(0, src)));
    }));
    auto cat = [NP](const LExprPtr &m, const LExprPtr &j) { return add(mul(m, imm(NP)), j); };
    stmts.push_back(loop_nest(
        {s.groups},
        [&](const Index &g) {
          Gemm gm;
          gm.M = rows, gm.N = NP, gm.K = s.Cg();
          gm.dtype = acc;
          gm.a_contiguous_in_k = false;
          gm.a = [&](const LExprPtr &m, const LExprPtr &c) { // w as (C, Og·KH·KW)
            return cast(acc, k.in_flat(1, add(mul(add(mul(g[0], imm(s.Cg())), c), imm(rows)), m)));
          };
          gm.b = [&](const LExprPtr &c, const LExprPtr &j) {
            return load(xt, add(mul(add(mul(g[0], imm(s.Cg())), c), imm(NP)), j));
          };
          // col holds one group's rows at a time: the gather below reads them
          gm.store = [&](const LExprPtr &m, const LExprPtr &j, const LExprPtr &v) { return store(col, cat(m, j), v); };
          gm.store_raw = gm.store;
          gm.load = [&](const LExprPtr &m, const LExprPtr &j) { return load(col, cat(m, j)); };
          StmtPtr product = gemm_cpu_packed(k, gm);
          StmtPtr gather = loop_nest({count, s.Og(), s.OH, s.OW}, [&](const Index &i) {
            BufferPtr sum = k.local("sum", acc);
            LExprPtr zero = imm(0);
            StmtPtr taps = loop_nest(
                {s.KH, s.KW},
                [&](const Index &t) {
                  // the input pixel this tap reads: (o + pad - t·d) / s, whole and inside
                  LExprPtr valid;
                  LExprPtr ih = s.source(0, i[2], t[0], s.H, valid), iw = s.source(1, i[3], t[1], s.W, valid);
                  LExprPtr m = add(mul(add(mul(i[1], imm(s.KH)), t[0]), imm(s.KW)), t[1]);
                  LExprPtr v = load(col, cat(m, add(add(mul(i[0], imm(P)), mul(ih, imm(s.W))), iw)));
                  return store(sum, zero, add(load(sum, zero), select(valid, v, constant_of(0, acc))));
                },
                ForKind::Reduce, "k");
            Index idx{add(first, i[0]), add(mul(g[0], imm(s.Og())), i[1]), i[2], i[3]};
            return alloc(sum, seq({store(sum, zero, constant_of(0, acc)), taps,
                                   store(k.out(), flat_index(os, idx), k.finish(idx, cast(dt, load(sum, zero))))}));
          });
          return seq({product, gather});
        },
        ForKind::Serial));
    return seq(stmts);
  });
}

//===--- depthwise convolutions on the CPU --------------------------------===//
//
// With one input channel per group (groups = C, a channel multiplier m =
// O / C) each product above would be one row deep: a fork-join per channel
// for a few multiply-adds per pixel. Instead every output pixel is one
// expression, the multiply-adds of its taps in row-major order, over a
// zero-padded copy of the data; the pixel loops are plain data-parallel
// loops that the schedule vectorizes along the row (stride 1: whole vector
// loads) and spreads over the pool. The weight gradient is one compensated
// sum per (channel, tap) over the batch's pixels.

/// At most this many taps are unrolled into one expression.
constexpr int64_t kMaxUnrolledTaps = 64;

/// Whether a convolution of shape `s` is depthwise and handled here.
bool depthwise(GemmStrategy strategy, const ConvShape &s) {
  return strategy == gemm_cpu_packed && s.groups > 1 && s.Cg() == 1 && s.taps() <= kMaxUnrolledTaps;
}

/// out[n, o, oh, ow] = Σ_(kh, kw) weight(o, kh, kw) · xp[n, o / m, oh·s + kh·d, ow·s + kw·d]
/// with xp (N, C, Hp, Wp) padded.
StmtPtr depthwise_direct(KernelCtx &k, const ConvShape &s, const BufferPtr &xp, int64_t Hp, int64_t Wp,
                         const std::function<LExprPtr(const LExprPtr &o, int64_t kh, int64_t kw)> &weight) {
  const Shape &os = k.call.type.shape;
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  int64_t m = s.O / s.C;
  return loop_nest(os, [&](const Index &i) {
    LExprPtr c = m == 1 ? i[1] : binary(BinaryOp::FloorDiv, i[1], imm(m));
    LExprPtr plane = mul(add(mul(i[0], imm(s.C)), c), imm(Hp));
    LExprPtr sum;
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        LExprPtr row = add(plane, add(mul(i[2], imm(s.s[0])), imm(kh * s.d[0])));
        LExprPtr x = load(xp, add(mul(row, imm(Wp)), add(mul(i[3], imm(s.s[1])), imm(kw * s.d[1]))));
        LExprPtr w = weight(i[1], kh, kw);
        sum = sum ? (is_float(acc) ? mul_add(w, x, sum) : add(sum, mul(w, x))) : mul(w, x);
      }
    return store(k.out(), flat_index(os, i), k.finish(i, cast(dt, sum)));
  });
}

/// dw[o, 0, kh, kw] = Σ_(n, oh, ow) dy[n, o, oh, ow] · x[n, o / m, tap(oh, kh), tap(ow, kw)],
/// one compensated sum per weight, in the order of the batch's pixels.
StmtPtr depthwise_backward_weight(KernelCtx &k, const ConvShape &s, DType dt, DType acc) {
  int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3], P = s.OH * s.OW, m = s.O / s.C;
  std::vector<StmtPtr> stmts;
  BufferPtr xp = padded_copy(k, 1, s.p[0], s.p[1], Hp, Wp, 0, false, acc, stmts);
  const Shape &os = k.call.type.shape;
  stmts.push_back(loop_nest({s.O, s.KH, s.KW}, [&](const Index &w) {
    LExprPtr c = m == 1 ? w[0] : binary(BinaryOp::FloorDiv, w[0], imm(m));
    // term at image n, output pixel (oh, ow)
    auto term_at = [&](const LExprPtr &n, const LExprPtr &oh, const LExprPtr &ow) {
      LExprPtr dy = cast(acc, k.in_flat(0, add(add(mul(add(mul(n, imm(s.O)), w[0]), imm(P)), mul(oh, imm(s.OW))), ow)));
      LExprPtr row = add(mul(add(mul(n, imm(s.C)), c), imm(Hp)), add(mul(oh, imm(s.s[0])), mul(w[1], imm(s.d[0]))));
      LExprPtr x = load(xp, add(mul(row, imm(Wp)), add(mul(ow, imm(s.s[1])), mul(w[2], imm(s.d[1])))));
      return binary(BinaryOp::Mul, dy, x);
    };
    TermFn term = [&](const LExprPtr &r) {
      Index at = unravel_index(r, {s.N, s.OH, s.OW});
      return term_at(at[0], at[1], at[2]);
    };
    LaneBlockTermFn block_term;
    if (s.OW % kSumLanes == 0) // a block of lanes never leaves its output row
      block_term = [&](const LExprPtr &first, const LExprPtr &lane) {
        Index at = unravel_index(binary(BinaryOp::FloorDiv, first, imm(kSumLanes)), {s.N, s.OH, s.OW / kSumLanes});
        return term_at(at[0], at[1], add(mul(at[2], imm(kSumLanes)), lane));
      };
    return compensated_sum(
        k, s.N * P, acc, term,
        [&](const LExprPtr &total) { return store(k.out(), flat_index(os, {w[0], imm(0), w[1], w[2]}), k.finish({w[0], imm(0), w[1], w[2]}, cast(dt, total))); },
        nullptr, 1, block_term);
  }));
  return seq(stmts);
}

/// Whether a convolution takes the stride-1 path: the packed CPU strategy,
/// unit strides.
bool padded_path(GemmStrategy strategy, const ConvAttrs &a) {
  return strategy == gemm_cpu_packed && a.strides[0] == 1 && a.strides[1] == 1;
}

template <GemmStrategy strategy> StmtPtr conv2d_kernel(KernelCtx &k) {
  auto attrs = k.attrs_as<Conv2DAttrs>();
  ConvShape s(attrs);
  const Shape &xs = k.arg_type(0).shape, &ws = k.arg_type(1).shape;
  s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3], s.O = ws[0], s.KH = ws[2], s.KW = ws[3];
  s.OH = k.call.type.shape[2], s.OW = k.call.type.shape[3];
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  if (depthwise(strategy, s)) {
    int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3];
    std::vector<StmtPtr> stmts;
    BufferPtr xp = padded_copy(k, 0, s.p[0], s.p[1], Hp, Wp, 0, false, acc, stmts);
    stmts.push_back(depthwise_direct(k, s, xp, Hp, Wp, [&](const LExprPtr &o, int64_t kh, int64_t kw) {
      return cast(acc, k.in(1, {o, imm(0), imm(kh), imm(kw)}));
    }));
    return seq(stmts);
  }
  if (padded_path(strategy, attrs)) {
    int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3], K = s.Cg() * s.taps();
    std::vector<StmtPtr> stmts;
    BufferPtr xp = padded_copy(k, 0, s.p[0], s.p[1], Hp, Wp, s.d[0] * (s.KH - 1) * Wp + s.d[1] * (s.KW - 1), true, acc,
                               stmts);
    stmts.push_back(correlate_padded(k, xp, s.N, s.C, Hp, Wp, s.groups, s.KH, s.KW, s.d[0], s.d[1],
                                     [&](const LExprPtr &o, const LExprPtr &kk) { // w as (O, Cg·KH·KW)
                                       return cast(acc, k.in_flat(1, add(mul(o, imm(K)), kk)));
                                     }));
    return seq(stmts);
  }
  if (strategy == gemm_cpu_packed)
    return conv2d_strided(k, s, acc);
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
  return conv_product(k, strategy, p);
}

/// out[n, g·Og + o, oh, ow] = Σ x[n, g·Cg + c, ih, iw] w[g·Cg + c, o, kh, kw]
/// over the taps with oh = ih·s - pad + kh·d (ih whole and in range).
template <GemmStrategy strategy> StmtPtr conv2d_transpose_kernel(KernelCtx &k) {
  auto attrs = k.attrs_as<Conv2DTransposeAttrs>();
  ConvShape s(attrs);
  const Shape &xs = k.arg_type(0).shape, &ws = k.arg_type(1).shape, &os = k.call.type.shape;
  s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3], s.O = os[1], s.KH = ws[2], s.KW = ws[3];
  s.OH = os[2], s.OW = os[3];
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  if (depthwise(strategy, s) && padded_path(strategy, attrs)) {
    // stride 1: the correlation with the flipped kernel (below), depthwise:
    // out[n, c·m + j] reads channel c through w[c, j, KH-1-kh, KW-1-kw]
    int64_t top = s.d[0] * (s.KH - 1) - s.p[0], left = s.d[1] * (s.KW - 1) - s.p[1];
    int64_t Hp = s.OH + s.d[0] * (s.KH - 1), Wp = s.OW + s.d[1] * (s.KW - 1), m = s.Og();
    std::vector<StmtPtr> stmts;
    BufferPtr xp = padded_copy(k, 0, top, left, Hp, Wp, 0, false, acc, stmts);
    ConvShape flipped = s;
    flipped.s = {1, 1};
    stmts.push_back(depthwise_direct(k, flipped, xp, Hp, Wp, [&](const LExprPtr &o, int64_t kh, int64_t kw) {
      LExprPtr c = m == 1 ? o : binary(BinaryOp::FloorDiv, o, imm(m)), j = m == 1 ? imm(0) : binary(BinaryOp::FloorMod, o, imm(m));
      return cast(acc, k.in(1, {c, j, imm(s.KH - 1 - kh), imm(s.KW - 1 - kw)}));
    }));
    return seq(stmts);
  }
  if (strategy == gemm_cpu_packed && !padded_path(strategy, attrs))
    return conv2d_transpose_strided(k, s, acc);
  if (padded_path(strategy, attrs)) {
    // With stride 1 a transposed convolution is a correlation with the
    // flipped kernel, input and output channels swapped, on the data padded
    // by d·(K - 1) - pad (negative: cropped).
    int64_t top = s.d[0] * (s.KH - 1) - s.p[0], left = s.d[1] * (s.KW - 1) - s.p[1];
    int64_t Hp = s.OH + s.d[0] * (s.KH - 1), Wp = s.OW + s.d[1] * (s.KW - 1), K = s.Cg() * s.taps();
    std::vector<StmtPtr> stmts;
    BufferPtr xp = padded_copy(k, 0, top, left, Hp, Wp, s.d[0] * (s.KH - 1) * Wp + s.d[1] * (s.KW - 1), true, acc,
                               stmts);
    // wf[g·Og + o, (c, kh, kw)] = w[g·Cg + c, o, KH-1-kh, KW-1-kw]
    BufferPtr wf = k.scratch("flipped", acc, s.O * K);
    stmts.push_back(loop_nest({s.groups, s.Og(), s.Cg(), s.KH, s.KW}, [&](const Index &i) {
      LExprPtr at = add(mul(add(mul(add(mul(add(mul(i[0], imm(s.Og())), i[1]), imm(s.Cg())), i[2]), imm(s.KH)), i[3]),
                            imm(s.KW)), i[4]);
      LExprPtr src = k.in(1, {add(mul(i[0], imm(s.Cg())), i[2]), i[1], sub(imm(s.KH - 1), i[3]), sub(imm(s.KW - 1), i[4])});
      return store(wf, at, cast(acc, src));
    }));
    stmts.push_back(correlate_padded(k, xp, s.N, s.C, Hp, Wp, s.groups, s.KH, s.KW, s.d[0], s.d[1],
                                     [&](const LExprPtr &o, const LExprPtr &kk) { return load(wf, add(mul(o, imm(K)), kk)); }));
    return seq(stmts);
  }
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
  return conv_product(k, strategy, p);
}

/// dw[g·Og + o, c, kh, kw] = Σ_(n, oh, ow) dy[n, g·Og + o, oh, ow] · x[n, g·Cg + c, tap(oh, kh), tap(ow, kw)]
template <GemmStrategy strategy> StmtPtr conv2d_backward_weight_kernel(KernelCtx &k) {
  auto attrs = k.attrs_as<Conv2DBackwardWeightAttrs>();
  ConvShape s(attrs);
  const Shape &dys = k.arg_type(0).shape, &xs = k.arg_type(1).shape, &os = k.call.type.shape;
  s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3], s.O = os[0], s.KH = os[2], s.KW = os[3];
  s.OH = dys[2], s.OW = dys[3];
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  if (depthwise(strategy, s))
    return depthwise_backward_weight(k, s, dt, acc);
  if (padded_path(strategy, attrs))
    return backward_weight_padded(k, s, dt, acc);
  if (strategy == gemm_cpu_packed)
    return backward_weight_strided(k, s, dt, acc);
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
  return conv_product(k, strategy, p);
}

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
      .kernel(conv2d_kernel<gemm_nest>)
      .strategy(TargetKind::CPU, conv2d_kernel<gemm_cpu_packed>)
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
      .kernel(conv2d_transpose_kernel<gemm_nest>)
      .strategy(TargetKind::CPU, conv2d_transpose_kernel<gemm_cpu_packed>)
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
      .kernel(conv2d_backward_weight_kernel<gemm_nest>)
      .strategy(TargetKind::CPU, conv2d_backward_weight_kernel<gemm_cpu_packed>)
      .fuses_epilogue()
      .flops(conv2d_backward_weight_flops)
      .example("%g: Tensor[(2, 6, 6, 4), float64], %x: Tensor[(2, 4, 6, 5), float64]",
               "nn.conv2d_backward_weight(%g, %x, padding=[1, 0], groups=2, kernel_size=[3, 2])")
      .example("%g: Tensor[(1, 3, 4, 2), float64], %x: Tensor[(1, 2, 6, 5), float64]",
               "nn.conv2d_backward_weight(%g, %x, strides=2, padding=[1, 0], kernel_size=[2, 2])");
}

} // namespace gradc
