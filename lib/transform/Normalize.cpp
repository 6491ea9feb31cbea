//===- Normalize.cpp - convert a function body to A-normal form -----------===//
//
// Runs after type inference, before inlining and differentiation, which both
// want one operator per binding and atoms as arguments.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/transform/Passes.h"

namespace gradc {
namespace {

class Normalizer : public ExprMutator {
public:
  FunctionPtr mutate_function(const Function &fn) override {
    auto out = std::make_shared<Function>(*ExprMutator::mutate_function(fn));
    if (!out->body.result->is_atom()) {
      ExprPtr var = make_var("t", {}, out->body.result->span, out->body.result->type);
      out->body.bindings.push_back({var, out->body.result, false});
      out->body.result = var;
    }
    return out;
  }

protected:
  /// A binding of an atom disappears: its uses read the atom. So does one
  /// of a `fn` value: scan(%f, ...) becomes scan(fn (...) {...}, ...).
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    if (b.value->is_atom() || b.value->kind == ExprKind::Func) {
      remap(b.var, mutate(b.value));
      return;
    }
    ExprMutator::mutate_binding(b, out);
  }

  // Every operand becomes an atom, bound first if it is not one.
  ExprPtr on_call(const ExprPtr &e) override { return with_atoms(e); }
  ExprPtr on_global_call(const ExprPtr &e) override { return with_atoms(e); }
  ExprPtr on_tuple(const ExprPtr &e) override { return with_atoms(e); }
  ExprPtr on_tuple_get(const ExprPtr &e) override { return with_atoms(e); }

private:
  ExprPtr with_atoms(const ExprPtr &e) {
    return rebuild_with(e, [this](const ExprPtr &a) { return atom(a); });
  }

  ExprPtr atom(const ExprPtr &e) {
    ExprPtr v = mutate(e);
    if (v->is_atom() || v->kind == ExprKind::Func) // a body stays in place (its own bindings normalized)
      return v;
    ExprPtr var = make_var("t", {}, e->span, v->type);
    current_bindings().push_back({var, v, false});
    remap(e, var); // a shared operand is bound once
    return var;
  }
};

} // namespace

FunctionPtr normalize(const Function &fn) { return Normalizer().mutate_function(fn); }

} // namespace gradc
