//===- TypeInfer.cpp - type inference through operator relations ----------===//
//
// The first pass after parsing. It rebuilds every node with its type: each
// call is checked by op/Check.h (arity, attributes, relation). An expression
// with an Unknown input is Unknown itself and reports nothing, so every
// independent error is reported exactly once.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/TypeInfer.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Check.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

class TypeInferencer : public ExprMutator {
public:
  TypeInferencer(const Module &m, DiagEngine &diag, std::unordered_map<const Function *, FunctionPtr> &typed,
                 std::set<const Function *> &in_progress)
      : module_(m), diag_(diag), typed_(typed), in_progress_(in_progress) {
    report_ = [this](Span s, const std::string &msg) { diag_.error(s, msg); };
  }

  /// The typed version of `fn` (memoized per Function: a callee is typed first).
  FunctionPtr function(const Function &fn) {
    if (auto it = typed_.find(&fn); it != typed_.end())
      return it->second;
    in_progress_.insert(&fn);
    FunctionPtr out = TypeInferencer(module_, diag_, typed_, in_progress_).mutate_function(fn);
    const Type &result = out->body.result->type;
    if (result.is_function())
      diag_.error(out->body.result->span, "@" + fn.name + " returns a `fn` value: a fn can only be the body of scan");
    if (!fn.ret_type.is_unknown() && !result.has_unknown() && result != fn.ret_type)
      diag_.error(fn.span, "@" + fn.name + ": declared return type " + fn.ret_type.str() + " but the body has type " +
                               result.str());
    if (!result.has_unknown())
      check_inplace(*out);
    in_progress_.erase(&fn);
    return typed_[&fn] = out;
  }

