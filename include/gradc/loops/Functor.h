//===- Functor.h - visitors and mutators of the loop IR -------------------===//
//
// Every walk over the loop IR derives from one of these, so a new statement or
// expression kind is taught once, here (the tensor IR's ir/Functor.h is the
// same design).
//
// * LExprFunctor<R(Args...)> and StmtFunctor<R(Args...)> are the one dispatch
//   on the node kind, a hook per kind. The printer and the LLVM emitter
//   derive from them directly.
// * LoopVisitor reads: its defaults visit every child statement and every
//   operand, index and value.
// * LoopMutator rebuilds through the checked constructors of LoopIR.h: a
//   changed child gives a new parent, an unchanged subtree is returned as it
//   is (shared). Loop variables and buffers are kept unless a hook maps them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

#include <optional>

#include <unordered_map>

namespace gradc {

/// The internal error of a functor reaching a kind it does not handle.
[[noreturn]] void unhandled_loop_kind(const char *what);

template <typename Signature> class LExprFunctor;
template <typename R, typename... Args> class LExprFunctor<R(Args...)> {
public:
  virtual ~LExprFunctor() = default;
  R dispatch(const LExprPtr &e, Args... args) {
    switch (e->kind) {
    case LExprKind::IntImm:
      return on_int_imm(e, args...);
    case LExprKind::FloatImm:
      return on_float_imm(e, args...);
    case LExprKind::Var:
      return on_var(e, args...);
    case LExprKind::Load:
      return on_load(e, args...);
    case LExprKind::Unary:
      return on_unary(e, args...);
    case LExprKind::Binary:
      return on_binary(e, args...);
    case LExprKind::Compare:
      return on_compare(e, args...);
    case LExprKind::Select:
      return on_select(e, args...);
    case LExprKind::Cast:
      return on_cast(e, args...);
    case LExprKind::MulAdd:
      return on_mul_add(e, args...);
    case LExprKind::Shuffle:
      return on_shuffle(e, args...);
    }
    unhandled_loop_kind("expression");
  }

protected:
  virtual R on_int_imm(const LExprPtr &e, Args...) = 0;
  virtual R on_float_imm(const LExprPtr &e, Args...) = 0;
  virtual R on_var(const LExprPtr &e, Args...) = 0;
  virtual R on_load(const LExprPtr &e, Args...) = 0;
  virtual R on_unary(const LExprPtr &e, Args...) = 0;
  virtual R on_binary(const LExprPtr &e, Args...) = 0;
  virtual R on_compare(const LExprPtr &e, Args...) = 0;
  virtual R on_select(const LExprPtr &e, Args...) = 0;
  virtual R on_cast(const LExprPtr &e, Args...) = 0;
  virtual R on_mul_add(const LExprPtr &e, Args...) = 0;
  virtual R on_shuffle(const LExprPtr &e, Args...) = 0;
};

template <typename Signature> class StmtFunctor;
template <typename R, typename... Args> class StmtFunctor<R(Args...)> {
public:
  virtual ~StmtFunctor() = default;
  R dispatch(const StmtPtr &s, Args... args) {
    switch (s->kind) {
    case StmtKind::For:
      return on_for(s, args...);
    case StmtKind::Store:
      return on_store(s, args...);
    case StmtKind::Seq:
      return on_seq(s, args...);
    case StmtKind::If:
      return on_if(s, args...);
    case StmtKind::Alloc:
      return on_alloc(s, args...);
    case StmtKind::Barrier:
      return on_barrier(s, args...);
    case StmtKind::Mma:
      return on_mma(s, args...);
    }
    unhandled_loop_kind("statement");
  }

protected:
  virtual R on_for(const StmtPtr &s, Args...) = 0;
  virtual R on_store(const StmtPtr &s, Args...) = 0;
  virtual R on_seq(const StmtPtr &s, Args...) = 0;
  virtual R on_if(const StmtPtr &s, Args...) = 0;
  virtual R on_alloc(const StmtPtr &s, Args...) = 0;
  virtual R on_barrier(const StmtPtr &s, Args...) = 0;
  virtual R on_mma(const StmtPtr &s, Args...) = 0;
};

class LoopVisitor : protected StmtFunctor<void()>, protected LExprFunctor<void()> {
public:
  void visit(const StmtPtr &s) {
    if (s)
      StmtFunctor<void()>::dispatch(s);
  }
  void visit(const LExprPtr &e) { LExprFunctor<void()>::dispatch(e); }

protected:
  void on_for(const StmtPtr &s) override { visit(s->body); }
  void on_store(const StmtPtr &s) override {
    visit(s->index);
    visit(s->value);
  }
  void on_seq(const StmtPtr &s) override {
    for (const StmtPtr &c : s->seq)
      visit(c);
  }
  void on_if(const StmtPtr &s) override {
    visit(s->value);
    visit(s->body);
    visit(s->else_body);
  }
  void on_alloc(const StmtPtr &s) override { visit(s->body); }
  void on_barrier(const StmtPtr &) override {}
  void on_mma(const StmtPtr &s) override {
    visit(s->index);
    for (const LExprPtr &e : s->inputs)
      visit(e);
  }

