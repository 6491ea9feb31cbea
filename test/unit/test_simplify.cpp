//===- test_simplify.cpp - index simplification keeps every value ---------===//
//
// Random index expressions of the shapes lowering composes (sums of loop
// variables times constants, divided, reduced and clamped by constants, in
// nests), simplified under their loop ranges (lower/Passes.h:
// simplify_index), must take the value of the original at every point of
// the ranges; the shapes a reshape of a transpose gives must lose their
// divisions. The known zero bits of an index (loops/Lanes.h: what a vector
// access may assume of its alignment) must hold at every point too.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Lanes.h"
#include "gradc/loops/Range.h"
#include "gradc/lower/Passes.h"

#include <catch2/catch.hpp>

#include <random>
#include <unordered_map>

using namespace gradc;

namespace {

int64_t floor_div_ref(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

int64_t eval(const LExprPtr &e, const std::unordered_map<const LVar *, int64_t> &at) {
  switch (e->kind) {
  case LExprKind::IntImm:
    return e->ivalue;
  case LExprKind::Var:
    return at.at(e->var.get());
  case LExprKind::Binary: {
    int64_t a = eval(e->operands[0], at), b = eval(e->operands[1], at);
    switch (e->bop) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Min:
      return std::min(a, b);
    case BinaryOp::Max:
      return std::max(a, b);
    case BinaryOp::FloorDiv:
      return floor_div_ref(a, b);
    case BinaryOp::FloorMod:
      return a - floor_div_ref(a, b) * b;
    default:
      break;
    }
  }
  default:
    break;
  }
  FAIL("unexpected expression");
  return 0;
}

int count_divisions(const LExprPtr &e) {
  int n = e->kind == LExprKind::Binary && (e->bop == BinaryOp::FloorDiv || e->bop == BinaryOp::FloorMod);
  for (const LExprPtr &o : e->operands)
    n += count_divisions(o);
  return n;
}

struct Vars {
  std::vector<LVarPtr> vars;
  std::vector<int64_t> extents;
  /// Variables v0, v1, ... over [0, extent) each.
  static Vars of(std::initializer_list<int64_t> extents) {
    Vars v;
    for (int64_t extent : extents) {
      v.vars.push_back(std::make_shared<LVar>(LVar{"v" + std::to_string(v.vars.size())}));
      v.extents.push_back(extent);
    }
    return v;
  }
  std::unordered_map<const LVar *, Range> ranges() const {
    std::unordered_map<const LVar *, Range> r;
    for (size_t i = 0; i < vars.size(); ++i)
      r[vars[i].get()] = Range{0, extents[i] - 1};
    return r;
  }
};

/// Whether `a` and `b` agree at every point of the vars' ranges.
bool agree(const LExprPtr &a, const LExprPtr &b, const Vars &v) {
  std::unordered_map<const LVar *, int64_t> at;
  std::vector<int64_t> idx(v.vars.size(), 0);
  while (true) {
    for (size_t i = 0; i < v.vars.size(); ++i)
      at[v.vars[i].get()] = idx[i];
    if (eval(a, at) != eval(b, at))
      return false;
    size_t d = 0;
    while (d < idx.size() && ++idx[d] == v.extents[d])
      idx[d++] = 0;
    if (d == idx.size())
      return true;
  }
}

LExprPtr random_expr(std::mt19937 &rng, const Vars &v, int depth) {
  std::uniform_int_distribution<int> pick(0, 9), small(1, 9), var(0, int(v.vars.size()) - 1);
  const int64_t divisors[] = {2, 3, 4, 6, 8, 16, 32, 64};
  int k = depth <= 0 ? 0 : pick(rng);
  if (k <= 2)
    return binary(BinaryOp::Mul, var_ref(v.vars[size_t(var(rng))]), int_imm(k == 0 ? 1 : divisors[size_t(small(rng) % 8)]));
  LExprPtr a = random_expr(rng, v, depth - 1);
  switch (k) {
  case 3:
  case 4:
    return binary(BinaryOp::Add, a, random_expr(rng, v, depth - 1));
  case 5:
    return binary(BinaryOp::Add, a, int_imm(small(rng) - 5));
  case 6:
    return binary(BinaryOp::FloorDiv, a, int_imm(divisors[size_t(small(rng) % 8)]));
  case 7:
    return binary(BinaryOp::FloorMod, a, int_imm(divisors[size_t(small(rng) % 8)]));
  case 8:
    return binary(BinaryOp::Min, binary(BinaryOp::Max, a, int_imm(0)), int_imm(small(rng) * 8));
  default:
    return binary(BinaryOp::Sub, a, random_expr(rng, v, depth - 1));
  }
}

} // namespace

