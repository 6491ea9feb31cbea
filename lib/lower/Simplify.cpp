//===- Simplify.cpp - index arithmetic proven redundant, removed ----------===//
//
// The first loop pass. Lowering writes a view's index as it composes: a
// reshape flattens the output index and splits it again by divisions and
// remainders, a transpose permutes the pieces, a clamp bounds each one. Here
// the loop variables' ranges (loops/Range.h) prove most of that arithmetic
// redundant, bottom-up:
//  * x // c and x % c (c > 0): x as a sum of terms times constants, the
//    terms whose coefficient c divides go to the quotient; if the rest lies
//    in [0, c), x // c is the quotient and x % c the rest, else what is left
//    divides or reduces only the rest;
//  * (x // a) // b is x // (a·b);
//  * min(x, c) and max(x, c) go where x's range already lies on the right
//    side of c (the clamps of an index that cannot leave its buffer).
// ((i·128 + k) // 32) % 4 with k in [0, 128) becomes k // 32; the reshape of
// a contiguous tensor, its flat index. What is left is cheaper to run in
// every element (an epilogue's or a packing loop's index), and affine more
// often, so the scheduler and codegen see strides they can vectorize.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Functor.h"
#include "gradc/loops/Range.h"
#include "gradc/lower/Passes.h"

#include <vector>

namespace gradc {
namespace {

bool int_imm_of(const LExprPtr &e, int64_t &value) {
  if (e->kind != LExprKind::IntImm)
    return false;
  value = e->ivalue;
  return true;
}

/// An int64 expression as Σ coefficient · term + constant.
struct Linear {
  std::vector<std::pair<LExprPtr, int64_t>> terms;
  int64_t constant = 0;
  bool ok = true; // false: a coefficient would overflow

  void add(const LExprPtr &e, int64_t scale) {
    if (!ok)
      return;
    int64_t c = 0;
    if (int_imm_of(e, c)) {
      ok = !__builtin_mul_overflow(c, scale, &c) && !__builtin_add_overflow(constant, c, &constant);
      return;
    }
    if (e->kind == LExprKind::Binary && (e->bop == BinaryOp::Add || e->bop == BinaryOp::Sub)) {
      add(e->operands[0], scale);
      int64_t s = 0;
      ok = ok && !__builtin_mul_overflow(scale, e->bop == BinaryOp::Sub ? -1 : 1, &s);
      add(e->operands[1], s);
      return;
    }
    if (e->kind == LExprKind::Binary && e->bop == BinaryOp::Mul) {
      for (int side = 0; side < 2; ++side)
        if (int_imm_of(e->operands[side], c)) {
          int64_t s = 0;
          ok = ok && !__builtin_mul_overflow(scale, c, &s);
          add(e->operands[1 - side], s);
          return;
        }
    }
    terms.push_back({e, scale});
  }

  LExprPtr build() const {
    LExprPtr sum;
    for (const auto &[term, coef] : terms) {
      LExprPtr t = binary(BinaryOp::Mul, term, int_imm(coef));
      sum = sum ? binary(BinaryOp::Add, sum, t) : t;
    }
    if (!sum)
      return int_imm(constant);
    return constant ? binary(BinaryOp::Add, sum, int_imm(constant)) : sum;
  }
};

class IndexSimplifier : public LoopMutator {
protected:
  StmtPtr on_for(const StmtPtr &s) override {
    ranges_.vars[s->var.get()] = Range{0, std::max<int64_t>(0, s->extent - 1)};
    StmtPtr out = LoopMutator::on_for(s);
    ranges_.vars.erase(s->var.get());
    return out;
  }

  LExprPtr on_binary(const LExprPtr &e) override {
    LExprPtr r = rebuild(e);
    if (r->kind != LExprKind::Binary || r->dtype != DType::Int64)
      return r;
    return simplify(r);
  }

private:
  RangeOf ranges_;

  bool within(const LExprPtr &e, int64_t lo, int64_t hi) {
    MaybeRange r = ranges_.of(e);
    return r && r->lo >= lo && r->hi <= hi;
  }

  LExprPtr simplify(const LExprPtr &e) {
    const LExprPtr &a = e->operands[0], &b = e->operands[1];
    int64_t c = 0;
    switch (e->bop) {
    case BinaryOp::Min:
    case BinaryOp::Max: {
      bool min = e->bop == BinaryOp::Min;
      for (int side = 0; side < 2; ++side)
        if (int_imm_of(e->operands[side], c)) {
          const LExprPtr &x = e->operands[1 - side];
          if (min ? within(x, INT64_MIN, c) : within(x, c, INT64_MAX))
            return x;
        }
      return e;
    }
    case BinaryOp::FloorDiv:
    case BinaryOp::FloorMod:
      if (!int_imm_of(b, c) || c <= 0)
        return e;
      break;
    default:
      return e;
    }
    bool div = e->bop == BinaryOp::FloorDiv;
    int64_t inner = 0;
    if (div && a->kind == LExprKind::Binary && a->bop == BinaryOp::FloorDiv && int_imm_of(a->operands[1], inner) &&
        inner > 0 && !__builtin_mul_overflow(inner, c, &inner))
      return simplify(binary(BinaryOp::FloorDiv, a->operands[0], int_imm(inner)));
    Linear x;
    x.add(a, 1);
    if (!x.ok)
      return e;
    Linear quotient, rest;
    for (const auto &term : x.terms)
      (term.second % c == 0 ? quotient : rest).terms.push_back(term.second % c == 0
                                                                  ? std::make_pair(term.first, term.second / c)
                                                                  : term);
    quotient.constant = floor_div(x.constant, c);
    rest.constant = x.constant - quotient.constant * c; // in [0, c)
    LExprPtr r = rest.build();
    bool exact = within(r, 0, c - 1);
    if (div) {
      if (exact)
        return quotient.build();
      if (quotient.terms.empty() && quotient.constant == 0)
        return e;
      return binary(BinaryOp::Add, quotient.build(), binary(BinaryOp::FloorDiv, r, b));
    }
    if (exact)
      return r;
    return quotient.terms.empty() && rest.constant == x.constant ? e : binary(BinaryOp::FloorMod, r, b);
  }
};

} // namespace

void simplify_indices(LoweredFunction &fn) {
  for (Kernel &k : fn.kernels)
    k.body = IndexSimplifier().mutate(k.body);
}

} // namespace gradc
