//===- elementwise.cpp - unary, binary, comparison and creation operators -===//
//
// Every operator here is injective: it computes one output element from the
// input elements at the (broadcast) same index, so chains of them fuse into a
// single loop nest. Broadcasting follows numpy; the gradient pass sums
// adjoints back to each input's shape, so rules here ignore broadcasting.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/elementwise.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

#include <cmath>

namespace gradc {
namespace {

const char *kUnaryTypes = "%x: Tensor[(2, 3), float64]";
const char *kBinaryTypes = "%x: Tensor[(2, 3), float64], %y: Tensor[(3,), float64]";

ExprPtr zero_of(GradCtx &g) { return g.b.constant(0, g.grad->type.dtype); }

/// g where `cond` holds, else 0.
ExprPtr mask(GradCtx &g, const OpDef *cmp, ExprPtr a, ExprPtr b) {
  ExprPtr cond = g.b.call(cmp, {a, b});
  return g.b.call(ops::where, {cond, g.grad, zero_of(g)});
}

Type where_rel(RelationCtx &ctx) {
  const Type *c = ctx.tensor(0), *x = c ? ctx.tensor(1) : nullptr, *y = x ? ctx.tensor(2) : nullptr;
  if (!y)
    return Type::unknown();
  if (c->dtype != DType::Bool)
    return ctx.fail(std::string("condition must be bool, found ") + dtype_name(c->dtype));
  if (x->dtype != y->dtype)
    return ctx.fail(std::string("dtypes ") + dtype_name(x->dtype) + " and " + dtype_name(y->dtype) + " differ");
  auto xy = broadcast_shapes(x->shape, y->shape);
  auto all = xy ? broadcast_shapes(c->shape, *xy) : std::nullopt;
  if (!all)
    return ctx.fail("shapes " + shape_str(c->shape) + ", " + shape_str(x->shape) + " and " + shape_str(y->shape) +
                    " are not broadcast-compatible");
  return Type::tensor(*all, x->dtype);
}

Type create_rel(RelationCtx &ctx) {
  auto a = ctx.attrs_as<CreateAttrs>();
  return Type::tensor(a.shape, a.dtype);
}

Type full_rel(RelationCtx &ctx) {
  const Type *v = ctx.tensor(0);
  if (!v)
    return Type::unknown();
  if (v->rank() != 0)
    return ctx.fail("fill_value must be a scalar, found " + v->str());
  auto a = ctx.attrs_as<FullAttrs>();
  return Type::tensor(a.shape, a.dtype.value_or(v->dtype));
}

Type full_like_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0), *v = x ? ctx.tensor(1) : nullptr;
  if (!v)
    return Type::unknown();
  if (v->rank() != 0)
    return ctx.fail("fill_value must be a scalar, found " + v->str());
  return *x;
}

Type cast_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  return Type::tensor(x->shape, ctx.attrs_as<CastAttrs>().dtype);
}

Type clip_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  auto a = ctx.attrs_as<ClipAttrs>();
  if (a.a_min > a.a_max)
    return ctx.fail_attr("a_max", "a_min is greater than a_max");
  return *x;
}

/// logical_and / or (two operands) and logical_not (one): bool tensors.
Type logical_rel(RelationCtx &ctx) {
  for (size_t i = 0; i < ctx.args.size(); ++i) {
    const Type *t = ctx.tensor(i);
    if (!t)
      return Type::unknown();
    if (t->dtype != DType::Bool)
      return ctx.fail("expects bool tensors, found " + t->str() + " (compare first, or cast)");
  }
  return ctx.args.size() == 1 ? ctx.args[0] : broadcast_rel(ctx);
}

/// isnan / isinf: any tensor -> bool of its shape.
Type predicate_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  return x ? Type::tensor(x->shape, DType::Bool) : Type::unknown();
}

LExprPtr math(UnaryOp op, const LExprPtr &x) { return unary(op, x); }

/// x ^ y, a float exponent of 1, 2 or 3 as x, x·x or x·x·x, as PyTorch
/// computes them (x·x is the square correctly rounded, as numpy's too; the
/// cube rounds twice, within 1.5 ulp): arithmetic that vectorizes where pow
/// is a libm call per element (a layer norm's (x - mean)^2 and its
/// gradient's 2·x^1 were 11% of vit_small's step; a tanh GELU cubes).
LExprPtr power(const LExprPtr &x, const LExprPtr &y) {
  if (is_float(x->dtype) && y->kind == LExprKind::FloatImm) {
    if (y->fvalue == 1)
      return x;
    if (y->fvalue == 2)
      return binary(BinaryOp::Mul, x, x);
    if (y->fvalue == 3)
      return binary(BinaryOp::Mul, binary(BinaryOp::Mul, x, x), x);
  }
  return binary(BinaryOp::Pow, x, y);
}

