//===- DeadCode.cpp - remove bindings the result does not need ------------===//
#include "gradc/transform/Passes.h"

#include <unordered_set>

namespace gradc {

void eliminate_dead_code(Function &fn) {
  std::unordered_set<const Expr *> live{fn.body.result.get()};
  std::vector<Binding> kept;
  for (auto it = fn.body.bindings.rbegin(); it != fn.body.bindings.rend(); ++it) {
    if (!live.count(it->var.get()))
      continue;
    for (const ExprPtr &a : it->value->args)
      live.insert(a.get());
    kept.push_back(*it);
  }
  fn.body.bindings.assign(kept.rbegin(), kept.rend());
}

} // namespace gradc
