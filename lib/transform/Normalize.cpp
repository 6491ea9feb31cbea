//===- Normalize.cpp - convert a function body to A-normal form -----------===//
//
// Runs after type inference, before inlining and differentiation, which both
// want one operator per binding and atoms as arguments.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/Passes.h"

#include <unordered_map>

namespace gradc {
namespace {

class Normalizer {
public:
  std::vector<Binding> out;
  std::unordered_map<const Expr *, ExprPtr> subst; // aliases and inlined constants

  ExprPtr atom(const ExprPtr &e, const ExprPtr &bind_to = nullptr) {
    if (e->kind == ExprKind::Var) {
      auto it = subst.find(e.get());
      return it == subst.end() ? e : it->second;
    }
    if (e->kind == ExprKind::Constant)
      return e;
    auto copy = std::make_shared<Expr>(*e);
    for (ExprPtr &a : copy->args)
      a = atom(a);
    if (copy->kind == ExprKind::Func)
      normalize(*(copy->func = std::make_shared<Function>(*e->func)));
    ExprPtr var = bind_to ? bind_to : make_var("t", {}, e->span);
    var->type = e->type;
    out.push_back({var, copy, false});
    return var;
  }
};

} // namespace

void normalize(Function &fn) {
  Normalizer n;
  for (const Binding &b : fn.body.bindings) {
    if (b.value->is_atom()) {
      n.subst[b.var.get()] = n.atom(b.value);
      continue;
    }
    n.atom(b.value, b.var);
    n.out.back().is_let = b.is_let;
  }
  fn.body.result = n.atom(fn.body.result);
  fn.body.bindings = std::move(n.out);
}

} // namespace gradc