/// y - 1, folded where y is a literal (so that x^2's gradient reads 2·x^1,
/// which power() lowers to 2·x).
ExprPtr minus_one(GradCtx &g, const ExprPtr &y) {
  if (y->kind == ExprKind::Constant)
    return g.b.constant(is_float(y->dtype) ? y->fvalue - 1 : double(y->ivalue - 1), y->dtype);
  return g.b.sub(y, g.b.constant(1, y->type.dtype));
}

void unary_op(OpRegistry &reg, const char *name, const char *summary, TypeRelation rel, GradientFn grad, ElementFn elem,
              bool positive = false) {
  reg.add(name)
      .describe(summary)
      .arg("data", "Tensor", "The input tensor.")
      .support_level(1)
      .relation(rel == float_identity_rel ? "FloatIdentity" : "Identity", rel)
      .gradient(grad)
      .element(elem)
      .example(kUnaryTypes, std::string(name) + "(%x)", positive);
}

/// `bool_ok`: defined on bool (add, multiply, maximum, minimum: logical
/// or/and, as numpy); else bool operands are a type error (Relations.h).
void binary_op(OpRegistry &reg, const char *name, const char *summary, bool bool_ok, GradientFn grad, ElementFn elem,
               bool positive = false) {
  reg.add(name)
      .describe(summary)
      .arg("lhs", "Tensor", "The left operand.")
      .arg("rhs", "Tensor", "The right operand (broadcast with lhs).")
      .support_level(1)
      .relation("Broadcast", bool_ok ? broadcast_rel : numeric_broadcast_rel)
      .gradient(grad)
      .element(elem)
      .example(kBinaryTypes, std::string(name) + "(%x, %y)", positive);
}

} // namespace