TEST_CASE("simplified indices take the original's value everywhere in range", "[simplify]") {
  std::mt19937 rng(20261124);
  Vars v = Vars::of({3, 8, 5});
  for (int n = 0; n < 3000; ++n) {
    LExprPtr e = random_expr(rng, v, 4);
    LExprPtr s = simplify_index(e, v.ranges());
    INFO(n);
    REQUIRE(agree(e, s, v));
  }
}

TEST_CASE("a reshape of a transpose and a flat reshape lose their divisions", "[simplify]") {
  Vars v = Vars::of({8, 64, 32});
  auto var = [&](int i) { return var_ref(v.vars[size_t(i)]); };
  auto add = [](LExprPtr a, LExprPtr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); };
  auto mul = [](LExprPtr a, int64_t c) { return binary(BinaryOp::Mul, std::move(a), int_imm(c)); };
  auto div = [](LExprPtr a, int64_t c) { return binary(BinaryOp::FloorDiv, std::move(a), int_imm(c)); };
  auto mod = [](LExprPtr a, int64_t c) { return binary(BinaryOp::FloorMod, std::move(a), int_imm(c)); };
  // (b, t, d) of a (8, 64, 32) view of (2, 4, 64, 32) transposed from (2, 64, 4, 32): flat f = (b·64 + t)·32 + d.
  LExprPtr f = add(mul(add(mul(var(0), 64), var(1)), 32), var(2));
  LExprPtr n = div(f, 8192), h = mod(div(f, 2048), 4), t = mod(div(f, 32), 64), d = mod(f, 32);
  LExprPtr index = add(mul(add(mul(add(mul(n, 64), t), 4), h), 32), d); // (n, t, h, d) in (2, 64, 4, 32)
  LExprPtr s = simplify_index(index, v.ranges());
  CHECK(agree(index, s, v));
  CHECK(count_divisions(s) == 2); // b // 4 and b % 4
  // A flat reshape: (i // 10)·10 + i % 10 is i.
  LExprPtr flat = add(mul(div(var(1), 10), 10), mod(var(1), 10));
  CHECK(count_divisions(simplify_index(flat, v.ranges())) == 0);
  // Rows r of (N, C, H) split as n = r // H // C and c = r // H % C: plane n·C + c is r // H, however
  // the nested division was folded first (r // (H·C)), and the element (plane·H + h)·W + w keeps
  // only that division (a max pool's rows: C as a divisor had kept kernels apart).
  for (int64_t C : {3, 192}) {
    LExprPtr r = add(mul(var(0), 64), var(1)); // 0 .. 511
    LExprPtr plane = add(mul(div(div(r, 4), C), C), mod(div(r, 4), C));
    LExprPtr element = add(mul(add(mul(plane, 4), var(2)), 7), int_imm(5));
    LExprPtr simple = simplify_index(element, v.ranges());
    INFO(C);
    CHECK(agree(element, simple, v));
    CHECK(count_divisions(simple) == 1);
    // and the folded form, (q // 4C)·C + (q // 4) % C, the same (q one loop's variable)
    LExprPtr folded = add(mul(div(var(1), 4 * C), C), mod(div(var(1), 4), C));
    CHECK(agree(folded, simplify_index(folded, v.ranges()), v));
    CHECK(count_divisions(simplify_index(folded, v.ranges())) == 1);
  }
  // Coefficients that do not match stay: (q // 12)·2 + (q // 4) % 3 is not (q // 4)·k.
  LExprPtr skew = add(mul(div(var(1), 12), 2), mod(div(var(1), 4), 3));
  CHECK(agree(skew, simplify_index(skew, v.ranges()), v));
  CHECK(count_divisions(simplify_index(skew, v.ranges())) == 3);
}

