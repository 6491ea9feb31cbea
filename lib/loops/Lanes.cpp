//===- Lanes.cpp - which vectorized loops are emitted as vector code ------===//
#include "gradc/loops/Lanes.h"

#include "gradc/loops/Functor.h"

#include <algorithm>
#include <bit>
#include <optional>

namespace gradc {
namespace {

class UsesVar : public LoopVisitor {
public:
  explicit UsesVar(const LVar *var) : var_(var) {}
  bool found = false;

protected:
  void on_var(const LExprPtr &e) override { found = found || e->var.get() == var_; }

private:
  const LVar *var_;
};

using Step = std::optional<int64_t>;

class LaneStride : public LExprFunctor<Step()> {
public:
  explicit LaneStride(const LVar *lane) : lane_(lane) {}
  Step of(const LExprPtr &e) { return dispatch(e); }

protected:
  Step opaque(const LExprPtr &e) { return uses_var(e, lane_) ? Step() : Step(0); }
  Step on_int_imm(const LExprPtr &) override { return 0; }
  Step on_float_imm(const LExprPtr &) override { return 0; }
  Step on_var(const LExprPtr &e) override { return e->var.get() == lane_ ? 1 : 0; }
  Step on_load(const LExprPtr &e) override { return opaque(e); }
  Step on_unary(const LExprPtr &e) override { return opaque(e); }
  Step on_compare(const LExprPtr &e) override { return opaque(e); }
  Step on_select(const LExprPtr &e) override { return opaque(e); }
  Step on_cast(const LExprPtr &e) override { return opaque(e); }
  Step on_mul_add(const LExprPtr &e) override { return opaque(e); }
  Step on_shuffle(const LExprPtr &e) override { return opaque(e); }
  Step on_binary(const LExprPtr &e) override {
    if (e->dtype != DType::Int64)
      return opaque(e);
    const LExprPtr &x = e->operands[0], &y = e->operands[1];
    Step a = of(x), b = of(y);
    if (!a || !b)
      return std::nullopt;
    switch (e->bop) {
    case BinaryOp::Add:
      return *a + *b;
    case BinaryOp::Sub:
      return *a - *b;
    case BinaryOp::Mul:
      if (x->kind == LExprKind::IntImm)
        return x->ivalue * *b;
      if (y->kind == LExprKind::IntImm)
        return *a * y->ivalue;
      break;
    case BinaryOp::FloorDiv: // by one: the dividend
      if (y->kind == LExprKind::IntImm && y->ivalue == 1)
        return a;
      break;
    case BinaryOp::FloorMod: // by one: zero
      if (y->kind == LExprKind::IntImm && y->ivalue == 1)
        return Step(0);
      break;
    default:
      break;
    }
    return *a == 0 && *b == 0 ? Step(0) : Step();
  }

private:
  const LVar *lane_;
};

Step lane_stride(const LExprPtr &e, const LVar *lane) { return index_stride(e, lane); }

/// index_zero_bits: the known trailing zero bits of an Int64 index.
class ZeroBits : public LExprFunctor<int()> {
public:
  ZeroBits(const LVar *lane, const std::function<bool(const LExpr &)> &fixed) : lane_(lane), fixed_(fixed) {}
  int of(const LExprPtr &e) { return e->dtype == DType::Int64 ? dispatch(e) : 0; }

protected:
  static int bits(int64_t c) { return c == 0 ? 64 : std::countr_zero(uint64_t(c)); }
  int on_int_imm(const LExprPtr &e) override { return fixed_(*e) ? bits(e->ivalue) : 0; }
  int on_float_imm(const LExprPtr &) override { return 0; }
  int on_var(const LExprPtr &e) override { return e->var.get() == lane_ ? 64 : 0; }
  int on_load(const LExprPtr &) override { return 0; }
  int on_unary(const LExprPtr &) override { return 0; }
  int on_compare(const LExprPtr &) override { return 0; }
  int on_select(const LExprPtr &e) override { return std::min(of(e->operands[1]), of(e->operands[2])); }
  int on_cast(const LExprPtr &) override { return 0; }
  int on_mul_add(const LExprPtr &) override { return 0; }
  int on_shuffle(const LExprPtr &) override { return 0; }
  int on_binary(const LExprPtr &e) override {
    const LExprPtr &x = e->operands[0], &y = e->operands[1];
    switch (e->bop) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Min:
    case BinaryOp::Max:
      return std::min(of(x), of(y));
    case BinaryOp::Mul:
      return std::min(64, of(x) + of(y));
    case BinaryOp::FloorMod: // x - y floor(x / y): as even as both
      return y->kind == LExprKind::IntImm && fixed_(*y) && y->ivalue != 0 ? std::min(of(x), bits(y->ivalue)) : 0;
    default:
      return 0;
    }
  }

private:
  const LVar *lane_;
  const std::function<bool(const LExpr &)> &fixed_;
};

/// Whether each node of an expression that uses the lane has a vector form.
class LaneWiseExpr : public LExprFunctor<bool()> {
public:
  LaneWiseExpr(const LVar *lane, bool strided_loads) : lane_(lane), strided_loads_(strided_loads) {}
  bool ok(const LExprPtr &e) {
    if (!uses_var(e, lane_))
      return true;
    if (e->dtype == DType::Bool && e->kind != LExprKind::Compare)
      return false;
    return dispatch(e);
  }

protected:
  bool operands_ok(const LExprPtr &e) {
    for (const LExprPtr &o : e->operands)
      if (!ok(o))
        return false;
    return true;
  }
  bool on_int_imm(const LExprPtr &) override { return true; }
  bool on_float_imm(const LExprPtr &) override { return true; }
  bool on_var(const LExprPtr &) override { return true; }
  bool on_load(const LExprPtr &e) override {
    Step step = lane_stride(e->operands[0], lane_);
    return step == Step(1) || (strided_loads_ && step && *step > 1 && *step <= kMaxLoadStride);
  }
  bool on_unary(const LExprPtr &e) override {
    return has_vector_form(e->uop, e->dtype) && operands_ok(e);
  }
  bool on_binary(const LExprPtr &e) override {
    switch (e->bop) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Mul:
    case BinaryOp::Min:
    case BinaryOp::Max:
      return operands_ok(e);
    case BinaryOp::Philox: // 32-bit multiplies, shifts and xors in vector form
      return operands_ok(e);
    case BinaryOp::Div:
      return is_float(e->dtype) && operands_ok(e);
    default:
      return false;
    }
  }
  bool on_compare(const LExprPtr &e) override { return e->operands[0]->dtype != DType::Bool && operands_ok(e); }
  bool on_select(const LExprPtr &e) override { return operands_ok(e); }
  bool on_cast(const LExprPtr &e) override { return e->operands[0]->dtype != DType::Bool && operands_ok(e); }
  bool on_mul_add(const LExprPtr &e) override { return operands_ok(e); }
  bool on_shuffle(const LExprPtr &) override { return false; }

private:
  const LVar *lane_;
  bool strided_loads_;
};

