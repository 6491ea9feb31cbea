//===- cpu/reduce.cpp - the CPU's sums ------------------------------------===//
//
// sum, mean, sum_pair and collapse_sum_to with the outputs side by side in vector
// lanes where the input's innermost axis is kept (the lanes read along it)
// or the rows are too short for lanes of their own; otherwise the generic
// kernel (reduce.cpp), whose lanes run along each output's terms. Each
// output's terms are summed in the same order either way.
//
//===----------------------------------------------------------------------===//
#include "Cpu.h"
#include "../reduce.h"
#include "gradc/loops/Lanes.h"
#include "gradc/op/Registry.h"

#include <algorithm>

namespace gradc {
namespace {

StmtPtr cpu_sum(KernelCtx &k, const ReduceShape &shape, bool mean) {
  const ReduceShape r = merged_runs(shape);
  int64_t outputs = num_elements(r.out);
  bool innermost_kept = std::find(r.axes.begin(), r.axes.end(), int64_t(r.in.size()) - 1) == r.axes.end();
  if (outputs < 2 || !(innermost_kept || r.count < 2 * kSumLanes))
    return sum_kernel(k, r, mean);
  // Where the lanes read along the input's rows (a bias's gradient: column
  // sums of a 2080 x 1024 adjoint), a block is as wide as a core's share of
  // the row, up to the widest vector code (kMaxLanes): each row is read 256
  // bytes at a time, not 64 bytes per 4 KiB page (2.3 -> 0.24 ms on one
  // core).
  int64_t cores = k.target.cpu_tuning().cores;
  int64_t block = innermost_kept ? std::clamp<int64_t>(outputs / cores / kSumLanes * kSumLanes, kSumLanes, kMaxLanes)
                                 : kSumLanes;
  DType acc = dtype_info(k.out()->dtype).accumulator;
  return over_lane_blocks(
      k, outputs,
      [&](const LExprPtr &first, int64_t width) {
        auto at = [&](const LExprPtr &l) { return binary(BinaryOp::Add, first, l); };
        std::vector<LaneTermFn> terms; // sum_pair: argument j into output j
        for (size_t arg = 0; arg < k.outputs.size(); ++arg)
          terms.push_back([&, arg](const LExprPtr &l, const LExprPtr &i) {
            return reduced_element(k, r, unravel_index(at(l), r.out), i, arg);
          });
        return compensated_sums(k, width, r.count, acc, terms,
                                [&](const LExprPtr &l, const std::vector<LExprPtr> &totals) {
                                  std::vector<StmtPtr> stores;
                                  for (size_t j = 0; j < totals.size(); ++j)
                                    stores.push_back(store(k.out(j), at(l), sum_value(k, r, mean, totals[j], j)));
                                  return seq(std::move(stores));
                                });
      },
      block);
}

} // namespace

void register_cpu_reduce(OpRegistry &reg) {
  reg.strategy("sum", TargetKind::CPU, [](KernelCtx &k) { return cpu_sum(k, reduce_shape(k.call), false); });
  reg.strategy("mean", TargetKind::CPU, [](KernelCtx &k) { return cpu_sum(k, reduce_shape(k.call), true); });
  reg.strategy("sum_pair", TargetKind::CPU, [](KernelCtx &k) { return cpu_sum(k, reduce_shape(k.call), false); });
  reg.strategy("collapse_sum_to", TargetKind::CPU,
               [](KernelCtx &k) { return cpu_sum(k, collapse_sum_shape(k), false); });
}

} // namespace gradc
