//===- cuda/reduce.cpp - the GPU's sums -----------------------------------===//
//
// sum, mean, sum_pair and collapse_sum_to with few outputs and many terms
// (batch norm's sums per channel) split across threads (gpu_split_sums);
// outputs of a warp's worth of terms or more (the row statistics of layer
// and group norm, a softmax gradient's row sums) a warp each, summed by
// shuffles (cuda/Rows.cpp); otherwise the generic kernel, a thread per
// output. sum_pair's two sums run one after the other, as two sums did.
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
  int64_t outputs = num_elements(r.out);
  // sum_pair: argument j into output j, a sum (its phases) after the other
  auto each = [&](const std::function<StmtPtr(const OutputTermFn &term,
                                              const std::function<StmtPtr(const LExprPtr &, const LExprPtr &)> &put)> &f) {
    std::vector<StmtPtr> sums;
    for (size_t j = 0; j < k.outputs.size(); ++j) {
      StmtPtr s = f(
          [&, j](const LExprPtr &o, const LExprPtr &i) { return reduced_element(k, r, unravel_index(o, r.out), i, j); },
          [&, j](const LExprPtr &o, const LExprPtr &total) { return store(k.out(j), o, sum_value(k, r, mean, total, j)); });
      if (!s)
        return StmtPtr();
      if (s->kind == StmtKind::Seq) // phases stay phases of the kernel, each a launch
        sums.insert(sums.end(), s->seq.begin(), s->seq.end());
      else
        sums.push_back(s);
    }
    return sums.size() == 1 ? sums[0] : seq(std::move(sums));
  };
  if (StmtPtr split = each([&](const OutputTermFn &term, const auto &put) {
        return gpu_split_sums(k, outputs, r.count, acc, term, put);
      }))
    return split;
  if (r.count < kWarpSize || outputs == 0)
    return sum_kernel(k, r, mean);
  return each([&](const OutputTermFn &term, const auto &put) {
    return gpu_warp_sums(k, outputs, r.count, acc, term, put);
  });
}

} // namespace

void register_cuda_reduce(OpRegistry &reg) {
  reg.strategy("sum", TargetKind::CUDA, [](KernelCtx &k) { return cuda_sum(k, reduce_shape(k.call), false); });
  reg.strategy("mean", TargetKind::CUDA, [](KernelCtx &k) { return cuda_sum(k, reduce_shape(k.call), true); });
  reg.strategy("sum_pair", TargetKind::CUDA, [](KernelCtx &k) { return cuda_sum(k, reduce_shape(k.call), false); });
  reg.strategy("collapse_sum_to", TargetKind::CUDA,
               [](KernelCtx &k) { return cuda_sum(k, collapse_sum_shape(k), false); });
}

} // namespace gradc
