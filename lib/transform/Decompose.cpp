//===- Decompose.cpp - expand composite operators into their parts --------===//
//
// A composite (OpBuilder::decompose) has no gradient rule or kernel of its
// own: each of its calls is replaced by the bindings its composition emits,
// and later uses of the call's Var read the composition's value.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"

namespace gradc {
namespace {

class Expander : public ExprMutator {
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    ExprPtr value = mutate(b.value);
    if (value->kind != ExprKind::Call || !value->op->decompose) {
      ExprMutator::mutate_binding(b, out);
      return;
    }
    Builder builder(out, value->span);
    size_t before = out.size();
    ExprPtr result = value->op->decompose(builder, value->args, value->attrs);
    GRADC_CHECK(result->type == b.var->type, "decompose",
                value->op->name + "'s composition has type " + result->type.str() + ", the call " +
                    b.var->type.str());
    // The composition's value keeps the call's name (%0 stays %0 in dumps),
    // if the composition bound it: a composition may return a value that
    // was there before (collapse_sum_like to the same shape is its input),
    // and that binding keeps its name.
    if (out.size() > before && out.back().var == result) {
      ExprPtr named = make_var(b.var->name, b.var->annotation, b.var->span, result->type);
      out.back().var = named;
      result = named;
    }
    remap(b.var, result);
  }
};

/// Whether `fn` calls a composite, also in the body of a `fn` value.
bool has_composite(const Function &fn) {
  class Finder : public ExprVisitor {
  public:
    bool found = false;

  protected:
    void on_call(const ExprPtr &e) override {
      found = found || e->op->decompose;
      visit_children(e);
    }
  } finder;
  finder.visit_function(fn);
  return finder.found;
}

} // namespace

FunctionPtr expand_composites(const Function &fn) {
  // A composition may use composites itself: expand until none is left.
  FunctionPtr out = std::make_shared<Function>(fn);
  for (int round = 0; has_composite(*out); ++round) {
    GRADC_CHECK(round < 16, "decompose", "composite operators that expand into each other");
    out = Expander().mutate_function(*out);
  }
  return out;
}

} // namespace gradc
