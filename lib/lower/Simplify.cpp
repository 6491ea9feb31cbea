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
//  * x // c where x = g·y + r, g dividing c and r in [0, g): y // (c / g)
//    (and x % c: g·(y % (c / g)) + r);
//  * (x // a) // b is x // (a·b), and (x // c)·c·k + (x % c)·k is x·k;
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

#include <algorithm>
#include <numeric>
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

  /// This sum as g·quotient + rest: the terms whose coefficient g divides,
  /// divided, and the others; the constant split so that rest's is in [0, g).
  void split(int64_t g, Linear &quotient, Linear &rest) const {
    for (const auto &[term, coef] : terms)
      if (coef % g == 0)
        quotient.terms.push_back({term, coef / g});
      else
        rest.terms.push_back({term, coef});
    quotient.constant = floor_div_positive(constant, g);
    rest.constant = constant - quotient.constant * g;
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

/// `e` as x // c (or x % c, `mod`) by a positive constant: x and c.
bool division_of(const LExprPtr &e, bool mod, LExprPtr &x, int64_t &c) {
  if (e->kind != LExprKind::Binary || e->bop != (mod ? BinaryOp::FloorMod : BinaryOp::FloorDiv) ||
      !int_imm_of(e->operands[1], c) || c <= 0)
    return false;
  x = e->operands[0];
  return true;
}

class IndexSimplifier : public LoopMutator {
public:
  IndexSimplifier() = default;
  explicit IndexSimplifier(const std::unordered_map<const LVar *, Range> &vars) { ranges_.vars = vars; }
  using LoopMutator::mutate;

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

  /// A sum with (x // c)·c·k and (x % c)·k among its terms has x·k instead
  /// (a reshape's split index flattened again); likewise (x // (a·c))·c·k
  /// and ((x // a) % c)·k give (x // a)·k, which the nested division's
  /// folding (x // a // c = x // (a·c)) would otherwise hide: a row r of
  /// (N, C, H) rows split as n = r // H // C, c = r // H % C reads plane
  /// n·C + c = r // H, with no division by C left (a template's divisors
  /// stay constants, so C kept otherwise equal kernels apart).
  LExprPtr recombine(const LExprPtr &e) {
    Linear x;
    x.add(e, 1);
    if (!x.ok)
      return e;
    bool changed = false;
    for (size_t i = 0; i < x.terms.size(); ++i) {
      LExprPtr inner, other;
      int64_t c = 0, c2 = 0, k = 0;
      if (!division_of(x.terms[i].first, false, inner, c))
        continue;
      for (size_t j = 0; j < x.terms.size(); ++j)
        if (j != i && division_of(x.terms[j].first, true, other, c2) &&
            !__builtin_mul_overflow(x.terms[j].second, c2, &k) && k == x.terms[i].second) {
          // x // c with x % c, or x // (a·c2) with (x // a) % c2
          LExprPtr whole, below;
          int64_t a = 0, ac = 0;
          if (c2 == c && same_expr(inner, other))
            whole = inner;
          else if (division_of(other, false, below, a) && same_expr(inner, below) &&
                   !__builtin_mul_overflow(a, c2, &ac) && ac == c)
            whole = other;
          else
            continue;
          int64_t scale = x.terms[j].second;
          x.terms.erase(x.terms.begin() + std::ptrdiff_t(std::max(i, j)));
          x.terms.erase(x.terms.begin() + std::ptrdiff_t(std::min(i, j)));
          x.add(whole, scale);
          if (!x.ok)
            return e;
          changed = true;
          i = size_t(-1); // start over: the terms moved
          break;
        }
    }
    return changed ? x.build() : e;
  }

  /// x // c (or x % c) where x = g·y + r with g dividing c and r in [0, g):
  /// y // (c / g), or g·(y % (c / g)) + r; null where no such g is found.
  LExprPtr through_divisor(const Linear &x, int64_t c, bool div) {
    std::vector<int64_t> candidates;
    for (const auto &term : x.terms) {
      int64_t g = std::gcd(c, term.second < 0 ? -term.second : term.second);
      if (g > 1 && g < c && std::find(candidates.begin(), candidates.end(), g) == candidates.end())
        candidates.push_back(g);
    }
    std::sort(candidates.rbegin(), candidates.rend());
    for (int64_t g : candidates) {
      Linear y, r;
      x.split(g, y, r);
      LExprPtr rest = r.build();
      if (!within(rest, 0, g - 1))
        continue;
      LExprPtr m = int_imm(c / g);
      if (div)
        return simplify(binary(BinaryOp::FloorDiv, y.build(), m));
      return binary(BinaryOp::Add, binary(BinaryOp::Mul, simplify(binary(BinaryOp::FloorMod, y.build(), m)), int_imm(g)),
                    rest);
    }
    return nullptr;
  }

  LExprPtr simplify(const LExprPtr &e) {
    if (e->kind != LExprKind::Binary || e->dtype != DType::Int64) // (a rewrite may fold to a constant)
      return e;
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
    case BinaryOp::Add:
    case BinaryOp::Sub:
      return recombine(e);
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
    x.split(c, quotient, rest);
    LExprPtr r = rest.build();
    bool exact = within(r, 0, c - 1);
    if (!exact)
      if (LExprPtr by_gcd = through_divisor(x, c, div))
        return by_gcd;
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

LExprPtr simplify_index(const LExprPtr &e, const std::unordered_map<const LVar *, Range> &vars) {
  return IndexSimplifier(vars).mutate(e);
}

void simplify_indices(LoweredFunction &fn) {
  for (Kernel &k : fn.kernels)
    k.body = IndexSimplifier().mutate(k.body);
}

} // namespace gradc
