//===- reduce.cpp - sum, mean, max, min -----------------------------------===//
//
// Reductions over `axis` (None = all, negative allowed, `exclude` inverts the
// set) with `keepdims`. Each lowers to a loop nest over the output with the
// reduction inside, in a fixed order (so results do not depend on where the
// kernel runs): sums are compensated and accumulate in the dtype's
// accumulator (Kernel.h: compensated_sum); max and min start from the
// dtype's limits.
//
//===----------------------------------------------------------------------===//
#include "reduce.h"
#include "gradc/op/attrs/reduce.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"
#include "gradc/loops/Lanes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace gradc {
namespace {

const char *kTypes = "%x: Tensor[(2, 3, 4), float64]";


} // namespace

ReduceShape reduce_shape(const Expr &call) {
  ReduceShape r;
  r.in = call.args[0]->type.shape;
  auto a = call.op->attrs_type == &typeid(ArgReduceAttrs) ? ReduceAttrs(call_attrs<ArgReduceAttrs>(call))
                                                           : call_attrs<ReduceAttrs>(call);
  r.axes = a.reduced(int64_t(r.in.size()));
  r.keepdims = a.keepdims;
  r.out = call.type.is_tuple() ? call.type.fields[0].shape : call.type.shape; // sum_pair's: its fields alike
  r.count = 1;
  for (int64_t a : r.axes)
    r.count *= r.in[a];
  return r;
}

namespace {

/// Input index from an output index and the reduced-axes indices.
Index input_index(const ReduceShape &r, const Index &out_idx, const Index &red_idx) {
  Index idx;
  size_t o = 0, k = 0;
  for (int64_t d = 0; d < (int64_t)r.in.size(); ++d) {
    bool reduced = std::find(r.axes.begin(), r.axes.end(), d) != r.axes.end();
    if (reduced) {
      idx.push_back(red_idx[k++]);
      if (r.keepdims)
        ++o;
    } else {
      idx.push_back(out_idx[o++]);
    }
  }
  return idx;
}

} // namespace

ReduceShape merged_runs(const ReduceShape &r) {
  auto reduced = [&](size_t d) { return std::find(r.axes.begin(), r.axes.end(), int64_t(d)) != r.axes.end(); };
  ReduceShape m = r;
  m.in.clear();
  m.axes.clear();
  for (size_t d = 0; d < r.in.size(); ++d) {
    if (d > 0 && reduced(d) == reduced(d - 1)) {
      m.in.back() *= r.in[d];
      continue;
    }
    if (reduced(d))
      m.axes.push_back(int64_t(m.in.size()));
    m.in.push_back(r.in[d]);
  }
  if (m.in == r.in)
    return r;
  m.data = r.data.empty() ? r.in : r.data;
  m.out = reduced_shape(m.in, m.axes, r.keepdims);
  return m;
}

LExprPtr reduce_input(KernelCtx &k, const ReduceShape &r, const Index &idx, size_t arg) {
  // The view's index as the argument's: the split is what the simplifier
  // (lower/Simplify.cpp) folds back into one flat offset.
  return k.in(arg, r.data.empty() ? idx : unravel_index(flat_index(r.in, idx), r.data));
}

LExprPtr reduced_element(KernelCtx &k, const ReduceShape &r, const Index &oidx, const LExprPtr &flat, size_t arg) {
  Shape red_shape;
  for (int64_t a : r.axes)
    red_shape.push_back(r.in[a]);
  return reduce_input(k, r, input_index(r, oidx, unravel_index(flat, red_shape)), arg);
}

LExprPtr sum_value(const KernelCtx &k, const ReduceShape &r, bool mean, const LExprPtr &total, size_t out) {
  DType dt = k.out(out)->dtype, acc = dtype_info(dt).accumulator;
  return cast(dt, mean ? binary(BinaryOp::Div, total, constant_of(double(r.count), acc)) : total);
}

namespace {

/// Terms each lane adds plainly before one compensated step (Kernel.h:
/// compensated_sum's group). Neumaier's step is ten vector operations per
/// term, so a batch norm's sums ran at a third of the speed of memory
/// (its backward's Σ g and Σ g·(x - mean) over 8 x 256 x 56 x 56: 2.2 ms
/// one by one, 1.2 ms as one sum_pair in groups of 4); grouped, each lane's
/// error is at most 3 ulps of the |terms| of a group, so the total's error
/// stays within a few ulps of Σ |x| (pairwise summation's bound grows with
/// log2 of the count), its compensation across groups exact as before.
constexpr int64_t kSumGroup = 4;

} // namespace

