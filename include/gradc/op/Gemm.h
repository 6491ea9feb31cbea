//===- Gemm.h - register-tiled matrix products in the loop IR -------------===//
//
// nn.dense and matmul both lower through lower_gemm, which picks a schedule
// for the target (a schedule per target, chosen at lowering):
//
//  * CPU, B contiguous along n (matmul): tiles of MR rows × NV columns held
//    in a local accumulator, k innermost-but-one and the column loop
//    vectorized. Every element still sums in k order, exactly as the plain
//    triple loop would.
//  * CPU, A and B contiguous along k (dense): MR × NR dot products at once,
//    each with VL partial sums along k that are added up in a fixed order at
//    the end. The order differs from a plain k loop but is fixed by the
//    shape, so a recomputed value is bitwise identical to the original.
//  * GPU: one thread per output element, summing in k order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Kernel.h"

namespace gradc {

struct Gemm {
  int64_t M = 0, N = 0, K = 0;
  DType dtype = DType::Float32;
  std::function<LExprPtr(const LExprPtr &m, const LExprPtr &k)> a;
  std::function<LExprPtr(const LExprPtr &k, const LExprPtr &n)> b;
  std::function<StmtPtr(const LExprPtr &m, const LExprPtr &n, const LExprPtr &value)> store;
  bool b_contiguous_in_k = false; // true for nn.dense's weight (N, K)
};

/// C[m, n] = sum_k a(m, k) b(k, n) for m < M, n < N; the outermost loop is
/// parallel.
StmtPtr lower_gemm(KernelCtx &k, const Gemm &g);

} // namespace gradc
