//===- Remat.cpp - recompute dropped values where they are read late ------===//
//
// Selection and rewriting are separate: checkpoint_segments reads the
// markers (manual), and rematerialize rewrites any RematSet, whoever chose
// it. Runs in the remat stage, after fusion, on every function: a binding
// is a kernel, and what it reads is every Var inside its fused calls.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
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

/// `e` with every Var it reads replaced by var(Var), through nested calls
/// and tuples; a `fn` value (a scan's body, closed) is kept as it is. With
/// `fresh`, every call and tuple node is new even where nothing changed: a
/// recomputation is a value of its own, and passes that count uses per node
/// (fusion) must not see two bindings share one.
ExprPtr replace_vars(const ExprPtr &e, const std::function<ExprPtr(const ExprPtr &)> &var, bool fresh = false) {
  if (e->kind == ExprKind::Var)
    return var(e);
  if (e->kind == ExprKind::Func || e->kind == ExprKind::Constant)
    return e;
  std::vector<ExprPtr> args;
  bool changed = fresh;
  for (const ExprPtr &a : e->args) {
    args.push_back(replace_vars(a, var, fresh));
    changed |= args.back() != a;
  }
  return changed ? with_args(*e, std::move(args)) : e;
}

/// The Vars `e` reads, in the order replace_vars meets them (each once).
std::vector<ExprPtr> read_vars(const ExprPtr &e) {
  std::vector<ExprPtr> vars;
  std::unordered_set<const Expr *> seen;
  replace_vars(e, [&](const ExprPtr &v) {
    if (seen.insert(v.get()).second)
      vars.push_back(v);
    return v;
  });
  return vars;
}

} // namespace

CheckpointReach checkpoint_reach(const Function &fn, const std::function<bool(size_t)> &opens) {
  const std::vector<Binding> &body = fn.body.bindings;
  std::unordered_map<const Expr *, size_t> def; // var -> binding index
  for (size_t i = 0; i < body.size(); ++i)
    def[body[i].var.get()] = i;
  std::vector<std::vector<size_t>> reads(body.size());
  for (size_t i = 0; i < body.size(); ++i)
    for (const ExprPtr &v : free_vars(body[i].value))
      if (auto it = def.find(v.get()); it != def.end())
        reads[i].push_back(it->second);
  CheckpointReach r{std::vector<bool>(body.size()), std::vector<bool>(body.size())};
  for (size_t i = 0; i < body.size(); ++i) {
    if (marker(*body[i].value) == CheckpointMarker::Start) {
      r.from_start[i] = opens(i);
      continue;
    }
    for (size_t j : reads[i])
      if (r.from_start[j] && marker(*body[j].value) != CheckpointMarker::End)
        r.from_start[i] = true;
  }
  for (size_t i = body.size(); i-- > 0;)
    if (marker(*body[i].value) == CheckpointMarker::End || r.to_end[i])
      for (size_t j : reads[i])
        if (marker(*body[j].value) != CheckpointMarker::Start)
          r.to_end[j] = true;
  return r;
}

std::vector<bool> CheckpointReach::segment() const {
  std::vector<bool> in(from_start.size());
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = from_start[i] && to_end[i];
  return in;
}

RematSet checkpoint_segments(const Function &fn, RematStats &stats) {
  const std::vector<Binding> &body = fn.body.bindings;
  for (const Binding &b : body)
    stats.segments += marker(*b.value) == CheckpointMarker::Start;
  std::vector<bool> segment = checkpoint_reach(fn, [](size_t) { return true; }).segment();
  RematSet set{std::vector<bool>(body.size()), std::vector<bool>(body.size())};
  for (size_t i = 0; i < body.size(); ++i) {
    set.dropped[i] = segment[i] && marker(*body[i].value) != CheckpointMarker::Start;
    set.reads_original[i] = set.dropped[i] || marker(*body[i].value) == CheckpointMarker::End;
  }
  return set;
}