class LaneWiseBody : public StmtFunctor<bool()> {
public:
  LaneWiseBody(const LVar *lane, bool strided) : lane_(lane), strided_(strided), exprs_(lane, strided) {}
  bool ok(const StmtPtr &s) { return s && dispatch(s); }

protected:
  bool on_for(const StmtPtr &) override { return false; }
  bool on_if(const StmtPtr &) override { return false; }
  bool on_alloc(const StmtPtr &) override { return false; }
  bool on_barrier(const StmtPtr &) override { return false; }
  bool on_mma(const StmtPtr &) override { return false; }
  bool on_seq(const StmtPtr &s) override {
    for (const StmtPtr &c : s->seq)
      if (!ok(c))
        return false;
    return true;
  }
  bool on_store(const StmtPtr &s) override {
    Step step = lane_stride(s->index, lane_);
    bool spread = strided_ && step && *step > 1 && *step <= kMaxLoadStride;
    return s->buffer->dtype != DType::Bool && (step == Step(1) || spread) && exprs_.ok(s->value);
  }

private:
  const LVar *lane_;
  bool strided_;
  LaneWiseExpr exprs_;
};

} // namespace

bool has_vector_form(UnaryOp op, DType dtype) {
  switch (op) {
  case UnaryOp::Neg:
    return dtype != DType::Bool;
  case UnaryOp::Abs:
  case UnaryOp::Sqrt:
    return is_float(dtype);
  case UnaryOp::Exp:
  case UnaryOp::Log:
  case UnaryOp::Tanh:
  case UnaryOp::Erf:
    return dtype == DType::Float32 || dtype == DType::Float16;
  default:
    return false;
  }
}

bool uses_var(const LExprPtr &e, const LVar *var) {
  UsesVar finder(var);
  finder.visit(e);
  return finder.found;
}

bool lane_wise(const Stmt &loop, bool strided_loads) {
  return loop.kind == StmtKind::For && loop.for_kind == ForKind::Vectorized && loop.extent >= 2 &&
         loop.extent <= kMaxLanes && LaneWiseBody(loop.var.get(), strided_loads).ok(loop.body);
}

bool transposing_copy(const Stmt &loop) {
  const int64_t n = loop.extent;
  if (loop.kind != StmtKind::For || loop.for_kind != ForKind::Unrolled || n < 2 || n > kMaxLanes || (n & (n - 1)))
    return false;
  const Stmt &lanes = *loop.body;
  if (lanes.kind != StmtKind::For || lanes.for_kind != ForKind::Vectorized || lanes.extent != n)
    return false;
  const Stmt &st = *lanes.body;
  if (st.kind != StmtKind::Store || st.value->kind != LExprKind::Load || st.value->buffer == st.buffer ||
      st.value->dtype != st.buffer->dtype || st.buffer->dtype == DType::Bool)
    return false;
  const LVar *i = loop.var.get(), *l = lanes.var.get();
  const LExprPtr &from = st.value->operands[0];
  return lane_stride(st.index, l) == Step(1) && lane_stride(st.index, i) && lane_stride(from, i) == Step(1) &&
         lane_stride(from, l);
}

std::optional<int64_t> index_stride(const LExprPtr &e, const LVar *var) { return LaneStride(var).of(e); }

int index_zero_bits(const LExprPtr &e, const LVar *lane, const std::function<bool(const LExpr &)> &fixed) {
  return ZeroBits(lane, fixed).of(e);
}

} // namespace gradc
