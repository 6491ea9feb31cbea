//===- Inline.cpp - inline calls of other definitions ---------------------===//
//
// Runs after normalize and before differentiation, so that the gradient pass
// sees one straight-line body. Each call site gets its own copy of the callee.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/Passes.h"

#include <unordered_map>

namespace gradc {

void inline_calls(Function &fn, const Module &module) {
  std::vector<Binding> out;
  std::unordered_map<const Expr *, ExprPtr> subst;
  auto rename = [&](const ExprPtr &e) {
    auto it = subst.find(e.get());
    return it == subst.end() ? e : it->second;
  };
  for (Binding b : fn.body.bindings) {
    for (ExprPtr &a : b.value->args)
      a = rename(a);
    if (b.value->kind != ExprKind::GlobalCall) {
      out.push_back(b);
      continue;
    }
    FunctionPtr callee = module.find(b.value->name);
    GRADC_CHECK(callee, "inline", "call of unknown function @" + b.value->name);
    FunctionPtr copy = clone_function(*callee);
    normalize(*copy);
    inline_calls(*copy, module);
    // Parameters become the call's arguments; the call's value becomes the result.
    std::unordered_map<const Expr *, ExprPtr> params;
    for (size_t i = 0; i < copy->params.size(); ++i)
      params[copy->params[i].get()] = b.value->args[i];
    auto bind_param = [&](const ExprPtr &e) {
      auto it = params.find(e.get());
      return it == params.end() ? e : it->second;
    };
    for (Binding inner : copy->body.bindings) {
      for (ExprPtr &a : inner.value->args)
        a = bind_param(a);
      out.push_back(inner);
    }
    subst[b.var.get()] = bind_param(copy->body.result);
  }
  fn.body.bindings = std::move(out);
  fn.body.result = rename(fn.body.result);
}

} // namespace gradc
