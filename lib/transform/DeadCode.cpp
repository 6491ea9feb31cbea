//===- DeadCode.cpp - remove bindings the result does not need ------------===//
#include "gradc/ir/Functor.h"
#include "gradc/transform/Passes.h"

#include <unordered_set>

namespace gradc {

FunctionPtr eliminate_dead_code(const Function &fn) {
  // A binding is live when the result or a live binding reads it, also from
  // inside the body of a `fn` value (free_vars sees into those).
  std::unordered_set<const Expr *> live;
  for (const ExprPtr &v : free_vars(fn.body.result))
    live.insert(v.get());
  std::vector<Binding> kept;
  for (auto it = fn.body.bindings.rbegin(); it != fn.body.bindings.rend(); ++it) {
    if (!live.count(it->var.get()))
      continue;
    for (const ExprPtr &v : free_vars(it->value))
      live.insert(v.get());
    kept.push_back(*it);
  }
  auto out = std::make_shared<Function>(fn);
  out->body.bindings.assign(kept.rbegin(), kept.rend());
  return out;
}

} // namespace gradc
