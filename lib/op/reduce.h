//===- reduce.h - the shape of a sum, for the strategies ------------------===//
//
// Internal to lib/op. sum, mean and collapse_sum_* lower through
// sum_kernel (reduce.cpp: one compensated sum per output); the targets'
// strategies (cpu/reduce.cpp, cuda/reduce.cpp) arrange the same sums their
// own way and fall back to it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Builder.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/attrs/reduce.h"

namespace gradc {

struct ReduceShape {
  Shape in, out;
  std::vector<int64_t> axes;
  bool keepdims;
  int64_t count; // elements reduced into each output
  /// The argument's own shape where `in` is a view of it (merged_runs);
  /// empty where `in` is the argument's shape.
  Shape data;
};

/// The same reduction over the input with each run of adjacent axes that
/// are all reduced or all kept merged into one (batch norm's sums over
/// (N, H, W) of (N, C, H, W): over (N, H·W) of (N, C, H·W)), the output laid
/// out as before: the reduced elements keep their row-major order, and the
/// innermost reduced axis is as long as it can be, so the kernels read it a
/// vector at a time. Kernels only: a gradient rule reads the call's shapes.
ReduceShape merged_runs(const ReduceShape &r);
/// Input element `idx` (an index of r.in) of argument `arg`.
LExprPtr reduce_input(KernelCtx &k, const ReduceShape &r, const Index &idx, size_t arg = 0);

/// The reduction a sum, mean, max, min, argmax or argmin call makes.
ReduceShape reduce_shape(const Expr &call);
/// collapse_sum_to/_like's: the leading axes and those of size 1 in the
/// output summed away, into an output laid out as the input with them kept.
ReduceShape collapse_sum_shape(const KernelCtx &k);

/// Element `flat` (row-major over the reduced axes) of output `oidx`'s terms,
/// in argument `arg`.
LExprPtr reduced_element(KernelCtx &k, const ReduceShape &r, const Index &oidx, const LExprPtr &flat,
                         size_t arg = 0);
/// The value stored for a sum's `total` into output `out`: divided by the
/// count for a mean, rounded to the output dtype once.
LExprPtr sum_value(const KernelCtx &k, const ReduceShape &r, bool mean, const LExprPtr &total, size_t out = 0);

/// sum and mean: a compensated sum per output element in the dtype's
/// accumulator (float16 sums in float32), in lanes along the input's rows
/// where the reduced axes end with it. A call with several outputs
/// (sum_pair) sums argument j into output j, every sum's terms in one loop.
StmtPtr sum_kernel(KernelCtx &k, const ReduceShape &r, bool mean);

/// variance's mean of `x`: mean(x) over its axes, reshaped with them kept.
/// Its composition, its gradient rule and the norms built on it (norm.cpp)
/// all write it so, one call after common-subexpression elimination.
ExprPtr variance_mean(Builder &b, const ExprPtr &x, const VarianceAttrs &a);

} // namespace gradc
