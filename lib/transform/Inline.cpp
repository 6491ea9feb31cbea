//===- Inline.cpp - inline calls of other definitions ---------------------===//
//
// Runs after normalize and before differentiation, so that the gradient pass
// sees one straight-line body. Each call site gets its own copy of the callee.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/transform/Passes.h"

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

} // namespace gradc
