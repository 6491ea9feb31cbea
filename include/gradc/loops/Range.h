//===- Range.h - interval arithmetic on loop-IR index expressions ---------===//
//
// The closed interval an int64 index expression takes, from the intervals of
// the loop variables it reads (a loop `for (v, 0, n)` gives v in [0, n-1])
// and of guarded expressions. The verifier proves accesses in bounds with it;
// the index simplifier (lower/Passes.h: simplify_indices) proves divisions,
// remainders and clamps redundant.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/Functor.h"

#include <optional>
#include <unordered_map>

namespace gradc {

/// A closed integer interval.
struct Range {
  int64_t lo, hi;
};
using MaybeRange = std::optional<Range>;

/// Interval arithmetic on int64 index expressions; nullopt when unknown or
/// when a bound would overflow.
class RangeOf : public LExprFunctor<MaybeRange()> {
public:
  std::unordered_map<const LVar *, Range> vars;
  std::unordered_map<const LExpr *, int64_t> upper; // guards: e < c proven inside an If

  MaybeRange of(const LExprPtr &e);

private:
  MaybeRange on_int_imm(const LExprPtr &e) override { return Range{e->ivalue, e->ivalue}; }
  MaybeRange on_float_imm(const LExprPtr &) override { return std::nullopt; }
  MaybeRange on_var(const LExprPtr &e) override;
  MaybeRange on_load(const LExprPtr &) override { return std::nullopt; }
  MaybeRange on_unary(const LExprPtr &) override { return std::nullopt; }
  MaybeRange on_compare(const LExprPtr &) override { return std::nullopt; }
  MaybeRange on_select(const LExprPtr &e) override;
  MaybeRange on_cast(const LExprPtr &) override { return std::nullopt; }
  MaybeRange on_mul_add(const LExprPtr &) override { return std::nullopt; }
  MaybeRange on_shuffle(const LExprPtr &) override { return std::nullopt; }
  MaybeRange on_binary(const LExprPtr &e) override;
};

/// floor(a / b) for b > 0.
inline int64_t floor_div_positive(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

} // namespace gradc
