//===- activation.cpp - leaky_relu, prelu, gelu, silu, softplus, dropout --===//
//
// The piecewise-linear activations (injective: they fuse into their
// neighbours and into a product's epilogue) and Relay's inference-time
// dropout, which is the identity on field 0 of (output, mask). gelu and
// silu are compositions of elementwise operators (so every order of
// gradient comes from their parts, and they fuse the same); softplus is
// computed stably, max(βx, 0) + log(1 + e^-|βx|), over β.
//
// leaky_relu and prelu take the slope where x > 0 is false, so at x = 0 the
// gradient is alpha, as PyTorch's.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/activation.h"
#include "gradc/op/attrs/random.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

#include <cmath>

namespace gradc {
namespace {

LExprPtr positive(const LExprPtr &x) { return compare(CompareOp::GT, x, constant_of(0, x->dtype)); }

Type prelu_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0), *alpha = x ? ctx.tensor(1) : nullptr;
  if (!alpha || !require_float(ctx, *x))
    return Type::unknown();
  int64_t axis = ctx.attrs_as<PReluAttrs>().axis;
  Type expect = Type::tensor({x->shape[axis]}, x->dtype);
  if (*alpha != expect)
    return ctx.fail("alpha must be " + expect.str() + " (the data's axis " + std::to_string(axis) + "), found " +
                    alpha->str());
  return *x;
}

Type softplus_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x || !require_float(ctx, *x))
    return Type::unknown();
  if (!(ctx.attrs_as<SoftplusAttrs>().beta > 0))
    return ctx.fail_attr("beta", "beta must be > 0, found " + ctx.attrs.get("beta").str());
  return *x;
}

Type dropout_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x || !require_float(ctx, *x))
    return Type::unknown();
  DropoutAttrs a = ctx.attrs_as<DropoutAttrs>();
  if (!(a.rate >= 0 && a.rate < 1))
    return ctx.fail_attr("rate", "rate must be in [0, 1), found " + ctx.attrs.get("rate").str());
  if (a.training != (ctx.args.size() == 2))
    return ctx.fail(a.training ? "training=True needs the seed: nn.dropout(data, seed, rate=p, training=True)"
                               : "a seed is read only with training=True");
  if (a.training) {
    const Type *seed = ctx.tensor(1);
    if (!seed)
      return Type::unknown();
    if (seed->dtype != DType::Int64 || seed->rank() != 0)
      return ctx.fail("the seed must be a scalar int64 (64 random bits), found " + seed->str());
  }
  return Type::tuple({*x, *x});
}

} // namespace

