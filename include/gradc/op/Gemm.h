//===- Gemm.h - matrix products in the loop IR ----------------------------===//
//
// nn.dense and matmul describe their product as a Gemm and register one
// strategy per target (OpBuilder::strategy): the schedule-neutral nest
// (gemm_nest) is the generic kernel, and the CPU has a blocked, packed
// schedule (gemm_cpu_packed) sized from the Target (vector width and
// registers, FMA, L1 size):
//
//  * One operand is read as vectors: per block of KC steps of k, each job
//    packs its panel of NR columns, laid out [k][NR], into a Local on its
//    thread's stack (sized to the L1; the packing absorbs any layout: x·wᵀ,
//    dyᵀ·x and dy·w alike, and pads the last panel with zeros). The other
//    operand is broadcast element by element where it lies, or, when many
//    panels reuse rows that lie a multiple of 4 KiB apart, from rows packed
//    once per K block into kernel scratch. B is packed unless packing A and
//    storing C transposed moves fewer elements (then Cᵀ = Bᵀ·Aᵀ is computed:
//    x·wᵀ with a small batch packs x, not w).
//  * The register micro-kernel holds MR × NR accumulators (NR one or two
//    vectors, MR filling the register file), adds one k step per iteration
//    with FMA where the target has it, and stores the tile; a later K block
//    reloads it. Every element is therefore summed in k order, each step
//    fused (or a multiply then an add without FMA): the order is fixed by the
//    shape and target, so a recomputed value is bitwise identical.
//  * Panels run on the thread pool (Parallel), packing included.
//  * With 32 vector registers (AVX-512), a small batch against a weight,
//    both contiguous along k (x·wᵀ with M <= 32), is instead 4 × 4 dot
//    products in VL lanes along k, the lanes added pairwise at the end
//    (gemm_dot): nothing packed, no broadcasts.
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
  /// Reads back what `store` wrote (a partial sum, when K is blocked).
  std::function<LExprPtr(const LExprPtr &m, const LExprPtr &n)> load;
  /// `store` applies a fused epilogue (KernelCtx::epilogue): it takes only
  /// final values. Partial sums of a blocked K then go through `store_raw`
  /// (the same place, no epilogue; `load` reads them back) where the output
  /// has the product's dtype, else into kernel scratch.
  bool epilogue = false;
  std::function<StmtPtr(const LExprPtr &m, const LExprPtr &n, const LExprPtr &value)> store_raw;
  bool a_contiguous_in_k = true;  // a packing-order hint only
  bool b_contiguous_in_k = false; // true for nn.dense's weight (N, K)
  /// b is computed, not loaded (a convolution's implicit im2col: index
  /// arithmetic, a select for the padding): the packed CPU schedule packs
  /// it, once per panel, rather than recompute it in the register tile.
  bool b_gathered = false;

  /// Products accumulate in the dtype's accumulator (float16 in float32).
  DType acc() const { return dtype_info(dtype).accumulator; }
  LExprPtr a_acc(const LExprPtr &m, const LExprPtr &k) const { return cast(acc(), a(m, k)); }
  LExprPtr b_acc(const LExprPtr &k, const LExprPtr &n) const { return cast(acc(), b(k, n)); }
};

/// C[m, n] = sum_k a(m, k) b(k, n) for m < M, n < N.
using GemmStrategy = StmtPtr (*)(KernelCtx &k, const Gemm &g);
/// The schedule-neutral nest.
StmtPtr gemm_nest(KernelCtx &k, const Gemm &g);
/// Packed panels and a register micro-kernel for the CPU (see above).
StmtPtr gemm_cpu_packed(KernelCtx &k, const Gemm &g);

} // namespace gradc
