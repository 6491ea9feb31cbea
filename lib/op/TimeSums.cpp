//===- TimeSums.cpp - a scan's captured adjoints summed after its loop ----===//
//
// See op/TimeSums.h. A captured adjoint qualifies when the vjp computes it
// as matmul(transpose(%a, axes=[1, 0]), %b) of two matrices with the same
// rows, or as a sum of a matrix over its rows; each operand is then read
// from a history: the states' (when every state is stored), a sequence's, a
// sequence adjoint's, or one the vjp emits.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/TimeSums.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/op/Relations.h"
#include "gradc/op/attrs/reduce.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

bool is_matrix(const ExprPtr &e) { return e->type.is_tensor() && e->type.rank() == 2; }

class Planner {
public:
  Planner(const Function &vjp, bool float_state, const std::vector<bool> &float_x, const std::vector<bool> &stored,
          bool states_whole)
      : vjp_(vjp), stored_(stored), states_whole_(states_whole) {
    for (const Binding &b : vjp.body.bindings)
      def_[b.var.get()] = b.value.get();
    result_ = def_.count(vjp.body.result.get()) ? def_[vjp.body.result.get()] : nullptr;
    if (!ok())
      return;
    size_t field = float_state ? 1 : 0;
    for (size_t i = 0; i < float_x.size(); ++i)
      if (float_x[i]) {
        adjoint_field_[result_->args.at(field).get()] = field;
        ++field;
      }
  }

  bool ok() const { return result_ && result_->kind == ExprKind::Tuple; }
  const Expr *result() const { return result_; }

  /// The time sum that captured adjoint `var` is, if it is one.
  std::optional<TimeSum> sum_of(const ExprPtr &var) {
    const Expr *v = def_.count(var.get()) ? def_[var.get()] : nullptr;
    if (!v || v->kind != ExprKind::Call)
      return std::nullopt;
    TimeSum s;
    s.op = v->op;
    if (v->op == ops::matmul) {
      const Expr *t = def_.count(v->args[0].get()) ? def_[v->args[0].get()] : nullptr;
      if (!t || t->kind != ExprKind::Call || t->op != ops::transpose || !is_matrix(t->args[0]) ||
          !is_matrix(v->args[1]) || t->args[0]->type.shape[0] != v->args[1]->type.shape[0])
        return std::nullopt;
      auto a = source(t->args[0]), b = source(v->args[1]);
      if (!a || !b)
        return std::nullopt;
      s.a = *a, s.b = *b;
      return s;
    }
    if (v->op == ops::sum && is_matrix(v->args[0])) {
      auto r = call_attrs<ReduceAttrs>(*v);
      if (r.reduced(2) != std::vector<int64_t>{0})
        return std::nullopt;
      auto a = source(v->args[0]);
      if (!a)
        return std::nullopt;
      s.a = *a;
      s.attrs = v->attrs;
      return s;
    }
    return std::nullopt;
  }

  std::vector<ExprPtr> emitted; // the step values the vjp is to return for the sums

private:
  const Function &vjp_;
  std::vector<bool> stored_;
  bool states_whole_;
  std::unordered_map<const Expr *, const Expr *> def_;
  std::unordered_map<const Expr *, size_t> adjoint_field_;
  const Expr *result_ = nullptr;

  /// The state's projections leading to `e`, if `e` is a field of it.
  std::optional<std::vector<int>> state_path(const Expr *e) {
    std::vector<int> path;
    while (e != vjp_.params[0].get()) {
      auto it = def_.find(e);
      if (it == def_.end() || it->second->kind != ExprKind::TupleGet || it->second->args[0]->kind != ExprKind::Var)
        return std::nullopt;
      path.insert(path.begin(), it->second->index);
      e = it->second->args[0].get();
    }
    return path;
  }

  std::optional<StepSource> source(const ExprPtr &e) {
    if (e->kind != ExprKind::Var)
      return std::nullopt;
    auto adj = adjoint_field_.find(e.get());
    if (adj != adjoint_field_.end())
      return StepSource{StepSource::Adjoint, {}, adj->second};
    for (size_t i = 0; i < stored_.size(); ++i)
      if (e == vjp_.params[1 + i] && stored_[i])
        return StepSource{StepSource::Sequence, {}, i};
    if (states_whole_)
      if (auto path = state_path(e.get()))
        return StepSource{StepSource::State, *path, 0};
    // Any other step value (the pre-activation's adjoint, a state under time
    // checkpointing): the vjp returns it and the backward stacks it.
    size_t n = 0;
    for (; n < emitted.size() && emitted[n] != e; ++n) {
    }
    if (n == emitted.size())
      emitted.push_back(e);
    return StepSource{StepSource::Emitted, {}, n};
  }
};

