//===- norm.cpp - nn.batch_norm, nn.layer_norm, nn.group_norm -------------===//
//
// Relay's batch normalisation: (data, gamma, beta, mean, var) along `axis`,
//
//   out = (x - mean) · rsqrt(var + epsilon) · gamma + beta
//
// (gamma only with `scale`, beta only with `center`), and the 3-tuple
// result (out, mean, var). It is one kernel with three outputs: a
// per-channel factor rsqrt(var + eps) · gamma, then one subtract and one
// fused multiply-add per element, and the statistics copied through. The
// statistics are inputs of the formula, so they get gradients too: a
// training-mode batch norm is written with the batch's own statistics,
// `nn.batch_norm(x, g, b, mean(x, axis=[0, 2, 3]), variance(x, axis=[0, 2, 3]))`,
// and differentiates exactly as PyTorch's F.batch_norm(training=True).
//
// layer_norm and group_norm are compositions (the statistics of each row or
// group with mean, then the same formula), so their gradients of every
// order come from the parts, and fusion recomputes the centred values
// instead of storing them. The composition runs in the dtype's accumulator,
// as batch_norm's kernel and the reductions do: float16 data is cast to
// float32 and the result rounded once (statistics rounded to float16 put
// the output 0.05 off where a row's mean is 100 and its spread 0.5). The
// casts' adjoints put the backward pass in float32 too.
//
//===----------------------------------------------------------------------===//
#include "reduce.h"
#include "gradc/op/attrs/norm.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"
#include "gradc/op/attrs/reduce.h"

namespace gradc {
namespace {

Type batch_norm_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x || !require_float(ctx, *x))
    return Type::unknown();
  auto a = ctx.attrs_as<BatchNormAttrs>();
  if (a.epsilon < 0)
    return ctx.fail_attr("epsilon", "epsilon must be >= 0, found " + ctx.attrs.get("epsilon").str());
  Type vec = Type::tensor({x->shape[a.axis]}, x->dtype);
  for (size_t i = 1; i < 5; ++i) {
    const Type *t = ctx.tensor(i);
    if (!t)
      return Type::unknown();
    if (*t != vec)
      return ctx.fail(ctx.op.args[i].name + " must be " + vec.str() + " (the data's axis " + std::to_string(a.axis) +
                      "), found " + t->str());
  }
  return Type::tuple({*x, vec, vec});
}

/// out = (x - mean[c]) · f[c] + beta[c] with f = rsqrt(var + eps) · gamma,
/// in the accumulator dtype; then the statistics copied to outputs 1 and 2.
StmtPtr batch_norm_kernel(KernelCtx &k) {
  auto a = k.attrs_as<BatchNormAttrs>();
  const Shape &xs = k.arg_type(0).shape;
  int64_t C = xs[a.axis];
  DType dt = k.out()->dtype, acc = dtype_info(dt).accumulator;
  BufferPtr factor = k.scratch("factor", acc, C), shift = k.scratch("shift", acc, C);
  auto vec = [&](size_t arg, const LExprPtr &c) { return cast(acc, k.in(arg, {c})); };
  StmtPtr per_channel = loop_nest({C}, [&](const Index &c) {
    LExprPtr f = binary(BinaryOp::Div, constant_of(1, acc),
                        unary(UnaryOp::Sqrt, binary(BinaryOp::Add, vec(4, c[0]), constant_of(a.epsilon, acc))));
    if (a.scale)
      f = binary(BinaryOp::Mul, f, vec(1, c[0]));
    return seq({store(factor, c[0], f), store(shift, c[0], a.center ? vec(2, c[0]) : constant_of(0, acc))});
  });
  StmtPtr normalise = loop_nest(xs, [&](const Index &i) {
    const LExprPtr &c = i[a.axis];
    LExprPtr centred = binary(BinaryOp::Sub, cast(acc, k.in(0, i)), vec(3, c));
    return store(k.out(0), flat_index(xs, i), cast(dt, mul_add(centred, load(factor, c), load(shift, c))));
  });
  StmtPtr stats = loop_nest({C}, [&](const Index &c) {
    return seq({store(k.out(1), c[0], k.in(3, c)), store(k.out(2), c[0], k.in(4, c))});
  });
  return seq({per_channel, normalise, stats});
}

