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

MaybeRange RangeOf::on_select(const LExprPtr &e) {
  MaybeRange a = of(e->operands[1]), b = of(e->operands[2]);
  if (!a || !b)
    return std::nullopt;
  return Range{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
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
