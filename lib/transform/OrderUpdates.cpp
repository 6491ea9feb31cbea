//===- OrderUpdates.cpp - updates of parameters after their last reads ----===//
//
// A result written into a parameter (FunctionAttrs::inplace) can be written
// straight into the caller's buffer only when nothing reads the parameter's
// old value after the binding that makes it. This pass moves that binding
// after the other readers, which the program's dependences allow unless a
// reader depends on the new value; lowering copies the result in last where
// the order cannot be had. Otherwise an update runs as early as it can, so
// what only it reads (a training step's gradient) is freed early.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Kernel.h"
#include "gradc/transform/Passes.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_map>

namespace gradc {

namespace {

/// The binding (index) that computes each leaf of the result, depth-first
/// (for a field of a tuple-valued call, the call); -1 where a leaf is a
/// parameter or a constant.
std::vector<int> leaf_producers(const Function &fn, const std::unordered_map<const Expr *, size_t> &index) {
  std::vector<int> out;
  std::function<void(const ExprPtr &)> walk = [&](const ExprPtr &e) {
    auto it = e->kind == ExprKind::Var ? index.find(e.get()) : index.end();
    while (it != index.end() && fn.body.bindings[it->second].value->kind == ExprKind::TupleGet) {
      const ExprPtr &tuple = fn.body.bindings[it->second].value->args[0];
      auto call = index.find(tuple.get());
      if (call == index.end() || fn.body.bindings[call->second].value->kind != ExprKind::Call)
        break;
      it = call;
    }
    if (it != index.end() && fn.body.bindings[it->second].value->kind == ExprKind::Tuple) {
      for (const ExprPtr &f : fn.body.bindings[it->second].value->args)
        walk(f);
    } else if (e->kind == ExprKind::Tuple) {
      for (const ExprPtr &f : e->args)
        walk(f);
    } else if (e->type.is_tuple()) { // a tuple-valued call: its leaves are its own
      for (size_t i = 0, n = leaf_types(e->type).size(); i < n; ++i)
        out.push_back(it != index.end() ? int(it->second) : -1);
    } else {
      out.push_back(it != index.end() ? int(it->second) : -1);
    }
  };
  walk(fn.body.result);
  return out;
}

} // namespace

FunctionPtr order_in_place_updates(const Function &fn) {
  const std::vector<Binding> &body = fn.body.bindings;
  size_t n = body.size();
  if (fn.attrs.inplace.empty() || n == 0)
    return std::make_shared<Function>(fn);
  std::unordered_map<const Expr *, size_t> index;
  for (size_t i = 0; i < n; ++i)
    index[body[i].var.get()] = i;
  std::vector<std::vector<size_t>> reads(n); // the bindings each binding reads
  std::vector<std::vector<const Expr *>> params(n);
  for (size_t i = 0; i < n; ++i)
    for (const ExprPtr &v : free_vars(body[i].value)) {
      if (auto it = index.find(v.get()); it != index.end())
        reads[i].push_back(it->second);
      else
        params[i].push_back(v.get());
    }
  // Edges: reads, then i -> b for each binding i that must come before b.
  std::vector<std::vector<size_t>> successors(n), predecessors(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t r : reads[i]) {
      successors[r].push_back(i);
      predecessors[i].push_back(r);
    }
  std::vector<int> producers = leaf_producers(fn, index);
  for (size_t leaf = 0; leaf < producers.size() && leaf < fn.attrs.inplace.size(); ++leaf) {
    int64_t p = fn.attrs.inplace[leaf];
    if (p < 0 || producers[leaf] < 0)
      continue;
    size_t b = size_t(producers[leaf]);
    const Expr *param = fn.params.at(size_t(p)).get();
    // What b reaches cannot come before it (that would close a cycle).
    std::vector<bool> reached(n, false);
    std::vector<size_t> stack{b};
    reached[b] = true;
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      for (size_t s : successors[i])
        if (!reached[s]) {
          reached[s] = true;
          stack.push_back(s);
        }
    }
    for (size_t i = 0; i < n; ++i)
      if (!reached[i] && std::find(params[i].begin(), params[i].end(), param) != params[i].end()) {
        successors[i].push_back(b);
        predecessors[b].push_back(i);
      }
  }
  // A stable topological order: the earliest binding whose predecessors are
  // placed goes next, an update first: as soon as its operands are computed
  // and the old value's last reader has run (a training step's gradient
  // then dies at once, not when the whole backward pass is done).
  std::vector<bool> update(n, false);
  for (size_t leaf = 0; leaf < producers.size() && leaf < fn.attrs.inplace.size(); ++leaf)
    if (fn.attrs.inplace[leaf] >= 0 && producers[leaf] >= 0)
      update[size_t(producers[leaf])] = true;
  std::vector<size_t> waiting(n, 0);
  for (size_t i = 0; i < n; ++i)
    waiting[i] = predecessors[i].size();
  auto later = [&](size_t a, size_t b) { return update[a] != update[b] ? update[b] : a > b; };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> ready(later);
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0)
      ready.push(i);
  auto out = std::make_shared<Function>(fn);
  out->body.bindings.clear();
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    out->body.bindings.push_back(body[i]);
    for (size_t s : successors[i])
      if (--waiting[s] == 0)
        ready.push(s);
  }
  GRADC_CHECK(out->body.bindings.size() == n, "order updates", "a cycle in @" + fn.name + "'s bindings");
  return out;
}

} // namespace gradc
