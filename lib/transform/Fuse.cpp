//===- Fuse.cpp - fuse chains of injective operators ----------------------===//
//
// The last tensor-level pass before lowering. Only injective producers are
// fused, and only into injective consumers, so a fused value is computed
// exactly once per output element and no work is duplicated.
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Log.h"
#include "gradc/transform/Fuse.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Registry.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

constexpr int kMaxFusedDepth = 64;

/// How many times each Var is read, counting reads inside `fn` bodies.
class UseCounter : public ExprVisitor {
public:
  std::unordered_map<const Expr *, int> uses;

protected:
  void on_var(const ExprPtr &v) override { ++uses[v.get()]; }
};

/// The operator calls in a fused expression tree (a call used twice counts twice).
class CallCounter : public ExprVisitor {
public:
  CallCounter() : ExprVisitor(/*share=*/false) {}
  int calls = 0;

private:
  void on_call(const ExprPtr &e) override {
    ++calls;
    visit_children(e);
  }
};

int count_calls(const ExprPtr &e) {
  CallCounter counter;
  counter.visit(e);
  return counter.calls;
}

bool injective(const Expr &e) { return e.kind == ExprKind::Call && e.op->injective(); }

} // namespace

FunctionPtr fuse_injective(const Function &fn) {
  UseCounter counter;
  counter.visit_function(fn);
  std::unordered_map<const Expr *, ExprPtr> single_use; // injective values with one user
  std::unordered_set<const Expr *> fused;               // their vars, once inlined
  std::unordered_map<const Expr *, int> depth;           // nesting depth of each single-use value
  std::vector<Binding> out;
  for (const Binding &b : fn.body.bindings) {
    ExprPtr value = b.value;
    if (injective(*value)) {
      std::vector<ExprPtr> args = value->args;
      int d = 1;
      for (ExprPtr &a : args)
        if (auto it = single_use.find(a.get()); it != single_use.end()) {
          fused.insert(a.get());
          d = std::max(d, depth[a.get()] + 1);
          a = it->second;
        }
      value = with_args(*value, std::move(args));
      // A chain deeper than kMaxFusedDepth starts a new kernel, so that every
      // walk over a fused expression (lowering, the verifier, codegen) stays
      // shallow however long the chain (100 000 chained adds compile).
      if (counter.uses[b.var.get()] == 1 && b.var->type.is_tensor() && d < kMaxFusedDepth) {
        single_use[b.var.get()] = value;
        depth[b.var.get()] = d;
      }
    }
    out.push_back({b.var, value, b.is_let});
  }
  std::erase_if(out, [&](const Binding &b) { return fused.count(b.var.get()) > 0; });
  if (log_enabled(LogLevel::Info))
    for (const Binding &b : out) {
      int ops = count_calls(b.value);
      if (ops > 1)
        log(LogLevel::Info, "fuse", "@" + fn.name + ": %" + b.var->name + " fuses " + std::to_string(ops) +
                                        " operators into one kernel (root " + b.value->op->name + ")");
    }
  auto result = std::make_shared<Function>(fn);
  result->body.bindings = std::move(out);
  return result;
}

} // namespace gradc
