//===- Range.cpp - interval arithmetic on loop-IR index expressions -------===//
#include "gradc/loops/Range.h"

#include <algorithm>

namespace gradc {
namespace {

MaybeRange checked(__int128 lo, __int128 hi) {
  if (lo < INT64_MIN || hi > INT64_MAX)
    return std::nullopt;
  return Range{int64_t(lo), int64_t(hi)};
}

} // namespace

MaybeRange RangeOf::of(const LExprPtr &e) {
  MaybeRange r = dispatch(e);
  auto it = upper.find(e.get());
  if (r && it != upper.end())
    r->hi = std::min(r->hi, it->second);
  return r;
}

MaybeRange RangeOf::on_var(const LExprPtr &e) {
  auto it = vars.find(e->var.get());
  return it == vars.end() ? std::nullopt : MaybeRange(it->second);
}

namespace {

/// `r` where `x op c` holds for its values; nullopt where it never does.
MaybeRange refine(Range r, CompareOp op, int64_t c) {
  switch (op) {
  case CompareOp::LT:
    if (c == INT64_MIN)
      return std::nullopt;
    r.hi = std::min(r.hi, c - 1);
    break;
  case CompareOp::LE:
    r.hi = std::min(r.hi, c);
    break;
  case CompareOp::GT:
    if (c == INT64_MAX)
      return std::nullopt;
    r.lo = std::max(r.lo, c + 1);
    break;
  case CompareOp::GE:
    r.lo = std::max(r.lo, c);
    break;
  default:
    return r;
  }
  return r.lo <= r.hi ? MaybeRange(r) : std::nullopt;
}

CompareOp negated(CompareOp op) {
  switch (op) {
  case CompareOp::LT:
    return CompareOp::GE;
  case CompareOp::LE:
    return CompareOp::GT;
  case CompareOp::GT:
    return CompareOp::LE;
  case CompareOp::GE:
    return CompareOp::LT;
  case CompareOp::EQ:
    return CompareOp::NE;
  case CompareOp::NE:
    return CompareOp::EQ;
  }
  return op;
}

} // namespace

/// The union of the branches' ranges; a branch that is the compared
/// expression of a condition `x op c` counts only where its side of the
/// condition holds: select(row < rows, row, rows - 1) is in [.., rows - 1]
/// (a clamp that the index simplifier, which folds min and max, keeps).
MaybeRange RangeOf::on_select(const LExprPtr &e) {
  const LExprPtr &cond = e->operands[0];
  int64_t c = 0;
  bool bounded = cond->kind == LExprKind::Compare && cond->operands[1]->kind == LExprKind::IntImm &&
                 cond->operands[0]->dtype == DType::Int64;
  if (bounded)
    c = cond->operands[1]->ivalue;
  MaybeRange sides[2];
  bool taken[2] = {true, true};
  for (int side = 0; side < 2; ++side) {
    const LExprPtr &v = e->operands[size_t(side) + 1];
    MaybeRange r = of(v);
    if (!r)
      return std::nullopt;
    if (bounded && same_expr(v, cond->operands[0])) {
      r = refine(*r, side == 0 ? cond->cop : negated(cond->cop), c);
      taken[side] = r.has_value();
    }
    sides[side] = r;
  }
  if (!taken[0] && !taken[1])
    return std::nullopt;
  if (!taken[0] || !taken[1])
    return taken[0] ? sides[0] : sides[1];
  return Range{std::min(sides[0]->lo, sides[1]->lo), std::max(sides[0]->hi, sides[1]->hi)};
}

MaybeRange RangeOf::on_binary(const LExprPtr &e) {
  if (e->dtype != DType::Int64)
    return std::nullopt;
  MaybeRange a = of(e->operands[0]), b = of(e->operands[1]);
  if (!a || !b)
    return std::nullopt;
  __int128 al = a->lo, ah = a->hi, bl = b->lo, bh = b->hi;
  switch (e->bop) {
  case BinaryOp::Add:
    return checked(al + bl, ah + bh);
  case BinaryOp::Sub:
    return checked(al - bh, ah - bl);
  case BinaryOp::Mul: {
    __int128 c[] = {al * bl, al * bh, ah * bl, ah * bh};
    return checked(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
  }
  case BinaryOp::Min:
    return Range{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
  case BinaryOp::Max:
    return Range{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
  case BinaryOp::FloorDiv:
    if (bl == bh && bl > 0) // floor division by a positive constant is monotonic
      return Range{floor_div_positive(a->lo, b->lo), floor_div_positive(a->hi, b->lo)};
    return std::nullopt;
  case BinaryOp::FloorMod:
    if (bl == bh && bl > 0)
      return a->lo >= 0 && a->hi < b->lo ? *a : Range{0, b->lo - 1};
    return std::nullopt;
  case BinaryOp::Philox:
    return Range{0, (int64_t(1) << 32) - 1};
  default:
    return std::nullopt;
  }
}

} // namespace gradc
