//===- TypeInfer.cpp - type inference through operator relations ----------===//
//
// The first pass after parsing. It rebuilds every node with its type: each
// call is checked by op/Check.h (arity, attributes, relation). An expression
// with an Unknown input is Unknown itself and reports nothing, so every
// independent error is reported exactly once.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/TypeInfer.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Check.h"
#include "gradc/op/Registry.h"

#include <set>
#include <unordered_map>

namespace gradc {
namespace {

class TypeInferencer : public ExprMutator {
public:
  TypeInferencer(const Module &m, DiagEngine &diag, std::unordered_map<const Function *, FunctionPtr> &typed,
                 std::set<const Function *> &in_progress)
      : module_(m), diag_(diag), typed_(typed), in_progress_(in_progress) {
    report_ = [this](Span s, const std::string &msg) { diag_.error(s, msg); };
  }

  /// The typed version of `fn` (memoized by name: a callee is typed first).
  FunctionPtr function(const Function &fn) {
    if (auto it = typed_.find(&fn); it != typed_.end())
      return it->second;
    in_progress_.insert(&fn);
    FunctionPtr out = TypeInferencer(module_, diag_, typed_, in_progress_).mutate_function(fn);
    const Type &result = out->body.result->type;
    if (!fn.ret_type.is_unknown() && !result.has_unknown() && result != fn.ret_type)
      diag_.error(fn.span, "@" + fn.name + ": declared return type " + fn.ret_type.str() + " but the body has type " +
                               result.str());
    in_progress_.erase(&fn);
    return typed_[&fn] = out;
  }

protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    ExprPtr value = mutate(b.value);
    Type t = value->type;
    if (!b.var->annotation.is_unknown() && !t.has_unknown() && t != b.var->annotation) {
      diag_.error(b.var->span, "%" + b.var->name + " is annotated " + b.var->annotation.str() +
                                   " but its value has type " + t.str());
      t = b.var->annotation;
    }
    ExprPtr var = make_var(b.var->name, b.var->annotation, b.var->span, t);
    remap(b.var, var);
    out.push_back({var, value, b.is_let});
  }

  ExprPtr on_call(const ExprPtr &e) override {
    return check_call(e->op, mutated_args(*e), e->attrs, e->span, report_);
  }

  ExprPtr on_tuple(const ExprPtr &e) override { return make_tuple(mutated_args(*e), e->span); }

  ExprPtr on_tuple_get(const ExprPtr &e) override {
    return check_tuple_get(mutate(e->args[0]), e->index, e->span, report_);
  }

  /// A `fn` is a value of function type. Until `scan` consumes one, it is
  /// reported wherever it appears (its body is still checked).
  ExprPtr on_func(const ExprPtr &e) override {
    ExprPtr typed = ExprMutator::on_func(e);
    diag_.error(e->span, "a `fn` value is not supported yet (it will be the body of scan)");
    return typed;
  }

  ExprPtr on_global_call(const ExprPtr &e) override {
    std::vector<ExprPtr> args = mutated_args(*e);
    auto untyped = [&] { return make_global_call(e->name, args, e->span); };
    FunctionPtr callee = module_.find(e->name);
    if (!callee)
      return untyped();
    if (in_progress_.count(callee.get())) {
      diag_.error(e->span, "recursive call of '@" + e->name + "' is not supported");
      return untyped();
    }
    FunctionPtr typed = function(*callee);
    if (typed->params.size() != args.size()) {
      diag_.error(e->span, "@" + e->name + ": expected " + std::to_string(typed->params.size()) +
                               " arguments, found " + std::to_string(args.size()));
      return untyped();
    }
    for (size_t i = 0; i < args.size(); ++i) {
      const Type &t = args[i]->type;
      if (!t.has_unknown() && t != typed->params[i]->type) {
        diag_.error(args[i]->span, "@" + e->name + ": argument " + std::to_string(i + 1) + " has type " + t.str() +
                                       " but %" + typed->params[i]->name + " expects " +
                                       typed->params[i]->type.str());
        return untyped();
      }
    }
    return make_global_call(e->name, args, e->span, typed->body.result->type);
  }

private:
  const Module &module_;
  DiagEngine &diag_;
  std::unordered_map<const Function *, FunctionPtr> &typed_;
  std::set<const Function *> &in_progress_;
  Report report_;

  std::vector<ExprPtr> mutated_args(const Expr &e) {
    std::vector<ExprPtr> args;
    for (const ExprPtr &a : e.args)
      args.push_back(mutate(a));
    return args;
  }
};

} // namespace

Module infer_types(const Module &module, DiagEngine &diag) {
  std::set<std::string> seen;
  std::set<const Function *> in_progress;
  for (const FunctionPtr &fn : module.functions)
    if (!seen.insert(fn->name).second)
      diag.error(fn->span, "function '@" + fn->name + "' is defined more than once");
  std::unordered_map<const Function *, FunctionPtr> typed;
  Module out{module.source, {}};
  TypeInferencer inferencer(module, diag, typed, in_progress);
  for (const FunctionPtr &fn : module.functions)
    out.functions.push_back(inferencer.function(*fn));
  return out;
}

} // namespace gradc
