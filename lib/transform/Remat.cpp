//===- Remat.cpp - recompute dropped values where they are read late ------===//
//
// Selection and rewriting are separate: checkpoint_segments reads the
// markers (manual), and rematerialize rewrites any RematSet, whoever chose
// it. Runs after the gradient pass, on every function.
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Log.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Remat.h"

#include <functional>
#include <unordered_map>

namespace gradc {
namespace {

CheckpointMarker marker(const Expr &e) {
  return e.kind == ExprKind::Call ? e.op->checkpoint : CheckpointMarker::None;
}

/// `e` with every Var it reads replaced by var(Var), through nested calls
/// and tuples; a `fn` value (a scan's body, closed) is kept as it is.
ExprPtr replace_vars(const ExprPtr &e, const std::function<ExprPtr(const ExprPtr &)> &var) {
  if (e->kind == ExprKind::Var)
    return var(e);
  if (e->kind == ExprKind::Func || e->args.empty())
    return e;
  std::vector<ExprPtr> args;
  bool changed = false;
  for (const ExprPtr &a : e->args) {
    args.push_back(replace_vars(a, var));
    changed |= args.back() != a;
  }
  return changed ? with_args(*e, std::move(args)) : e;
}

} // namespace

RematSet checkpoint_segments(const Function &fn, RematStats &stats) {
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
  RematSet set{std::vector<bool>(body.size()), std::vector<bool>(body.size())};
  for (size_t i = 0; i < body.size(); ++i) {
    set.dropped[i] = from_start[i] && to_end[i] && marker(*body[i].value) != CheckpointMarker::Start;
    set.reads_original[i] = set.dropped[i] || marker(*body[i].value) == CheckpointMarker::End;
  }
  return set;
}

FunctionPtr rematerialize(const Function &fn, const RematSet &set, RematStats &stats, std::vector<size_t> *source) {
  const std::vector<Binding> &body = fn.body.bindings;
  GRADC_CHECK(set.dropped.size() == body.size() && set.reads_original.size() == body.size(), "remat",
              "a remat set for another function");
  std::unordered_map<const Expr *, size_t> def; // var -> binding index
  for (size_t i = 0; i < body.size(); ++i)
    def[body[i].var.get()] = i;

  std::unordered_map<const Expr *, ExprPtr> copy_of;
  std::vector<Binding> out;
  std::vector<size_t> from; // of each binding of `out`
  std::function<ExprPtr(const ExprPtr &)> recompute = [&](const ExprPtr &var) -> ExprPtr {
    auto it = def.find(var.get());
    if (it == def.end() || !set.dropped[it->second])
      return var;
    if (auto done = copy_of.find(var.get()); done != copy_of.end())
      return done->second;
    const Binding &orig = body[it->second];
    ExprPtr value = replace_vars(orig.value, recompute);
    ExprPtr v = make_var(orig.var->name + "_remat", {}, orig.var->span, orig.var->type);
    out.push_back({v, value, false});
    from.push_back(it->second);
    ++stats.recomputed;
    return copy_of[var.get()] = v;
  };
  for (size_t i = 0; i < body.size(); ++i) {
    Binding b = body[i];
    if (!set.reads_original[i])
      b.value = replace_vars(b.value, recompute);
    out.push_back(b);
    from.push_back(i);
  }
  auto result = std::make_shared<Function>(fn);
  result->body.result = replace_vars(fn.body.result, recompute);
  result->body.bindings = std::move(out);
  if (source)
    *source = std::move(from);
  return result;
}

FunctionPtr rematerialize_checkpoints(const Function &fn, RematStats &stats) {
  RematSet set = checkpoint_segments(fn, stats);
  FunctionPtr result = rematerialize(fn, set, stats);
  if (stats.segments)
    log(LogLevel::Info, "remat", "@" + fn.name + ": " + std::to_string(stats.segments) + " checkpoint segments, " +
                                     std::to_string(stats.recomputed) + " bindings recomputed in the backward pass");
  return result;
}

} // namespace gradc
