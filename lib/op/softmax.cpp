//===- softmax.cpp - nn.softmax, nn.log_softmax -----------------------------===//
//
// Both normalise along one axis in three vectorized passes (maximum, sum of
// exponentials, output), in the dtype's accumulator, each sum in a fixed
// order (op/Kernel.h: compensated_sum), so a recomputed row is bitwise
// identical.
//
//===----------------------------------------------------------------------===//
#include "softmax.h"
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

} // namespace

SoftmaxMath::SoftmaxMath(const KernelCtx &k, bool log) : log(log) {
  dt = k.out()->dtype, at = dtype_info(dt).accumulator;
  write_exp = !log && dt == at;
  shape = outer = k.arg_type(0).shape;
  axis = k.attrs_as<SoftmaxAttrs>().axis, n = shape[axis];
  rows = n ? num_elements(shape) / n : 0;
  outer.erase(outer.begin() + axis);
}

Index SoftmaxMath::at_row(const LExprPtr &row, const LExprPtr &j) const {
  Index i = unravel_index(row, outer);
  i.insert(i.begin() + axis, j);
  return i;
}

LExprPtr SoftmaxMath::finalize(const LExprPtr &shifted, const LExprPtr &written, const LExprPtr &sum) const {
  if (log)
    return binary(BinaryOp::Sub, shifted, sum);
  return binary(BinaryOp::Mul, write_exp ? written : unary(UnaryOp::Exp, shifted), sum);
}

LExprPtr SoftmaxMath::finish_sum(const LExprPtr &total) const {
  return log ? unary(UnaryOp::Log, total) : binary(BinaryOp::Div, constant_of(1, at), total);
}

StmtPtr softmax_kernel(KernelCtx &k, bool log) {
  const Shape &shape = k.arg_type(0).shape;
  int64_t axis = k.attrs_as<SoftmaxAttrs>().axis, n = shape[axis];
  SoftmaxMath math(k, log);
  DType dt = math.dt, at = math.at;
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
            return alloc(s, seq({store(s, int_imm(0), math.finish_sum(total)),
                                 for_loop(j, n, ForKind::Spatial,
                                          store(k.out(), out_at(jr),
                                                cast(dt, math.finalize(shifted(jr), load(k.out(), out_at(jr)), sum))))}));
          },
          math.write_exp ? std::function<StmtPtr(const LExprPtr &, const LExprPtr &)>(also) : nullptr, 2);
    });
  });
}

namespace {

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
