//===- cuda/loss.cpp - the GPU's nn.nll_loss ------------------------------===//
//
// The loss's sum over its targets, and the mean's total weight in its
// backward operator, a warp each (cuda/Rows.cpp): every lane checks and sums
// its targets, then the lanes' sums by shuffles, where the generic kernels
// sum them on one thread. The loss per target ("none") and the scatter of
// the backward operator are data parallel already (a thread per element).
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../loss.h"
#include "gradc/op/Registry.h"
#include "gradc/op/attrs/loss.h"

namespace gradc {
namespace {

/// A warp's sums over every target of `s` (warp_accumulate): add_terms(tidx)
/// adds target tidx's terms into the `sums`, then() on lane 0 after.
StmtPtr warp_over_targets(KernelCtx &k, const NllShape &s, const std::vector<BufferPtr> &sums,
                          const std::function<StmtPtr(const Index &tidx)> &add_terms,
                          const std::function<StmtPtr()> &then) {
  return gpu_warp_rows(k, 1, [&](const LExprPtr &, const LExprPtr &lane, const LExprPtr &live) {
    return warp_accumulate(
        k, num_elements(s.target), lane, live, sums,
        [&](const LExprPtr &j) { return add_terms(unravel_index(j, s.target)); }, then);
  });
}

StmtPtr cuda_nll_loss(KernelCtx &k) {
  NllShape s(k.arg_type(0).shape);
  const std::string reduction = k.attrs_as<NllAttrs>().reduction;
  if (reduction == "none" || num_elements(s.target) < kWarpSize)
    return nll_loss_kernel(k);
  DType dt = k.out()->dtype, acc = dtype_info(dt).accumulator;
  BufferPtr loss = k.local("loss", acc), weight = k.local("weight", acc);
  LExprPtr zero = int_imm(0);
  return warp_over_targets(
      k, s, {loss, weight},
      [&](const Index &tidx) {
        LExprPtr w;
        LExprPtr l = nll_loss_at(k, s, tidx, &w);
        return seq({check_target(k, 1, s, tidx), store(loss, zero, add(load(loss, zero), cast(acc, l))),
                    store(weight, zero, add(load(weight, zero), cast(acc, w)))});
      },
      [&] {
        LExprPtr total = load(loss, zero);
        return store(k.out(), zero,
                     cast(dt, reduction == "mean" ? binary(BinaryOp::Div, total, load(weight, zero)) : total));
      });
}

StmtPtr cuda_nll_loss_backward(KernelCtx &k) {
  NllShape s(k.arg_type(1).shape);
  if (k.attrs_as<NllAttrs>().reduction != "mean" || num_elements(s.target) < kWarpSize)
    return nll_loss_backward_kernel(k);
  DType dt = k.out()->dtype, acc = dtype_info(dt).accumulator;
  BufferPtr weight = k.local("weight", acc), word = k.scratch("weight_total", acc, 1);
  LExprPtr zero = int_imm(0);
  StmtPtr total = warp_over_targets(
      k, s, {weight},
      [&](const Index &tidx) {
        auto [cls, counted] = nll_target(k, 2, s, tidx);
        LExprPtr w = select(counted, nll_weight(k, 3, cls, dt), constant_of(0, dt));
        return store(weight, zero, add(load(weight, zero), cast(acc, w)));
      },
      [&] { return store(word, zero, load(weight, zero)); });
  return seq({total, nll_loss_backward_scatter(k, load(word, zero))});
}

} // namespace

void register_cuda_loss(OpRegistry &reg) {
  reg.strategy("nn.nll_loss", TargetKind::CUDA, cuda_nll_loss);
  reg.strategy("grad.nll_loss_backward", TargetKind::CUDA, cuda_nll_loss_backward);
}

} // namespace gradc
