//===- Functor.cpp - default traversals of the tensor IR ------------------===//
#include "gradc/ir/Functor.h"

namespace gradc {

void unhandled_expr_kind(const Expr &e) {
  internal_error("tensor IR", "a functor reached a node kind it does not handle (kind " +
                                  std::to_string(static_cast<int>(e.kind)) + ")");
}

void ExprVisitor::visit(const ExprPtr &e) {
  if (share_ && !e->is_atom() && !seen_.insert(e.get()).second)
    return;
  dispatch(e);
}

void ExprVisitor::visit_function(const Function &fn) {
  for (const ExprPtr &p : fn.params)
    visit_param(p);
  for (const Binding &b : fn.body.bindings)
    visit_binding(b);
  if (fn.body.result)
    visit(fn.body.result);
}

void ExprVisitor::visit_children(const ExprPtr &e) {
  for (const ExprPtr &a : e->args)
    visit(a);
}

ExprPtr ExprMutator::mutate(const ExprPtr &e) {
  if (auto it = memo_.find(e.get()); it != memo_.end())
    return it->second;
  ExprPtr out = dispatch(e);
  memo_[e.get()] = out;
  return out;
}

FunctionPtr ExprMutator::mutate_function(const Function &fn) {
  auto out = std::make_shared<Function>();
  out->name = fn.name;
  out->ret_type = fn.ret_type;
  out->span = fn.span;
  out->attrs = fn.attrs;
  for (const ExprPtr &p : fn.params) {
    ExprPtr np = mutate_param(p);
    if (np != p)
      remap(p, np);
    out->params.push_back(np);
  }
  std::vector<Binding> *outer = bindings_;
  bindings_ = &out->body.bindings;
  for (const Binding &b : fn.body.bindings)
    mutate_binding(b, out->body.bindings);
  if (fn.body.result)
    out->body.result = mutate(fn.body.result);
  bindings_ = outer;
  return out;
}

void ExprMutator::mutate_binding(const Binding &b, std::vector<Binding> &out) {
  ExprPtr value = mutate(b.value);
  ExprPtr var = b.var;
  if (value->type != var->type && !value->type.is_unknown()) {
    var = make_var(b.var->name, b.var->annotation, b.var->span, value->type);
    remap(b.var, var);
  }
  out.push_back({var, value, b.is_let});
}

ExprPtr ExprMutator::on_func(const ExprPtr &e) {
  FunctionPtr fn = mutate_function(*e->func);
  return make_func(fn, e->span);
}

namespace {

class FreeVars : public ExprVisitor {
public:
  std::vector<ExprPtr> vars;

protected:
  void visit_param(const ExprPtr &p) override { bound_.insert(p.get()); }
  void visit_binding(const Binding &b) override {
    visit(b.value);
    bound_.insert(b.var.get());
  }
  void on_var(const ExprPtr &v) override {
    if (!bound_.count(v.get()) && seen_vars_.insert(v.get()).second)
      vars.push_back(v);
  }

private:
  std::unordered_set<const Expr *> bound_, seen_vars_;
};

} // namespace

namespace {

class NestedMapper : public ExprMutator {
public:
  explicit NestedMapper(const std::function<FunctionPtr(const Function &)> &f) : f_(f) {}

protected:
  ExprPtr on_func(const ExprPtr &e) override { return make_func(f_(*mutate_function(*e->func)), e->span); }

private:
  const std::function<FunctionPtr(const Function &)> &f_;
};

} // namespace

FunctionPtr map_nested_functions(const Function &fn, const std::function<FunctionPtr(const Function &)> &f) {
  return NestedMapper(f).mutate_function(fn);
}

FunctionPtr close_over(const Function &fn, const std::vector<ExprPtr> &captured) {
  // Substitute the new parameters for the captured Vars, then clone the whole
  // (the clone gives every Var, the parameters included, a fresh identity).
  class Substitute : public ExprMutator {
  public:
    using ExprMutator::remap;
  } substitute;
  auto open = std::make_shared<Function>(fn);
  for (const ExprPtr &c : captured) {
    ExprPtr p = make_var(c->name, c->type, c->span, c->type);
    substitute.remap(c, p);
    open->params.push_back(p);
  }
  FunctionPtr closed = substitute.mutate_function(*open);
  return clone_function(*closed);
}

ExprPtr inline_function(const Function &fn, const std::vector<ExprPtr> &args, std::vector<Binding> &out) {
  class Inliner : public ExprMutator {
  public:
    using ExprMutator::mutate_binding;
    using ExprMutator::remap;
  } inliner;
  FunctionPtr copy = clone_function(fn);
  GRADC_CHECK(copy->params.size() == args.size(), "tensor IR", "a function inlined with the wrong number of arguments");
  for (size_t i = 0; i < args.size(); ++i)
    inliner.remap(copy->params[i], args[i]);
  for (const Binding &b : copy->body.bindings)
    inliner.mutate_binding(b, out);
  return inliner.mutate(copy->body.result);
}

std::unordered_map<const Expr *, int> count_uses(const Function &fn) {
  class Counter : public ExprVisitor {
  public:
    std::unordered_map<const Expr *, int> uses;

  protected:
    void on_var(const ExprPtr &v) override { ++uses[v.get()]; }
  } counter;
  counter.visit_function(fn);
  return std::move(counter.uses);
}

std::vector<ExprPtr> free_vars(const ExprPtr &e) {
  FreeVars fv;
  fv.visit(e);
  return std::move(fv.vars);
}

} // namespace gradc