StmtPtr sum_kernel(KernelCtx &k, const ReduceShape &shape, bool mean) {
  const ReduceShape r = merged_runs(shape);
  DType acc = dtype_info(k.out()->dtype).accumulator;
  const size_t sums = k.outputs.size(); // sum_pair: argument j summed into output j
  // Where the innermost reduced axis is the input's last and a multiple of
  // the lanes long, a block of lanes never crosses it: its start is split
  // into indices once and the lanes step along that axis (one vector load;
  // batch norm's sums over (N, H, W) of 32 x 32 x 32 x 32: 0.52 -> 0.13 ms).
  // Where it is at least a vector long but not a multiple (7 x 7 = 49,
  // 14 x 14 = 196 pixels), the terms are rows of it (compensated_sum's
  // rows): each row's whole blocks a vector load at a time, its last terms
  // one by one (its blocks padded with zero terms, clamped indices made
  // every load of them a gather: 14 x 14 rows summed at half the speed).
  Shape red_shape;
  for (int64_t a : r.axes)
    red_shape.push_back(r.in[a]);
  const int64_t L = r.in.empty() ? 0 : r.in.back();
  bool last_reduced = !r.axes.empty() && r.axes.back() == int64_t(r.in.size()) - 1;
  bool split_blocks = last_reduced && L % kSumLanes == 0;
  bool in_rows = last_reduced && !split_blocks && L >= kSumLanes;
  Shape blocks = red_shape, lead(red_shape.begin(), red_shape.end() - (red_shape.empty() ? 0 : 1));
  if (!blocks.empty())
    blocks.back() = L / kSumLanes;
  return loop_nest(r.out, [&](const Index &oidx) {
    std::vector<SumTerms> terms;
    for (size_t arg = 0; arg < sums; ++arg) {
      TermFn term = [&, oidx, arg](const LExprPtr &i) { return reduced_element(k, r, oidx, i, arg); };
      LaneBlockTermFn block_term;
      if (split_blocks)
        block_term = [&, oidx, arg](const LExprPtr &first, const LExprPtr &lane) {
          // block first / lanes of the reduced axes with the last counted in
          // blocks: every index provably in range (the loop verifier checks)
          Index red = unravel_index(binary(BinaryOp::FloorDiv, first, int_imm(kSumLanes)), blocks);
          red.back() = binary(BinaryOp::Add, binary(BinaryOp::Mul, red.back(), int_imm(kSumLanes)), lane);
          return reduce_input(k, r, input_index(r, oidx, red), arg);
        };
      RowTermFn row_term = [&, oidx, arg](const LExprPtr &q, const LExprPtr &j) { // element j of row q
        Index red = unravel_index(q, lead);
        red.push_back(j);
        return reduce_input(k, r, input_index(r, oidx, red), arg);
      };
      terms.push_back({term, block_term, row_term});
    }
    return compensated_sum(
        k, r.count, acc, terms,
        [&](const std::vector<LExprPtr> &totals) {
          std::vector<StmtPtr> stores;
          for (size_t j = 0; j < sums; ++j)
            stores.push_back(store(k.out(j), flat_index(r.out, oidx), sum_value(k, r, mean, totals[j], j)));
          return seq(std::move(stores));
        },
        nullptr, kSumGroup, in_rows ? L : 0);
  });
}