void register_elementwise_ops(OpRegistry &reg) {
  //===--- unary ----------------------------------------------------------===//
  unary_op(
      reg, "negative", "Elementwise -x.", numeric_identity_rel, // numpy rejects -x on bool
      [](GradCtx &g) -> Grads { return {g.b.neg(g.grad)}; },    // d/dx -x = -1
      [](ElementCtx &c) { return unary(UnaryOp::Neg, c.in(0)); });
  unary_op(
      reg, "exp", "Elementwise e^x.", float_identity_rel,
      [](GradCtx &g) -> Grads { return {g.b.mul(g.grad, g.out)}; }, // d/dx e^x = e^x
      [](ElementCtx &c) { return math(UnaryOp::Exp, c.in(0)); });
  unary_op(
      reg, "log", "Elementwise natural logarithm.", float_identity_rel,
      [](GradCtx &g) -> Grads { return {g.b.div(g.grad, g.arg(0))}; }, // d/dx ln x = 1/x
      [](ElementCtx &c) { return math(UnaryOp::Log, c.in(0)); }, true);
  unary_op(
      reg, "sqrt", "Elementwise square root.", float_identity_rel,
      [](GradCtx &g) -> Grads { // d/dx sqrt(x) = 1 / (2 sqrt(x))
        return {g.b.div(g.grad, g.b.scale(g.out, 2.0))};
      },
      [](ElementCtx &c) { return math(UnaryOp::Sqrt, c.in(0)); }, true);
  reg.add("rsqrt")
      .describe("Elementwise 1/sqrt(x).")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(1)
      .relation("FloatIdentity", float_identity_rel) // names rsqrt in its messages
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        return b.div(b.constant(1, a[0]->type.dtype), b.call(ops::sqrt, {a[0]}));
      })
      .example(kUnaryTypes, "rsqrt(%x)", true);
  unary_op(
      reg, "sigmoid", "Elementwise 1 / (1 + e^-x).", float_identity_rel,
      [](GradCtx &g) -> Grads { // d/dx s(x) = s(x) (1 - s(x))
        ExprPtr one_minus = g.b.sub(g.b.constant(1, g.out->type.dtype), g.out);
        return {g.b.mul(g.grad, g.b.mul(g.out, one_minus))};
      },
      [](ElementCtx &c) {
        LExprPtr x = c.in(0);
        LExprPtr one = constant_of(1, x->dtype);
        return binary(BinaryOp::Div, one, binary(BinaryOp::Add, one, math(UnaryOp::Exp, unary(UnaryOp::Neg, x))));
      });
  unary_op(
      reg, "tanh", "Elementwise hyperbolic tangent.", float_identity_rel,
      [](GradCtx &g) -> Grads { // d/dx tanh x = 1 - tanh^2 x
        ExprPtr sq = g.b.mul(g.out, g.out);
        return {g.b.mul(g.grad, g.b.sub(g.b.constant(1, sq->type.dtype), sq))};
      },
      [](ElementCtx &c) { return math(UnaryOp::Tanh, c.in(0)); });
  unary_op(
      reg, "sin", "Elementwise sine.", float_identity_rel,
      [](GradCtx &g) -> Grads { return {g.b.mul(g.grad, g.b.call(ops::cos, {g.arg(0)}))}; },
      [](ElementCtx &c) { return math(UnaryOp::Sin, c.in(0)); });
  unary_op(
      reg, "cos", "Elementwise cosine.", float_identity_rel,
      [](GradCtx &g) -> Grads { // d/dx cos x = -sin x
        return {g.b.neg(g.b.mul(g.grad, g.b.call(ops::sin, {g.arg(0)})))};
      },
      [](ElementCtx &c) { return math(UnaryOp::Cos, c.in(0)); });
  unary_op(
      reg, "erf", "Elementwise Gauss error function.", float_identity_rel,
      [](GradCtx &g) -> Grads { // d/dx erf x = 2/sqrt(pi) e^(-x^2)
        ExprPtr x = g.arg(0);
        ExprPtr e = g.b.call(ops::exp, {g.b.neg(g.b.mul(x, x))});
        return {g.b.mul(g.grad, g.b.scale(e, 2.0 / std::sqrt(M_PI)))};
      },
      [](ElementCtx &c) { return math(UnaryOp::Erf, c.in(0)); });
  unary_op(
      reg, "abs", "Elementwise |x|.", identity_rel,
      [](GradCtx &g) -> Grads { // d/dx |x| = sign(x)
        ExprPtr neg = g.b.call(ops::less, {g.arg(0), zero_of(g)});
        return {g.b.call(ops::where, {neg, g.b.neg(g.grad), g.grad})};
      },
      [](ElementCtx &c) { return unary(UnaryOp::Abs, c.in(0)); });
  unary_op(
      reg, "nn.relu", "Elementwise max(x, 0).", identity_rel,
      // 1 where relu(x) > 0, that is x > 0 (NaN and -0 alike): from the output, so
      // that x is not needed after relu and relu fuses into the product before it.
      [](GradCtx &g) -> Grads { return {mask(g, ops::greater, g.out, zero_of(g))}; },
      [](ElementCtx &c) {
        LExprPtr x = c.in(0);
        return binary(BinaryOp::Max, x, constant_of(0, x->dtype));
      });
  unary_op(
      reg, "copy", "Elementwise copy.", identity_rel, [](GradCtx &g) -> Grads { return {g.grad}; },
      [](ElementCtx &c) { return c.in(0); });

  reg.add("clip")
      .describe("Elementwise clamp to [a_min, a_max].")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<ClipAttrs>()
      .support_level(3)
      .relation("Clip", clip_rel)
      .gradient([](GradCtx &g) -> Grads { // 1 inside [a_min, a_max], else 0
        DType dt = g.grad->type.dtype;
        auto a = g.attrs_as<ClipAttrs>();
        ExprPtr lo = g.b.call(ops::greater_equal, {g.arg(0), g.b.constant(a.a_min, dt)});
        ExprPtr hi = g.b.call(ops::less_equal, {g.arg(0), g.b.constant(a.a_max, dt)});
        ExprPtr inner = g.b.call(ops::where, {lo, g.grad, zero_of(g)});
        return {g.b.call(ops::where, {hi, inner, zero_of(g)})};
      })
      .element([](ElementCtx &c) {
        LExprPtr x = c.in(0);
        auto a = c.attrs_as<ClipAttrs>();
        LExprPtr lo = constant_of(a.a_min, x->dtype), hi = constant_of(a.a_max, x->dtype);
        return binary(BinaryOp::Min, binary(BinaryOp::Max, x, lo), hi);
      })
      .example(kUnaryTypes, "clip(%x, a_min=-1.0f, a_max=1.2f)");

  //===--- binary ---------------------------------------------------------===//
  binary_op(
      reg, "add", "Elementwise x + y.", true,
      [](GradCtx &g) -> Grads {
        return {g.grad, g.grad};
      }, // d(x+y) = dx + dy
      [](ElementCtx &c) { return binary(BinaryOp::Add, c.in(0), c.in(1)); });
  binary_op(
      reg, "subtract", "Elementwise x - y.", false,
      [](GradCtx &g) -> Grads {
        return {g.grad, g.b.neg(g.grad)};
      },
      [](ElementCtx &c) { return binary(BinaryOp::Sub, c.in(0), c.in(1)); });
  binary_op(
      reg, "multiply", "Elementwise x * y.", true,
      [](GradCtx &g) -> Grads { // d(xy) = y dx + x dy
        return {g.b.mul(g.grad, g.arg(1)), g.b.mul(g.grad, g.arg(0))};
      },
      [](ElementCtx &c) { return binary(BinaryOp::Mul, c.in(0), c.in(1)); });
  binary_op(
      reg, "divide", "Elementwise x / y.", false,
      [](GradCtx &g) -> Grads { // d(x/y) = dx / y - (x/y) dy / y
        ExprPtr dx = g.b.div(g.grad, g.arg(1));
        return {dx, g.b.neg(g.b.mul(dx, g.out))};
      },
      [](ElementCtx &c) { return binary(BinaryOp::Div, c.in(0), c.in(1)); });
  binary_op(
      reg, "power", "Elementwise x ^ y.", false,
      [](GradCtx &g) -> Grads { // d(x^y) = y x^(y-1) dx + x^y ln(x) dy
        ExprPtr x = g.arg(0), y = g.arg(1);
        ExprPtr ym1 = minus_one(g, y);
        ExprPtr dx = g.b.mul(g.grad, g.b.mul(y, g.b.call(ops::power, {x, ym1})));
        ExprPtr dy = g.b.mul(g.grad, g.b.mul(g.out, g.b.call(ops::log, {x})));
        return {dx, dy};
      },
      [](ElementCtx &c) { return power(c.in(0), c.in(1)); }, true);
  binary_op(
      reg, "maximum", "Elementwise max(x, y).", true,
      [](GradCtx &g) -> Grads { // the gradient goes to the larger operand (x on ties)
        return {mask(g, ops::greater_equal, g.arg(0), g.arg(1)), mask(g, ops::less, g.arg(0), g.arg(1))};
      },
      [](ElementCtx &c) { return binary(BinaryOp::Max, c.in(0), c.in(1)); });
  binary_op(
      reg, "minimum", "Elementwise min(x, y).", true,
      [](GradCtx &g) -> Grads { // the gradient goes to the smaller operand (x on ties)
        return {mask(g, ops::less_equal, g.arg(0), g.arg(1)), mask(g, ops::greater, g.arg(0), g.arg(1))};
      },
      [](ElementCtx &c) { return binary(BinaryOp::Min, c.in(0), c.in(1)); });

  //===--- comparisons and selection -------------------------------------===//
