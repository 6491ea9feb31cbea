//===- Fuse.cpp - fuse injective chains, epilogues and producers ----------===//
//
// The last tensor-level pass before lowering. A value with one user fuses
// into it (becomes a nested call, computed inside its user's kernel):
//  * an injective producer into an injective consumer: one loop nest, each
//    fused value computed once per output element;
//  * an injective producer into an operator that fuses_producers (matrix
//    products, reductions), which reads each element a bounded number of
//    times: transpose(dy) into dyᵀ·x, a / b into sum(a / b);
//  * an operator that fuses_epilogue (the anchor) into injective consumers
//    that read it at their own output index, probed through their element
//    functions: bias_add and relu after dense, the relu gradient after the
//    product that feeds it. The anchor's kernel then stores the consumers'
//    value; one anchor per kernel.
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Log.h"
#include "gradc/transform/Fuse.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Kernel.h"
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

/// Whether injective `call` reads operand `arg` at its own output index and
/// nowhere else (bias_add, relu, where: yes; transpose, a broadcast operand:
/// no), found by building its element expression once over symbolic indices.
bool reads_elementwise(const ExprPtr &call, size_t arg) {
  const Type &t = call->type, &at = call->args[arg]->type;
  if (!t.is_tensor() || !at.is_tensor() || !(at.shape == t.shape))
    return false;
  Index out;
  for (size_t d = 0; d < t.shape.size(); ++d)
    out.push_back(var_ref(std::make_shared<LVar>(LVar{"i" + std::to_string(d)})));
  int reads = 0;
  bool same = true;
  ElementCtx ctx{*call, out, [&](size_t a, const Index &idx) {
                   const Type &type = call->args[a]->type;
                   if (a == arg) {
                     ++reads;
                     same = same && idx == out;
                   }
                   auto probe = std::make_shared<Buffer>(Buffer{"probe", type.dtype, {1}, BufferScope::Input});
                   return load(probe, int_imm(0));
                 }};
  call->op->element(ctx);
  return reads == 1 && same;
}

/// A single-use value that may fuse into its user.
struct Fusable {
  ExprPtr value;
  int depth = 1;
  bool anchored = false; // it is, or contains, an operator that fuses_epilogue
};

} // namespace

FunctionPtr fuse_operators(const Function &fn) {
  UseCounter counter;
  counter.visit_function(fn);
  std::unordered_map<const Expr *, Fusable> single_use; // by var
  std::unordered_set<const Expr *> fused;                // vars whose value moved into their user
  std::vector<Binding> out;
  for (const Binding &b : fn.body.bindings) {
    ExprPtr value = b.value;
    if (value->kind == ExprKind::Call) {
      bool inj = injective(*value);
      Fusable self{nullptr, 1, false};
      std::vector<ExprPtr> args = value->args;
      for (size_t i = 0; i < args.size(); ++i) {
        auto it = single_use.find(args[i].get());
        if (it == single_use.end())
          continue;
        const Fusable &f = it->second;
        bool plain_producer = injective(*f.value) && !f.anchored;
        bool ok = inj ? plain_producer || (!self.anchored && reads_elementwise(value, i))
                      : plain_producer && value->op->fuses_producers;
        if (!ok)
          continue;
        fused.insert(args[i].get());
        self.depth = std::max(self.depth, f.depth + 1);
        self.anchored = self.anchored || f.anchored;
        args[i] = f.value;
      }
      value = with_args(*value, std::move(args));
      // A chain deeper than kMaxFusedDepth starts a new kernel, so that every
      // walk over a fused expression (lowering, the verifier, codegen) stays
      // shallow however long the chain (100 000 chained adds compile).
      bool fusable = inj || (value->op->fuses_epilogue && !self.anchored);
      if (fusable && counter.uses[b.var.get()] == 1 && b.var->type.is_tensor() && self.depth < kMaxFusedDepth) {
        self.value = value;
        self.anchored = self.anchored || !inj;
        single_use[b.var.get()] = self;
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