void register_activation_ops(OpRegistry &reg) {
  reg.add("nn.leaky_relu")
      .describe("Elementwise x > 0 ? x : alpha · x.")
      .arg("data", "Tensor", "The input.")
      .attrs<LeakyReluAttrs>()
      .support_level(3)
      .relation("FloatIdentity", float_identity_rel)
      .gradient([](GradCtx &g) -> Grads { // g where x > 0, else alpha · g
        DType dt = g.grad->type.dtype;
        ExprPtr up = g.b.call(ops::greater, {g.arg(0), g.b.constant(0, dt)});
        return {g.b.call(ops::where, {up, g.grad, g.b.scale(g.grad, g.attrs_as<LeakyReluAttrs>().alpha)})};
      })
      .element([](ElementCtx &c) {
        LExprPtr x = c.in(0);
        return select(positive(x), x, binary(BinaryOp::Mul, constant_of(c.attrs_as<LeakyReluAttrs>().alpha, x->dtype), x));
      })
      .example("%x: Tensor[(2, 3), float64]", "nn.leaky_relu(%x, alpha=0.2f)");

  reg.add("nn.prelu")
      .describe("Elementwise x > 0 ? x : alpha[c] · x, alpha per index c of `axis`.")
      .arg("data", "Tensor", "The input.")
      .arg("alpha", "Tensor[(C,)]", "The slopes.")
      .attrs<PReluAttrs>()
      .support_level(3)
      .relation("PRelu", prelu_rel)
      .gradient([](GradCtx &g) -> Grads { // dx = x > 0 ? g : alpha g;  dalpha = Σ (x > 0 ? 0 : x) g
        int64_t axis = g.attrs_as<PReluAttrs>().axis, rank = g.arg(0)->type.rank();
        DType dt = g.grad->type.dtype;
        Shape along{g.arg(0)->type.shape[axis]};
        along.insert(along.end(), rank - axis - 1, 1);
        ExprPtr up = g.b.call(ops::greater, {g.arg(0), g.b.constant(0, dt)});
        ExprPtr zero = g.b.constant(0, dt);
        ExprPtr dx = g.b.call(ops::where, {up, g.grad, g.b.mul(g.grad, g.b.reshape(g.arg(1), along))});
        ExprPtr da = g.b.sum(g.b.call(ops::where, {up, zero, g.b.mul(g.grad, g.arg(0))}), {axis}, false, true);
        return {dx, da};
      })
      .element([](ElementCtx &c) {
        LExprPtr x = c.in(0), a = c.in(1, {c.index[c.attrs_as<PReluAttrs>().axis]});
        return select(positive(x), x, binary(BinaryOp::Mul, a, x));
      })
      .example("%x: Tensor[(2, 3, 4), float64], %a: Tensor[(3,), float64]", "nn.prelu(%x, %a)")
      .example("%x: Tensor[(2, 3, 4), float64], %a: Tensor[(4,), float64]", "nn.prelu(%x, %a, axis=-1)");

  reg.add("nn.gelu")
      .describe("Elementwise x·Φ(x) = x/2 · (1 + erf(x/√2)); approximate=\"tanh\": x/2 · (1 + tanh(√(2/π)(x + "
                "0.044715x³))).")
      .arg("data", "Tensor", "The input.")
      .attrs<GeluAttrs>()
      .support_level(3)
      .relation("FloatIdentity", float_identity_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &attrs) {
        ExprPtr x = a[0];
        DType dt = x->type.dtype;
        ExprPtr inner;
        if (composite_attrs<GeluAttrs>(a, attrs).approximate == "tanh")
          inner = b.call(ops::tanh, {b.scale(b.add(x, b.scale(b.mul(b.mul(x, x), x), 0.044715)),
                                            std::sqrt(2 / M_PI))});
        else
          inner = b.call(ops::erf, {b.scale(x, M_SQRT1_2)});
        return b.mul(b.scale(x, 0.5), b.add(b.constant(1, dt), inner));
      })
      .example("%x: Tensor[(2, 3), float64]", "nn.gelu(%x)")
      .example("%x: Tensor[(2, 3), float64]", "nn.gelu(%x, approximate=\"tanh\")");

  reg.add("nn.silu")
      .describe("Elementwise x·sigmoid(x) (swish).")
      .arg("data", "Tensor", "The input.")
      .support_level(3)
      .relation("FloatIdentity", float_identity_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        return b.mul(a[0], b.call(ops::sigmoid, {a[0]}));
      })
      .example("%x: Tensor[(2, 3), float64]", "nn.silu(%x)");

  reg.add("nn.softplus")
      .describe("Elementwise log(1 + e^(beta·x)) / beta, x itself where beta·x > threshold.")
      .arg("data", "Tensor", "The input.")
      .attrs<SoftplusAttrs>()
      .support_level(3)
      .relation("Softplus", softplus_rel)
      .gradient([](GradCtx &g) -> Grads { // sigmoid(beta·x), 1 past the threshold
        auto a = g.attrs_as<SoftplusAttrs>();
        DType dt = g.grad->type.dtype;
        ExprPtr bx = g.b.scale(g.arg(0), a.beta);
        ExprPtr linear = g.b.call(ops::greater, {bx, g.b.constant(a.threshold, dt)});
        return {g.b.call(ops::where, {linear, g.grad, g.b.mul(g.grad, g.b.call(ops::sigmoid, {bx}))})};
      })
      .element([](ElementCtx &c) {
        auto a = c.attrs_as<SoftplusAttrs>();
        LExprPtr x = c.in(0);
        DType dt = x->dtype;
        LExprPtr bx = mul(constant_of(a.beta, dt), x);
        LExprPtr soft = add(binary(BinaryOp::Max, bx, constant_of(0, dt)),
                            unary(UnaryOp::Log, add(constant_of(1, dt),
                                                    unary(UnaryOp::Exp, unary(UnaryOp::Neg, unary(UnaryOp::Abs, bx))))));
        return select(compare(CompareOp::GT, bx, constant_of(a.threshold, dt)), x,
                      binary(BinaryOp::Div, soft, constant_of(a.beta, dt)));
      })
      .example("%x: Tensor[(2, 3), float64]", "nn.softplus(%x)")
      .example("%x: Tensor[(2, 3), float64]", "nn.softplus(%x, beta=2f, threshold=1.5f)");

  reg.add("nn.dropout")
      .describe("Dropout: (output, mask). Inference: (data, ones). Training (training=True, a seed): the mask "
                "of nn.dropout_mask(seed, rate, stream) (Philox-4x32-10: the same bits on every thread count, "
                "target and remat plan), the kept elements scaled by 1 / (1 - rate), the mask as 1 and 0 in "
                "data's dtype.")
      .arg("data", "Tensor", "The input.")
      .arg("seed", "Tensor[(), int64]", "Training only: the random key (64 bits; advance it every step).")
      .arity(1, 2)
      .attrs<DropoutAttrs>()
      .support_level(1)
      .relation("Dropout", dropout_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &attrs) {
        DropoutAttrs d = composite_attrs<DropoutAttrs>(a, attrs);
        if (!d.training || d.rate == 0)
          return b.tuple({a[0], b.ones_like(a[0])});
        DType dt = a[0]->type.dtype;
        DropoutMaskAttrs m{.shape = a[0]->type.shape, .rate = d.rate, .stream = d.stream};
        ExprPtr keep = b.call(ops::dropout_mask, {a[1]}, m);
        ExprPtr zero = b.constant(0, dt);
        ExprPtr out = b.call(ops::where, {keep, b.scale(a[0], 1 / (1 - d.rate)), zero});
        return b.tuple({out, b.cast(keep, dt)});
      })
      .example("%x: Tensor[(2, 3), float64]", "nn.dropout(%x, rate=0.3f).0")
      .example("%x: Tensor[(4, 5), float64], %s: Tensor[(), int64]",
               "nn.dropout(%x, %s, rate=0.3f, training=True).0");
}

} // namespace gradc