  /// inplace_indices: one entry per result leaf, each -1 or a parameter of
  /// the leaf's type, no parameter twice.
  void check_inplace(const Function &fn) {
    const std::vector<int64_t> &inplace = fn.attrs.inplace;
    if (inplace.empty())
      return;
    std::vector<Type> leaves = leaf_types(fn.body.result->type);
    Span at = fn.attrs.inplace_span;
    if (inplace.size() != leaves.size()) {
      diag_.error(at, "inplace_indices of @" + fn.name + " has " + std::to_string(inplace.size()) +
                          " entries, but its result has " + std::to_string(leaves.size()) +
                          " leaves (one entry per leaf: a parameter's index, or -1)");
      return;
    }
    std::vector<int> taken(fn.params.size(), -1);
    for (size_t i = 0; i < inplace.size(); ++i) {
      int64_t p = inplace[i];
      if (p == -1)
        continue;
      if (p < -1 || p >= int64_t(fn.params.size())) {
        diag_.error(at, "inplace_indices[" + std::to_string(i) + "] is " + std::to_string(p) + ": @" + fn.name +
                            " has " + std::to_string(fn.params.size()) + " parameters (-1: a result of its own)");
        continue;
      }
      const ExprPtr &param = fn.params[size_t(p)];
      if (taken[size_t(p)] >= 0)
        diag_.error(at, "inplace_indices writes results " + std::to_string(taken[size_t(p)]) + " and " +
                            std::to_string(i) + " both into %" + param->name);
      else if (param->type != leaves[i])
        diag_.error(at, "inplace_indices[" + std::to_string(i) + "] writes a result of type " + leaves[i].str() +
                            " into %" + param->name + " of type " + param->type.str());
      taken[size_t(p)] = int(i);
    }
  }

protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    ExprPtr value = mutate(b.value);
    Type t = value->type;
    if (!b.var->annotation.is_unknown() && !t.has_unknown() && t != b.var->annotation) {
      diag_.error(b.var->span, "%" + b.var->name + " is annotated " + b.var->annotation.str() +
                                   " but its value has type " + t.str());
      t = b.var->annotation;
    }
    ExprPtr var = make_var(b.var->name, b.var->annotation, b.var->span, t);
    remap(b.var, var);
    out.push_back({var, value, b.is_let});
  }

  /// Parameters of a `fn` without annotation, typed by the operator it is
  /// the body of (OpDef::fn_params), while that fn is being typed.
  ExprPtr mutate_param(const ExprPtr &p) override {
    if (auto it = param_types_.find(p.get()); it != param_types_.end())
      return make_var(p->name, p->annotation, p->span, it->second);
    if (p->annotation.is_unknown())
      diag_.error(p->span, "parameter '%" + p->name + "' needs a type annotation (only the body of scan, written " +
                               "inline, may leave its parameters' types to the arguments)");
    return p;
  }

  ExprPtr on_call(const ExprPtr &e) override {
    if (e->op->takes_fn() && !e->args.empty() && e->args[0]->kind == ExprKind::Func)
      return call_with_body(e);
    // A call written with an alias (permute_dims for transpose) is reported
    // under the name the user wrote: the call's span is that name.
    const std::string &text = diag_.file()->text();
    const std::vector<std::string> &aliases = e->op->aliases;
    if (aliases.empty() || e->span.end > text.size())
      return check_call(e->op, mutated_args(*e), e->attrs, e->span, report_);
    std::string written = text.substr(e->span.begin, e->span.end - e->span.begin);
    if (std::find(aliases.begin(), aliases.end(), written) == aliases.end())
      return check_call(e->op, mutated_args(*e), e->attrs, e->span, report_);
    std::string prefix = e->op->name + ": ";
    Report as_written = [&](Span s, const std::string &msg) {
      report_(s, msg.compare(0, prefix.size(), prefix) ? msg : written + ": " + msg.substr(prefix.size()));
    };
    return check_call(e->op, mutated_args(*e), e->attrs, e->span, as_written);
  }

  ExprPtr on_tuple(const ExprPtr &e) override {
    std::vector<ExprPtr> fields = mutated_args(*e);
    for (const ExprPtr &f : fields)
      if (f->type.is_function())
        diag_.error(f->span, "a `fn` value cannot be a tuple field (it can only be the body of scan)");
    return make_tuple(std::move(fields), e->span);
  }

  ExprPtr on_tuple_get(const ExprPtr &e) override {
    return check_tuple_get(mutate(e->args[0]), e->index, e->span, report_);
  }

  /// `op(fn (...) {...}, args...)`: the other arguments are typed first, so
  /// that the fn's unannotated parameters take the types the operator
  /// derives from theirs (an annotation is kept, and the relation checks it).
  ExprPtr call_with_body(const ExprPtr &e) {
    std::vector<ExprPtr> args(e->args.size());
    std::vector<Type> rest;
    bool known = true;
    for (size_t i = 1; i < e->args.size(); ++i) {
      args[i] = mutate(e->args[i]);
      rest.push_back(args[i]->type);
      known = known && !args[i]->type.has_unknown();
    }
    const Function &fn = *e->args[0]->func;
    // (A wrong arity, or an error the relation will report, is not reported here.)
    int n = int(e->args.size());
    known = known && n >= e->op->min_inputs && n <= e->op->max_inputs;
    std::string error;
    std::optional<std::vector<Type>> given = known ? e->op->fn_params(rest, e->attrs, error) : std::nullopt;
    if (known && !given && !fn_params_annotated(fn))
      diag_.error(e->span, e->op->name + ": " + error);
    else if (given && given->size() != fn.params.size() && !fn_params_annotated(fn)) // (else: the relation's)
      diag_.error(e->args[0]->span, e->op->name + ": the body takes " + std::to_string(fn.params.size()) +
                                        (fn.params.size() == 1 ? " parameter" : " parameters") +
                                        ", but the call passes it " + std::to_string(given->size()));
    for (size_t i = 0; i < fn.params.size(); ++i)
      if (fn.params[i]->annotation.is_unknown()) // (unknown: an error is reported)
        param_types_[fn.params[i].get()] = given && i < given->size() ? (*given)[i] : Type::unknown();
    args[0] = mutate(e->args[0]);
    return check_call(e->op, std::move(args), e->attrs, e->span, report_);
  }

  ExprPtr on_global_call(const ExprPtr &e) override {
    std::vector<ExprPtr> args = mutated_args(*e);
    auto untyped = [&] { return make_global_call(e->name, args, e->span); };
    FunctionPtr callee = module_.find(e->name);
    if (!callee)
      return untyped();
    if (in_progress_.count(callee.get())) {
      diag_.error(e->span, "recursive call of '@" + e->name + "' is not supported");
      return untyped();
    }
    FunctionPtr typed = function(*callee);
    if (typed->params.size() != args.size()) {
      diag_.error(e->span, "@" + e->name + ": expected " + std::to_string(typed->params.size()) +
                               " arguments, found " + std::to_string(args.size()));
      return untyped();
    }
    for (size_t i = 0; i < args.size(); ++i) {
      const Type &t = args[i]->type;
      if (!t.has_unknown() && t != typed->params[i]->type) {
        diag_.error(args[i]->span, "@" + e->name + ": argument " + std::to_string(i + 1) + " has type " + t.str() +
                                       " but %" + typed->params[i]->name + " expects " +
                                       typed->params[i]->type.str());
        return untyped();
      }
    }
    return make_global_call(e->name, args, e->span, typed->body.result->type);
  }

