//===- cuda/reduce.cpp - the GPU's sums -----------------------------------===//
//
// sum, mean and collapse_sum_to with few outputs and many terms (batch
// norm's sums per channel) split across threads (gpu_split_sums); outputs of
// a warp's worth of terms or more (the row statistics of layer and group
// norm, a softmax gradient's row sums) a warp each, summed by shuffles
// (cuda/Rows.cpp); otherwise the generic kernel, a thread per output.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../reduce.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {

StmtPtr cuda_sum(KernelCtx &k, const ReduceShape &shape, bool mean) {
  const ReduceShape r = merged_runs(shape);
  DType acc = dtype_info(k.out()->dtype).accumulator;
  if (StmtPtr split = gpu_split_sums(
          k, num_elements(r.out), r.count, acc,
          [&](const LExprPtr &o, const LExprPtr &i) { return reduced_element(k, r, unravel_index(o, r.out), i); },
          [&](const LExprPtr &o, const LExprPtr &total) { return store(k.out(), o, sum_value(k, r, mean, total)); }))
    return split;
  int64_t outputs = num_elements(r.out);
  if (r.count < kWarpSize || outputs == 0)
    return sum_kernel(k, r, mean);
  return gpu_warp_sums(
      k, outputs, r.count, acc,
      [&](const LExprPtr &o, const LExprPtr &i) { return reduced_element(k, r, unravel_index(o, r.out), i); },
      [&](const LExprPtr &o, const LExprPtr &total) { return store(k.out(), o, sum_value(k, r, mean, total)); });
}

} // namespace

void register_cuda_reduce(OpRegistry &reg) {
  reg.strategy("sum", TargetKind::CUDA, [](KernelCtx &k) { return cuda_sum(k, reduce_shape(k.call), false); });
  reg.strategy("mean", TargetKind::CUDA, [](KernelCtx &k) { return cuda_sum(k, reduce_shape(k.call), true); });
  reg.strategy("collapse_sum_to", TargetKind::CUDA,
               [](KernelCtx &k) { return cuda_sum(k, collapse_sum_shape(k), false); });
}

} // namespace gradc
