//===- Gradient.cpp - reverse-mode differentiation ------------------------===//
//
// The shared work of every gradient lives here, once: the reverse walk,
// fan-out accumulation, summing broadcast adjoints back to input shapes,
// no_grad, and the error for an operator without a gradient. Per-operator
// rules (FPrimalGradient) live with their operators under lib/op/.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/Gradient.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

class Adjoints {
public:
  explicit Adjoints(Builder &b) : b_(b) {}

  /// adj[x] += g, with g summed back to x's shape if it was broadcast.
  void add(const ExprPtr &x, ExprPtr g) {
    if (x->kind != ExprKind::Var || !x->type.is_tensor() || !is_float(x->type.dtype) || !g)
      return;
    GRADC_CHECK(g->type.is_tensor() && g->type.dtype == x->type.dtype, "gradient",
                "adjoint of type " + g->type.str() + " for a value of type " + x->type.str());
    g = b_.sum_to(g, x->type.shape);
    auto it = tensor_.find(x.get());
    if (it == tensor_.end())
      tensor_[x.get()] = g;
    else
      it->second = b_.add(it->second, g);
  }

  void add_field(const ExprPtr &tuple, int index, ExprPtr g) {
    if (tuple->kind != ExprKind::Var || !g)
      return;
    auto &fields = tuple_[tuple.get()];
    fields.resize(tuple->type.fields.size());
    fields[index] = fields[index] ? b_.add(fields[index], g) : g;
  }

  ExprPtr get(const ExprPtr &x) const {
    auto it = tensor_.find(x.get());
    return it == tensor_.end() ? nullptr : it->second;
  }

  /// The adjoint of a tuple value as a tuple, zeros for fields without one.
  ExprPtr get_tuple(const ExprPtr &x) {
    auto it = tuple_.find(x.get());
    if (it == tuple_.end())
      return nullptr;
    std::vector<ExprPtr> fields;
    for (size_t i = 0; i < x->type.fields.size(); ++i) {
      ExprPtr f = i < it->second.size() ? it->second[i] : nullptr;
      fields.push_back(f ? f : b_.zeros(x->type.fields[i]));
    }
    return b_.tuple(fields);
  }

  const std::vector<ExprPtr> *fields(const ExprPtr &x) const {
    auto it = tuple_.find(x.get());
    return it == tuple_.end() ? nullptr : &it->second;
  }

private:
  Builder &b_;
  std::unordered_map<const Expr *, ExprPtr> tensor_;
  std::unordered_map<const Expr *, std::vector<ExprPtr>> tuple_;
};

/// Rebinds the listed Vars under new names (nodes are immutable).
class Renamer : public ExprMutator {
public:
  explicit Renamer(const std::unordered_map<const Expr *, std::string> &names) : names_(names) {}

protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    auto it = names_.find(b.var.get());
    if (it == names_.end())
      return ExprMutator::mutate_binding(b, out);
    ExprPtr var = make_var(it->second, b.var->annotation, b.var->span, b.var->type);
    remap(b.var, var);
    out.push_back({var, mutate(b.value), b.is_let});
  }

private:
  const std::unordered_map<const Expr *, std::string> &names_;
};

} // namespace

/// The adjoint rule of one forward binding, chosen by the kind of its value:
/// a call's registered gradient, a tuple's fields, a projection's field.
class BackwardStep : ExprFunctor<void(const ExprPtr &)> {
public:
  BackwardStep(Builder &b, Adjoints &adj, std::map<std::string, std::vector<Span>> &missing,
               std::unordered_set<const Expr *> &blocked)
      : b_(b), adj_(adj), missing_(missing), blocked_(blocked) {}
  void run(const Binding &bind) { dispatch(bind.value, bind.var); }

private:
  Builder &b_;
  Adjoints &adj_;
  std::map<std::string, std::vector<Span>> &missing_;
  std::unordered_set<const Expr *> &blocked_;

