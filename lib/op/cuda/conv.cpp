//===- cuda/conv.cpp - the GPU's convolutions -----------------------------===//
//
// Each product an implicit GEMM tiled through shared memory (cuda/Gemm.cpp:
// the im2col gather computed as the operand slices are copied in; the loops
// around the products, batch and groups, more blocks), except that a product
// of few outputs and a long K (a weight gradient, K summing over every image
// and pixel) is split along K into tiled products of partial sums, summed
// after (split_k_product); where the outputs are too few for tiles, each is
// summed in chunks of K by threads of their own (gpu_split_sums): one thread
// per output left most of the device idle.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../conv.h"
#include "gradc/op/Registry.h"

#include <algorithm>
#include <tuple>

namespace gradc {
namespace {

/// Products that fill fewer blocks than this are split along K (a GPU has
/// 100 or more multiprocessors, each running two blocks of 256 at once).
constexpr int64_t kSplitKBlocks = 256;
/// The least depth of a split: 32 slices of 16.
constexpr int64_t kMinSplitDepth = 512;

/// A product whose tiles leave most of the device idle but whose K is long
/// (a weight gradient: few outputs, K over every image and pixel), split
/// along K: phase 1 computes each split's tile product (cuda/Gemm.cpp, the
/// splits and the loops around the product more blocks) into a scratch of
/// partial products, phase 2 sums each output's partials in split order
/// (no atomics: the same bits every run) and stores it. Operands are tiled
/// and reused across outputs, where a sum per output (gpu_split_sums) reads
/// them again for every output. Null where the tiles fill the device or K
/// is too short to split.
StmtPtr split_k_product(KernelCtx &k, const ConvProduct &p) {
  const int64_t loops = num_elements(p.loops);
  const int64_t tile = p.M >= 128 && p.N >= 128 ? 128 : 64; // gemm_cuda_tiled's
  const int64_t blocks = loops * ((p.M + tile - 1) / tile) * ((p.N + tile - 1) / tile);
  if (p.M < 32 || p.N < 32 || blocks * 2 > kSplitKBlocks || p.K < 2 * kMinSplitDepth)
    return nullptr;
  int64_t splits = std::min(kSplitKBlocks / blocks, p.K / kMinSplitDepth);
  const int64_t chunk = (p.K + splits - 1) / splits;
  splits = (p.K + chunk - 1) / chunk;
  const DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  BufferPtr partial = k.scratch("split_partials", acc, splits * loops * p.M * p.N);
  Shape outer = p.loops;
  outer.push_back(splits);
  StmtPtr products = loop_nest(
      outer,
      [&](const Index &at_split) {
        Index at(at_split.begin(), at_split.end() - 1);
        LExprPtr split = at_split.back(), l = flat_index(p.loops, at);
        // Depth kk of this split is depth split * chunk + kk of the product, zero past K.
        auto depth = [&](const LExprPtr &kk) { return add(mul(split, int_imm(chunk)), kk); };
        auto within = [&](const LExprPtr &kk, const LExprPtr &v) {
          return select(compare(CompareOp::LT, depth(kk), int_imm(p.K)), v, constant_of(0, acc));
        };
        auto clamped = [&](const LExprPtr &kk) { return binary(BinaryOp::Min, depth(kk), int_imm(p.K - 1)); };
        Gemm g;
        g.M = p.M;
        g.N = p.N;
        g.K = chunk;
        g.dtype = acc;
        g.a_contiguous_in_k = p.a_contiguous_in_k;
        g.b_contiguous_in_k = p.b_contiguous_in_k;
        g.b_gathered = true;
        g.a = [&](const LExprPtr &m, const LExprPtr &kk) { return within(kk, p.a(at, m, clamped(kk))); };
        g.b = [&](const LExprPtr &kk, const LExprPtr &n) { return within(kk, p.b(at, clamped(kk), n)); };
        auto slot = [&](const LExprPtr &m, const LExprPtr &n) {
          return add(mul(add(mul(add(mul(split, int_imm(loops)), l), int_imm(p.M)), m), int_imm(p.N)), n);
        };
        g.store = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) { return store(partial, slot(m, n), v); };
        g.load = [&](const LExprPtr &m, const LExprPtr &n) { return load(partial, slot(m, n)); };
        return gemm_cuda_tiled(k, g);
      },
      ForKind::Spatial);
  Shape outputs = p.loops;
  outputs.insert(outputs.end(), {p.M, p.N});
  StmtPtr sums = loop_nest(
      outputs,
      [&](const Index &o) {
        Index at(o.begin(), o.end() - 2);
        const LExprPtr &m = o[o.size() - 2], &n = o.back();
        LExprPtr flat = flat_index(outputs, o);
        BufferPtr total = k.local("split_total", acc);
        LVarPtr sp = k.var("split");
        LExprPtr zero = int_imm(0);
        return alloc(total, seq({store(total, zero, constant_of(0, acc)),
                                 for_loop(sp, splits, ForKind::Reduce,
                                          store(total, zero,
                                                add(load(total, zero),
                                                    load(partial, add(mul(var_ref(sp), int_imm(loops * p.M * p.N)), flat))))),
                                 k.put(p.out_index(at, m, n), p.out_flat(at, m, n), cast(dt, load(total, zero)))}));
      },
      ForKind::Spatial);
  return seq({products, sums});
}

StmtPtr cuda_conv_product(KernelCtx &k, const ConvProduct &p) {
  if (StmtPtr split = split_k_product(k, p))
    return split;
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
            return k.put(p.out_index(at, m, n), p.out_flat(at, m, n), cast(dt, total));
          }))
    return split;
  return conv_products(k, p, gemm_cuda_tiled);
}

} // namespace

void register_cuda_conv(OpRegistry &reg) {
  reg.strategy("nn.conv2d", TargetKind::CUDA, [](KernelCtx &k) { return conv2d_as_products(k, cuda_conv_product); });
  reg.strategy("nn.conv2d_transpose", TargetKind::CUDA,
               [](KernelCtx &k) { return conv2d_transpose_as_products(k, cuda_conv_product); });
  reg.strategy("nn.conv2d_backward_weight", TargetKind::CUDA,
               [](KernelCtx &k) { return conv2d_backward_weight_as_products(k, cuda_conv_product); });
}

} // namespace gradc