private:
  const Module &module_;
  DiagEngine &diag_;
  std::unordered_map<const Function *, FunctionPtr> &typed_;
  std::set<const Function *> &in_progress_;
  Report report_;
  std::unordered_map<const Expr *, Type> param_types_;

  static bool fn_params_annotated(const Function &fn) {
    return std::none_of(fn.params.begin(), fn.params.end(),
                        [](const ExprPtr &p) { return p->annotation.is_unknown(); });
  }

  std::vector<ExprPtr> mutated_args(const Expr &e) {
    std::vector<ExprPtr> args;
    for (const ExprPtr &a : e.args)
      args.push_back(mutate(a));
    return args;
  }
};

/// Checkpoint markers must pair up (SPEC §6, Relax semantics). A segment is
/// every value on a path from a grad.start_checkpoint to a
/// grad.end_checkpoint (transform/Remat.h); markers that delimit none were
/// silently ignored. Located errors now, in source order:
///  * an end_checkpoint whose input depends on no start_checkpoint (through
///    values not already closed by an end_checkpoint);
///  * a start_checkpoint whose input is inside an open segment (segments
///    cannot nest or cross);
///  * a start_checkpoint from which no end_checkpoint is reached (equal
///    starts on one value are one marker: one of them reaching an end is
///    enough).
/// A `@f(...)` call is an opaque value here: a segment cannot span functions.
/// A marker whose call is ill-typed (already reported) is not reported again.
/// Iterative: any depth of nesting or number of bindings. `fn` is typed.
void check_checkpoints(const Function &fn, DiagEngine &diag) {
  auto marker = [](const Expr *e) { return e->kind == ExprKind::Call ? e->op->checkpoint : CheckpointMarker::None; };
  std::unordered_map<const Expr *, const Expr *> bound; // binding var -> its value
  std::unordered_map<const Expr *, const Expr *> open;  // node -> a start whose segment is open there
  std::vector<const Expr *> order;                      // post-order: operands before users
  std::unordered_set<const Expr *> seen;
  auto resolve = [&](const Expr *e) {
    auto it = bound.find(e);
    return it == bound.end() ? e : it->second;
  };
  // Tuples are followed field by field: `(%y, %inside).0` is %y, on no
  // segment's path (a projection of a tuple built elsewhere stays opaque).
  std::function<const Expr *(const Expr *)> field_source = [&](const Expr *e) -> const Expr * {
    if (e->kind != ExprKind::TupleGet)
      return nullptr;
    const Expr *tuple = resolve(e->args[0].get());
    if (tuple->kind != ExprKind::Tuple || size_t(e->index) >= tuple->args.size())
      return nullptr;
    const Expr *field = resolve(tuple->args[size_t(e->index)].get());
    const Expr *deeper = field_source(field);
    return deeper ? deeper : field;
  };
  auto visit = [&](const Expr *root) {
    std::vector<std::pair<const Expr *, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto &[e, next] = stack.back();
      if (next == 0 && !seen.insert(e).second) {
        stack.pop_back();
        continue;
      }
      if (e->kind != ExprKind::Var && e->kind != ExprKind::Func && next < e->args.size()) {
        stack.push_back({e->args[next++].get(), 0});
        continue;
      }
      order.push_back(e);
      stack.pop_back();
    }
  };
  for (const Binding &b : fn.body.bindings) {
    visit(b.value.get());
    bound[b.var.get()] = b.value.get();
  }
  if (fn.body.result)
    visit(fn.body.result.get());

  std::vector<std::pair<Span, std::string>> errors;
  auto where = [&](const Expr *e) {
    auto [line, col] = diag.file()->line_col(e->span.begin);
    return std::to_string(line) + ":" + std::to_string(col);
  };
  for (const Expr *e : order) {
    const Expr *in = nullptr; // the first open segment among the operands
    if (const Expr *field = field_source(e)) {
      if (auto it = open.find(field); it != open.end())
        in = it->second;
    } else if (e->kind != ExprKind::Func) {
      for (const ExprPtr &a : e->args)
        if (auto it = open.find(resolve(a.get())); !in && it != open.end())
          in = it->second;
    }
    bool reported = e->type.has_unknown(); // its call's error
    switch (marker(e)) {
    case CheckpointMarker::Start:
      if (in && !reported)
        errors.push_back({e->span, "grad.start_checkpoint inside the checkpoint segment opened at " + where(in) +
                                       ": segments cannot nest or cross"});
      open[e] = e;
      break;
    case CheckpointMarker::End:
      if (!in && !reported)
        errors.push_back({e->span, "grad.end_checkpoint closes no checkpoint segment: its input does not depend on "
                                   "a grad.start_checkpoint"});
      break;
    case CheckpointMarker::None:
      if (in && e->kind != ExprKind::Var)
        open[e] = in;
      break;
    }
  }
  // Backward from every end_checkpoint's input: the starts it reaches are closed.
  std::unordered_set<const Expr *> reaches_end, closed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Expr *e = *it;
    CheckpointMarker m = marker(e);
    if (m == CheckpointMarker::Start && reaches_end.count(e))
      closed.insert(e);
    if (m == CheckpointMarker::End || (m == CheckpointMarker::None && reaches_end.count(e))) {
      if (const Expr *field = field_source(e))
        reaches_end.insert(field);
      else if (e->kind != ExprKind::Func)
        for (const ExprPtr &a : e->args)
          reaches_end.insert(resolve(a.get()));
    }
  }
  // Equal starts on one value are one marker: closed when any of them is.
  auto marked = [&](const Expr *start) { return start->args.empty() ? start : resolve(start->args[0].get()); };
  std::unordered_set<const Expr *> closed_inputs;
  for (const Expr *e : closed)
    closed_inputs.insert(marked(e));
  for (const Expr *e : order)
    if (marker(e) == CheckpointMarker::Start && !closed.count(e) && !closed_inputs.count(marked(e)) &&
        !e->type.has_unknown())
      errors.push_back({e->span, "grad.start_checkpoint opens a checkpoint segment that no grad.end_checkpoint "
                                 "closes"});
  std::stable_sort(errors.begin(), errors.end(),
                   [](const auto &a, const auto &b) { return a.first.begin < b.first.begin; });
  for (const auto &[span, message] : errors)
    diag.error(span, message);
}

} // namespace

Module infer_types(const Module &module, DiagEngine &diag) {
  std::set<std::string> seen;
  std::set<const Function *> in_progress;
  for (const FunctionPtr &fn : module.functions)
    if (!seen.insert(fn->name).second)
      diag.error(fn->span, "function '@" + fn->name + "' is defined more than once");
  std::unordered_map<const Function *, FunctionPtr> typed;
  Module out{module.source, {}};
  TypeInferencer inferencer(module, diag, typed, in_progress);
  for (const FunctionPtr &fn : module.functions) {
    out.functions.push_back(inferencer.function(*fn));
    check_checkpoints(*out.functions.back(), diag);
  }
  return out;
}

} // namespace gradc
