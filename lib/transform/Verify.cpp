//===- Verify.cpp - the tensor-IR verifier --------------------------------===//
#include "gradc/transform/Verify.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Check.h"
#include "gradc/op/Registry.h"

#include <unordered_set>

namespace gradc {
namespace {

class Verifier : public ExprVisitor {
public:
  Verifier(IRForm form, const std::string &after, const Module *module)
      : ExprVisitor(/*share=*/true), form_(form), after_(after), module_(module) {}

  void verify_function(const Function &fn) {
    function_ = fn.name.empty() ? "a fn value" : "@" + fn.name;
    visit_function(fn);
  }

private:
  IRForm form_;
  const std::string &after_;
  const Module *module_;
  std::string function_;
  std::unordered_set<const Expr *> defined_; // Vars in scope
  std::unordered_set<const Expr *> ever_defined_;
  std::unordered_set<const Expr *> bound_values_; // the value node of every binding

  [[noreturn]] void fail(const std::string &what) {
    internal_error("verifier", "after " + after_ + ", in " + function_ + ": " + what);
  }

  static std::string var_name(const Expr &v) { return "%" + v.name; }

  void define(const ExprPtr &var) {
    if (var->kind != ExprKind::Var)
      fail("a binding or parameter that is not a Var");
    if (!ever_defined_.insert(var.get()).second)
      fail("%" + var->name + " is defined twice");
    defined_.insert(var.get());
  }

  void visit_function(const Function &fn) override {
    for (const ExprPtr &p : fn.params)
      define(p);
    for (const Binding &b : fn.body.bindings)
      visit_binding(b);
    if (!fn.body.result)
      fail("no result");
    if (form_ != IRForm::Typed && !fn.body.result->is_atom())
      fail("the result is not an atom");
    visit(fn.body.result);
    // A fn value's names go out of scope after it.
    for (const ExprPtr &p : fn.params)
      defined_.erase(p.get());
    for (const Binding &b : fn.body.bindings)
      defined_.erase(b.var.get());
  }

  void visit_binding(const Binding &b) override {
    const Expr &v = *b.value;
    if (form_ != IRForm::Typed) {
      if (v.is_atom())
        fail("%" + b.var->name + " is bound to an atom");
      for (size_t i = 0; i < v.args.size(); ++i) {
        const ExprPtr &a = v.args[i];
        bool fused_ok = form_ == IRForm::Fused && v.kind == ExprKind::Call &&
                        (v.op->injective(v) || v.op->producer_reads(v, i) > 0);
        if (!a->is_atom() && !(fused_ok && fused_operand(*a)) && !is_body(v, *a))
          fail("an operand of %" + b.var->name + "'s value is not an atom");
      }
    }
    visit(b.value);
    if (!(b.var->type == v.type))
      fail("%" + b.var->name + " has type " + b.var->type.str() + " but is bound to a value of type " + v.type.str());
    define(b.var);
    // A binding's value is its own node: passes count uses per node (a
    // recomputation that reused the original's call made fusion drop a
    // value another binding still read).
    if (!v.is_atom() && !bound_values_.insert(&v).second)
      fail("%" + b.var->name + " is bound to the same node as another binding");
  }

  /// The `fn` value that is a scan's argument 0.
  static bool is_body(const Expr &call, const Expr &a) {
    if (call.kind != ExprKind::Call || a.kind != ExprKind::Func)
      return false;
    for (size_t i = 0; call.op->is_fn_arg(i) && i < call.args.size(); ++i)
      if (&a == call.args[i].get())
        return true;
    return false;
  }

  /// A fused operand: an injective call, or an anchor (a call that
  /// fuses_epilogue) under an injective one, whose operands are atoms or
  /// fused operands.
  bool fused_operand(const Expr &e) const {
    bool parts = e.kind == ExprKind::Tuple; // a tuple of fused parts (concatenate's)
    if (!parts && (e.kind != ExprKind::Call || !(e.op->injective(e) || e.op->fuses_epilogue)))
      return false;
    for (const ExprPtr &a : e.args)
      if (!a->is_atom() && !fused_operand(*a))
        return false;
    return true;
  }

  void typed(const Expr &e) {
    if (e.type.kind == Type::Unknown || e.type.has_unknown())
      fail("a node of unknown type");
  }

  void on_var(const ExprPtr &e) override {
    if (!defined_.count(e.get()))
      fail(var_name(*e) + " is used where it is not defined");
    typed(*e);
  }
  void on_constant(const ExprPtr &e) override { typed(*e); }

  void on_call(const ExprPtr &e) override {
    visit_children(e);
    typed(*e);
    std::string problem;
    ExprPtr checked = check_call(e->op, e->args, e->attrs, e->span,
                                 [&](Span, const std::string &msg) { problem = problem.empty() ? msg : problem; });
    if (!problem.empty())
      fail("call of " + e->op->name + " fails its relation: " + problem);
    if (!checked || !(checked->type == e->type))
      fail("call of " + e->op->name + " has type " + e->type.str() + " but its relation gives " +
           (checked ? checked->type.str() : std::string("nothing")));
  }

  void on_global_call(const ExprPtr &e) override {
    visit_children(e);
    typed(*e);
    if (module_ && !module_->find(e->name))
      fail("a call of @" + e->name + ", which is not defined");
  }

  void on_tuple(const ExprPtr &e) override {
    visit_children(e);
    typed(*e);
    bool ok = e->type.is_tuple() && e->type.fields.size() == e->args.size();
    for (size_t i = 0; ok && i < e->args.size(); ++i)
      ok = e->type.fields[i] == e->args[i]->type;
    if (!ok)
      fail("a tuple of type " + e->type.str() + " whose fields have other types");
  }

  void on_tuple_get(const ExprPtr &e) override {
    visit_children(e);
    typed(*e);
    const Type &t = e->args[0]->type;
    if (!t.is_tuple() || e->index < 0 || size_t(e->index) >= t.fields.size() || !(t.fields[e->index] == e->type))
      fail("a projection ." + std::to_string(e->index) + " of type " + e->type.str() + " from " + t.str());
  }
};

} // namespace

void verify(const Function &fn, IRForm form, const std::string &after_pass) {
  Verifier(form, after_pass, nullptr).verify_function(fn);
}

void verify(const Module &m, IRForm form, const std::string &after_pass) {
  for (const FunctionPtr &fn : m.functions)
    Verifier(form, after_pass, &m).verify_function(*fn);
}

} // namespace gradc
