//===- Kernel.cpp - index arithmetic and loop nests for operator lowering -===//
#include "gradc/op/Kernel.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gradc {

namespace {

/// `flat` on the last axis longer than 1 (stride 1), zeros elsewhere:
/// flat_index of that is `flat` itself, the address an atom's load reads.
Index flat_on_last_axis(const Shape &shape, const LExprPtr &flat) {
  Index idx(shape.size(), int_imm(0));
  for (size_t d = shape.size(); d-- > 0;)
    if (shape[d] != 1) {
      idx[d] = flat;
      break;
    }
  return idx;
}

} // namespace

LExprPtr KernelCtx::in_flat(size_t arg, const LExprPtr &flat) const {
  const Expr &a = *call.args[arg];
  GRADC_CHECK(a.is_atom(), "lowering", call.op->name + " read a fused operand by flat index");
  return in(arg, flat_on_last_axis(a.type.shape, flat));
}

LExprPtr ElementCtx::in_flat(size_t arg, const LExprPtr &flat) const {
  const Expr &a = *call.args[arg];
  if (a.is_atom() && a.type.is_tensor())
    return in(arg, flat_on_last_axis(a.type.shape, flat));
  return in(arg, unravel_index(flat, a.type.shape));
}

LExprPtr constant_of(double value, DType dtype) {
  if (is_float(dtype))
    return float_imm(value, dtype);
  if (dtype == DType::Bool)
    return int_imm(value != 0, dtype);
  const DTypeInfo &info = dtype_info(dtype);
  if (std::isnan(value))
    return int_imm(0, dtype);
  // double(int_max) may round up past it: compare before converting.
  if (value >= double(info.int_max))
    return int_imm(info.int_max, dtype);
  if (value <= double(info.int_min))
    return int_imm(info.int_min, dtype);
  return int_imm(int64_t(value), dtype);
}

LExprPtr lowest_of(DType dtype) {
  if (is_float(dtype))
    return float_imm(-INFINITY, dtype);
  return int_imm(dtype_info(dtype).int_min, dtype);
}

LExprPtr highest_of(DType dtype) {
  if (is_float(dtype))
    return float_imm(INFINITY, dtype);
  return int_imm(dtype_info(dtype).int_max, dtype);
}

namespace {

} // namespace

StmtPtr neumaier(const BufferPtr &s, const BufferPtr &c, const LExprPtr &slot, const LExprPtr &x) {
  LExprPtr sv = load(s, slot);
  if (!is_float(s->dtype))
    return store(s, slot, add(sv, x));
  LExprPtr t = add(sv, x);
  LExprPtr big_s = compare(CompareOp::GE, unary(UnaryOp::Abs, sv), unary(UnaryOp::Abs, x));
  LExprPtr err = select(big_s, add(sub(sv, t), x), add(sub(x, t), sv));
  return seq({store(c, slot, add(load(c, slot), err)), store(s, slot, t)});
}

LExprPtr neumaier_total(const BufferPtr &s, const BufferPtr &c, const LExprPtr &slot) {
  LExprPtr total = load(s, slot);
  if (!is_float(s->dtype))
    return total;
  LExprPtr finite = compare(CompareOp::EQ, sub(total, total), constant_of(0, s->dtype));
  return select(finite, add(total, load(c, slot)), total);
}

namespace {

/// A Spatial loop over `width` lanes (vectorized by the schedule).
StmtPtr for_lanes(KernelCtx &k, int64_t width, const std::function<StmtPtr(const LExprPtr &l)> &body) {
  LVarPtr l = k.var("l");
  return for_loop(l, width, ForKind::Spatial, body(var_ref(l)));
}

} // namespace

