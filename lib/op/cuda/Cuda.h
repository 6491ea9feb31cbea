//===- Cuda.h - the GPU's strategies (internal to lib/op) -----------------===//
//
// The operator families' CUDA kernels live in this folder, one file per
// family, each registering its strategies with the registry
// (OpRegistry::strategy) from its register_cuda_* function; the definitions
// in lib/op never test the target. A GPU kernel is one loop nest whose
// data-parallel loops lower/BindGpu.cpp maps to threads: these strategies
// give it enough parallel work (or one nest where the generic kernel has
// several). A strategy may also bind its nest itself (LoopIR.h, GPU kernels:
// a block loop, shared memory, barriers, shuffles), as the tiled products do.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Gemm.h"
#include "gradc/op/Kernel.h"

namespace gradc {

class OpRegistry;

/// `outputs` sums of `count` terms each, where there are too few outputs to
/// fill the device with one thread each and many terms (batch norm's sums
/// per channel over N x H x W, a weight gradient's over every pixel): each
/// sum in fixed chunks, a block of 256 threads per chunk reading adjacent
/// terms and summing them as a tree of shuffles, into a scratch row of
/// partial sums, then the partials of each output summed by a warp: two
/// phases of one kernel (the GPU binding launches each on its own; one where
/// every output is one chunk). Null where one thread per output is enough.
/// term(o, r): term r of output o (a flat output index); then(o, total).
using OutputTermFn = std::function<LExprPtr(const LExprPtr &o, const LExprPtr &r)>;
StmtPtr gpu_split_sums(KernelCtx &k, int64_t outputs, int64_t count, DType acc, const OutputTermFn &term,
                       const std::function<StmtPtr(const LExprPtr &o, const LExprPtr &total)> &then);

/// C = A B tiled through shared memory: a block of 256 threads per 128 x 128
/// tile of C (64 x 64 where M or N is smaller), an 8 x 8 (4 x 4) register
/// tile per thread, K in slices of 8 (16), the next slice fetched into
/// registers while the current one is multiplied (see cuda/Gemm.cpp). A
/// product too small for a tile (M or N under 32) is the generic nest, a
/// thread per output.
StmtPtr gemm_cuda_tiled(KernelCtx &k, const Gemm &g);

/// Products whose tiles fill few blocks but whose K is long (weight
/// gradients: few outputs, K over every image and pixel, or every token),
/// split along K: phase 1 computes each split's tiled product
/// (gemm_cuda_tiled; the splits, and the loops around the product, more
/// blocks) into kernel scratch, phase 2 sums each output's partials in split
/// order (no atomics: the same bits every run) and stores it with the
/// product's own store. `loops` are the Spatial loops around the products,
/// gemm_at(at) the product at their index `at` (its functions capturing
/// `at` by value). Null where the tiles fill the device or K is too short.
StmtPtr gemm_cuda_split_k(KernelCtx &k, const Shape &loops, const std::function<Gemm(const Index &at)> &gemm_at);
/// The GPU's product: split along K where it is alone in its kernel and
/// that pays (gemm_cuda_split_k), else tiled.
StmtPtr gemm_cuda(KernelCtx &k, const Gemm &g);

/// The threads of one warp (every NVIDIA GPU's) and of a row kernel's block.
constexpr int64_t kWarpSize = 32, kGpuRowThreads = 256;

/// A kernel that gives each of `rows` rows a warp, 8 warps to a block of
/// 256 threads (fewer where there are fewer rows): body(row, lane, live) runs on every thread, `row` clamped to
/// the last (the warps past it compute it again, their shuffles needed by
/// nothing but the rule that a warp shuffles together), `live` false there:
/// every store goes under it.
using WarpRowFn = std::function<StmtPtr(const LExprPtr &row, const LExprPtr &lane, const LExprPtr &live)>;
StmtPtr gpu_warp_rows(KernelCtx &k, int64_t rows, const WarpRowFn &body);
/// acc[0] reduced by `op` over the warp's 32 lanes, the same bits on every
/// lane: five shuffles toward lane 0 (lane l adds lane l + 16, then l + 8,
/// ...), then lane 0's result shuffled to all.
StmtPtr warp_all_reduce(const BufferPtr &acc, BinaryOp op, const LExprPtr &lane);
/// body(j) for a lane's positions of a row of n: j = lane, lane + 32, ...
/// below n (a lane's own order).
StmtPtr warp_row_loop(KernelCtx &k, int64_t n, const LExprPtr &lane, const std::function<StmtPtr(const LExprPtr &j)> &body);
/// A warp's sums over `count` positions (each a Local of one element): each
/// zeroed, add_terms(j) for the lane's positions j (warp_row_loop), each
/// summed over the lanes by shuffles, then then() on lane 0 where `live`.
StmtPtr warp_accumulate(KernelCtx &k, int64_t count, const LExprPtr &lane, const LExprPtr &live,
                        const std::vector<BufferPtr> &sums, const std::function<StmtPtr(const LExprPtr &j)> &add_terms,
                        const std::function<StmtPtr()> &then);
/// `outputs` sums of `count` terms each in `acc`, a warp per output
/// (gpu_warp_rows): each lane's positions (warp_row_loop), then the lanes'
/// sums by shuffles; then(o, total) on lane 0 of a live row.
StmtPtr gpu_warp_sums(KernelCtx &k, int64_t outputs, int64_t count, DType acc, const OutputTermFn &term,
                      const std::function<StmtPtr(const LExprPtr &o, const LExprPtr &total)> &then);

void register_cuda_conv(OpRegistry &reg);
void register_cuda_loss(OpRegistry &reg);
void register_cuda_linear(OpRegistry &reg);
void register_cuda_softmax(OpRegistry &reg);
void register_cuda_reduce(OpRegistry &reg);
void register_cuda_slice(OpRegistry &reg);
void register_cuda_index(OpRegistry &reg);
void register_cuda_scan(OpRegistry &reg);

/// Every CUDA strategy, in the registry being built.
inline void register_cuda_strategies(OpRegistry &reg) {
  register_cuda_conv(reg);
  register_cuda_linear(reg);
  register_cuda_loss(reg);
  register_cuda_softmax(reg);
  register_cuda_reduce(reg);
  register_cuda_slice(reg);
  register_cuda_index(reg);
  register_cuda_scan(reg);
}

} // namespace gradc
