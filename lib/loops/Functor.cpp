//===- Functor.cpp - the default rebuilds of the loop-IR mutator ----------===//
#include "gradc/loops/Functor.h"
#include "gradc/loops/Lanes.h"
#include "gradc/support/Diagnostics.h"

#include <unordered_set>

namespace gradc {

void unhandled_loop_kind(const char *what) {
  internal_error("loop IR", std::string("a walk reached a ") + what + " kind it does not handle");
}

namespace {

/// `e` with the same kind and attributes as `like` and new operands, built by
/// the checked constructor of its kind (so binary folding applies).
LExprPtr with_operands(const LExpr &like, std::vector<LExprPtr> ops) {
  switch (like.kind) {
  case LExprKind::Load:
    return load(like.buffer, std::move(ops[0]));
  case LExprKind::Unary:
    return unary(like.uop, std::move(ops[0]));
  case LExprKind::Binary:
    return binary(like.bop, std::move(ops[0]), std::move(ops[1]));
  case LExprKind::Compare:
    return compare(like.cop, std::move(ops[0]), std::move(ops[1]));
  case LExprKind::Select:
    return select(std::move(ops[0]), std::move(ops[1]), std::move(ops[2]));
  case LExprKind::Cast:
    return cast(like.dtype, std::move(ops[0]));
  case LExprKind::MulAdd:
    return mul_add(std::move(ops[0]), std::move(ops[1]), std::move(ops[2]));
  case LExprKind::Shuffle:
    return shuffle(std::move(ops[0]), std::move(ops[1]));
  case LExprKind::IntImm:
  case LExprKind::FloatImm:
  case LExprKind::Var:
    break;
  }
  internal_error("loop IR", "with_operands of a leaf expression");
}

} // namespace

StmtPtr with_for(const Stmt &loop, ForKind kind, StmtPtr body) {
  GRADC_CHECK(loop.kind == StmtKind::For, "loop IR", "with_for of a statement that is not a loop");
  return for_loop(loop.var, loop.extent, kind, std::move(body));
}

LExprPtr LoopMutator::rebuild(const LExprPtr &e) {
  std::vector<LExprPtr> ops;
  bool changed = false;
  for (const LExprPtr &o : e->operands) {
    ops.push_back(mutate(o));
    changed |= ops.back() != o;
  }
  return changed ? with_operands(*e, std::move(ops)) : e;
}

StmtPtr LoopMutator::on_for(const StmtPtr &s) {
  StmtPtr body = mutate(s->body);
  return body == s->body ? s : with_for(*s, s->for_kind, std::move(body));
}

StmtPtr LoopMutator::on_store(const StmtPtr &s) {
  LExprPtr index = mutate(s->index), value = mutate(s->value);
  return index == s->index && value == s->value ? s : store(s->buffer, std::move(index), std::move(value));
}

StmtPtr LoopMutator::on_seq(const StmtPtr &s) {
  std::vector<StmtPtr> stmts;
  bool changed = false;
  for (const StmtPtr &c : s->seq) {
    stmts.push_back(mutate(c));
    changed |= stmts.back() != c;
  }
  return changed ? seq(std::move(stmts)) : s;
}

StmtPtr LoopMutator::on_if(const StmtPtr &s) {
  LExprPtr cond = mutate(s->value);
  StmtPtr then_body = mutate(s->body), else_body = mutate(s->else_body);
  if (cond == s->value && then_body == s->body && else_body == s->else_body)
    return s;
  return if_then(std::move(cond), std::move(then_body), std::move(else_body));
}

StmtPtr LoopMutator::on_alloc(const StmtPtr &s) {
  StmtPtr body = mutate(s->body);
  return body == s->body ? s : alloc(s->buffer, std::move(body));
}

StmtPtr LoopMutator::on_mma(const StmtPtr &s) {
  LExprPtr index = mutate(s->index);
  std::vector<LExprPtr> inputs;
  bool same = index == s->index;
  for (const LExprPtr &e : s->inputs) {
    inputs.push_back(mutate(e));
    same = same && inputs.back() == e;
  }
  return same ? s : mma_tf32(s->buffer, std::move(index), std::move(inputs));
}

StmtPtr substitute(const StmtPtr &s, const VarValues &values) {
  struct Substitute : LoopMutator {
    const VarValues &values;
    explicit Substitute(const VarValues &v) : values(v) { memoized_ = true; }
    LExprPtr on_var(const LExprPtr &e) override {
      auto it = values.find(e->var.get());
      return it == values.end() ? e : it->second;
    }
  };
  return Substitute(values).mutate(s);
}

StmtPtr collapse_nest(const std::vector<const Stmt *> &loops, ForKind kind, const LVarPtr &var) {
  VarValues values;
  int64_t stride = 1;
  for (size_t d = loops.size(); d-- > 0;) {
    LExprPtr digit = stride == 1 ? var_ref(var) : binary(BinaryOp::FloorDiv, var_ref(var), int_imm(stride));
    if (d > 0)
      digit = binary(BinaryOp::FloorMod, digit, int_imm(std::max<int64_t>(loops[d]->extent, 1)));
    values[loops[d]->var.get()] = digit;
    stride *= loops[d]->extent;
  }
  return for_loop(var, stride, kind, substitute(loops.back()->body, values));
}

std::vector<BufferPtr> touched_buffers(const StmtPtr &s) {
  class Collector : public LoopVisitor {
  public:
    std::vector<BufferPtr> buffers;
    using LoopVisitor::visit;

  private:
    std::unordered_set<const Buffer *> seen_;
    void note(const BufferPtr &b) {
      if (b->scope != BufferScope::Local && b->scope != BufferScope::Shared && seen_.insert(b.get()).second)
        buffers.push_back(b);
    }
    void on_store(const StmtPtr &st) override {
      note(st->buffer);
      LoopVisitor::on_store(st);
    }
    void on_load(const LExprPtr &e) override {
      note(e->buffer);
      LoopVisitor::on_load(e);
    }
  } collector;
  collector.visit(s);
  return std::move(collector.buffers);
}

namespace {
struct SyncFinder : LoopVisitor {
  bool found = false;
  using LoopVisitor::visit;
  void on_barrier(const StmtPtr &) override { found = true; }
  void on_mma(const StmtPtr &) override { found = true; }
  void on_shuffle(const LExprPtr &) override { found = true; }
};
} // namespace

bool synchronizes(const StmtPtr &s) {
  SyncFinder f;
  f.visit(s);
  return f.found;
}

bool synchronizes(const LExprPtr &e) {
  SyncFinder f;
  f.visit(e);
  return f.found;
}

bool contains_loop(const StmtPtr &s, std::optional<ForKind> kind) {
  struct Finder : LoopVisitor {
    std::optional<ForKind> kind;
    bool found = false;
    void on_for(const StmtPtr &f) override {
      found = found || !kind || f->for_kind == *kind;
      if (!found)
        LoopVisitor::on_for(f);
    }
  } finder;
  finder.kind = kind;
  finder.visit(s);
  return finder.found;
}

namespace {

/// Whether a unary or binary node of `s` satisfies `pred`.
bool any_arithmetic(const StmtPtr &s, bool (*pred)(const LExpr &)) {
  struct Finder : LoopVisitor {
    bool (*pred)(const LExpr &);
    bool found = false;
    void on_unary(const LExprPtr &e) override {
      found = found || pred(*e);
      LoopVisitor::on_unary(e);
    }
    void on_binary(const LExprPtr &e) override {
      found = found || pred(*e);
      LoopVisitor::on_binary(e);
    }
  } finder;
  finder.pred = pred;
  finder.visit(s);
  return finder.found;
}

} // namespace

bool computes_transcendental(const StmtPtr &s) {
  return any_arithmetic(s, [](const LExpr &e) {
    if (e.kind == LExprKind::Unary)
      return e.uop != UnaryOp::Neg && e.uop != UnaryOp::Abs && e.uop != UnaryOp::Sqrt;
    return e.bop == BinaryOp::Pow;
  });
}

bool calls_math_function(const StmtPtr &s) {
  return any_arithmetic(s, [](const LExpr &e) {
    if (e.kind == LExprKind::Unary)
      return !has_vector_form(e.uop, e.dtype);
    return e.bop == BinaryOp::Pow || (is_float(e.dtype) && (e.bop == BinaryOp::FloorDiv || e.bop == BinaryOp::FloorMod));
  });
}

} // namespace gradc
