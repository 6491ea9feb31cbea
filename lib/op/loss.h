//===- loss.h - nn.nll_loss's pieces for the targets' strategies ----------===//
//
// Internal to lib/op: what loss.cpp's kernels are made of, for a target's
// strategy (cuda/loss.cpp) to arrange differently.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Kernel.h"

#include <utility>

namespace gradc {

/// Index helpers shared by nll_loss and its backward operators: pred is
/// (N, C, d...) or (C), the target pred without its class axis.
struct NllShape {
  Shape pred, target;
  int64_t class_axis, C;
  explicit NllShape(const Shape &p) : pred(p) {
    class_axis = p.size() == 1 ? 0 : 1;
    C = p[class_axis];
    target = p;
    target.erase(target.begin() + class_axis);
  }
  Index pred_index(const Index &tidx, const LExprPtr &c) const {
    Index idx = tidx;
    idx.insert(idx.begin() + class_axis, c);
    return idx;
  }
};

/// The target (argument `target_arg`) at `tidx` as an in-range int64 class,
/// and whether it counts (it is not ignore_index).
std::pair<LExprPtr, LExprPtr> nll_target(const KernelCtx &k, size_t target_arg, const NllShape &s, const Index &tidx);
/// A counted target outside [0, C) reported through the function's status
/// (the entry point returns kStatusIndexOutOfRange); the kernels themselves
/// read the clamped class, so memory stays safe.
StmtPtr check_target(KernelCtx &k, size_t target_arg, const NllShape &s, const Index &tidx);
/// The class weight (argument `weight_arg`, 1 without one).
LExprPtr nll_weight(const KernelCtx &k, size_t weight_arg, const LExprPtr &cls, DType dt);
/// nn.nll_loss's loss at target `tidx` (0 where it does not count); its
/// weight into *weight (0 there too) when asked.
LExprPtr nll_loss_at(const KernelCtx &k, const NllShape &s, const Index &tidx, LExprPtr *weight);
/// grad.nll_loss_backward's data-parallel part: every prediction's gradient,
/// the mean's total weight given (1 otherwise).
StmtPtr nll_loss_backward_scatter(KernelCtx &k, const LExprPtr &total);

StmtPtr nll_loss_kernel(KernelCtx &k);
StmtPtr nll_loss_backward_kernel(KernelCtx &k);

} // namespace gradc