/// A (C,) vector for axis `axis` of data of type `x`, as (C, 1, ..., 1): it
/// broadcasts along the channel axis.
ExprPtr along_channels(Builder &b, const ExprPtr &v, const Type &x, int64_t axis) {
  Shape s{x.shape[axis]};
  s.insert(s.end(), x.rank() - axis - 1, 1);
  return b.reshape(v, s);
}

/// Field `field` of nn.batch_norm on its own (transform/Passes.h:
/// project_fields): the output as the injective formula the kernel
/// computes, (x - mean) · f + beta with the per-channel f = rsqrt(var + eps)
/// · gamma, in the accumulator dtype; the statistics are their inputs. The
/// output then fuses as any injective chain: a relu, relu6 or residual add
/// after it is one kernel reading x, and where the output has several
/// cheap users it is recomputed in each (transform/Fuse.cpp).
ExprPtr batch_norm_project(Builder &b, const std::vector<ExprPtr> &args, const Attrs &attrs, size_t field) {
  if (field > 0)
    return args[2 + field];
  auto a = composite_attrs<BatchNormAttrs>(args, attrs);
  const ExprPtr &x = args[0];
  DType dt = x->type.dtype, acc = dtype_info(dt).accumulator;
  auto in_acc = [&](ExprPtr v) { return dt == acc ? v : b.cast(v, acc); };
  auto along = [&](ExprPtr v) { return along_channels(b, v, x->type, a.axis); };
  ExprPtr f = b.div(b.constant(1, acc), b.call(ops::sqrt, {b.add(in_acc(args[4]), b.constant(a.epsilon, acc))}));
  if (a.scale)
    f = b.mul(f, in_acc(args[1]));
  ExprPtr out = b.mul(b.sub(in_acc(x), along(in_acc(args[3]))), along(f));
  if (a.center)
    out = b.add(out, along(in_acc(args[2])));
  return dt == acc ? out : b.cast(out, dt);
}

/// With s = rsqrt(var + eps), d = x - mean and G = (G0, G1, G2) the adjoint:
///   dx = G0 · gamma · s,  dbeta = Σ G0,  dgamma = s · Σ G0 · d,
///   dmean = -gamma · s · Σ G0 + G1,  dvar = -½ gamma · s³ · Σ G0 · d + G2,
/// each Σ over every axis but the channel's. Only two sums pass over the
/// data, Σ G0 and Σ G0 · d; the per-channel factors multiply their results
/// (it was four, Σ G0 · gamma · s and Σ G0 · d · s apart).
Grads batch_norm_grad(GradCtx &g) {
  auto a = g.attrs_as<BatchNormAttrs>();
  Builder &b = g.b;
  ExprPtr x = g.arg(0), gamma = g.arg(1), mean = g.arg(3), var = g.arg(4);
  DType dt = x->type.dtype;
  auto along = [&](ExprPtr v) { return along_channels(b, v, x->type, a.axis); };
  auto per_channel = [&](ExprPtr t) { return b.sum(t, {a.axis}, false, true); };
  ExprPtr g0 = b.get(g.grad, 0), g1 = b.get(g.grad, 1), g2 = b.get(g.grad, 2);
  ExprPtr s = b.call(ops::rsqrt, {b.add(var, b.constant(a.epsilon, dt))});
  ExprPtr gs = a.scale ? b.mul(gamma, s) : s; // d out / d x per channel
  ExprPtr d = b.sub(x, along(mean));
  ExprPtr dx = b.mul(g0, along(gs));
  ExprPtr sum_g0 = per_channel(g0), sum_g0_d = per_channel(b.mul(g0, d));
  ExprPtr dgamma = a.scale ? b.mul(sum_g0_d, s) : nullptr;
  ExprPtr dbeta = a.center ? sum_g0 : nullptr;
  ExprPtr dmean = b.add(b.neg(b.mul(sum_g0, gs)), g1);
  ExprPtr s3 = b.mul(b.mul(s, s), gs); // s² · gamma · s
  ExprPtr dvar = b.add(b.mul(sum_g0_d, b.scale(s3, -0.5)), g2);
  return {dx, dgamma, dbeta, dmean, dvar};
}

