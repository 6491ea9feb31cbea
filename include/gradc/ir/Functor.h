//===- Functor.h - visitors and mutators of the tensor IR -----------------===//
//
// Every walk over the tensor IR derives from one of these, so a new node kind
// is taught once, here. The defaults visit every child, including the bodies
// of `fn` values; a pass overrides the hooks for the node kinds it cares about.
//
// * ExprFunctor<R(Args...)> is the one dispatch on the node kind: a hook per
//   kind, and an internal error for a kind the functor does not handle.
// * ExprVisitor reads. A Call, Tuple or TupleGet reached twice (a shared
//   subexpression) is visited once; atoms are visited at every use.
// * ExprMutator rebuilds: nodes are immutable, so a changed child gives a new
//   parent, and an unchanged subtree is returned as it is (shared). Results
//   are memoized per node, so a DAG is rewritten in linear time. `remap`
//   redirects every later use of a Var (how a pass renames or retypes one).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace gradc {

/// The internal error of a functor reaching a node kind it does not handle.
[[noreturn]] void unhandled_expr_kind(const Expr &e);

template <typename Signature> class ExprFunctor;

template <typename R, typename... Args> class ExprFunctor<R(Args...)> {
public:
  virtual ~ExprFunctor() = default;
  R dispatch(const ExprPtr &e, Args... args) {
    switch (e->kind) {
    case ExprKind::Var:
      return on_var(e, args...);
    case ExprKind::Constant:
      return on_constant(e, args...);
    case ExprKind::Call:
      return on_call(e, args...);
    case ExprKind::GlobalCall:
      return on_global_call(e, args...);
    case ExprKind::Tuple:
      return on_tuple(e, args...);
    case ExprKind::TupleGet:
      return on_tuple_get(e, args...);
    case ExprKind::Func:
      return on_func(e, args...);
    }
    unhandled(e);
  }

protected:
  virtual R on_var(const ExprPtr &e, Args...) { unhandled(e); }
  virtual R on_constant(const ExprPtr &e, Args...) { unhandled(e); }
  virtual R on_call(const ExprPtr &e, Args...) { unhandled(e); }
  virtual R on_global_call(const ExprPtr &e, Args...) { unhandled(e); }
  virtual R on_tuple(const ExprPtr &e, Args...) { unhandled(e); }
  virtual R on_tuple_get(const ExprPtr &e, Args...) { unhandled(e); }
  virtual R on_func(const ExprPtr &e, Args...) { unhandled(e); }
  [[noreturn]] void unhandled(const ExprPtr &e) { unhandled_expr_kind(*e); }
};

class ExprVisitor : protected ExprFunctor<void()> {
public:
  /// `share`: visit a shared Call/Tuple/TupleGet once (false: at every use,
  /// as a printer must).
  explicit ExprVisitor(bool share = true) : share_(share) {}
  void visit(const ExprPtr &e);
  /// Parameters, then every binding in order, then the result.
  virtual void visit_function(const Function &fn);

protected:
  virtual void visit_param(const ExprPtr &param) {}
  /// Default: visit the value (the bound Var is a definition, not a use).
  virtual void visit_binding(const Binding &b) { visit(b.value); }
  void on_var(const ExprPtr &e) override {}
  void on_constant(const ExprPtr &e) override {}
  void on_call(const ExprPtr &e) override { visit_children(e); }
  void on_global_call(const ExprPtr &e) override { visit_children(e); }
  void on_tuple(const ExprPtr &e) override { visit_children(e); }
  void on_tuple_get(const ExprPtr &e) override { visit_children(e); }
  void on_func(const ExprPtr &e) override { visit_function(*e->func); }
  void visit_children(const ExprPtr &e);

private:
  bool share_;
  std::unordered_set<const Expr *> seen_;
};

class ExprMutator : protected ExprFunctor<ExprPtr()> {
public:
  ExprPtr mutate(const ExprPtr &e);
  /// A new function: parameters (mutate_param), every binding in order
  /// (mutate_binding), then the result.
  virtual FunctionPtr mutate_function(const Function &fn);

protected:
  /// Default: the parameter itself.
  virtual ExprPtr mutate_param(const ExprPtr &param) { return param; }
  /// Appends the rewritten binding to `out`: nothing drops it, several are
  /// allowed. Default: the value mutated, bound to the same Var (or to a
  /// fresh one, remapped, when the value's type changed).
  virtual void mutate_binding(const Binding &b, std::vector<Binding> &out);
  ExprPtr on_var(const ExprPtr &e) override { return e; }
  ExprPtr on_constant(const ExprPtr &e) override { return e; }
  ExprPtr on_call(const ExprPtr &e) override { return rebuild(e); }
  ExprPtr on_global_call(const ExprPtr &e) override { return rebuild(e); }
  ExprPtr on_tuple(const ExprPtr &e) override { return rebuild(e); }
  ExprPtr on_tuple_get(const ExprPtr &e) override { return rebuild(e); }
  ExprPtr on_func(const ExprPtr &e) override;

  /// `e` with every operand mutated; `e` itself when none changed.
  ExprPtr rebuild(const ExprPtr &e) {
    return rebuild_with(e, [this](const ExprPtr &a) { return mutate(a); });
  }
  /// `e` with `operand(a)` for every operand `a`; `e` itself when none changed.
  template <typename F> ExprPtr rebuild_with(const ExprPtr &e, F &&operand) {
    std::vector<ExprPtr> args;
    bool changed = false;
    for (const ExprPtr &a : e->args) {
      args.push_back(operand(a));
      changed |= args.back() != a;
    }
    return changed ? with_args(*e, std::move(args)) : e;
  }
  /// Every later use of `from` (a Var) reads `to`.
  void remap(const ExprPtr &from, ExprPtr to) { memo_[from.get()] = std::move(to); }
  /// The bindings of the body being rebuilt, for passes that emit extra ones.
  std::vector<Binding> &current_bindings() { return *bindings_; }

private:
  std::unordered_map<const Expr *, ExprPtr> memo_;
  std::vector<Binding> *bindings_ = nullptr;
};

/// `fn` with the function of every `fn` value in it replaced by f(that
/// function), innermost first: how a pass that rewrites one function's own
/// bindings (fusion, dead-code elimination) reaches the bodies of scans.
FunctionPtr map_nested_functions(const Function &fn, const std::function<FunctionPtr(const Function &)> &f);

/// `fn` closed over `captured` (Vars it reads but does not define): a
/// function whose parameters are fn's (fresh Vars) then one per captured
/// Var, in order, which its body reads instead.
FunctionPtr close_over(const Function &fn, const std::vector<ExprPtr> &captured);

/// Appends the bindings of a fresh copy of `fn` (ANF) to `out`, its
/// parameters replaced by `args` (atoms of their types), and returns its
/// result: `fn` called in place, as a rule that builds on a derived
/// function (scan_backward's gradient) needs.
ExprPtr inline_function(const Function &fn, const std::vector<ExprPtr> &args, std::vector<Binding> &out);

/// How many times each Var is read in `fn`, reads inside the bodies of its
/// `fn` values included.
std::unordered_map<const Expr *, int> count_uses(const Function &fn);

/// The Vars that `e` reads, in first-use order, including reads from inside
/// the bodies of `fn` values (less the Vars those bodies define themselves).
std::vector<ExprPtr> free_vars(const ExprPtr &e);

} // namespace gradc
