//===- SiblingSums.cpp - two sums over one shape in one pass --------------===//
//
// Part of the `fused` stage, before fusion. Two `sum`s over the same axes of
// tensors of one type that read a common value of that size,
//   %s = sum(%g, axis=[1], exclude=True)
//   %p = multiply(%g, %d)
//   %t = sum(%p, axis=[1], exclude=True)
// (a training batch norm's backward: Σ g and Σ g·(x - mean), each a pass over
// g and the data g is computed from) become one call that sums both as it
// reads,
//   %pair = sum_pair(%g, %p, axis=[1], exclude=True)
//   %s = %pair.0
//   %t = %pair.1
// at the later sum's place, so that fusion makes them one kernel reading the
// shared values once. The earlier sum moves down to the later one: only
// where nothing between them reads it, no checkpoint marker lies between
// them (the segments stay as marked) and the later one does not read it.
// Runs before in-place updates are ordered, which then place an update of a
// parameter after the pair's read of it.
//
// "Reads a common value": the tensors of the sums' input size at the leaves
// of their injective producers, those fusion may fuse into the sum (the
// adjoint g a convolution's kernel stores, the data x), searched a few
// bindings deep. Sums that share nothing are left apart: a pair would only
// keep the earlier one's inputs alive longer.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/op/attrs/reduce.h"
#include "gradc/support/Log.h"
#include "gradc/transform/Passes.h"

#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

constexpr int kMaxProducerDepth = 6; // bindings searched above a sum for what it reads

bool is_sum(const Expr &v) { return v.kind == ExprKind::Call && v.op == ops::sum && v.args[0]->kind == ExprKind::Var; }

/// Whether sums `a` and `b` reduce the same axes of tensors of one type.
bool same_reduction(const Expr &a, const Expr &b) {
  const Type &x = a.args[0]->type;
  if (!x.is_tensor() || !(x == b.args[0]->type) || !(a.type == b.type))
    return false;
  auto ra = call_attrs<ReduceAttrs>(a), rb = call_attrs<ReduceAttrs>(b);
  return ra.keepdims == rb.keepdims && ra.reduced(x.rank()) == rb.reduced(x.rank());
}

class SiblingSums {
public:
  explicit SiblingSums(const Function &fn) : fn_(fn) {
    for (const Binding &b : fn.body.bindings)
      bound_[b.var.get()] = b.value;
  }

  FunctionPtr run() {
    const std::vector<Binding> &body = fn_.body.bindings;
    // Each later sum takes the nearest earlier one it may pair with.
    std::unordered_map<size_t, size_t> partner; // later sum -> earlier sum
    std::unordered_set<size_t> taken;
    for (size_t j = 0; j < body.size(); ++j) {
      if (!is_sum(*body[j].value))
        continue;
      for (size_t i = j; i-- > 0;)
        if (!taken.count(i) && is_sum(*body[i].value) && pairs(i, j)) {
          partner[j] = i;
          taken.insert(i);
          taken.insert(j);
          break;
        }
    }
    if (partner.empty())
      return std::make_shared<Function>(fn_);
    std::vector<Binding> out;
    for (size_t j = 0; j < body.size(); ++j) {
      if (taken.count(j) && !partner.count(j))
        continue; // an earlier sum: bound with its partner below
      auto p = partner.find(j);
      if (p == partner.end()) {
        out.push_back(body[j]);
        continue;
      }
      const Binding &first = body[p->second], &second = body[j];
      std::vector<Binding> parts;
      Builder b(parts, second.value->span);
      b.call(ops::sum_pair, {first.value->args[0], second.value->args[0]}, second.value->attrs);
      // named after the two sums it makes (the kernel is %d_b_t_6_sum_pair)
      ExprPtr pair = make_var(first.var->name + "_" + second.var->name, {}, second.value->span, parts.back().var->type);
      parts.back().var = pair;
      b.get(pair, 0);
      parts.back().var = first.var;
      b.get(pair, 1);
      parts.back().var = second.var;
      log(LogLevel::Info, "sibling sums",
          "@" + fn_.name + ": %" + first.var->name + " and %" + second.var->name + " summed in one pass");
      out.insert(out.end(), parts.begin(), parts.end());
    }
    auto result = std::make_shared<Function>(fn_);
    result->body.bindings = std::move(out);
    return result;
  }

private:
  const Function &fn_;
  std::unordered_map<const Expr *, ExprPtr> bound_;

  /// Whether sum `i` may move down to sum `j` (i < j) and be summed with it.
  bool pairs(size_t i, size_t j) const {
    const std::vector<Binding> &body = fn_.body.bindings;
    const Expr &a = *body[i].value, &b = *body[j].value;
    if (!same_reduction(a, b))
      return false;
    const Expr *moved = body[i].var.get();
    for (size_t k = i + 1; k <= j; ++k) {
      const Expr &v = *body[k].value;
      if (v.kind == ExprKind::Call && v.op->checkpoint != CheckpointMarker::None)
        return false;
      for (const ExprPtr &u : free_vars(body[k].value))
        if (u.get() == moved)
          return false;
    }
    std::unordered_set<const Expr *> reads_a = reads(a.args[0]);
    for (const Expr *r : reads(b.args[0]))
      if (reads_a.count(r))
        return true;
    return false;
  }

  /// The tensors of `x`'s size or larger at the leaves of its injective
  /// producers, kMaxProducerDepth bindings up: what a sum of `x` reads.
  std::unordered_set<const Expr *> reads(const ExprPtr &x) const {
    std::unordered_set<const Expr *> found;
    int64_t size = num_elements(x->type.shape);
    std::function<void(const ExprPtr &, int)> walk = [&](const ExprPtr &v, int depth) {
      if (v->kind != ExprKind::Var || !v->type.is_tensor() || num_elements(v->type.shape) < size)
        return;
      auto it = bound_.find(v.get());
      const Expr *value = it == bound_.end() ? nullptr : it->second.get();
      if (!value || value->kind != ExprKind::Call || !value->op->injective(*value) || depth == kMaxProducerDepth) {
        found.insert(v.get());
        return;
      }
      for (const ExprPtr &arg : value->args)
        walk(arg, depth + 1);
    };
    walk(x, 0);
    return found;
  }
};

FunctionPtr pair_body(const Function &fn) { return SiblingSums(fn).run(); }

} // namespace

FunctionPtr pair_sibling_sums(const Function &fn) { return pair_body(*map_nested_functions(fn, pair_body)); }

} // namespace gradc
