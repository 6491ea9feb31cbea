//===- loss.cpp - nn.nll_loss and its backward operators --------------------===//
//
// The negative log-likelihood loss with PyTorch's semantics, and the
// Relax-style helpers its gradient goes through (grad.nll_loss_backward,
// grad.nll_loss_weights_backward). Every sum is in the dtype's accumulator.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/loss.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"
#include "loss.h"

namespace gradc {
std::pair<LExprPtr, LExprPtr> nll_target(const KernelCtx &k, size_t target_arg, const NllShape &s, const Index &tidx) {
  LExprPtr t = k.in(target_arg, tidx);
  LExprPtr counted = compare(CompareOp::NE, t, constant_of(double(k.attrs_as<NllAttrs>().ignore_index), t->dtype));
  LExprPtr t64 = cast(DType::Int64, t);
  LExprPtr cls = binary(BinaryOp::Min, binary(BinaryOp::Max, t64, int_imm(0)), int_imm(s.C - 1));
  return {cls, counted};
}

StmtPtr check_target(KernelCtx &k, size_t target_arg, const NllShape &s, const Index &tidx) {
  LExprPtr t = k.in(target_arg, tidx);
  LExprPtr counted = compare(CompareOp::NE, t, constant_of(double(k.attrs_as<NllAttrs>().ignore_index), t->dtype));
  LExprPtr t64 = cast(DType::Int64, t);
  LExprPtr outside = binary(BinaryOp::Or, compare(CompareOp::LT, t64, int_imm(0)),
                            compare(CompareOp::GE, t64, int_imm(s.C)));
  return k.report_if(binary(BinaryOp::And, counted, outside), kStatusIndexOutOfRange, t64,
                     flat_index(s.target, tidx), s.C);
}

LExprPtr nll_weight(const KernelCtx &k, size_t weight_arg, const LExprPtr &cls, DType dt) {
  return k.call.args.size() > weight_arg ? k.in(weight_arg, {cls}) : constant_of(1, dt);
}


LExprPtr nll_loss_at(const KernelCtx &k, const NllShape &s, const Index &tidx, LExprPtr *weight) {
  DType dt = k.out()->dtype;
  LExprPtr zero_f = constant_of(0, dt);
  auto [cls, counted] = nll_target(k, 1, s, tidx);
  LExprPtr w = nll_weight(k, 2, cls, dt);
  if (weight)
    *weight = select(counted, w, zero_f);
  return select(counted, unary(UnaryOp::Neg, mul(w, k.in(0, s.pred_index(tidx, cls)))), zero_f);
}

StmtPtr nll_loss_backward_scatter(KernelCtx &k, const LExprPtr &total) {
  NllShape s(k.arg_type(1).shape);
  DType dt = k.out()->dtype, at = dtype_info(dt).accumulator;
  const std::string reduction = k.attrs_as<NllAttrs>().reduction;
  LExprPtr zero_f = constant_of(0, dt);
  return loop_nest(s.pred, [&](const Index &pidx) {
    Index tidx = pidx;
    LExprPtr c = tidx[s.class_axis];
    tidx.erase(tidx.begin() + s.class_axis);
    auto [cls, counted] = nll_target(k, 2, s, tidx);
    LExprPtr hit = binary(BinaryOp::And, counted, compare(CompareOp::EQ, cls, c));
    LExprPtr g = k.in(0, reduction == "none" ? tidx : Index{});
    LExprPtr value = cast(dt, binary(BinaryOp::Div, cast(at, unary(UnaryOp::Neg, mul(nll_weight(k, 3, cls, dt), g))), total));
    return store(k.out(), flat_index(s.pred, pidx), select(hit, value, zero_f));
  });
}

namespace {

//===--- nn.nll_loss ------------------------------------------------------===//
// pred (N, C, d...) or (C); target (N, d...) or (); weights (C). PyTorch's
// semantics: loss = -w[t] pred[t] where t != ignore_index; "mean" divides the
// sum by the total weight of the counted targets. Out-of-range targets are
// clamped into [0, C) so a bad target can never read out of bounds.

Type nll_loss_rel(RelationCtx &ctx) {
  const Type *p = ctx.tensor(0), *t = p ? ctx.tensor(1) : nullptr;
  if (!t)
    return Type::unknown();
  if (!is_float(p->dtype))
    return ctx.fail("predictions must be floating-point, found " + p->str());
  if (!is_int(t->dtype))
    return ctx.fail("targets must be int32 or int64, found " + t->str());
  if (p->rank() == 0)
    return ctx.fail("predictions must have rank >= 1");
  Shape expect = p->shape;
  expect.erase(expect.begin() + (p->rank() == 1 ? 0 : 1));
  if (t->shape != expect)
    return ctx.fail("targets of shape " + shape_str(t->shape) + " do not match predictions " + shape_str(p->shape) +
                    " (expected " + shape_str(expect) + ")");
  if (ctx.args.size() == 3) {
    const Type *w = ctx.tensor(2);
    if (!w)
      return Type::unknown();
    int64_t C = p->shape[p->rank() == 1 ? 0 : 1];
    if (w->dtype != p->dtype || w->shape != Shape{C})
      return ctx.fail("weights must be " + Type::tensor({C}, p->dtype).str() + ", found " + w->str());
  }
  const std::string r = ctx.attrs_as<NllAttrs>().reduction;
  return Type::tensor(r == "none" ? t->shape : Shape{}, p->dtype);
}

} // namespace

StmtPtr nll_loss_kernel(KernelCtx &k) {
  NllShape s(k.arg_type(0).shape);
  DType dt = k.out()->dtype;
  const std::string reduction = k.attrs_as<NllAttrs>().reduction;
  LExprPtr zero = int_imm(0);
  auto loss_at = [&](const Index &tidx, LExprPtr *weight) { return nll_loss_at(k, s, tidx, weight); };
  if (reduction == "none")
    return loop_nest(s.target, [&](const Index &tidx) {
      return seq({check_target(k, 1, s, tidx), store(k.out(), flat_index(s.target, tidx), loss_at(tidx, nullptr))});
    });
  // Sums accumulate in the dtype's accumulator (float16 in float32), each
  // compensated (Neumaier), as reductions are: a plain float32 sum of 1995
  // equal losses was 2.8e-5 off (found by the differential tester).
  DType at = dtype_info(dt).accumulator;
  LExprPtr zero_a = constant_of(0, at);
  BufferPtr acc = k.local("loss", at), wsum = k.local("weight", at);
  BufferPtr acc_c = k.local("loss_carry", at), wsum_c = k.local("weight_carry", at);
  StmtPtr body = loop_nest(
      s.target,
      [&](const Index &tidx) {
        LExprPtr w;
        LExprPtr l = loss_at(tidx, &w);
        return seq({check_target(k, 1, s, tidx), neumaier(acc, acc_c, zero, cast(at, l)),
                    neumaier(wsum, wsum_c, zero, cast(at, w))});
      },
      ForKind::Reduce);
  LExprPtr total = neumaier_total(acc, acc_c, zero), weight = neumaier_total(wsum, wsum_c, zero);
  LExprPtr result = reduction == "mean" ? binary(BinaryOp::Div, total, weight) : total;
  StmtPtr init = seq({store(acc, zero, zero_a), store(wsum, zero, zero_a), store(acc_c, zero, zero_a),
                      store(wsum_c, zero, zero_a)});
  return alloc(acc, alloc(wsum, alloc(acc_c, alloc(wsum_c, seq({init, body, store(k.out(), zero, cast(dt, result))})))));
}

namespace {

//===--- grad.nll_loss_backward -------------------------------------------===//

Type nll_loss_backward_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *p = g ? ctx.tensor(1) : nullptr;
  if (!p)
    return Type::unknown();
  std::vector<Type> fwd(ctx.args.begin() + 1, ctx.args.end());
  RelationCtx inner{ctx.op, fwd, ctx.attrs, "", 1}; // fwd[i] is argument i + 1
  Type loss = nll_loss_rel(inner);
  if (!inner.error.empty()) {
    ctx.error = inner.error;
    return Type::unknown();
  }
  if (*g != loss)
    return ctx.fail("output_grad of type " + g->str() + " does not match the loss type " + loss.str());
  return *p;
}

} // namespace

