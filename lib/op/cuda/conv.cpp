//===- cuda/conv.cpp - the GPU's convolutions -----------------------------===//
//
// Each product an implicit GEMM tiled through shared memory (cuda/Gemm.cpp:
// the im2col gather computed as the operand slices are copied in; the loops
// around the products, batch and groups, more blocks), except that a product
// of few outputs and a long K (a weight gradient, K summing over every image
// and pixel) is split along K into tiled products of partial sums, summed
// after (gemm_cuda_split_k); where the outputs are too few for tiles, each is
// summed in chunks of K by threads of their own (gpu_split_sums): one thread
// per output left most of the device idle.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../conv.h"
#include "gradc/op/Registry.h"

#include <tuple>

namespace gradc {
namespace {

StmtPtr cuda_conv_product(KernelCtx &k, const ConvProduct &p) {
  if (StmtPtr split = gemm_cuda_split_k(k, p.loops, [&](const Index &at) { return conv_gemm(k, p, at); }))
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
