//===- Decompose.cpp - expand composite operators into their parts --------===//
//
// A composite (OpBuilder::decompose) has no kernel of its own: each of its
// calls is replaced by the bindings its composition emits, and later uses of
// the call's Var read the composition's value. Most composites have no
// gradient rule either and are expanded before differentiation, so that
// their gradient is their parts'. One with a rule of its own (variance,
// whose parts' gradient would sum x - mean(x) again, a sum that is zero)
// stays a call until the gradient pass has applied that rule, and is
// expanded right after it.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"

namespace gradc {
namespace {

/// Whether `call` is expanded now: a composite, and, before differentiation,
/// one without a gradient rule of its own.
bool expands(const Expr &call, Composites which) {
  return call.op->decompose && (which == Composites::All || !call.op->gradient);
}

class Expander : public ExprMutator {
public:
  explicit Expander(Composites which) : which_(which) {}

private:
  Composites which_;

  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    ExprPtr value = mutate(b.value);
    if (value->kind != ExprKind::Call || !expands(*value, which_)) {
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

/// Whether `fn` calls a composite to expand, also in the body of a `fn` value.
bool has_composite(const Function &fn, Composites which) {
  class Finder : public ExprVisitor {
  public:
    explicit Finder(Composites which) : which(which) {}
    Composites which;
    bool found = false;

  protected:
    void on_call(const ExprPtr &e) override {
      found = found || expands(*e, which);
      visit_children(e);
    }
  } finder(which);
  finder.visit_function(fn);
  return finder.found;
}

} // namespace

FunctionPtr expand_composites(const Function &fn, Composites which) {
  // A composition may use composites itself: expand until none is left.
  FunctionPtr out = std::make_shared<Function>(fn);
  for (int round = 0; has_composite(*out, which); ++round) {
    GRADC_CHECK(round < 16, "decompose", "composite operators that expand into each other");
    out = Expander(which).mutate_function(*out);
  }
  return out;
}

} // namespace gradc