/// gamma and beta: (C,) for axis `axis` of the data, epsilon >= 0.
Type affine_norm_rel(RelationCtx &ctx, int64_t axis, double epsilon) {
  const Type *x = ctx.tensor(0);
  if (!x || !require_float(ctx, *x))
    return Type::unknown();
  if (epsilon < 0)
    return ctx.fail_attr("epsilon", "epsilon must be >= 0, found " + ctx.attrs.get("epsilon").str());
  Type vec = Type::tensor({x->shape[axis]}, x->dtype);
  for (size_t i = 1; i < 3; ++i) {
    const Type *t = ctx.tensor(i);
    if (!t)
      return Type::unknown();
    if (*t != vec)
      return ctx.fail(ctx.op.args[i].name + " must be " + vec.str() + " (the data's axis " + std::to_string(axis) +
                      "), found " + t->str());
  }
  return *x;
}

Type layer_norm_rel(RelationCtx &ctx) {
  auto a = ctx.attrs_as<LayerNormAttrs>();
  return affine_norm_rel(ctx, a.axis, a.epsilon);
}

Type group_norm_rel(RelationCtx &ctx) {
  auto a = ctx.attrs_as<GroupNormAttrs>();
  Type t = affine_norm_rel(ctx, a.axis, a.epsilon);
  if (t.is_tensor() && t.shape[a.axis] % a.num_groups != 0)
    return ctx.fail_attr("num_groups", std::to_string(t.shape[a.axis]) + " channels do not split into " +
                                           std::to_string(a.num_groups) + " groups");
  return t;
}

/// (x - mean) · rsqrt(var + eps) over `axes` of x (kept), the biased variance:
/// the variance operator, whose gradient rule does not sum x - mean again,
/// and its mean (variance_mean), one call with the variance's own after
/// common-subexpression elimination.
ExprPtr normalise(Builder &b, ExprPtr x, const std::vector<int64_t> &axes, double epsilon) {
  VarianceAttrs v;
  v.axis = axes;
  v.keepdims = true;
  ExprPtr mean = variance_mean(b, x, v);
  ExprPtr var = b.call(ops::variance, {x}, v);
  return b.mul(b.sub(x, mean), b.call(ops::rsqrt, {b.add(var, b.constant(epsilon, x->type.dtype))}));
}

/// `v` in dtype `dt` (itself when it is already).
ExprPtr as_dtype(Builder &b, ExprPtr v, DType dt) { return v->type.dtype == dt ? v : b.cast(v, dt); }

/// y · gamma + beta with both along `axis` (as scale and center say), in y's dtype.
ExprPtr affine(Builder &b, ExprPtr y, ExprPtr gamma, ExprPtr beta, int64_t axis, bool scale, bool center) {
  Shape along(y->type.rank() - axis, 1);
  along[0] = y->type.shape[axis];
  DType dt = y->type.dtype;
  if (scale)
    y = b.mul(y, b.reshape(as_dtype(b, gamma, dt), along));
  if (center)
    y = b.add(y, b.reshape(as_dtype(b, beta, dt), along));
  return y;
}

} // namespace