TEST_CASE("an index's known zero bits hold at every point with the lane at zero", "[lanes]") {
  std::mt19937 rng(20261129);
  Vars v = Vars::of({3, 8, 5});
  const LVar *lane = v.vars[1].get();
  auto fixed = [](const LExpr &) { return true; };
  int aligned = 0;
  for (int n = 0; n < 3000; ++n) {
    LExprPtr e = random_expr(rng, v, 4);
    int bits = index_zero_bits(e, lane, fixed);
    aligned += bits >= 2;
    const int64_t mask = bits >= 63 ? -1 : (int64_t(1) << bits) - 1;
    std::unordered_map<const LVar *, int64_t> at{{lane, 0}};
    for (int64_t a = 0; a < v.extents[0]; ++a)
      for (int64_t c = 0; c < v.extents[2]; ++c) {
        at[v.vars[0].get()] = a;
        at[v.vars[2].get()] = c;
        INFO(n << ": " << bits << " bits");
        REQUIRE((eval(e, at) & mask) == 0);
      }
  }
  CHECK(aligned > 100); // the analysis finds something, not only zero bits
  // What the tiled GPU product's accesses give: 16-byte groups of float32.
  LVarPtr t = std::make_shared<LVar>(LVar{"t"}), l = std::make_shared<LVar>(LVar{"l"});
  LExprPtr group = binary(BinaryOp::Add, binary(BinaryOp::Mul, binary(BinaryOp::FloorMod, var_ref(t), int_imm(2)), int_imm(4)),
                          var_ref(l));
  LExprPtr row = binary(BinaryOp::Mul, binary(BinaryOp::FloorDiv, var_ref(t), int_imm(2)), int_imm(128));
  LExprPtr index = binary(BinaryOp::Add, row, group);
  CHECK(index_zero_bits(index, l.get(), fixed) == 2);
  CHECK(index_zero_bits(binary(BinaryOp::Add, index, int_imm(2)), l.get(), fixed) == 1);
  // A template's argument may be odd: 128 as an argument gives nothing.
  const LExpr *stride = row->operands[1].get();
  CHECK(index_zero_bits(index, l.get(), [&](const LExpr &c) { return &c != stride; }) == 0);
  CHECK(index_zero_bits(binary(BinaryOp::FloorDiv, index, int_imm(4)), l.get(), fixed) == 0);
  CHECK(index_zero_bits(var_ref(l), l.get(), fixed) == 64);
}

TEST_CASE("a select that clamps its own condition's operand has the clamped range", "[simplify]") {
  // A packed product's last row tile: rows rt*12 + i of 16 tiles, clamped to 192 or 160 rows.
  LVarPtr rt = std::make_shared<LVar>(LVar{"rt"}), i = std::make_shared<LVar>(LVar{"i"});
  RangeOf ranges;
  ranges.vars = {{rt.get(), Range{0, 15}}, {i.get(), Range{0, 11}}};
  auto row = [&] { return binary(BinaryOp::Add, binary(BinaryOp::Mul, var_ref(rt), int_imm(12)), var_ref(i)); };
  auto clamp = [&](int64_t rows) {
    return select(compare(CompareOp::LT, row(), int_imm(rows)), row(), int_imm(rows - 1));
  };
  for (int64_t rows : {160, 192, 200}) {
    MaybeRange r = ranges.of(clamp(rows));
    REQUIRE(r);
    CHECK(r->lo == 0);
    CHECK(r->hi == rows - 1); // (200: the constant branch counts, though never taken)
  }
  // The condition the other way round bounds the other branch; one never taken drops out.
  LExprPtr from_below = select(compare(CompareOp::GE, row(), int_imm(8)), int_imm(100), row());
  CHECK(ranges.of(from_below)->lo == 0);
  CHECK(ranges.of(from_below)->hi == 100);
  LExprPtr never = select(compare(CompareOp::GT, row(), int_imm(500)), row(), int_imm(7));
  CHECK(ranges.of(never)->lo == 7);
  CHECK(ranges.of(never)->hi == 7);
  // A branch that is not the compared expression keeps its whole range.
  LExprPtr other = select(compare(CompareOp::LT, row(), int_imm(10)), var_ref(i), int_imm(3));
  CHECK(ranges.of(other)->hi == 11);
  // The index simplifier folds a redundant min, and keeps the select.
  std::unordered_map<const LVar *, Range> vars = ranges.vars;
  LExprPtr folded = simplify_index(binary(BinaryOp::Min, row(), int_imm(191)), vars);
  CHECK(folded->kind == LExprKind::Binary);
  CHECK(folded->bop == BinaryOp::Add);
  CHECK(simplify_index(clamp(192), vars)->kind == LExprKind::Select);
}
