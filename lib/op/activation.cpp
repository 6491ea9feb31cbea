//===- activation.cpp - nn.leaky_relu, nn.prelu, nn.dropout ---------------===//
//
// The piecewise-linear activations (injective: they fuse into their
// neighbours and into a product's epilogue) and Relay's inference-time
// dropout, which is the identity on field 0 of (output, mask).
//
// leaky_relu and prelu take the slope where x > 0 is false, so at x = 0 the
// gradient is alpha, as PyTorch's.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

struct LeakyReluAttrs {
  double alpha = 0.01;
  template <class V> void visit(V &v) { v("alpha", alpha, "The slope for x <= 0."); }
};

struct PReluAttrs {
  int64_t axis = 1;
  template <class V> void visit(V &v) { v("axis", axis, "The channel axis alpha runs along.", {.axis_of = 0}); }
};

struct DropoutAttrs {
  double rate = 0.5;
  template <class V> void visit(V &v) { v("rate", rate, "The training-time drop probability (unused at inference)."); }
};

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

Type dropout_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x || !require_float(ctx, *x))
    return Type::unknown();
  double rate = ctx.attrs_as<DropoutAttrs>().rate;
  if (!(rate >= 0 && rate < 1))
    return ctx.fail_attr("rate", "rate must be in [0, 1), found " + ctx.attrs.get("rate").str());
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

  reg.add("nn.dropout")
      .describe("Inference-time dropout: (data, a mask of ones); the identity on field 0.")
      .arg("data", "Tensor", "The input.")
      .attrs<DropoutAttrs>()
      .support_level(1)
      .relation("Dropout", dropout_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        return b.tuple({a[0], b.ones_like(a[0])});
      })
      .example("%x: Tensor[(2, 3), float64]", "nn.dropout(%x, rate=0.3f).0");
}

} // namespace gradc
