//===- softmax.cpp - nn.softmax, nn.log_softmax -----------------------------===//
//
// Both normalise along one axis in three vectorized passes (maximum, sum of
// exponentials, output), in the dtype's accumulator, each sum in a fixed
// order (op/Kernel.h: compensated_sum), so a recomputed row is bitwise
// identical.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/softmax.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

//===--- softmax and log_softmax ------------------------------------------===//

/// Loops over every element of `shape` except along `axis`; `body` receives
/// a function that completes the index with a position along the axis.
using AtAxis = std::function<Index(const LExprPtr &)>;
StmtPtr over_axis(const Shape &shape, int64_t axis, const std::function<StmtPtr(const AtAxis &)> &body) {
  Shape outer = shape;
  outer.erase(outer.begin() + axis);
  return loop_nest(
      outer,
      [&](const Index &oidx) {
        AtAxis at = [&, oidx](const LExprPtr &j) {
          Index idx = oidx;
          idx.insert(idx.begin() + axis, j);
          return idx;
        };
        return body(at);
      },
      ForKind::Spatial);
}

/// m = max_j x_j; s = sum_j exp(x_j - m); out_j = finalize(x_j, m, s), all in
/// the dtype's accumulator (float16 rows are computed in float32, as PyTorch
/// does) and rounded to the output dtype once.
StmtPtr softmax_kernel(KernelCtx &k, bool log) {
  const Shape &shape = k.arg_type(0).shape;
  int64_t axis = k.attrs_as<SoftmaxAttrs>().axis, n = shape[axis];
  DType dt = k.out()->dtype, at = dtype_info(dt).accumulator;
  // softmax in the accumulator dtype writes each exp as it sums it, then
  // scales it in place: one exp per element, not two, and three passes.
  bool write_exp = !log && dt == at;
  // out_j from x_j - m and s' = log(s) (log_softmax) or 1 / s: a multiply
  // per element, where a divide cost about a cycle each (softmax of 4096 x
  // 1024: 3.6 -> 3.3 ms); within an ulp of the quotient.
  auto finalize = [&](const LExprPtr &shifted, const LExprPtr &written, const LExprPtr &sum) {
    if (log)
      return binary(BinaryOp::Sub, shifted, sum);
    return binary(BinaryOp::Mul, write_exp ? written : unary(UnaryOp::Exp, shifted), sum);
  };
  auto finish_sum = [&](const LExprPtr &total) {
    return log ? unary(UnaryOp::Log, total) : binary(BinaryOp::Div, constant_of(1, at), total);
  };
  int64_t rows = n ? num_elements(shape) / n : 0;
  if (!k.target.is_gpu() && n < 2 * kSumLanes && rows >= 2) {
    // On a CPU, short rows side by side, one per lane (64 rows of 10 classes:
    // 8.5 -> 1.6 us); each row reduced in order. On a GPU a row is a thread's.
    Shape outer = shape;
    outer.erase(outer.begin() + axis);
    return over_lane_blocks(k, rows, [&](const LExprPtr &first, int64_t width) {
      auto idx = [&](const LExprPtr &l, const LExprPtr &j) {
        Index i = unravel_index(binary(BinaryOp::Add, first, l), outer);
        i.insert(i.begin() + axis, j);
        return i;
      };
      auto x = [&](const LExprPtr &l, const LExprPtr &j) { return cast(at, k.in(0, idx(l, j))); };
      auto out_at = [&](const LExprPtr &l, const LExprPtr &j) { return flat_index(shape, idx(l, j)); };
      BufferPtr m = k.local("row_max", at, width), s = k.local("row_sum", at, width);
      auto shifted = [&](const LExprPtr &l, const LExprPtr &j) { return binary(BinaryOp::Sub, x(l, j), load(m, l)); };
      StmtPtr max = lanes_max(k, width, n, at, x, [&](const LExprPtr &l, const LExprPtr &v) { return store(m, l, v); });
      StmtPtr sum = compensated_sums(
          k, width, n, at, [&](const LExprPtr &l, const LExprPtr &j) { return unary(UnaryOp::Exp, shifted(l, j)); },
          [&](const LExprPtr &l, const LExprPtr &total) { return store(s, l, finish_sum(total)); },
          write_exp ? [&](const LExprPtr &l, const LExprPtr &j, const LExprPtr &e) { return store(k.out(), out_at(l, j), e); }
                    : std::function<StmtPtr(const LExprPtr &, const LExprPtr &, const LExprPtr &)>());
      LVarPtr j = k.var("j"), l = k.var("l");
      LExprPtr jr = var_ref(j), lr = var_ref(l);
      StmtPtr write = for_loop(
          j, n, ForKind::Spatial,
          for_loop(l, width, ForKind::Spatial,
                   store(k.out(), out_at(lr, jr),
                         cast(dt, finalize(shifted(lr, jr), load(k.out(), out_at(lr, jr)), load(s, lr))))));
      return alloc(m, alloc(s, seq({max, sum, write})));
    });
  }
  // Both reductions run in lanes along the row (vectorized; exp is vector
  // arithmetic), the sum compensated every 2 exponentials of a lane (all of
  // one sign: Kernel.h, compensated_sum's group): a fixed, shape-determined
  // order, accurate on long rows.
  return over_axis(shape, axis, [&](const AtAxis &at_axis) {
    auto x = [&](const LExprPtr &j) { return cast(at, k.in(0, at_axis(j))); };
    auto out_at = [&](const LExprPtr &j) { return flat_index(shape, at_axis(j)); };
    return lane_max(k, n, at, x, [&](const LExprPtr &max) {
      auto shifted = [&](const LExprPtr &j) { return binary(BinaryOp::Sub, x(j), max); };
      auto exp_of = [&](const LExprPtr &j) { return unary(UnaryOp::Exp, shifted(j)); };
      auto also = [&](const LExprPtr &j, const LExprPtr &e) { return store(k.out(), out_at(j), e); };
      return compensated_sum(
          k, n, at, exp_of,
          [&](const LExprPtr &total) {
            LVarPtr j = k.var("j");
            BufferPtr s = k.local("row_sum", at);
            LExprPtr jr = var_ref(j), sum = load(s, int_imm(0));
            return alloc(s, seq({store(s, int_imm(0), finish_sum(total)),
                                 for_loop(j, n, ForKind::Spatial,
                                          store(k.out(), out_at(jr),
                                                cast(dt, finalize(shifted(jr), load(k.out(), out_at(jr)), sum))))}));
          },
          write_exp ? std::function<StmtPtr(const LExprPtr &, const LExprPtr &)>(also) : nullptr, 2);
    });
  });
}