StmtPtr compensated_sum(KernelCtx &k, int64_t count, DType acc, const std::vector<SumTerms> &sums,
                        const std::function<StmtPtr(const std::vector<LExprPtr> &totals)> &then,
                        const std::function<StmtPtr(const LExprPtr &r, const LExprPtr &value)> &also,
                        int64_t group, int64_t row) {
  GRADC_CHECK(!sums.empty() && (sums.size() == 1 || !also), "lowering", "compensated_sum: `also` with several sums");
  GRADC_CHECK(row == 0 || (row >= kSumLanes && count % row == 0 && !also), "lowering",
              "compensated_sum: rows of " + std::to_string(row) + " terms for " + std::to_string(count));
  // In rows, each row's whole blocks of lanes, then its last terms one at
  // a time into lane 0.
  const int64_t rows = row ? count / row : 1, length = row ? row : count;
  const int64_t lanes = row || count >= 2 * kSumLanes ? kSumLanes : 1, blocks = length / lanes;
  group = is_float(acc) ? std::max<int64_t>(1, group) : 1;
  // Each sum's accumulators, carries and terms (and a term of a group).
  struct Slots {
    BufferPtr s, c, x, part;
  };
  std::vector<Slots> slots;
  for (size_t j = 0; j < sums.size(); ++j) {
    std::string n = j ? std::to_string(j) : ""; // sum, sum1, ...
    slots.push_back({k.local("sum" + n, acc, lanes), k.local("carry" + n, acc, lanes), k.local("term" + n, acc, lanes),
                     group > 1 ? k.local("part" + n, acc, lanes) : nullptr});
  }
  LExprPtr zero = constant_of(0, acc), lane0 = int_imm(0);
  // Each term is computed once, into x: Neumaier's step reads it four times,
  // and an exp written out four times was four times the code to compile.
  auto step = [&](const Slots &u, const LExprPtr &slot, const LExprPtr &r, const LExprPtr &t) {
    LExprPtr value = load(u.x, slot);
    return seq({store(u.x, slot, cast(acc, t)), also ? also(r, value) : seq({}), neumaier(u.s, u.c, slot, value)});
  };
  LExprPtr q; // the row, in rows
  // Term j of the sequence (of row q, in rows).
  auto term = [&](const SumTerms &t, const LExprPtr &j) { return row ? t.row_term(q, j) : t.term(j); };
  // Term first + slot of a block: from the block's start and the lane
  // where the caller can split it (contiguous loads), else from its index.
  auto term_at = [&](const SumTerms &t, const LExprPtr &first, const LExprPtr &slot) {
    return !row && t.block_term && lanes == kSumLanes ? t.block_term(first, slot) : term(t, add(first, slot));
  };
  auto each = [&](const std::function<StmtPtr(const SumTerms &, const Slots &)> &f) {
    std::vector<StmtPtr> stmts;
    for (size_t j = 0; j < sums.size(); ++j)
      stmts.push_back(f(sums[j], slots[j]));
    return seq(std::move(stmts));
  };
  std::vector<StmtPtr> body;
  LVarPtr l = k.var("l");
  body.push_back(for_loop(l, lanes, ForKind::Spatial, each([&](const SumTerms &, const Slots &u) {
                            return seq({store(u.s, var_ref(l), zero), store(u.c, var_ref(l), zero)});
                          })));
  LVarPtr qv = row ? k.var("q") : nullptr;
  if (qv)
    q = var_ref(qv);
  // Blocks of `lanes` terms: `group` of them at a time added plainly into
  // x, in order, then x into the sum with one compensated step; the blocks
  // left over one at a time. Every sum's terms of a block side by side, so
  // that the elements they share are read once.
  std::vector<StmtPtr> terms;
  const int64_t grouped = blocks / group * group;
  auto block = [&](const LExprPtr &first_block, int64_t n, const LExprPtr &slot) {
    return each([&](const SumTerms &t, const Slots &u) {
      std::vector<StmtPtr> steps;
      for (int64_t g = 0; g < n; ++g) {
        LExprPtr first = binary(BinaryOp::Mul, add(first_block, int_imm(g)), int_imm(lanes));
        LExprPtr r = add(first, slot);
        if (n == 1)
          return step(u, slot, r, term_at(t, first, slot));
        LExprPtr value = load(u.part, slot);
        steps.push_back(store(u.part, slot, cast(acc, term_at(t, first, slot))));
        if (also)
          steps.push_back(also(r, value));
        steps.push_back(store(u.x, slot, g == 0 ? value : add(load(u.x, slot), value)));
      }
      steps.push_back(neumaier(u.s, u.c, slot, load(u.x, slot)));
      return seq(std::move(steps));
    });
  };
  // None where a row has fewer than `group` blocks: the loop would never
  // run, but its loads, whose index the simplifier cannot bound over an
  // empty range, keep their row-to-element divisions, a divisor per channel
  // count (a batch norm's mean over 7 x 7 pixels: a function per layer of a
  // DenseNet block, integer divisors being constants of a template).
  if (grouped > 0) {
    LVarPtr b = k.var("b"), bl = k.var("l");
    terms.push_back(for_loop(b, grouped / group, ForKind::Reduce,
                             for_loop(bl, lanes, ForKind::Spatial,
                                      block(binary(BinaryOp::Mul, var_ref(b), int_imm(group)), group, var_ref(bl)))));
  }
  if (blocks > grouped) {
    LVarPtr rb = k.var("b"), rl = k.var("l");
    terms.push_back(for_loop(rb, blocks - grouped, ForKind::Reduce,
                             for_loop(rl, lanes, ForKind::Spatial, block(add(var_ref(rb), int_imm(grouped)), 1, var_ref(rl)))));
  }
  if (int64_t tail = length - blocks * lanes) {
    LVarPtr t = k.var("r");
    LExprPtr r = add(var_ref(t), int_imm(blocks * lanes));
    terms.push_back(for_loop(t, tail, ForKind::Reduce,
                             each([&](const SumTerms &st, const Slots &u) { return step(u, lane0, r, term(st, r)); })));
  }
  if (qv)
    body.push_back(for_loop(qv, rows, ForKind::Reduce, seq(std::move(terms))));
  else
    body.insert(body.end(), terms.begin(), terms.end());
  // The lanes pairwise into lane 0 (16 -> 8 -> 4 -> 2 -> 1, each step a
  // vector operation), carries alongside; a non-finite sum is the plain one.
  for (int64_t half = lanes / 2; half >= 1; half /= 2) {
    LVarPtr h = k.var("h");
    LExprPtr lo = var_ref(h), hi = add(var_ref(h), int_imm(half));
    body.push_back(for_loop(h, half, ForKind::Spatial, each([&](const SumTerms &, const Slots &u) {
                              StmtPtr carry = is_float(acc) ? store(u.c, lo, add(load(u.c, lo), load(u.c, hi))) : seq({});
                              return seq({neumaier(u.s, u.c, lo, load(u.s, hi)), carry});
                            })));
  }
  std::vector<LExprPtr> totals;
  for (const Slots &u : slots)
    totals.push_back(neumaier_total(u.s, u.c, lane0));
  body.push_back(then(totals));
  StmtPtr all = seq(std::move(body));
  for (auto u = slots.rbegin(); u != slots.rend(); ++u)
    all = alloc(u->s, alloc(u->c, alloc(u->x, u->part ? alloc(u->part, all) : all)));
  return all;
}

