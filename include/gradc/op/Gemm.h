//===- Gemm.h - register-tiled matrix products in the loop IR -------------===//
//
// nn.dense and matmul describe their product as a Gemm and register one
// strategy per target (OpBuilder::strategy): the schedule-neutral nest
// (gemm_nest) is the generic kernel, and the CPU has a hand schedule
// (gemm_cpu_tiles) that reads the target's vector width:
//
//  * CPU, B contiguous along n (matmul): tiles of MR rows × NV columns held
//    in a local accumulator, k innermost-but-one and the column loop
//    vectorized. Every element still sums in k order, exactly as the plain
//    triple loop would.
//  * CPU, A and B contiguous along k (dense): MR × NR dot products at once,
//    each with VL partial sums along k that are added up in a fixed order at
//    the end. The order differs from a plain k loop but is fixed by the
//    shape, so a recomputed value is bitwise identical to the original.
//  * gemm_nest: Spatial m and n, a Reduce k loop in order; on the GPU one
//    thread per output element after binding.
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

  /// Products accumulate in the dtype's accumulator (float16 in float32).
  DType acc() const { return dtype_info(dtype).accumulator; }
  LExprPtr a_acc(const LExprPtr &m, const LExprPtr &k) const { return cast(acc(), a(m, k)); }
  LExprPtr b_acc(const LExprPtr &k, const LExprPtr &n) const { return cast(acc(), b(k, n)); }
};

/// C[m, n] = sum_k a(m, k) b(k, n) for m < M, n < N.
using GemmStrategy = StmtPtr (*)(KernelCtx &k, const Gemm &g);
/// The schedule-neutral nest.
StmtPtr gemm_nest(KernelCtx &k, const Gemm &g);
/// Register tiles for the CPU; the outermost (row-tile) loop is Parallel.
StmtPtr gemm_cpu_tiles(KernelCtx &k, const Gemm &g);

} // namespace gradc