namespace {

/// max and min: exact in any order; the identity is the dtype's lowest
/// (highest) value, so integer and bool reductions are right at the limits.
StmtPtr extremum_kernel(KernelCtx &k, BinaryOp op) {
  ReduceShape r = reduce_shape(k.call);
  Shape red_shape;
  for (int64_t a : r.axes)
    red_shape.push_back(r.in[a]);
  const BufferPtr &out = k.out();
  return loop_nest(r.out, [&](const Index &oidx) {
    BufferPtr acc = k.local("acc", out->dtype);
    LExprPtr zero = int_imm(0);
    StmtPtr body = loop_nest(
        red_shape,
        [&](const Index &ridx) {
          LExprPtr x = k.in(0, input_index(r, oidx, ridx));
          return store(acc, zero, binary(op, load(acc, zero), x));
        },
        ForKind::Reduce, "r");
    LExprPtr init = op == BinaryOp::Max ? lowest_of(out->dtype) : highest_of(out->dtype);
    return alloc(acc, seq({store(acc, zero, init), body, store(out, flat_index(r.out, oidx), load(acc, zero))}));
  });
}

/// argmax and argmin: the flat position (row-major over the reduced axes)
/// of the first extreme, or the last with select_last_index; a NaN is the
/// extreme (the first NaN, as numpy). int32, as Relay.
StmtPtr arg_extremum_kernel(KernelCtx &k, CompareOp better) {
  ReduceShape r = reduce_shape(k.call);
  bool last = k.attrs_as<ArgReduceAttrs>().select_last_index;
  Shape red_shape;
  for (int64_t a : r.axes)
    red_shape.push_back(r.in[a]);
  const BufferPtr &out = k.out();
  DType dt = k.arg_type(0).dtype;
  return loop_nest(r.out, [&](const Index &oidx) {
    BufferPtr best = k.local("best", dt), at = k.local("at", DType::Int64);
    LExprPtr zero = int_imm(0);
    auto is_nan = [&](const LExprPtr &v) { return compare(CompareOp::NE, v, v); };
    StmtPtr body = loop_nest(
        red_shape,
        [&](const Index &ridx) {
          LExprPtr x = k.in(0, input_index(r, oidx, ridx)), b = load(best, zero);
          LExprPtr wins = compare(last ? (better == CompareOp::GT ? CompareOp::GE : CompareOp::LE) : better, x, b);
          if (is_float(dt)) // the first NaN wins and stays
            wins = both(compare(CompareOp::EQ, b, b), binary(BinaryOp::Or, wins, is_nan(x)));
          return if_then(wins, seq({store(best, zero, x), store(at, zero, flat_index(red_shape, ridx))}));
        },
        ForKind::Reduce, "r");
    LExprPtr first = k.in(0, input_index(r, oidx, Index(red_shape.size(), int_imm(0))));
    return alloc(best, alloc(at, seq({store(best, zero, first), store(at, zero, zero), body,
                                      store(out, flat_index(r.out, oidx), cast(out->dtype, load(at, zero)))})));
  });
}

template <CompareOp better> StmtPtr arg_kernel(KernelCtx &k) { return arg_extremum_kernel(k, better); }

Type arg_reduce_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  auto a = ctx.attrs_as<ArgReduceAttrs>();
  std::vector<int64_t> axes = a.reduced(x->rank());
  for (int64_t ax : axes)
    if (x->shape[ax] == 0)
      return ctx.fail("cannot take the " + std::string(ctx.op.name == "argmax" ? "maximum" : "minimum") +
                      " of an empty axis " + std::to_string(ax));
  return Type::tensor(reduced_shape(x->shape, axes, a.keepdims), DType::Int32);
}

/// The adjoint of a reduction's output, broadcast back to the input's shape.
ExprPtr broadcast_back(GradCtx &g, ExprPtr grad) {
  ReduceShape r = reduce_shape(g.call);
  ExprPtr kept = g.b.reshape(grad, reduced_shape(r.in, r.axes, true));
  Attrs bs;
  bs.set("shape", AttrValue::ints(r.in));
  return g.b.call(ops::broadcast_to, {kept}, bs);
}

/// sum_pair(a, b): both of one shape and numeric dtype, each reduced alike.
Type sum_pair_rel(RelationCtx &ctx) {
  const Type *a = ctx.tensor(0), *b = ctx.tensor(1);
  if (!a || !b)
    return Type::unknown();
  if (*a != *b)
    return ctx.fail("the two tensors must have one type, found " + a->str() + " and " + b->str());
  Type t = numeric_reduce_rel(ctx);
  return t.is_unknown() ? t : Type::tuple({t, t});
}

/// variance(data[, mean]): the mean, if given, has the reduction's shape
/// with keepdims (Relay passes mean(data, axis, keepdims=True)).
Type variance_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x || !require_float(ctx, *x))
    return Type::unknown();
  auto a = ctx.attrs_as<VarianceAttrs>();
  std::vector<int64_t> axes = a.reduce(true).reduced(x->rank());
  if (ctx.args.size() == 2) {
    const Type *m = ctx.tensor(1);
    if (!m)
      return Type::unknown();
    Type expect = Type::tensor(reduced_shape(x->shape, axes, true), x->dtype);
    if (*m != expect)
      return ctx.fail("mean of type " + m->str() + " is not the keepdims mean " + expect.str());
  }
  return Type::tensor(reduced_shape(x->shape, axes, a.keepdims), x->dtype);
}