StmtPtr compensated_sum(KernelCtx &k, int64_t count, DType acc, const TermFn &term,
                        const std::function<StmtPtr(const LExprPtr &total)> &then,
                        const std::function<StmtPtr(const LExprPtr &r, const LExprPtr &value)> &also,
                        int64_t group, const LaneBlockTermFn &block_term) {
  return compensated_sum(
      k, count, acc, {SumTerms{term, block_term}},
      [&](const std::vector<LExprPtr> &totals) { return then(totals[0]); }, also, group);
}

StmtPtr lane_max(KernelCtx &k, int64_t count, DType acc, const std::function<LExprPtr(const LExprPtr &r)> &term,
                 const std::function<StmtPtr(const LExprPtr &max)> &then) {
  const int64_t lanes = count >= 2 * kSumLanes ? kSumLanes : 1, blocks = count / lanes;
  BufferPtr m = k.local("max", acc, lanes);
  LExprPtr lane0 = int_imm(0);
  auto step = [&](const LExprPtr &slot, const LExprPtr &x) {
    return store(m, slot, binary(BinaryOp::Max, load(m, slot), x));
  };
  std::vector<StmtPtr> body;
  LVarPtr l = k.var("l"), b = k.var("b"), bl = k.var("l");
  body.push_back(for_loop(l, lanes, ForKind::Spatial, store(m, var_ref(l), lowest_of(acc))));
  LExprPtr r = add(binary(BinaryOp::Mul, var_ref(b), int_imm(lanes)), var_ref(bl));
  body.push_back(for_loop(b, blocks, ForKind::Reduce,
                          for_loop(bl, lanes, ForKind::Spatial, step(var_ref(bl), cast(acc, term(r))))));
  if (int64_t tail = count - blocks * lanes) {
    LVarPtr t = k.var("r");
    body.push_back(
        for_loop(t, tail, ForKind::Reduce, step(lane0, cast(acc, term(add(var_ref(t), int_imm(blocks * lanes)))))));
  }
  for (int64_t half = lanes / 2; half >= 1; half /= 2) { // pairwise, as compensated_sum
    LVarPtr h = k.var("h");
    body.push_back(for_loop(h, half, ForKind::Spatial, step(var_ref(h), load(m, add(var_ref(h), int_imm(half))))));
  }
  body.push_back(then(load(m, lane0)));
  return alloc(m, seq(std::move(body)));
}

