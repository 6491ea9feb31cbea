//===- Inline.cpp - inline calls of other definitions ---------------------===//
//
// Runs after normalize and before differentiation, so that the gradient pass
// sees one straight-line body. Each call site gets its own copy of the callee.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/transform/Passes.h"

#include <algorithm>
#include <unordered_map>

namespace gradc {
namespace {

class Inliner : public ExprMutator {
public:
  explicit Inliner(const Module &module) : module_(module) {}

protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    if (b.value->kind != ExprKind::GlobalCall)
      return ExprMutator::mutate_binding(b, out);
    FunctionPtr callee = module_.find(b.value->name);
    GRADC_CHECK(callee, "inline", "call of unknown function @" + b.value->name);
    // A fresh, normalized, inlined copy; its parameters read the arguments.
    FunctionPtr copy = Inliner(module_).mutate_function(*normalize(*clone_function(*callee)));
    Inliner args_in(module_);
    for (size_t i = 0; i < copy->params.size(); ++i)
      args_in.remap(copy->params[i], mutate(b.value->args[i]));
    for (const Binding &inner : copy->body.bindings)
      args_in.mutate_binding(inner, out);
    remap(b.var, args_in.mutate(copy->body.result));
  }

private:
  const Module &module_;
};

} // namespace

FunctionPtr inline_calls(const Function &fn, const Module &module) { return Inliner(module).mutate_function(fn); }

int64_t inlined_size(const Module &module, const Function &fn, int64_t limit,
                     std::unordered_map<std::string, int64_t> &memo) {
  auto [it, fresh] = memo.try_emplace(fn.name, 1); // a cycle (rejected earlier) counts as one
  if (!fresh)
    return it->second;
  int64_t n = 0;
  for (const Binding &b : fn.body.bindings) {
    int64_t add = 1;
    if (b.value->kind == ExprKind::GlobalCall)
      if (FunctionPtr callee = module.find(b.value->name))
        add = inlined_size(module, *callee, limit, memo);
    n = std::min<int64_t>(n + add, limit + 1);
  }
  return memo[fn.name] = n;
}

bool check_inline_size(const Module &module, DiagEngine &diag) {
  std::unordered_map<std::string, int64_t> memo;
  auto inlined = [&](const Function &fn) { return inlined_size(module, fn, kMaxInlinedBindings, memo); };
  // Report the functions that cross the limit themselves, not their callers.
  auto over = [&](const Function &fn) { return inlined(fn) > kMaxInlinedBindings; };
  bool ok = true;
  for (const FunctionPtr &fn : module.functions) {
    if (!over(*fn))
      continue;
    ok = false;
    bool callee_over = false;
    for (const Binding &b : fn->body.bindings)
      if (b.value->kind == ExprKind::GlobalCall)
        if (FunctionPtr callee = module.find(b.value->name))
          callee_over |= over(*callee);
    if (!callee_over)
      diag.error(fn->span, "@" + fn->name + " would have more than " + std::to_string(kMaxInlinedBindings) +
                               " bindings once the functions it calls are inlined (each call site gets a copy)");
  }
  return ok;
}

} // namespace gradc
