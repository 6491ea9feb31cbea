//===- Gemm.h - matrix products in the loop IR ----------------------------===//
//
// nn.dense, matmul and the convolutions describe their products as a Gemm.
// The schedule-neutral nest (gemm_nest) is what their generic kernels emit;
// a target's strategy emits the same Gemm its own way (the CPU's packed
// panels: op/cpu/Cpu.h, gemm_cpu_packed).
//
//  gemm_nest: Spatial m and n, a Reduce k loop in order; on the GPU one
//  thread per output element after binding.
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
  /// `store` and `load` reach element (m, n) through an index that is not
  /// affine in n (a strided convolution's chunk of images: each column's
  /// image and pixel by a division): the packed CPU schedule keeps the
  /// partial sums of a blocked K in scratch and stores each element once.
  bool c_scattered = false;
  /// The kernel's only product, no loops around it (nn.dense, an unbatched
  /// matmul): a strategy may run it as phases of the kernel with scratch of
  /// their own (a GPU product split along K).
  bool alone = false;
  /// C += A·B: the sums start from what `load` reads, not from zero
  /// (Winograd's weight gradient adding chunk after chunk into its sums:
  /// their partial sums then stay where they are, no scratch of their own).
  bool accumulate = false;
  /// `batch` products of this one shape (Winograd's 16 positions), their
  /// functions above reading which one as var_ref(batch_index), a variable
  /// the strategy binds: gemm_nest loops over it; the packed CPU schedule
  /// runs every product's jobs in one parallel loop (one fork-join for all
  /// of them, not one each), its scratch one slice per product.
  int64_t batch = 1;
  LVarPtr batch_index;

  /// Products accumulate in the dtype's accumulator (float16 in float32).
  DType acc() const { return dtype_info(dtype).accumulator; }
  LExprPtr a_acc(const LExprPtr &m, const LExprPtr &k) const { return cast(acc(), a(m, k)); }
  LExprPtr b_acc(const LExprPtr &k, const LExprPtr &n) const { return cast(acc(), b(k, n)); }
};

/// C[m, n] = sum_k a(m, k) b(k, n) for m < M, n < N (each of the batch).
using GemmStrategy = StmtPtr (*)(KernelCtx &k, const Gemm &g);
/// The schedule-neutral nest.
StmtPtr gemm_nest(KernelCtx &k, const Gemm &g);

} // namespace gradc