#define GRADC_COMPARE(NAME, COP)                                                                                       \
  reg.add(NAME)                                                                                                        \
      .describe("Elementwise comparison with broadcasting; the result is bool.")                                       \
      .arg("lhs", "Tensor", "The left operand.")                                                                       \
      .arg("rhs", "Tensor", "The right operand.")                                                                      \
      .support_level(4)                                                                                                \
      .relation("BroadcastComp", broadcast_comp_rel)                                                                   \
      .no_gradient()                                                                                                   \
      .element([](ElementCtx &c) { return compare(COP, c.in(0), c.in(1)); })
  GRADC_COMPARE("equal", CompareOp::EQ);
  GRADC_COMPARE("not_equal", CompareOp::NE);
  GRADC_COMPARE("less", CompareOp::LT);
  GRADC_COMPARE("less_equal", CompareOp::LE);
  GRADC_COMPARE("greater", CompareOp::GT);
  GRADC_COMPARE("greater_equal", CompareOp::GE);
#undef GRADC_COMPARE

  //===--- logic ------------------------------------------------------------===//
#define GRADC_LOGICAL(NAME, BOP)                                                                                       \
  reg.add(NAME)                                                                                                        \
      .describe("Elementwise logical operation of bool tensors, with broadcasting.")                                   \
      .arg("lhs", "Tensor[bool]", "The left operand.")                                                                 \
      .arg("rhs", "Tensor[bool]", "The right operand.")                                                                \
      .support_level(4)                                                                                                \
      .relation("Logical", logical_rel)                                                                                \
      .no_gradient()                                                                                                   \
      .element([](ElementCtx &c) { return binary(BOP, c.in(0), c.in(1)); })
  GRADC_LOGICAL("logical_and", BinaryOp::And);
  GRADC_LOGICAL("logical_or", BinaryOp::Or);