  void on_int_imm(const LExprPtr &) override {}
  void on_float_imm(const LExprPtr &) override {}
  void on_var(const LExprPtr &) override {}
  void on_load(const LExprPtr &e) override { visit_operands(e); }
  void on_unary(const LExprPtr &e) override { visit_operands(e); }
  void on_binary(const LExprPtr &e) override { visit_operands(e); }
  void on_compare(const LExprPtr &e) override { visit_operands(e); }
  void on_select(const LExprPtr &e) override { visit_operands(e); }
  void on_cast(const LExprPtr &e) override { visit_operands(e); }
  void on_mul_add(const LExprPtr &e) override { visit_operands(e); }
  void on_shuffle(const LExprPtr &e) override { visit_operands(e); }
  void visit_operands(const LExprPtr &e) {
    for (const LExprPtr &o : e->operands)
      visit(o);
  }
};

class LoopMutator : protected StmtFunctor<StmtPtr()>, protected LExprFunctor<LExprPtr()> {
public:
  StmtPtr mutate(const StmtPtr &s) { return s ? StmtFunctor<StmtPtr()>::dispatch(s) : s; }
  LExprPtr mutate(const LExprPtr &e) {
    if (!memoized_)
      return LExprFunctor<LExprPtr()>::dispatch(e);
    auto it = memo_.find(e.get());
    if (it != memo_.end())
      return it->second;
    LExprPtr r = LExprFunctor<LExprPtr()>::dispatch(e);
    memo_.emplace(e.get(), r);
    return r;
  }

protected:
  /// A mutator whose expression rewrite depends on the node alone (not on
  /// where it is) sets this: a node shared by several places stays one node
  /// (the verifier's guards, `if (e < c)`, know `e` by its node).
  bool memoized_ = false;
  std::unordered_map<const LExpr *, LExprPtr> memo_;

  StmtPtr on_for(const StmtPtr &s) override;
  StmtPtr on_store(const StmtPtr &s) override;
  StmtPtr on_seq(const StmtPtr &s) override;
  StmtPtr on_if(const StmtPtr &s) override;
  StmtPtr on_alloc(const StmtPtr &s) override;
  StmtPtr on_barrier(const StmtPtr &s) override { return s; }
  StmtPtr on_mma(const StmtPtr &s) override;

  LExprPtr on_int_imm(const LExprPtr &e) override { return e; }
  LExprPtr on_float_imm(const LExprPtr &e) override { return e; }
  LExprPtr on_var(const LExprPtr &e) override { return e; }
  LExprPtr on_load(const LExprPtr &e) override { return rebuild(e); }
  LExprPtr on_unary(const LExprPtr &e) override { return rebuild(e); }
  LExprPtr on_binary(const LExprPtr &e) override { return rebuild(e); }
  LExprPtr on_compare(const LExprPtr &e) override { return rebuild(e); }
  LExprPtr on_select(const LExprPtr &e) override { return rebuild(e); }
  LExprPtr on_cast(const LExprPtr &e) override { return rebuild(e); }
  LExprPtr on_mul_add(const LExprPtr &e) override { return rebuild(e); }
  LExprPtr on_shuffle(const LExprPtr &e) override { return rebuild(e); }
  /// `e` with every operand mutated (through the checked constructor of its
  /// kind); `e` itself when no operand changed.
  LExprPtr rebuild(const LExprPtr &e);
};

/// `loop` (a For) with another kind and body, sharing its variable and extent.
StmtPtr with_for(const Stmt &loop, ForKind kind, StmtPtr body);

/// `s` with each loop variable in `values` replaced by its expression.
using VarValues = std::unordered_map<const LVar *, LExprPtr>;
StmtPtr substitute(const StmtPtr &s, const VarValues &values);

/// A perfect nest `loops` (outermost first, each the whole body of the one
/// before) as one loop of `kind` over `var`, of the product of their
/// extents: iteration i is the nest's i-th in row-major order (the innermost
/// fastest), each variable its digit of i.
StmtPtr collapse_nest(const std::vector<const Stmt *> &loops, ForKind kind, const LVarPtr &var);

/// Every buffer that `s` reads or writes but does not allocate (Local and
/// Shared), in first-use order.
std::vector<BufferPtr> touched_buffers(const StmtPtr &s);

/// Whether `s` has a Barrier, an Mma or a Shuffle: a point every thread of a GPU
/// block (or warp) reaches together.
bool synchronizes(const StmtPtr &s);
bool synchronizes(const LExprPtr &e);

/// Whether `s` contains a loop (of `kind`, if given).
bool contains_loop(const StmtPtr &s, std::optional<ForKind> kind = std::nullopt);

/// Whether `s` calls a math function without a vector form (loops/Lanes.h:
/// sin, cos, pow, float floor division, float64 exp/log/tanh/erf):
/// vectorizing or unrolling a loop around these only multiplies scalar calls.
bool calls_math_function(const StmtPtr &s);

/// Whether `s` computes a transcendental function (exp, log, tanh, erf, sin,
/// cos, pow), vector form or not: unrolling a scalar loop of those only
/// multiplies a large body.
bool computes_transcendental(const StmtPtr &s);

} // namespace gradc
