//===- Remat.cpp - recompute checkpoint segments in the backward pass -----===//
//
// Runs after the gradient pass, on every function. Deciding what is "inside" is
// purely structural, so a dumped and re-parsed adjoint is rematerialized the
// same way as one built in memory.
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Log.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Remat.h"

#include <functional>

#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

CheckpointMarker marker(const Expr &e) {
  return e.kind == ExprKind::Call ? e.op->checkpoint : CheckpointMarker::None;
}

} // namespace

FunctionPtr rematerialize_checkpoints(const Function &fn, RematStats &stats) {
  const std::vector<Binding> &body = fn.body.bindings;
  std::unordered_map<const Expr *, size_t> def; // var -> binding index
  for (size_t i = 0; i < body.size(); ++i)
    def[body[i].var.get()] = i;

  // Forward reachability from start_checkpoint outputs...
  std::vector<bool> from_start(body.size(), false);
  for (size_t i = 0; i < body.size(); ++i) {
    const Expr &v = *body[i].value;
    if (marker(v) == CheckpointMarker::Start) {
      from_start[i] = true;
      ++stats.segments;
      continue;
    }
    for (const ExprPtr &a : v.args) {
      auto it = def.find(a.get());
      if (it != def.end() && from_start[it->second] && marker(*body[it->second].value) != CheckpointMarker::End)
        from_start[i] = true;
    }
  }
  // ...and backward reachability from end_checkpoint inputs.
  std::vector<bool> to_end(body.size(), false);
  for (size_t i = body.size(); i-- > 0;) {
    const Expr &v = *body[i].value;
    if (!(marker(v) == CheckpointMarker::End || to_end[i]))
      continue;
    for (const ExprPtr &a : v.args) {
      auto it = def.find(a.get());
      if (it != def.end() && marker(*body[it->second].value) != CheckpointMarker::Start)
        to_end[it->second] = true;
    }
  }
  std::vector<bool> inside(body.size());
  for (size_t i = 0; i < body.size(); ++i)
    inside[i] = from_start[i] && to_end[i] && marker(*body[i].value) != CheckpointMarker::Start;

  // Rewrite uses outside the segments to recomputed copies.
  std::unordered_map<const Expr *, ExprPtr> copy_of;
  std::vector<Binding> out;
  std::function<ExprPtr(const ExprPtr &)> recompute = [&](const ExprPtr &var) -> ExprPtr {
    auto it = def.find(var.get());
    if (it == def.end() || !inside[it->second])
      return var;
    auto done = copy_of.find(var.get());
    if (done != copy_of.end())
      return done->second;
    const Binding &orig = body[it->second];
    std::vector<ExprPtr> args;
    for (const ExprPtr &a : orig.value->args)
      args.push_back(recompute(a));
    ExprPtr v = make_var(orig.var->name + "_remat", {}, orig.var->span, orig.var->type);
    out.push_back({v, with_args(*orig.value, std::move(args)), false});
    ++stats.recomputed;
    return copy_of[var.get()] = v;
  };
  for (size_t i = 0; i < body.size(); ++i) {
    Binding b = body[i];
    bool user_inside = inside[i] || marker(*b.value) == CheckpointMarker::End;
    if (!user_inside) {
      std::vector<ExprPtr> args;
      for (const ExprPtr &a : b.value->args)
        args.push_back(recompute(a));
      b.value = with_args(*b.value, std::move(args));
    }
    out.push_back(b);
  }
  if (stats.segments)
    log(LogLevel::Info, "remat", "@" + fn.name + ": " + std::to_string(stats.segments) + " checkpoint segments, " +
                                     std::to_string(stats.recomputed) + " bindings recomputed in the backward pass");
  auto result = std::make_shared<Function>(fn);
  result->body.result = recompute(fn.body.result);
  result->body.bindings = std::move(out);
  return result;
}

} // namespace gradc