/// variance's gradient, a rule of its own though it is a composite. With m
/// the mean, d/dx Σ(x - m)²/(n - u) = 2(x - m)/(n - u). Where m is mean(x)
/// (one argument) the path through m adds -Σ 2(x - m)/(n - u)/n to every
/// element, zero in exact arithmetic (m minimizes Σ(x - m)²): the parts'
/// gradient spent a pass over x summing it, in every training batch norm
/// and layer norm. The rule is made of operators, mean(x) included, so it
/// differentiates again to the parts' second derivatives. A given mean's
/// adjoint is minus the sum of x's over the axes. float16 computes in its
/// accumulator, as the composition does.
} // namespace

ExprPtr variance_mean(Builder &b, const ExprPtr &x, const VarianceAttrs &a) {
  return b.reshape(b.call(ops::mean, {x}, a.reduce(false)),
                   reduced_shape(x->type.shape, a.reduce(true).reduced(x->type.rank()), true));
}

namespace {

Grads variance_gradient(GradCtx &g) {
  auto a = g.attrs_as<VarianceAttrs>();
  const Type &xt = g.arg(0)->type;
  DType dt = xt.dtype, acc = dtype_info(dt).accumulator;
  std::vector<int64_t> axes = a.reduce(true).reduced(xt.rank());
  Shape kept = reduced_shape(xt.shape, axes, true);
  int64_t n = 1;
  for (int64_t axis : axes)
    n *= xt.shape[axis];
  auto wide = [&](const ExprPtr &e) { return acc == dt ? e : g.b.cast(e, acc); };
  auto narrow = [&](const ExprPtr &e) { return acc == dt ? e : g.b.cast(e, dt); };
  bool given = g.call.args.size() == 2;
  ExprPtr x = wide(g.arg(0));
  ExprPtr m = given ? wide(g.arg(1)) : variance_mean(g.b, x, a);
  ExprPtr per = g.b.div(g.b.reshape(wide(g.grad), kept), g.b.constant(double(n - (a.unbiased ? 1 : 0)) / 2, acc));
  ExprPtr dx = g.b.mul(per, g.b.sub(x, m));
  if (!given)
    return {narrow(dx)};
  return {narrow(dx), narrow(g.b.neg(g.b.sum(dx, axes, true)))};
}

Type float_reduce_rel(RelationCtx &ctx) {
  Type t = reduce_rel(ctx);
  if (!t.is_unknown() && !require_float(ctx, t))
    return Type::unknown();
  return t;
}

} // namespace

ReduceShape collapse_sum_shape(const KernelCtx &k) {
  ReduceShape r;
  r.in = k.arg_type(0).shape;
  r.out = k.out()->shape;
  size_t lead = r.in.size() - r.out.size();
  for (size_t d = 0; d < r.in.size(); ++d)
    if (d < lead || r.out[d - lead] != r.in[d])
      r.axes.push_back(int64_t(d));
  r.keepdims = true; // the input's axes of size 1 are the output's
  r.out = reduced_shape(r.in, r.axes, true);
  r.count = 1;
  for (int64_t a : r.axes)
    r.count *= r.in[a];
  return r;
}

