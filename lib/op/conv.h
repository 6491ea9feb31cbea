//===- conv.h - a convolution's shape and its product, for the strategies ===//
//
// Internal to lib/op. conv.cpp defines the convolutions (relations,
// gradients, the generic kernels: each a matrix product per (batch index,
// group) through a ConvProductFn); the targets' strategies (cpu/conv.cpp,
// cuda/conv.cpp) read the same shapes and either supply the product's
// schedule or emit their own kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/attrs/conv.h"
#include "gradc/op/Gemm.h"
#include "gradc/op/Kernel.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace gradc {


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
  /// The outputs [first, last) along `axis` (of `out`) whose tap `t` lies
  /// inside data of extent n: o·s + t·d - pad in [0, n); first == last where none does.
  std::pair<int64_t, int64_t> inside_outputs(int axis, int64_t t, int64_t n, int64_t out) const {
    int64_t at = t * d[axis] - p[axis];
    return outputs_reading_inside(s[axis], at, at, n, out);
  }
  /// x[n, c, tap(oh, kh), tap(ow, kw)], zero in the padding.
  LExprPtr data_at(const KernelCtx &k, size_t arg, const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh,
                   const LExprPtr &ow, const LExprPtr &kh, const LExprPtr &kw, DType acc) const {
    LExprPtr ih = tap(0, oh, kh), iw = tap(1, ow, kw);
    LExprPtr inside = both(in_range(ih, 0, H), in_range(iw, 0, W));
    return select(inside, cast(acc, k.in(arg, {n, c, clamp_index(ih, H), clamp_index(iw, W)})), constant_of(0, acc));
  }
};

/// Splits a flat (channel, kh, kw) row index.
struct TapIndex {
  LExprPtr c, kh, kw;
  TapIndex(const LExprPtr &k, int64_t KH, int64_t KW) {
    if (KH * KW == 1) { // k is the channel: no division, so a product sees its operand's step along k
      c = k, kh = kw = imm(0);
      return;
    }
    c = binary(BinaryOp::FloorDiv, k, imm(KH * KW));
    LExprPtr t = binary(BinaryOp::FloorMod, k, imm(KH * KW));
    kh = binary(BinaryOp::FloorDiv, t, imm(KW));
    kw = binary(BinaryOp::FloorMod, t, imm(KW));
  }
};

/// An output pixel (oh, ow) from its flat index.
inline std::pair<LExprPtr, LExprPtr> pixel(const LExprPtr &p, int64_t OW) {
  return {binary(BinaryOp::FloorDiv, p, imm(OW)), binary(BinaryOp::FloorMod, p, imm(OW))};
}

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

/// Emits one ConvProduct: the generic nest (conv_product_nest) or a
/// target's schedule of it.
using ConvProductFn = StmtPtr (*)(KernelCtx &k, const ConvProduct &p);

/// Each product of `p` as the schedule-neutral Gemm nest (Spatial loops).
StmtPtr conv_product_nest(KernelCtx &k, const ConvProduct &p);
/// The product of `p` at index `at` of its loops, as a Gemm (its functions
/// hold `at`, and refer to `k` and `p`, which must outlive it).
Gemm conv_gemm(KernelCtx &k, const ConvProduct &p, const Index &at);
/// Each product of `p` as a Gemm that `strategy` emits, inside Spatial
/// loops over p.loops.
StmtPtr conv_products(KernelCtx &k, const ConvProduct &p, GemmStrategy strategy);

/// The shape of the call being lowered, in conv2d's terms.
ConvShape conv2d_shape(const KernelCtx &k);
ConvShape conv2d_transpose_shape(const KernelCtx &k);
ConvShape conv2d_backward_weight_shape(const KernelCtx &k);

/// Each convolution as its products (the im2col read through index
/// arithmetic), each emitted by `product`: the generic kernels with
/// conv_product_nest.
StmtPtr conv2d_as_products(KernelCtx &k, ConvProductFn product);
StmtPtr conv2d_transpose_as_products(KernelCtx &k, ConvProductFn product);
StmtPtr conv2d_backward_weight_as_products(KernelCtx &k, ConvProductFn product);

} // namespace gradc