/// `fn` returning `result`, without the bindings it no longer needs.
FunctionPtr with_result(const Function &fn, const ExprPtr &result) {
  auto out = std::make_shared<Function>(fn);
  out->body.bindings.clear();
  std::unordered_set<const Expr *> live;
  for (const ExprPtr &v : free_vars(result))
    live.insert(v.get());
  std::vector<Binding> kept;
  for (auto it = fn.body.bindings.rbegin(); it != fn.body.bindings.rend(); ++it)
    if (live.count(it->var.get())) {
      kept.push_back(*it);
      for (const ExprPtr &v : free_vars(it->value))
        live.insert(v.get());
    }
  out->body.bindings.assign(kept.rbegin(), kept.rend());
  out->body.bindings.push_back({make_var("t", result->type, {}, result->type), result, false});
  out->body.result = out->body.bindings.back().var;
  return out;
}

} // namespace

TimeSumPlan plan_time_sums(const Function &vjp, bool float_state, const std::vector<bool> &float_x,
                           const std::vector<bool> &float_c, const std::vector<bool> &stored, bool states_whole) {
  TimeSumPlan plan;
  plan.vjp = std::make_shared<Function>(vjp);
  Planner p(vjp, float_state, float_x, stored, states_whole);
  if (!p.ok())
    return plan;
  size_t first_cap = (float_state ? 1 : 0) + size_t(std::count(float_x.begin(), float_x.end(), true));
  std::vector<ExprPtr> fields(p.result()->args.begin(), p.result()->args.begin() + std::ptrdiff_t(first_cap));
  size_t field = first_cap;
  for (size_t j = 0; j < float_c.size(); ++j) {
    if (!float_c[j])
      continue;
    const ExprPtr &adjoint = p.result()->args.at(field++);
    std::optional<TimeSum> sum = adjoint->type.is_tensor() ? p.sum_of(adjoint) : std::nullopt;
    if (!sum) {
      fields.push_back(adjoint);
      continue;
    }
    sum->captured = j;
    plan.sums.push_back(*sum);
  }
  if (plan.sums.empty())
    return plan;
  // Emitted values come after the adjoints the backward still returns.
  size_t first_emitted = fields.size();
  for (TimeSum &s : plan.sums)
    for (StepSource *src : {&s.a, &s.b})
      if (src->kind == StepSource::Emitted)
        *src = StepSource{StepSource::Adjoint, {}, first_emitted + src->index};
  fields.insert(fields.end(), p.emitted.begin(), p.emitted.end());
  plan.emitted = p.emitted;
  plan.vjp = with_result(vjp, make_tuple(fields));
  return plan;
}

ExprPtr build_time_sum(Builder &b, const TimeSum &sum, const StepHistories &h) {
  // Steps 1..T-1 of a history (the state: 0..T-2, what step t starts from),
  // their time and row axes merged.
  auto rows = [&](const StepSource &src) {
    ExprPtr v;
    switch (src.kind) {
    case StepSource::State:
      v = h.states;
      for (int i : src.path)
        v = b.get(v, i);
      break;
    case StepSource::Sequence:
      v = h.sequences.at(src.index);
      break;
    case StepSource::Adjoint:
    case StepSource::Emitted: // (none once planned)
      v = b.get(h.backward, int(src.index));
      break;
    }
    // Merged first, then cropped: the product reads the history in place,
    // at an index affine in its rows.
    const Shape &s = v->type.shape;
    IntPairs crop(2, {0, 0});
    crop[0] = src.kind == StepSource::State ? std::array<int64_t, 2>{0, -s[1]} : std::array<int64_t, 2>{-s[1], 0};
    return b.pad(b.reshape(v, {h.steps * s[1], s[2]}), crop);
  };
  if (sum.op == ops::matmul)
    return b.call(ops::matmul, {b.transpose(rows(sum.a), {1, 0}), rows(sum.b)});
  return b.call(ops::sum, {rows(sum.a)}, sum.attrs);
}

} // namespace gradc
