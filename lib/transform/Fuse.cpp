//===- Fuse.cpp - fuse chains of injective operators ----------------------===//
//
// The last tensor-level pass before lowering. Only injective producers are
// fused, and only into injective consumers, so a fused value is computed
// exactly once per output element and no work is duplicated.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/Fuse.h"
#include "gradc/op/Registry.h"

#include <unordered_map>
#include <unordered_set>

namespace gradc {

void fuse_injective(Function &fn) {
  std::unordered_map<const Expr *, int> uses;
  for (const Binding &b : fn.body.bindings)
    for (const ExprPtr &a : b.value->args)
      ++uses[a.get()];
  ++uses[fn.body.result.get()];

  auto injective = [](const Expr &e) { return e.kind == ExprKind::Call && e.op->injective(); };
  std::unordered_map<const Expr *, ExprPtr> single_use; // injective values with one user
  std::unordered_set<const Expr *> fused;               // their vars, once inlined
  std::vector<Binding> out;
  for (const Binding &b : fn.body.bindings) {
    ExprPtr value = b.value;
    if (injective(*value)) {
      auto copy = std::make_shared<Expr>(*value);
      for (ExprPtr &a : copy->args)
        if (auto it = single_use.find(a.get()); it != single_use.end()) {
          fused.insert(a.get());
          a = it->second;
        }
      value = copy;
      if (uses[b.var.get()] == 1 && b.var->type.is_tensor())
        single_use[b.var.get()] = value;
    }
    out.push_back({b.var, value, b.is_let});
  }
  std::erase_if(out, [&](const Binding &b) { return fused.count(b.var.get()) > 0; });
  fn.body.bindings = std::move(out);
}

} // namespace gradc