void register_reduce_ops(OpRegistry &reg) {
  reg.add("sum")
      .attrs<ReduceAttrs>()
      .describe("Sum over axes.")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(4)
      .relation("Reduce", numeric_reduce_rel) // numpy counts bools in int64
      .gradient([](GradCtx &g) -> Grads { return {broadcast_back(g, g.grad)}; }) // d/dx_i sum x = 1
      .kernel([](KernelCtx &k) { return sum_kernel(k, reduce_shape(k.call), false); })
      .fuses_producers() // reads each element once
      .example(kTypes, "sum(%x, axis=[0, 2])");

  // Made by the fused stage (transform/SiblingSums.cpp) from two sums over
  // one shape that read common values, so that one pass over memory reads
  // them: a batch norm's backward Σ g and Σ g·(x - mean).
  reg.add("sum_pair")
      .attrs<ReduceAttrs>()
      .describe("Two sums over the same axes of two tensors of one shape, in one pass: (sum(a), sum(b)).")
      .arg("a", "Tensor", "The first tensor.")
      .arg("b", "Tensor", "The second tensor, of a's type.")
      .support_level(4)
      .relation("SumPair", sum_pair_rel)
      .gradient([](GradCtx &g) -> Grads {
        return {broadcast_back(g, g.b.get(g.grad, 0)), broadcast_back(g, g.b.get(g.grad, 1))};
      })
      .kernel([](KernelCtx &k) { return sum_kernel(k, reduce_shape(k.call), false); })
      .fuses_producers() // reads each element of each once
      .example("%x: Tensor[(2, 3, 4), float64], %y: Tensor[(2, 3, 4), float64]", "sum_pair(%x, %x * %y, axis=[0, 2]).1")
      .example("%x: Tensor[(2, 3, 4), float64], %y: Tensor[(2, 3, 4), float64]",
               "sum_pair(%y, %x, axis=1, exclude=True, keepdims=True).0");

  reg.add("mean")
      .attrs<ReduceAttrs>()
      .describe("Arithmetic mean over axes.")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(4)
      .relation("Reduce", float_reduce_rel)
      .gradient([](GradCtx &g) -> Grads { // d/dx_i mean x = 1/n
        double n = double(reduce_shape(g.call).count);
        return {broadcast_back(g, g.b.scale(g.grad, 1.0 / n))};
      })
      .kernel([](KernelCtx &k) { return sum_kernel(k, reduce_shape(k.call), true); })
      .fuses_producers()
      .example(kTypes, "mean(%x, axis=1, keepdims=True)");

  reg.add("variance")
      .describe("Σ (x - mean)² / (n - unbiased) over axes (numpy's var with ddof = unbiased); the mean, if "
                "given, is mean(data, axis, keepdims=True).")
      .arg("data", "Tensor", "The input tensor.")
      .arg("mean", "Tensor", "Optional: the mean, with the reduced axes kept.")
      .arity(1, 2)
      .attrs<VarianceAttrs>()
      .support_level(4)
      .relation("Variance", variance_rel)
      .gradient(variance_gradient)
      // Two passes: the mean, then the compensated sum of squared
      // deviations (sum fuses the subtract and square as it reads): accurate
      // where E[x²] - E[x]² cancels. Expanded after differentiation (its
      // rule above), its mean then shared with a batch norm's.
      // A dtype narrower than its accumulator (float16) computes in the
      // accumulator and rounds once: its range holds neither the sum of
      // squares nor the count past 65 504 elements (both overflowed to inf,
      // and their quotient was NaN).
      .decompose([](Builder &b, const std::vector<ExprPtr> &args, const Attrs &attrs) {
        auto a = composite_attrs<VarianceAttrs>(args, attrs);
        DType dt = args[0]->type.dtype, acc = dtype_info(dt).accumulator;
        if (acc != dt) {
          std::vector<ExprPtr> wide;
          for (const ExprPtr &arg : args)
            wide.push_back(b.cast(arg, acc));
          return b.cast(b.call(ops::variance, wide, attrs), dt);
        }
        ExprPtr x = args[0];
        // mean(x, axis) reshaped, not mean(..., keepdims=True): the same call
        // as a batch norm's own mean of x, which common-subexpression
        // elimination then computes once
        ExprPtr m = args.size() == 2 ? args[1] : variance_mean(b, x, a);
        ExprPtr d = b.sub(x, m);
        if (!a.unbiased) // the sum and its division by n in one kernel
          return b.call(ops::mean, {b.mul(d, d)}, a.reduce(a.keepdims));
        ExprPtr ss = b.call(ops::sum, {b.mul(d, d)}, a.reduce(a.keepdims));
        int64_t n = num_elements(x->type.shape) / std::max<int64_t>(1, num_elements(m->type.shape));
        return b.div(ss, b.constant(double(n - 1), x->type.dtype));
      })
      .example(kTypes, "variance(%x, axis=[0, 2])")
      .example(kTypes, "variance(%x, mean(%x, axis=1, keepdims=True), axis=1, keepdims=True, unbiased=True)")
      .example(kTypes, "variance(%x, axis=1, exclude=True, keepdims=True, unbiased=True)");

  reg.add("std")
      .describe("The standard deviation over axes: sqrt(variance) (numpy's std with ddof = unbiased).")
      .arg("data", "Tensor", "The input tensor.")
      .arg("mean", "Tensor", "Optional: the mean, with the reduced axes kept.")
      .arity(1, 2)
      .attrs<VarianceAttrs>()
      .support_level(4)
      .relation("Variance", variance_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &args, const Attrs &attrs) {
        return b.call(ops::sqrt, {b.call(ops::variance, args, attrs)});
      })
      .example(kTypes, "std(%x, axis=[0, 2])", true)
      .example(kTypes, "std(%x, axis=1, keepdims=True, unbiased=True)", true);

  reg.add("logsumexp")
      .attrs<ReduceAttrs>()
      .describe("log Σ exp(x) over axes, computed as m + log Σ exp(x - m) with m the maximum (no overflow).")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(4)
      .relation("Reduce", float_reduce_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &args, const Attrs &attrs) {
        auto a = composite_attrs<ReduceAttrs>(args, attrs);
        ExprPtr x = args[0];
        DType dt = x->type.dtype;
        ReduceAttrs kept = a;
        kept.keepdims = true;
        // m only shifts the exponentials: the result does not depend on it, so
        // no gradient flows through it (and an infinite m, all -inf or a +inf,
        // shifts by 0 so that no inf - inf appears)
        ExprPtr m = b.call(ops::no_grad, {b.call(ops::max, {x}, kept)});
        ExprPtr inf = b.call(ops::equal, {b.call(ops::abs, {m}), b.constant(INFINITY, dt)});
        m = b.call(ops::where, {inf, b.constant(0, dt), m});
        ExprPtr r = b.add(b.call(ops::log, {b.call(ops::sum, {b.call(ops::exp, {b.sub(x, m)})}, kept)}), m);
        return b.reshape(r, reduced_shape(x->type.shape, a.reduced(x->type.rank()), a.keepdims));
      })
      .example(kTypes, "logsumexp(%x, axis=1)")
      .example(kTypes, "logsumexp(%x, axis=[0, 2], keepdims=True)");

  for (auto [name, what, better] : {std::tuple{"argmax", "maximum", CompareOp::GT},
                                     std::tuple{"argmin", "minimum", CompareOp::LT}})
    reg.add(name)
        .attrs<ArgReduceAttrs>()
        .describe(std::string("The position of the ") + what + " over axes (int32; the first on ties, the first NaN).")
        .arg("data", "Tensor", "The input tensor.")
        .support_level(4)
        .relation("ArgReduce", arg_reduce_rel)
        .no_gradient()
        .kernel(better == CompareOp::GT ? arg_kernel<CompareOp::GT> : arg_kernel<CompareOp::LT>)
        .fuses_producers();

  reg.add("max")
      .attrs<ReduceAttrs>()
      .describe("Maximum over axes.")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(4)
      .relation("Reduce", reduce_rel)
      .gradient([](GradCtx &g) -> Grads { // flows to every element equal to the maximum
        ExprPtr at_max = g.b.call(ops::equal, {g.arg(0), broadcast_back(g, g.out)});
        ExprPtr zero = g.b.constant(0, g.grad->type.dtype);
        return {g.b.call(ops::where, {at_max, broadcast_back(g, g.grad), zero})};
      })
      .kernel([](KernelCtx &k) { return extremum_kernel(k, BinaryOp::Max); })
      .fuses_producers()
      .example(kTypes, "max(%x, axis=-1)");

  reg.add("min")
      .attrs<ReduceAttrs>()
      .describe("Minimum over axes.")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(4)
      .relation("Reduce", reduce_rel)
      .gradient([](GradCtx &g) -> Grads { // flows to every element equal to the minimum
        ExprPtr at_min = g.b.call(ops::equal, {g.arg(0), broadcast_back(g, g.out)});
        ExprPtr zero = g.b.constant(0, g.grad->type.dtype);
        return {g.b.call(ops::where, {at_min, broadcast_back(g, g.grad), zero})};
      })
      .kernel([](KernelCtx &k) { return extremum_kernel(k, BinaryOp::Min); })
      .fuses_producers()
      .example(kTypes, "min(%x, axis=0)");
}

} // namespace gradc
