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

StmtPtr compensated_sum(KernelCtx &k, int64_t count, DType acc, const TermFn &term,
                        const std::function<StmtPtr(const LExprPtr &total)> &then,
                        const std::function<StmtPtr(const LExprPtr &r, const LExprPtr &value)> &also,
                        int64_t group, const LaneBlockTermFn &block_term) {
  const int64_t lanes = count >= 2 * kSumLanes ? kSumLanes : 1, blocks = count / lanes;
  BufferPtr s = k.local("sum", acc, lanes), c = k.local("carry", acc, lanes), x = k.local("term", acc, lanes);
  group = is_float(acc) ? std::max<int64_t>(1, group) : 1;
  BufferPtr part = group > 1 ? k.local("part", acc, lanes) : nullptr; // a term of a group
  LExprPtr zero = constant_of(0, acc), lane0 = int_imm(0);
  // Each term is computed once, into x: Neumaier's step reads it four times,
  // and an exp written out four times was four times the code to compile.
  auto step = [&](const LExprPtr &slot, const LExprPtr &r, const LExprPtr &t) {
    LExprPtr value = load(x, slot);
    return seq({store(x, slot, cast(acc, t)), also ? also(r, value) : seq({}), neumaier(s, c, slot, value)});
  };
  // Term r = first + slot of a block: from the block's start and the lane
  // where the caller can split it (contiguous loads), else from r.
  auto term_at = [&](const LExprPtr &first, const LExprPtr &slot) {
    return block_term && lanes == kSumLanes ? block_term(first, slot) : term(add(first, slot));
  };
  std::vector<StmtPtr> body;
  LVarPtr l = k.var("l");
  body.push_back(for_loop(l, lanes, ForKind::Spatial,
                          seq({store(s, var_ref(l), zero), store(c, var_ref(l), zero)})));
  // Blocks of `lanes` terms: `group` of them at a time added plainly into
  // x, in order, then x into the sum with one compensated step; the blocks
  // left over one at a time.
  const int64_t grouped = blocks / group * group;
  auto block = [&](const LExprPtr &first_block, int64_t n, const LExprPtr &slot) {
    std::vector<StmtPtr> terms;
    for (int64_t g = 0; g < n; ++g) {
      LExprPtr first = binary(BinaryOp::Mul, add(first_block, int_imm(g)), int_imm(lanes));
      LExprPtr r = add(first, slot);
      if (n == 1)
        return step(slot, r, term_at(first, slot));
      LExprPtr value = load(part, slot);
      terms.push_back(store(part, slot, cast(acc, term_at(first, slot))));
      if (also)
        terms.push_back(also(r, value));
      terms.push_back(store(x, slot, g == 0 ? value : add(load(x, slot), value)));
    }
    terms.push_back(neumaier(s, c, slot, load(x, slot)));
    return seq(std::move(terms));
  };
  LVarPtr b = k.var("b"), bl = k.var("l");
  body.push_back(for_loop(b, grouped / group, ForKind::Reduce,
                          for_loop(bl, lanes, ForKind::Spatial,
                                   block(binary(BinaryOp::Mul, var_ref(b), int_imm(group)), group, var_ref(bl)))));
  if (blocks > grouped) {
    LVarPtr rb = k.var("b"), rl = k.var("l");
    body.push_back(for_loop(rb, blocks - grouped, ForKind::Reduce,
                            for_loop(rl, lanes, ForKind::Spatial, block(add(var_ref(rb), int_imm(grouped)), 1, var_ref(rl)))));
  }
  if (int64_t tail = count - blocks * lanes) {
    LVarPtr t = k.var("r");
    body.push_back(for_loop(t, tail, ForKind::Reduce,
                            step(lane0, add(var_ref(t), int_imm(blocks * lanes)),
                                 term(add(var_ref(t), int_imm(blocks * lanes))))));
  }
  // The lanes pairwise into lane 0 (16 -> 8 -> 4 -> 2 -> 1, each step a
  // vector operation), carries alongside; a non-finite sum is the plain one.
  for (int64_t half = lanes / 2; half >= 1; half /= 2) {
    LVarPtr h = k.var("h");
    LExprPtr lo = var_ref(h), hi = add(var_ref(h), int_imm(half));
    StmtPtr carry = is_float(acc) ? store(c, lo, add(load(c, lo), load(c, hi))) : seq({});
    body.push_back(for_loop(h, half, ForKind::Spatial, seq({neumaier(s, c, lo, load(s, hi)), carry})));
  }
  body.push_back(then(neumaier_total(s, c, lane0)));
  StmtPtr all = seq(std::move(body));
  return alloc(s, alloc(c, alloc(x, part ? alloc(part, all) : all)));
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

StmtPtr compensated_sums(KernelCtx &k, int64_t width, int64_t count, DType acc, const LaneTermFn &term,
                         const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &total)> &then,
                         const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &r, const LExprPtr &value)> &also) {
  BufferPtr s = k.local("sum", acc, width), c = k.local("carry", acc, width), x = k.local("term", acc, width);
  LExprPtr zero = constant_of(0, acc);
  auto lanes = [&](const std::function<StmtPtr(const LExprPtr &l)> &body) { return for_lanes(k, width, body); };
  LVarPtr r = k.var("r");
  StmtPtr terms = for_loop(r, count, ForKind::Reduce, lanes([&](const LExprPtr &l) {
    LExprPtr value = load(x, l);
    return seq({store(x, l, cast(acc, term(l, var_ref(r)))), also ? also(l, var_ref(r), value) : seq({}),
                neumaier(s, c, l, value)});
  }));
  return alloc(s, alloc(c, alloc(x, seq({lanes([&](const LExprPtr &l) { return seq({store(s, l, zero), store(c, l, zero)}); }),
                                         terms, lanes([&](const LExprPtr &l) { return then(l, neumaier_total(s, c, l)); })}))));
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
