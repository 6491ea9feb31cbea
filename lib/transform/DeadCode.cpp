//===- DeadCode.cpp - remove bindings the result does not need ------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Registry.h"
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
  // A grad.end_checkpoint nobody reads still closes its segment: dropping
  // it while the segment's values stay live would leave a start that no
  // end closes, which the type checker rejects when the dump is read back.
  std::vector<Binding> out_bindings;
  auto next_kept = kept.rbegin();
  for (const Binding &b : fn.body.bindings) {
    if (next_kept != kept.rend() && next_kept->var == b.var) {
      out_bindings.push_back(*next_kept++);
      continue;
    }
    const Expr &v = *b.value;
    if (v.kind == ExprKind::Call && v.op->checkpoint == CheckpointMarker::End && !v.args.empty() &&
        live.count(v.args[0].get()))
      out_bindings.push_back(b);
  }
  auto out = std::make_shared<Function>(fn);
  out->body.bindings = std::move(out_bindings);
  return out;
}

} // namespace gradc