/// dpred[.., c, ..] = -w[t] g / (total weight if mean) where c == t and t counts.
/// The total weight is summed first, into a scratch word, so that the writes
/// of dpred are a nest of their own (parallel on the CPU, a launch of their
/// own on the GPU) rather than the tail of a serial sum.
StmtPtr nll_loss_backward_kernel(KernelCtx &k) {
  NllShape s(k.arg_type(1).shape);
  DType dt = k.out()->dtype;
  const std::string reduction = k.attrs_as<NllAttrs>().reduction;
  LExprPtr zero_f = constant_of(0, dt), zero = int_imm(0);
  DType at = dtype_info(dt).accumulator; // the total weight sums in the accumulator dtype
  std::vector<StmtPtr> stmts;
  LExprPtr total = constant_of(1, at);
  if (reduction == "mean") { // the total weight, compensated as the loss's
    BufferPtr wsum = k.local("weight", at), wsum_c = k.local("weight_carry", at);
    BufferPtr word = k.scratch("weight_total", at, 1);
    StmtPtr sum = loop_nest(
        s.target,
        [&](const Index &tidx) {
          auto [cls, counted] = nll_target(k, 2, s, tidx);
          LExprPtr w = select(counted, nll_weight(k, 3, cls, dt), zero_f);
          return neumaier(wsum, wsum_c, zero, cast(at, w));
        },
        ForKind::Reduce, "r");
    stmts.push_back(alloc(wsum, alloc(wsum_c, seq({store(wsum, zero, constant_of(0, at)),
                                                   store(wsum_c, zero, constant_of(0, at)), sum,
                                                   store(word, zero, neumaier_total(wsum, wsum_c, zero))}))));
    total = load(word, zero);
  }
  stmts.push_back(nll_loss_backward_scatter(k, total));
  return seq(std::move(stmts));
}

