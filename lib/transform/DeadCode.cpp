//===- DeadCode.cpp - remove bindings the result does not need ------------===//
//
// A binding is live when the result or a live binding reads it, also from
// inside the body of a `fn` value (free_vars sees into those). Checkpoint
// segments stay whole: a segment whose start is live keeps its ends (and
// what leads to them) even when nobody reads them, or the start would be
// left open and the module (a dumped adjoint) would no longer type-check.
// The markers cost nothing: the `fused` stage drops them after remat.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"
#include "gradc/transform/Remat.h"

#include <unordered_set>

namespace gradc {
namespace {

CheckpointMarker marker(const Expr &e) {
  return e.kind == ExprKind::Call ? e.op->checkpoint : CheckpointMarker::None;
}

/// Adds to `live` what the live bindings read, walking back from the last.
void propagate(const std::vector<Binding> &bindings, std::unordered_set<const Expr *> &live) {
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it)
    if (live.count(it->var.get()))
      for (const ExprPtr &v : free_vars(it->value))
        live.insert(v.get());
}

FunctionPtr eliminate_dead_bindings(const Function &fn) {
  const std::vector<Binding> &bindings = fn.body.bindings;
  std::unordered_set<const Expr *> live;
  for (const ExprPtr &v : free_vars(fn.body.result))
    live.insert(v.get());
  propagate(bindings, live);

  // The ends a live start reaches (transform/Remat.h's segments, opened by
  // the live starts only) are kept, with their inputs.
  CheckpointReach reach = checkpoint_reach(fn, [&](size_t i) { return live.count(bindings[i].var.get()) > 0; });
  bool kept_end = false;
  for (size_t i = 0; i < bindings.size(); ++i)
    if (marker(*bindings[i].value) == CheckpointMarker::End && reach.from_start[i])
      kept_end |= live.insert(bindings[i].var.get()).second;
  if (kept_end)
    propagate(bindings, live);

  auto out = std::make_shared<Function>(fn);
  out->body.bindings.clear();
  for (const Binding &b : bindings)
    if (live.count(b.var.get()))
      out->body.bindings.push_back(b);
  return out;
}

} // namespace

// The bodies of scans first: what they no longer read may die outside them.
FunctionPtr eliminate_dead_code(const Function &fn) {
  return eliminate_dead_bindings(*map_nested_functions(fn, eliminate_dead_bindings));
}

} // namespace gradc
