//===- TimeSums.h - a scan's captured adjoints summed after its loop ------===//
//
// The adjoint of a weight a scan's body captures is a sum over time of one
// term per step. When the term is a contraction over the rows of the step's
// values (the weight of nn.dense(%h, %W): matmul(transpose(%d_pre), %h); a
// bias: sum(%d_pre, axis=[0])), the sum over time is the same contraction
// over every step's rows at once:
//   sum_t d_pre[t]ᵀ h[t-1] = matmul(transpose(D), H)
// with D and H the steps' values stacked and their time and row axes merged.
// One product of K = (T-1) rows instead of T-1 products of a few rows each,
// and no accumulation kernel per step: what cuDNN's RNN does with its weight
// gradients. `plan_time_sums` finds such adjoints in a scan's vjp;
// grad.scan_backward then leaves them out (attribute `unsummed`) and returns
// the values the contraction needs that are not already histories (attribute
// `emitted`: returned stacked over time, as the sequences' adjoints are).
// The product runs after the loop, the same whatever the time checkpointing,
// so --remat=manual stays bitwise --remat=none.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <vector>

namespace gradc {

class Builder;

/// Where the steps of one operand of a time sum are, after the backward loop.
struct StepSource {
  enum Kind {
    State,    // a field of the states history (path: the projections), step t-1
    Sequence, // the vjp's per-step parameter `index` after the state (a sequence or a stored saved value), step t
    Adjoint,  // the backward's output field `index` (a sequence's adjoint, or an emitted value), step t
    Emitted,  // (while planning: emitted value `index`, an Adjoint once the fields are known)
  } kind = State;
  std::vector<int> path;
  size_t index = 0;
};

struct TimeSum {
  size_t captured = 0;         // which captured value's adjoint, among the captured values
  const OpDef *op = nullptr;   // matmul (of transpose(a) and b) or sum (over the rows of a)
  Attrs attrs;                 // the sum's
  StepSource a, b;             // b: matmul only
};

struct TimeSumPlan {
  FunctionPtr vjp;               // without the summed adjoints, returning `emitted` values after the others
  std::vector<TimeSum> sums;
  std::vector<ExprPtr> emitted;  // the vjp's values it returns for them (each an Adjoint source past the others)
};

/// The captured adjoints of `vjp` (parameters: the state, `per_step` step
/// values, the captured values, the state's adjoint; result: the adjoints
/// of the state if `float_state`, of the sequences flagged in `float_x`, of
/// the captured values flagged in `float_c`) that are contractions over the
/// step's rows. `states_whole`: every state is stored (no time
/// checkpointing), so a state operand is read from the states' history;
/// otherwise the vjp emits it. `stored`: which per-step parameters have a
/// history the backward can read (the sequences, stored saved values).
TimeSumPlan plan_time_sums(const Function &vjp, bool float_state, const std::vector<bool> &float_x,
                           const std::vector<bool> &float_c, const std::vector<bool> &stored, bool states_whole);

/// The histories of a backward over `steps` steps: the states, the per-step
/// parameters' sequences (null where none), and the backward's value.
struct StepHistories {
  ExprPtr states;
  std::vector<ExprPtr> sequences;
  ExprPtr backward;
  int64_t steps = 0;
};

/// The adjoint `sum` stands for: the contraction over every step's rows.
ExprPtr build_time_sum(Builder &b, const TimeSum &sum, const StepHistories &h);

} // namespace gradc