  void on_call(const ExprPtr &e, const ExprPtr &var) override {
    const Expr &value = *e;
    ExprPtr g = var->type.is_tuple() ? adj_.get_tuple(var) : adj_.get(var);
    if (!g || value.op->no_gradient || blocked_.count(var.get()))
      return;
    if (!value.op->gradient) {
      missing_[value.op->name].push_back(value.span);
      for (const ExprPtr &a : value.args)
        blocked_.insert(a.get());
      return;
    }
    GradCtx ctx{b_, value, var, g};
    Grads grads = value.op->gradient(ctx);
    GRADC_CHECK(grads.size() == value.args.size(), "gradient",
                value.op->name + " gradient returned " + std::to_string(grads.size()) + " adjoints for " +
                    std::to_string(value.args.size()) + " inputs");
    for (size_t k = 0; k < grads.size(); ++k)
      adj_.add(value.args[k], grads[k]);
  }
  void on_tuple(const ExprPtr &e, const ExprPtr &var) override {
    if (const auto *fields = adj_.fields(var))
      for (size_t k = 0; k < fields->size(); ++k)
        adj_.add(e->args[k], (*fields)[k]);
  }
  void on_tuple_get(const ExprPtr &e, const ExprPtr &var) override {
    adj_.add_field(e->args[0], e->index, adj_.get(var));
  }
  // Anything else cannot be a binding's value in inlined ANF.
  void on_var(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  void on_constant(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  void on_global_call(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  void on_func(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  [[noreturn]] static void not_anf() {
    internal_error("gradient", "unexpected binding (input not in ANF or not inlined)");
  }
};

FunctionPtr build_adjoint(const Function &primal, const std::vector<std::string> &wrt, DiagEngine &diag) {
  auto fn = std::make_shared<Function>(*clone_function(primal)); // a fresh copy, built up below
  fn->name = primal.name + "_adjoint";
  fn->ret_type = Type::unknown();

  // Which parameters, in declared order.
  std::vector<ExprPtr> targets;
  if (wrt.empty()) {
    for (const ExprPtr &p : fn->params)
      if (p->type.is_tensor() && is_float(p->type.dtype))
        targets.push_back(p);
  } else {
    for (const std::string &name : wrt) {
      bool found = false;
      for (const ExprPtr &p : fn->params)
        if (p->name == name) {
          found = true;
          if (!p->type.is_tensor() || !is_float(p->type.dtype))
            diag.error(p->span, "cannot differentiate with respect to %" + name + " of type " + p->type.str() +
                                    ": only floating-point tensors have gradients");
        }
      if (!found)
        diag.error(fn->span, "--wrt names %" + name + ", which is not a parameter of @" + primal.name);
    }
    for (const ExprPtr &p : fn->params)
      for (const std::string &name : wrt)
        if (p->name == name && p->type.is_tensor() && is_float(p->type.dtype)) {
          targets.push_back(p);
          break;
        }
  }

  std::vector<Binding> &body = fn->body.bindings;
  Builder b(body, fn->span);
  ExprPtr result = fn->body.result;
  ExprPtr target = result;
  if (result->type.is_tuple()) {
    if (result->type.fields.empty())
      diag.error(fn->span, "@" + primal.name + " returns an empty tuple: nothing to differentiate");
    else
      target = b.get(result, 0);
  }
  if (!target->type.is_tensor() || !is_float(target->type.dtype))
    diag.error(fn->span, "@" + primal.name + ": the differentiated result must be a floating-point tensor, found " +
                             target->type.str());
  diag.check();

  // Reverse walk over the forward bindings.
  size_t num_forward = body.size();
  Adjoints adj(b);
  adj.add(target, b.ones_like(target));
  // Once a rule is missing, the walk goes on marking what lies behind it as
  // `blocked`, so every missing rule on the way to a parameter is reported.
  std::map<std::string, std::vector<Span>> missing;
  std::unordered_set<const Expr *> blocked;
  BackwardStep step(b, adj, missing, blocked);
  for (size_t i = num_forward; i-- > 0;) {
    Binding bind = body[i]; // copied: `body` grows as we emit
    const Expr &value = *bind.value;
    b.set_span(value.span);
    if (blocked.count(bind.var.get())) {
      if (value.kind == ExprKind::Call && !value.op->has_gradient())
        missing[value.op->name].push_back(value.span);
      if (value.kind != ExprKind::Call || !value.op->no_gradient)
        for (const ExprPtr &a : value.args)
          blocked.insert(a.get());
    }
    step.run(bind);
  }
  std::vector<std::pair<Span, std::string>> errors;
  for (const auto &[name, spans] : missing)
    for (Span s : spans)
      errors.push_back({s, name});
  std::sort(errors.begin(), errors.end(), [](auto &a, auto &b) { return a.first.begin < b.first.begin; });
  for (const auto &[span, name] : errors)
    diag.error(span, "no gradient is registered for operator '" + name + "'");
  diag.check();

  b.set_span(fn->span);
  std::vector<ExprPtr> grads;
  for (const ExprPtr &p : targets) {
    ExprPtr g = adj.get(p);
    grads.push_back(g ? g : b.zeros(p->type));
  }
  ExprPtr grad_tuple = b.tuple(grads);
  fn->body.result = b.tuple({result, grad_tuple});

  // Name each adjoint after its primal value (`%d_w1`), parameters first,
  // so that the grad dump reads like the math.
  std::unordered_map<const Expr *, std::string> names;
  auto name_adjoint = [&](const ExprPtr &x) {
    if (ExprPtr g = adj.get(x); g && g->kind == ExprKind::Var)
      names.emplace(g.get(), "d_" + x->name);
  };
  for (const ExprPtr &p : fn->params)
    name_adjoint(p);
  for (size_t i = 0; i < num_forward; ++i)
    name_adjoint(body[i].var);
  return eliminate_dead_code(*Renamer(names).mutate_function(*fn));
}

} // namespace gradc