Type softmax_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (!require_float(ctx, *x))
    return Type::unknown();
  return *x; // the axis is checked with the attributes
}

} // namespace

void register_softmax_ops(OpRegistry &reg) {
  reg.add("nn.softmax")
      .describe("exp(x - max) / sum(exp(x - max)) along `axis`.")
      .arg("data", "Tensor", "The input.")
      .attrs<SoftmaxAttrs>()
      .support_level(1)
      .relation("Softmax", softmax_rel)
      .gradient([](GradCtx &g) -> Grads { // dx = y (g - sum(g y))
        int64_t axis = g.attrs_as<SoftmaxAttrs>().axis;
        ExprPtr gy = g.b.mul(g.grad, g.out);
        return {g.b.mul(g.out, g.b.sub(g.grad, g.b.sum(gy, {axis}, true)))};
      })
      .kernel([](KernelCtx &k) { return softmax_kernel(k, false); })
      .example("%x: Tensor[(2, 5), float64]", "nn.softmax(%x)");

  reg.add("nn.log_softmax")
      .describe("x - max - log(sum(exp(x - max))) along `axis`.")
      .arg("data", "Tensor", "The input.")
      .attrs<SoftmaxAttrs>()
      .support_level(1)
      .relation("Softmax", softmax_rel)
      .gradient([](GradCtx &g) -> Grads { // dx = g - exp(y) sum(g)
        int64_t axis = g.attrs_as<SoftmaxAttrs>().axis;
        ExprPtr soft = g.b.call(ops::exp, {g.out});
        return {g.b.sub(g.grad, g.b.mul(soft, g.b.sum(g.grad, {axis}, true)))};
      })
      .kernel([](KernelCtx &k) { return softmax_kernel(k, true); })
      .example("%x: Tensor[(2, 3, 4), float64]", "nn.log_softmax(%x, axis=1)");
}

} // namespace gradc