#undef GRADC_LOGICAL
  reg.add("logical_not")
      .describe("Elementwise not of a bool tensor.")
      .arg("data", "Tensor[bool]", "The input.")
      .support_level(4)
      .relation("Logical", logical_rel)
      .no_gradient()
      .element([](ElementCtx &c) { return compare(CompareOp::EQ, c.in(0), constant_of(0, DType::Bool)); });
  reg.add("isnan")
      .describe("Elementwise: is x NaN (false for integers and bools).")
      .arg("data", "Tensor", "The input.")
      .support_level(4)
      .relation("IdentityComp", predicate_rel)
      .no_gradient()
      .element([](ElementCtx &c) {
        LExprPtr x = c.in(0);
        return is_float(x->dtype) ? compare(CompareOp::NE, x, x) : constant_of(0, DType::Bool);
      });
  reg.add("isinf")
      .describe("Elementwise: is x +inf or -inf (false for integers and bools).")
      .arg("data", "Tensor", "The input.")
      .support_level(4)
      .relation("IdentityComp", predicate_rel)
      .no_gradient()
      .element([](ElementCtx &c) {
        LExprPtr x = c.in(0);
        return is_float(x->dtype) ? compare(CompareOp::EQ, unary(UnaryOp::Abs, x), highest_of(x->dtype))
                                  : constant_of(0, DType::Bool);
      });

  reg.add("where")
      .describe("Elementwise cond ? x : y with broadcasting of all three.")
      .arg("condition", "Tensor[bool]", "Where true, take x; else y.")
      .arg("x", "Tensor", "Values where the condition holds.")
      .arg("y", "Tensor", "Values elsewhere.")
      .support_level(4)
      .relation("Where", where_rel)
      .gradient([](GradCtx &g) -> Grads { // the gradient flows to the selected operand
        ExprPtr zero = zero_of(g);
        return {nullptr, g.b.call(ops::where, {g.arg(0), g.grad, zero}), g.b.call(ops::where, {g.arg(0), zero, g.grad})};
      })
      .element([](ElementCtx &c) { return select(c.in(0), c.in(1), c.in(2)); })
      .example("%c: Tensor[(2, 3), bool], %x: Tensor[(2, 3), float64], %y: Tensor[(3,), float64]", "where(%c, %x, %y)");

  //===--- creation ---------------------------------------------------------===//
  reg.add("zeros")
      .describe("A tensor of zeros.")
      .arity(0, 0)
      .attrs<CreateAttrs>()
      .support_level(3)
      .relation("InitOp", create_rel)
      .no_gradient()
      .element([](ElementCtx &c) { return constant_of(0, c.type().dtype); });
  reg.add("ones")
      .describe("A tensor of ones.")
      .arity(0, 0)
      .attrs<CreateAttrs>()
      .support_level(3)
      .relation("InitOp", create_rel)
      .no_gradient()
      .element([](ElementCtx &c) { return constant_of(1, c.type().dtype); });
  reg.add("full")
      .describe("A tensor filled with a scalar.")
      .arg("fill_value", "Tensor[()]", "The scalar to fill with.")
      .attrs<FullAttrs>()
      .support_level(3)
      .relation("Full", full_rel)
      .no_gradient()
      .element([](ElementCtx &c) { return cast(c.type().dtype, c.in(0, {})); });
  reg.add("zeros_like")
      .describe("Zeros of the input's type.")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(3)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        return b.call(ops::full_like, {a[0], b.constant(0, a[0]->type.dtype)});
      })
      .example(kUnaryTypes, "zeros_like(%x) + %x");
  reg.add("ones_like")
      .describe("Ones of the input's type.")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(3)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        return b.call(ops::full_like, {a[0], b.constant(1, a[0]->type.dtype)});
      })
      .example(kUnaryTypes, "ones_like(%x) * %x");
  reg.add("full_like")
      .describe("The input's type filled with a scalar.")
      .arg("data", "Tensor", "The input tensor.")
      .arg("fill_value", "Tensor[()]", "The scalar to fill with.")
      .support_level(3)
      .relation("FullLike", full_like_rel)
      .no_gradient()
      .element([](ElementCtx &c) { return cast(c.type().dtype, c.in(1, {})); });
  reg.add("cast")
      .describe("Elementwise dtype conversion.")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<CastAttrs>()
      .support_level(3)
      .relation("Cast", cast_rel)
      .gradient([](GradCtx &g) -> Grads { // the gradient is cast back (none for integer inputs)
        DType in = g.arg(0)->type.dtype;
        if (!is_float(in) || !is_float(g.grad->type.dtype))
          return {nullptr};
        return {g.b.cast(g.grad, in)};
      })
      .element([](ElementCtx &c) { return cast(c.type().dtype, c.in(0)); })
      .example(kUnaryTypes, "cast(%x, dtype=\"float64\")");
}

} // namespace gradc