namespace {

//===--- grad.nll_loss_weights_backward -----------------------------------===//
// With S = sum_i -w[t_i] p_i and W = sum_i w[t_i] over counted targets:
//   none/sum: dw[c] = sum_{i: t_i = c} g_i (-p_i)
//   mean (L = S / W): dw[c] = g / W * sum_{i: t_i = c} (-p_i - L)

Type nll_loss_weights_backward_rel(RelationCtx &ctx) {
  if (ctx.args.size() != 4)
    return ctx.fail("expects the weights of the loss");
  Type pred = nll_loss_backward_rel(ctx);
  if (pred.is_unknown() || !ctx.error.empty())
    return pred;
  return ctx.args[3];
}

/// dw[c] = sum over targets of class c of -g p[n, c] (sum; g per target for
/// "none"), and for "mean" (g / W) (-p[n, c] - L) with W the total weight and
/// L the loss. Every sum (W, S = W L, each class's) is compensated in the
/// dtype's accumulator, as reductions are: a plain float32 scatter over
/// 10^5 rows was off by 2e-4 relative, float16 by 1%.
StmtPtr nll_loss_weights_backward_kernel(KernelCtx &k) {
  NllShape s(k.arg_type(1).shape);
  DType dt = k.out()->dtype, acc = dtype_info(dt).accumulator;
  const std::string reduction = k.attrs_as<NllAttrs>().reduction;
  LExprPtr zero_a = constant_of(0, acc), zero = int_imm(0);
  auto in_acc = [&](int i, const Index &idx) { return cast(acc, k.in(i, idx)); };
  BufferPtr sums = k.scratch("class_sums", acc, s.C), carries = k.scratch("class_carries", acc, s.C);
  BufferPtr scale = k.local("scale", acc), shift = k.local("shift", acc);
  BufferPtr scale_carry = k.local("scale_carry", acc), shift_carry = k.local("shift_carry", acc);
  std::vector<StmtPtr> stmts{loop_nest({s.C}, [&](const Index &c) {
    return seq({store(sums, c[0], zero_a), store(carries, c[0], zero_a)});
  })};
  if (reduction == "mean") { // W into scale and S into shift, then scale = g / W, shift = L
    for (const BufferPtr &b : {scale, shift, scale_carry, shift_carry})
      stmts.push_back(store(b, zero, zero_a));
    stmts.push_back(loop_nest(
        s.target,
        [&](const Index &tidx) {
          auto [cls, counted] = nll_target(k, 2, s, tidx);
          LExprPtr w = in_acc(3, {cls});
          LExprPtr l = unary(UnaryOp::Neg, mul(w, in_acc(1, s.pred_index(tidx, cls))));
          return if_then(counted, seq({neumaier(scale, scale_carry, zero, w), neumaier(shift, shift_carry, zero, l)}));
        },
        ForKind::Reduce, "r"));
    LExprPtr W = neumaier_total(scale, scale_carry, zero), S = neumaier_total(shift, shift_carry, zero);
    stmts.push_back(store(shift, zero, binary(BinaryOp::Div, S, W)));
    stmts.push_back(store(scale, zero, binary(BinaryOp::Div, in_acc(0, {}), W)));
  }
  stmts.push_back(loop_nest(
      s.target,
      [&](const Index &tidx) {
        auto [cls, counted] = nll_target(k, 2, s, tidx);
        LExprPtr neg_p = unary(UnaryOp::Neg, in_acc(1, s.pred_index(tidx, cls)));
        LExprPtr term = reduction == "mean" ? mul(load(scale, zero), binary(BinaryOp::Sub, neg_p, load(shift, zero)))
                                            : mul(in_acc(0, reduction == "none" ? tidx : Index{}), neg_p);
        return if_then(counted, neumaier(sums, carries, cls, term));
      },
      ForKind::Reduce));
  stmts.push_back(loop_nest({s.C}, [&](const Index &c) {
    return store(k.out(), c[0], cast(dt, neumaier_total(sums, carries, c[0])));
  }));
  return alloc(scale, alloc(shift, alloc(scale_carry, alloc(shift_carry, seq(std::move(stmts))))));
}

constexpr const char *kNllWeighted =
    "%p: Tensor[(2, 3, 2), float64], %t: Tensor[(2, 2), int64], %w: Tensor[(3,), float64]";
constexpr const char *kNllBackward =
    "%g: float64, %p: Tensor[(2, 3, 2), float64], %t: Tensor[(2, 2), int64], %w: Tensor[(3,), float64]";

OpBuilder &nll_attrs(OpBuilder &b) { return b.attrs<NllAttrs>(); }

/// The arguments and attributes the backward operators of nn.nll_loss share:
/// the loss's adjoint followed by the loss's own arguments.
OpBuilder &nll_backward(OpBuilder &b) {
  return nll_attrs(b.arg("output_grad", "Tensor", "The adjoint of the loss.")
                       .arg("predictions", "Tensor[(N, C, d...)]", "As for nn.nll_loss.")
                       .arg("targets", "Tensor[(N, d...), int]", "As for nn.nll_loss.")
                       .arg("weights", "Tensor[(C,)]", "As for nn.nll_loss.")
                       .support_level(10));
}

/// The gradient of dw = nll_loss_weights_backward(g, p, t, w) (second order
/// through a weighted loss), from Φ = Σ_c G[c] dw[c] for the adjoint G, in
/// nll_loss calls with G or w as the class weights (m_i: target i counts):
///   sum / none: Φ = Σ_i g_i nll_i(p, t, G), free of w;
///   mean:       Φ = g (S_G - L W_G) / W with S_G = nll_sum(p, t, G),
///               W_G = Σ m_i G[t_i] = nll_sum(-1, t, G), L = nll_mean(p, t, w),
///               W = nll_sum(-1, t, w); so dΦ/dw comes from dL/dw and
///               dW/dw[c] = (counted targets of class c), both weight gradients.
Grads nll_loss_weights_backward_grad(GradCtx &g) {
  const auto &a = g.call.args; // (output_grad, predictions, targets, weights)
  ExprPtr G = g.grad, go = a[0], p = a[1], t = a[2], w = a[3];
  NllAttrs attrs = g.attrs_as<NllAttrs>(), sum = attrs, mean = attrs;
  sum.reduction = "sum";
  mean.reduction = "mean";
  Builder &b = g.b;
  if (attrs.reduction != "mean")
    return {b.call(ops::nll_loss, {p, t, G}, attrs), b.call(ops::nll_loss_backward, {go, p, t, G}, attrs), nullptr,
            nullptr};
  DType dt = p->type.dtype;
  ExprPtr minus_one = b.neg(b.ones_like(p)), one = b.constant(1, dt);
  ExprPtr S_G = b.call(ops::nll_loss, {p, t, G}, sum), W_G = b.call(ops::nll_loss, {minus_one, t, G}, sum);
  ExprPtr L = b.call(ops::nll_loss, {p, t, w}, mean), W = b.call(ops::nll_loss, {minus_one, t, w}, sum);
  ExprPtr dg = b.div(b.sub(S_G, b.mul(L, W_G)), W); // (S_G - L W_G) / W
  ExprPtr g_over_W = b.div(go, W);
  ExprPtr dp = b.sub(b.call(ops::nll_loss_backward, {g_over_W, p, t, G}, sum),
                     b.call(ops::nll_loss_backward, {b.mul(g_over_W, W_G), p, t, w}, mean));
  ExprPtr dL_dw = b.call(ops::nll_loss_weights_backward, {one, p, t, w}, mean);
  ExprPtr dW_dw = b.call(ops::nll_loss_weights_backward, {one, minus_one, t, w}, sum);
  ExprPtr dw = b.neg(b.add(b.mul(dL_dw, b.mul(g_over_W, W_G)), b.mul(dW_dw, b.div(b.mul(go, dg), W))));
  return {dg, dp, nullptr, dw};
}

/// nn.cross_entropy_with_logits(pred, target): same-typed, rank >= 1.
Type cross_entropy_rel(RelationCtx &ctx) {
  const Type *p = ctx.tensor(0), *t = p ? ctx.tensor(1) : nullptr;
  if (!t || !require_float(ctx, *p))
    return Type::unknown();
  if (*p != *t)
    return ctx.fail("predictions " + p->str() + " and targets " + t->str() + " must have one type");
  if (p->rank() < 1)
    return ctx.fail("expects a batch axis (rank >= 1), found " + p->str());
  return Type::tensor({}, p->dtype);
}

} // namespace

