//===- softmax.h - softmax's arithmetic, for the strategies ---------------===//
//
// Internal to lib/op (softmax.cpp defines nn.softmax and nn.log_softmax).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Kernel.h"

namespace gradc {

/// What a row's output is made of, in the dtype's accumulator `at`
/// (float16 rows are computed in float32, as PyTorch does), rounded to the
/// output dtype `dt` once.
struct SoftmaxMath {
  SoftmaxMath(const KernelCtx &k, bool log);
  bool log;
  DType dt, at;
  /// The rows: the input's shape, the axis, its extent n, how many rows
  /// (0 when n is), the shape without the axis.
  Shape shape, outer;
  int64_t axis, n, rows;
  /// The index of element j of row `row` (a flat index over `outer`).
  Index at_row(const LExprPtr &row, const LExprPtr &j) const;
  /// softmax in the accumulator dtype writes each exp as it sums it, then
  /// scales it in place: one exp per element, not two, and three passes.
  bool write_exp;
  /// out_j from x_j - m and s' = finish_sum(s): x_j - m - s' (log_softmax)
  /// or exp(x_j - m) · s' (written: the exp stored by the sum's pass) — a
  /// multiply per element where a divide cost about a cycle each (softmax
  /// of 4096 x 1024: 3.6 -> 3.3 ms); within an ulp of the quotient.
  LExprPtr finalize(const LExprPtr &shifted, const LExprPtr &written, const LExprPtr &sum) const;
  /// log(s) for log_softmax, 1 / s for softmax.
  LExprPtr finish_sum(const LExprPtr &total) const;
};

/// m = max_j x_j; s = sum_j exp(x_j - m); out_j = finalize(x_j - m, s) per
/// row, both reductions in lanes along the row.
StmtPtr softmax_kernel(KernelCtx &k, bool log);

} // namespace gradc