StmtPtr over_lane_blocks(KernelCtx &k, int64_t count,
                         const std::function<StmtPtr(const LExprPtr &first, int64_t width)> &body, int64_t block) {
  int64_t full = count / block, rest = count % block;
  LVarPtr b = k.var("lb");
  return seq({full ? for_loop(b, full, ForKind::Spatial, body(binary(BinaryOp::Mul, var_ref(b), int_imm(block)), block))
                   : seq({}),
              rest ? body(int_imm(full * block), rest) : seq({})});
}

namespace {

/// compensated_sums of each of `terms` in one loop; `also` only with one.
StmtPtr lane_sums(KernelCtx &k, int64_t width, int64_t count, DType acc, const std::vector<LaneTermFn> &terms,
                  const std::function<StmtPtr(const LExprPtr &l, const std::vector<LExprPtr> &totals)> &then,
                  const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &r, const LExprPtr &value)> &also) {
  GRADC_CHECK(!terms.empty() && (terms.size() == 1 || !also), "lowering", "lane_sums: `also` with several sums");
  struct Slots {
    BufferPtr s, c, x;
  };
  std::vector<Slots> slots;
  for (size_t j = 0; j < terms.size(); ++j) {
    std::string n = j ? std::to_string(j) : ""; // sum, sum1, ...
    slots.push_back({k.local("sum" + n, acc, width), k.local("carry" + n, acc, width), k.local("term" + n, acc, width)});
  }
  LExprPtr zero = constant_of(0, acc);
  auto lanes = [&](const std::function<StmtPtr(const LExprPtr &l)> &body) { return for_lanes(k, width, body); };
  LVarPtr r = k.var("r");
  StmtPtr sums = for_loop(r, count, ForKind::Reduce, lanes([&](const LExprPtr &l) {
    std::vector<StmtPtr> steps;
    for (size_t j = 0; j < terms.size(); ++j) {
      LExprPtr value = load(slots[j].x, l);
      steps.push_back(seq({store(slots[j].x, l, cast(acc, terms[j](l, var_ref(r)))),
                           also ? also(l, var_ref(r), value) : seq({}), neumaier(slots[j].s, slots[j].c, l, value)}));
    }
    return seq(std::move(steps));
  }));
  StmtPtr all = seq({lanes([&](const LExprPtr &l) {
                       std::vector<StmtPtr> init;
                       for (const Slots &u : slots)
                         init.push_back(seq({store(u.s, l, zero), store(u.c, l, zero)}));
                       return seq(std::move(init));
                     }),
                     sums, lanes([&](const LExprPtr &l) {
                       std::vector<LExprPtr> totals;
                       for (const Slots &u : slots)
                         totals.push_back(neumaier_total(u.s, u.c, l));
                       return then(l, totals);
                     })});
  for (auto u = slots.rbegin(); u != slots.rend(); ++u)
    all = alloc(u->s, alloc(u->c, alloc(u->x, all)));
  return all;
}

} // namespace

StmtPtr compensated_sums(KernelCtx &k, int64_t width, int64_t count, DType acc, const std::vector<LaneTermFn> &terms,
                         const std::function<StmtPtr(const LExprPtr &l, const std::vector<LExprPtr> &totals)> &then) {
  return lane_sums(k, width, count, acc, terms, then, nullptr);
}

StmtPtr compensated_sums(KernelCtx &k, int64_t width, int64_t count, DType acc, const LaneTermFn &term,
                         const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &total)> &then,
                         const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &r, const LExprPtr &value)> &also) {
  return lane_sums(
      k, width, count, acc, {term},
      [&](const LExprPtr &l, const std::vector<LExprPtr> &totals) { return then(l, totals[0]); }, also);
}

StmtPtr lanes_max(KernelCtx &k, int64_t width, int64_t count, DType acc, const LaneTermFn &term,
                  const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &max)> &then) {
  BufferPtr m = k.local("max", acc, width);
  auto lanes = [&](const std::function<StmtPtr(const LExprPtr &l)> &body) { return for_lanes(k, width, body); };
  LVarPtr r = k.var("r");
  StmtPtr terms = for_loop(r, count, ForKind::Reduce, lanes([&](const LExprPtr &l) {
    return store(m, l, binary(BinaryOp::Max, load(m, l), cast(acc, term(l, var_ref(r)))));
  }));
  return alloc(m, seq({lanes([&](const LExprPtr &l) { return store(m, l, lowest_of(acc)); }), terms,
                       lanes([&](const LExprPtr &l) { return then(l, load(m, l)); })}));
}