void register_loss_ops(OpRegistry &reg) {
  reg.add("nn.cross_entropy_with_logits")
      .describe("-Σ predictions · targets / batch (Relay: predictions are log-probabilities, targets a "
                "distribution per row; batch = the first axis).")
      .arg("predictions", "Tensor[(N, ...)]", "Log-probabilities (e.g. log_softmax of logits).")
      .arg("targets", "Tensor[(N, ...)]", "Target probabilities (e.g. one_hot).")
      .support_level(10)
      .relation("CrossEntropy", cross_entropy_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        ExprPtr total = b.sum(b.mul(a[0], a[1]), {});
        return b.scale(total, -1.0 / double(std::max<int64_t>(1, a[0]->type.shape[0])));
      })
      .example("%p: Tensor[(3, 4), float64], %t: Tensor[(3, 4), float64]", "nn.cross_entropy_with_logits(%p, %t)");


  nll_attrs(reg.add("nn.nll_loss")
                .describe("Negative log-likelihood loss (PyTorch semantics).")
                .arg("predictions", "Tensor[(N, C, d...)]", "Log-probabilities.")
                .arg("targets", "Tensor[(N, d...), int]", "Class indices.")
                .arg("weights", "Tensor[(C,)]", "Optional per-class weights.")
                .arity(2, 3)
                .support_level(10)
                .relation("NLLLoss", nll_loss_rel))
      .gradient([](GradCtx &g) -> Grads { // see grad.nll_loss_backward; targets are not differentiable
        std::vector<ExprPtr> args{g.grad};
        args.insert(args.end(), g.call.args.begin(), g.call.args.end());
        Grads out{g.b.call(ops::nll_loss_backward, args, g.attrs()), nullptr};
        if (args.size() == 4)
          out.push_back(g.b.call(ops::nll_loss_weights_backward, args, g.attrs()));
        return out;
      })
      .kernel(nll_loss_kernel)
      .example("%p: Tensor[(3, 4), float64], %t: Tensor[(3,), int64]", "nn.nll_loss(%p, %t)", false, 4)
      .example(kNllWeighted, "nn.nll_loss(%p, %t, %w)", true, 3)
      .example(kNllWeighted, "nn.nll_loss(%p, %t, %w, reduction=\"sum\", ignore_index=1)", true, 3)
      .example(kNllWeighted, "nn.nll_loss(%p, %t, %w, reduction=\"none\", ignore_index=0)", true, 3);

  nll_backward(
      reg.add("grad.nll_loss_backward").describe("The gradient of nn.nll_loss with respect to its predictions."))
      .arity(3, 4)
      .relation("NLLLossBackward", nll_loss_backward_rel)
      // dp = nll_loss_backward(g, p, t, w) is linear in g and free of p, and
      // sum(G * dp) = g · nll_loss(G, t, w) for every reduction (per element
      // for "none"), so for an adjoint G of dp:
      //   d/dg = nll_loss(G, t, w),  d/dp = 0,  d/dw = nll_loss_weights_backward(g, G, t, w)
      .gradient([](GradCtx &g) -> Grads {
        const auto &a = g.call.args;
        std::vector<ExprPtr> loss_args{g.grad, a[2]};
        if (a.size() == 4)
          loss_args.push_back(a[3]);
        Grads out{g.b.call(ops::nll_loss, loss_args, g.attrs()), nullptr, nullptr};
        if (a.size() == 4)
          out.push_back(g.b.call(ops::nll_loss_weights_backward, {a[0], g.grad, a[2], a[3]}, g.attrs()));
        return out;
      })
      .kernel(nll_loss_backward_kernel)
      .example(kNllBackward, "grad.nll_loss_backward(%g, %p, %t, %w)", true, 3)
      .example(kNllBackward, "grad.nll_loss_backward(%g, %p, %t, %w, reduction=\"sum\", ignore_index=1)", true, 3);

  nll_backward(reg.add("grad.nll_loss_weights_backward")
                   .describe("The gradient of nn.nll_loss with respect to its class weights."))
      .relation("NLLLossWeightsBackward", nll_loss_weights_backward_rel)
      .gradient(nll_loss_weights_backward_grad)
      .kernel(nll_loss_weights_backward_kernel)
      .example(kNllBackward, "grad.nll_loss_weights_backward(%g, %p, %t, %w)", true, 3)
      .example(kNllBackward, "grad.nll_loss_weights_backward(%g, %p, %t, %w, reduction=\"sum\", ignore_index=1)", true, 3)
      .example("%g: Tensor[(3,), float64], %p: Tensor[(3, 4), float64], %t: Tensor[(3,), int64], "
               "%w: Tensor[(4,), float64]",
               "grad.nll_loss_weights_backward(%g, %p, %t, %w, reduction=\"none\")", true, 4);
}

} // namespace gradc