void register_norm_ops(OpRegistry &reg) {
  reg.add("nn.layer_norm")
      .describe("Layer normalisation: (x - mean) / sqrt(var + epsilon) · gamma + beta over `axis`.")
      .arg("data", "Tensor", "The input.")
      .arg("gamma", "Tensor[(C,)]", "The scale (used with scale=True).")
      .arg("beta", "Tensor[(C,)]", "The shift (used with center=True).")
      .attrs<LayerNormAttrs>()
      .support_level(1)
      .relation("LayerNorm", layer_norm_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &attrs) {
        auto at = composite_attrs<LayerNormAttrs>(a, attrs);
        DType dt = a[0]->type.dtype;
        ExprPtr y = normalise(b, as_dtype(b, a[0], dtype_info(dt).accumulator), {at.axis}, at.epsilon);
        return as_dtype(b, affine(b, y, a[1], a[2], at.axis, at.scale, at.center), dt);
      })
      .example("%x: Tensor[(2, 3, 5), float64], %g: Tensor[(5,), float64], %b: Tensor[(5,), float64]",
               "nn.layer_norm(%x, %g, %b)")
      .example("%x: Tensor[(2, 3, 4), float64], %g: Tensor[(3,), float64], %b: Tensor[(3,), float64]",
               "nn.layer_norm(%x, %g, %b, axis=1, epsilon=0.01f, center=False)");

  reg.add("nn.group_norm")
      .describe("Group normalisation: channels in num_groups groups, each normalised over its channels and the "
                "axes after them, then gamma and beta per channel.")
      .arg("data", "Tensor", "The input.")
      .arg("gamma", "Tensor[(C,)]", "The scale (used with scale=True).")
      .arg("beta", "Tensor[(C,)]", "The shift (used with center=True).")
      .attrs<GroupNormAttrs>()
      .support_level(1)
      .relation("GroupNorm", group_norm_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &attrs) {
        auto at = composite_attrs<GroupNormAttrs>(a, attrs);
        const Shape &s = a[0]->type.shape;
        Shape grouped(s.begin(), s.begin() + at.axis);
        grouped.push_back(at.num_groups);
        grouped.push_back(s[at.axis] / at.num_groups);
        grouped.insert(grouped.end(), s.begin() + at.axis + 1, s.end());
        std::vector<int64_t> axes;
        for (int64_t d = at.axis + 1; d < int64_t(grouped.size()); ++d)
          axes.push_back(d);
        DType dt = a[0]->type.dtype;
        ExprPtr x = as_dtype(b, b.reshape(a[0], grouped), dtype_info(dt).accumulator);
        ExprPtr y = b.reshape(normalise(b, x, axes, at.epsilon), s);
        return as_dtype(b, affine(b, y, a[1], a[2], at.axis, at.scale, at.center), dt);
      })
      .example("%x: Tensor[(2, 4, 3), float64], %g: Tensor[(4,), float64], %b: Tensor[(4,), float64]",
               "nn.group_norm(%x, %g, %b, num_groups=2)")
      .example("%x: Tensor[(2, 3, 6), float64], %g: Tensor[(6,), float64], %b: Tensor[(6,), float64]",
               "nn.group_norm(%x, %g, %b, num_groups=3, axis=-1, scale=False)");


  reg.add("nn.batch_norm")
      .describe("Batch normalisation with given statistics: (out, mean, var).")
      .arg("data", "Tensor", "The input.")
      .arg("gamma", "Tensor[(C,)]", "The scale (used with scale=True).")
      .arg("beta", "Tensor[(C,)]", "The shift (used with center=True).")
      .arg("moving_mean", "Tensor[(C,)]", "The mean subtracted (the batch's in training).")
      .arg("moving_var", "Tensor[(C,)]", "The variance divided by (the batch's in training).")
      .attrs<BatchNormAttrs>()
      .support_level(1)
      .relation("BatchNorm", batch_norm_rel)
      .gradient(batch_norm_grad)
      .kernel(batch_norm_kernel)
      .project(batch_norm_project)
      .fuses_producers()
      .example("%x: Tensor[(2, 3, 4, 2), float64], %g: Tensor[(3,), float64], %b: Tensor[(3,), float64], "
               "%m: Tensor[(3,), float64], %v: Tensor[(3,), float64]",
               "nn.batch_norm(%x, %g, %b, %m, %v).0", true)
      .example("%x: Tensor[(4, 3, 2), float64], %g: Tensor[(2,), float64], %b: Tensor[(2,), float64], "
               "%m: Tensor[(2,), float64], %v: Tensor[(2,), float64]",
               "nn.batch_norm(%x, %g, %b, %m, %v, axis=-1, epsilon=0.01f, center=False).0", true)
      .example("%x: Tensor[(2, 3), float64], %g: Tensor[(3,), float64], %b: Tensor[(3,), float64], "
               "%m: Tensor[(3,), float64], %v: Tensor[(3,), float64]",
               "nn.batch_norm(%x, %g, %b, %m, %v, scale=False).2", true); // the statistics pass through
}

} // namespace gradc
