//===- TypeInfer.cpp - type inference through operator relations ----------===//
//
// The first pass after parsing. Calls are checked in three steps: arity,
// attributes against the operator's schema (unknown or ill-typed attributes
// are errors; defaults are filled in), then the type relation. An expression
// with an Unknown input is Unknown itself and reports nothing, so every
// independent error is reported exactly once.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/TypeInfer.h"
#include "gradc/op/Check.h"
#include "gradc/op/Registry.h"

#include <functional>
#include <set>
#include <unordered_map>

namespace gradc {
namespace {

class TypeInferencer {
public:
  TypeInferencer(Module &m, DiagEngine &diag) : module_(m), diag_(diag) {
    report_ = [this](Span s, const std::string &msg) { diag_.error(s, msg); };
  }

  void run() {
    std::set<std::string> seen;
    for (const FunctionPtr &fn : module_.functions) {
      if (!seen.insert(fn->name).second)
        diag_.error(fn->span, "function '@" + fn->name + "' is defined more than once");
    }
    for (const FunctionPtr &fn : module_.functions)
      function(*fn);
  }

private:
  Module &module_;
  DiagEngine &diag_;
  Report report_;
  std::unordered_map<const Function *, int> state_; // 1 = in progress, 2 = done

  void function(Function &fn) {
    int &st = state_[&fn];
    if (st == 2)
      return;
    if (st == 1) {
      diag_.error(fn.span, "recursive call of '@" + fn.name + "' is not supported");
      return;
    }
    st = 1;
    body(fn.body);
    const Type &result = fn.body.result->type;
    if (!fn.ret_type.is_unknown() && !result.has_unknown() && result != fn.ret_type)
      diag_.error(fn.span, "@" + fn.name + ": declared return type " + fn.ret_type.str() + " but the body has type " +
                               result.str());
    state_[&fn] = 2;
  }

  void body(Body &b) {
    for (Binding &bind : b.bindings) {
      expr(*bind.value);
      const Type &t = bind.value->type;
      if (!bind.var->annotation.is_unknown() && !t.has_unknown() && t != bind.var->annotation) {
        diag_.error(bind.var->span, "%" + bind.var->name + " is annotated " + bind.var->annotation.str() +
                                        " but its value has type " + t.str());
        bind.var->type = bind.var->annotation;
      } else {
        bind.var->type = t;
      }
    }
    expr(*b.result);
  }

  void expr(Expr &e) {
    switch (e.kind) {
    case ExprKind::Var:
    case ExprKind::Constant:
      return;
    case ExprKind::Call:
      for (const ExprPtr &a : e.args)
        expr(*a);
      e.type = check_call(e, report_);
      return;
    case ExprKind::Tuple:
    case ExprKind::TupleGet:
      for (const ExprPtr &a : e.args)
        expr(*a);
      e.type = check_structural(e, report_);
      return;
    case ExprKind::GlobalCall:
      global_call(e);
      return;
    case ExprKind::Func:
      body(e.func->body);
      // A fn's value is only used by scan; its type stands for its result.
      e.type = e.func->body.result->type;
      return;
    }
  }

  void global_call(Expr &e) {
    for (const ExprPtr &a : e.args)
      expr(*a);
    FunctionPtr callee = module_.find(e.name);
    e.type = Type::unknown();
    if (!callee)
      return;
    function(*callee);
    if (callee->params.size() != e.args.size()) {
      diag_.error(e.span, "@" + e.name + ": expected " + std::to_string(callee->params.size()) + " arguments, found " +
                              std::to_string(e.args.size()));
      return;
    }
    for (size_t i = 0; i < e.args.size(); ++i) {
      const Type &t = e.args[i]->type;
      if (!t.has_unknown() && t != callee->params[i]->type) {
        diag_.error(e.args[i]->span, "@" + e.name + ": argument " + std::to_string(i + 1) + " has type " + t.str() +
                                         " but %" + callee->params[i]->name + " expects " +
                                         callee->params[i]->type.str());
        return;
      }
    }
    e.type = callee->body.result->type;
  }
};

} // namespace

void infer_types(Module &module, DiagEngine &diag) { TypeInferencer(module, diag).run(); }

} // namespace gradc