LExprPtr in_range(const LExprPtr &i, int64_t lo, int64_t hi) {
  return binary(BinaryOp::And, compare(CompareOp::GE, i, int_imm(lo)), compare(CompareOp::LT, i, int_imm(hi)));
}

LExprPtr clamp_index(const LExprPtr &i, int64_t n) {
  return binary(BinaryOp::Min, binary(BinaryOp::Max, i, int_imm(0)), int_imm(std::max<int64_t>(n - 1, 0)));
}

std::pair<int64_t, int64_t> outputs_reading_inside(int64_t s, int64_t first, int64_t last, int64_t n, int64_t out) {
  // o·s >= -first and o·s <= n - 1 - last, in 128 bits (a window's reach may pass 2^63)
  __int128 low = -__int128(first), high = __int128(n) - 1 - last;
  __int128 begin = low <= 0 ? 0 : (low + s - 1) / s, end = high < 0 ? 0 : high / s + 1;
  begin = std::min<__int128>(begin, out);
  return {int64_t(begin), int64_t(std::clamp<__int128>(end, begin, out))};
}

LExprPtr flat_index(const Shape &shape, const Index &idx) {
  GRADC_CHECK(shape.size() == idx.size(), "lowering",
              "index of rank " + std::to_string(idx.size()) + " for shape " + shape_str(shape));
  LExprPtr flat;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) // the index along a size-1 axis is always 0
      continue;
    flat = flat ? binary(BinaryOp::Add, binary(BinaryOp::Mul, flat, int_imm(shape[d])), idx[d]) : idx[d];
  }
  return flat ? flat : int_imm(0);
}

Index unravel_index(const LExprPtr &flat, const Shape &shape) {
  Index idx(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    LExprPtr q = stride == 1 ? flat : binary(BinaryOp::FloorDiv, flat, int_imm(stride));
    idx[d] = d == 0 ? q : binary(BinaryOp::FloorMod, q, int_imm(shape[d]));
    stride *= shape[d];
  }
  return idx;
}

Index broadcast_index(const Shape &in_shape, const Shape &out_shape, const Index &idx) {
  Index out;
  size_t lead = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < in_shape.size(); ++d)
    out.push_back(in_shape[d] == 1 && out_shape[d + lead] != 1 ? int_imm(0) : idx[d + lead]);
  return out;
}

StmtPtr loop_nest(const Shape &shape, const std::function<StmtPtr(const Index &)> &body, ForKind axis,
                  const std::string &prefix) {
  std::vector<LVarPtr> vars;
  Index idx;
  for (size_t d = 0; d < shape.size(); ++d) {
    vars.push_back(std::make_shared<LVar>(LVar{prefix + std::to_string(d)}));
    idx.push_back(var_ref(vars.back()));
  }
  StmtPtr s = body(idx);
  for (size_t d = shape.size(); d-- > 0;)
    s = for_loop(vars[d], shape[d], axis, s);
  return s;
}

std::vector<Type> leaf_types(const Type &type) {
  if (!type.is_tuple())
    return {type};
  std::vector<Type> out;
  for (const Type &f : type.fields)
    for (Type &leaf : leaf_types(f))
      out.push_back(std::move(leaf));
  return out;
}

std::vector<Type> input_leaves(const Expr &call) {
  std::vector<Type> out;
  for (const ExprPtr &a : call.args)
    for (Type &leaf : leaf_types(a->type))
      out.push_back(std::move(leaf));
  return out;
}

LExprPtr ElementCtx::in(size_t arg) const {
  return input(arg, broadcast_index(arg_type(arg).shape, type().shape, index));
}

StmtPtr KernelCtx::report_if(const LExprPtr &bad, int64_t code, const LExprPtr &value, const LExprPtr &position,
                             int64_t limit) {
  BufferPtr status = status_buffer();
  return if_then(bad, seq({store(status, int_imm(0), int_imm(code)), store(status, int_imm(1), cast(DType::Int64, value)),
                           store(status, int_imm(2), position), store(status, int_imm(3), int_imm(limit))}));
}

BufferPtr KernelCtx::local(const std::string &name, DType dtype, int64_t size) {
  return std::make_shared<Buffer>(Buffer{name, dtype, {size}, BufferScope::Local});
}

LVarPtr KernelCtx::var(const std::string &name) { return std::make_shared<LVar>(LVar{name}); }

StmtPtr pointwise_kernel(KernelCtx &k) {
  const Shape &shape = k.arg_type(0).shape;
  return loop_nest(shape, [&](const Index &i) { return k.call.op->pointwise(k, i, flat_index(shape, i)); });
}

} // namespace gradc