RematSchedule schedule_of(const Function &fn, const RematSet &set) {
  const std::vector<Binding> &body = fn.body.bindings;
  GRADC_CHECK(set.dropped.size() == body.size() && set.reads_original.size() == body.size(), "remat",
              "a remat set for another function");
  std::unordered_map<const Expr *, size_t> def; // var -> binding index
  for (size_t i = 0; i < body.size(); ++i)
    def[body[i].var.get()] = i;
  RematSchedule schedule{set.reads_original, std::vector<std::vector<size_t>>(body.size() + 1)};
  std::vector<bool> copied(body.size());
  // A dropped value's copy after those of the dropped values it reads.
  std::function<void(const ExprPtr &, std::vector<size_t> &)> need = [&](const ExprPtr &var, std::vector<size_t> &list) {
    auto it = def.find(var.get());
    if (it == def.end() || !set.dropped[it->second] || copied[it->second])
      return;
    copied[it->second] = true;
    for (const ExprPtr &a : read_vars(body[it->second].value))
      need(a, list);
    list.push_back(it->second);
  };
  for (size_t j = 0; j < body.size(); ++j)
    if (!set.reads_original[j])
      for (const ExprPtr &v : read_vars(body[j].value))
        need(v, schedule.before[j]);
  for (const ExprPtr &v : read_vars(fn.body.result))
    need(v, schedule.before[body.size()]);
  return schedule;
}

FunctionPtr rematerialize(const Function &fn, const RematSet &set, RematStats &stats, std::vector<size_t> *source) {
  return rematerialize(fn, schedule_of(fn, set), stats, source);
}

FunctionPtr rematerialize(const Function &fn, const RematSchedule &schedule, RematStats &stats,
                          std::vector<size_t> *source) {
  const std::vector<Binding> &body = fn.body.bindings;
  GRADC_CHECK(schedule.reads_original.size() == body.size() && schedule.before.size() == body.size() + 1, "remat",
              "a remat schedule for another function");
  std::unordered_map<const Expr *, ExprPtr> latest; // a Var of `fn` -> its latest instance
  std::unordered_map<std::string, int> copies;      // copies made of each name, for fresh names
  std::unordered_set<std::string> names;
  for (const ExprPtr &p : fn.params)
    names.insert(p->name);
  for (const Binding &b : body)
    names.insert(b.var->name);
  auto current = [&](const ExprPtr &var) {
    auto it = latest.find(var.get());
    return it == latest.end() ? var : it->second;
  };
  std::vector<Binding> out;
  std::vector<size_t> from; // of each binding of `out`
  std::vector<bool> is_copy;
  auto emit_copies = [&](const std::vector<size_t> &list) {
    for (size_t i : list) {
      const Binding &orig = body.at(i);
      std::string name;
      do { // x_remat, then x_remat2, ...: every name in the text unique
        int k = ++copies[orig.var->name];
        name = orig.var->name + "_remat" + (k > 1 ? std::to_string(k) : "");
      } while (!names.insert(name).second);
      ExprPtr v = make_var(name, {}, orig.var->span, orig.var->type);
      out.push_back({v, replace_vars(orig.value, current, /*fresh=*/true), false});
      from.push_back(i);
      is_copy.push_back(true);
      latest[orig.var.get()] = v;
    }
  };
  for (size_t j = 0; j < body.size(); ++j) {
    emit_copies(schedule.before[j]);
    Binding b = body[j];
    if (!schedule.reads_original[j])
      b.value = replace_vars(b.value, current);
    out.push_back(b);
    from.push_back(j);
    is_copy.push_back(false);
  }
  emit_copies(schedule.before[body.size()]);
  ExprPtr result_value = replace_vars(fn.body.result, current);
  // A copy nobody reads is not made: a schedule may copy a value again for
  // a segment whose readers of it use an earlier copy (resnet18's stem:
  // batch norm's 6.4 MB output recomputed for nothing, at the adjoint's
  // smallest workspace). Walking back, a copy is kept when a later binding
  // or the result reads it.
  std::unordered_set<const Expr *> read;
  for (const ExprPtr &v : read_vars(result_value))
    read.insert(v.get());
  std::vector<bool> keep(out.size(), true);
  for (size_t k = out.size(); k-- > 0;) {
    if (is_copy[k] && !read.count(out[k].var.get())) {
      keep[k] = false;
      continue;
    }
    for (const ExprPtr &v : read_vars(out[k].value))
      read.insert(v.get());
  }
  std::vector<Binding> kept;
  std::vector<size_t> kept_from;
  std::vector<bool> ever_copied(body.size());
  for (size_t k = 0; k < out.size(); ++k) {
    if (!keep[k])
      continue;
    kept.push_back(std::move(out[k]));
    kept_from.push_back(from[k]);
    if (!is_copy[k])
      continue;
    const Binding &orig = body.at(from[k]);
    ++stats.recomputed;
    stats.extra_flops += expr_flops(*orig.value);
    if (!ever_copied[from[k]]) {
      ever_copied[from[k]] = true;
      stats.recomputed_values.push_back(orig.var->name);
    }
  }
  auto result = std::make_shared<Function>(fn);
  result->body.result = result_value;
  result->body.bindings = std::move(kept);
  if (source)
    *source = std::move(kept_from);
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
