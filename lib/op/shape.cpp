//===- shape.cpp - reshape, transpose, broadcast and collapse operators ---===//
//
// Layout operators are injective (an output element is one input element at
// a remapped index), so they fuse with their neighbours and never copy on
// their own. collapse_sum_* are the reductions that undo broadcasting; the
// gradient pass uses collapse_sum_to to sum adjoints back to input shapes.
//
//===----------------------------------------------------------------------===//
#include "reduce.h"
#include "gradc/op/attrs/shape.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

#include <algorithm>
#include <numeric>

namespace gradc {
namespace {

const char *kTypes = "%x: Tensor[(2, 3, 4), float64]";

/// nn.pad(data[, pad_value]): every axis grows by before + after.
Type pad_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (ctx.args.size() == 2) {
    const Type *v = ctx.tensor(1);
    if (!v)
      return Type::unknown();
    if (*v != Type::tensor({}, x->dtype))
      return ctx.fail("pad_value must be a scalar of the data's dtype " + Type::tensor({}, x->dtype).str() +
                      ", found " + v->str());
  }
  auto a = ctx.attrs_as<PadAttrs>();
  if (int64_t(a.pad_width.size()) != x->rank())
    return ctx.fail_attr("pad_width", "pad_width has " + std::to_string(a.pad_width.size()) +
                                          " entries for data of rank " + std::to_string(x->rank()));
  Shape out = x->shape;
  for (size_t d = 0; d < out.size(); ++d) {
    __int128 n = __int128(out[d]) + a.pad_width[d][0] + a.pad_width[d][1];
    if (n < 0 || n > INT64_MAX)
      return ctx.fail_attr("pad_width", "pad_width " + AttrValue::ints({a.pad_width[d][0], a.pad_width[d][1]}).str() +
                                            " makes axis " + std::to_string(d) + " of size " +
                                            std::to_string(out[d]) + " " + (n < 0 ? "negative" : "too large") +
                                            " (" + (n < 0 ? std::to_string(int64_t(n)) : "over 2^63 - 1") + ")");
    out[d] = int64_t(n);
  }
  return Type::tensor(out, x->dtype);
}

/// Every reshape-like operator reads the input element with the same flat index.
LExprPtr reshape_element(ElementCtx &c) { return c.in_flat(0, flat_index(c.type().shape, c.index)); }

/// d reshape(x) = reshape(g) back to x's shape.
Grads reshape_grad(GradCtx &g) { return {g.b.reshape(g.grad, g.arg(0)->type.shape)}; }

Type reshape_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  Shape out;
  int infer = -1;
  auto attrs = ctx.attrs_as<ReshapeAttrs>();
  const std::vector<int64_t> &spec = attrs.newshape;
  bool copy_zero = !attrs.allowzero;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && copy_zero) {
      if (i >= x->shape.size())
        return ctx.fail("newshape entry 0 at position " + std::to_string(i) + " has no input dimension to copy");
      out.push_back(x->shape[i]);
    } else if (d == -1) {
      if (infer >= 0)
        return ctx.fail("newshape may contain -1 only once");
      infer = int(out.size());
      out.push_back(1);
    } else if (d < -1) {
      return ctx.fail("newshape entry " + std::to_string(d) + " is not supported");
    } else {
      out.push_back(d);
    }
  }
  if (auto problem = shape_problem(out))
    return ctx.fail("newshape " + AttrValue::ints(spec).str() + ": " + *problem);
  int64_t known = num_elements(out), total = num_elements(x->shape);
  if (infer >= 0) {
    if (known == 0 || total % known)
      return ctx.fail("cannot reshape " + shape_str(x->shape) + " to " + AttrValue::ints(spec).str());
    out[infer] = total / known;
  }
  if (num_elements(out) != total)
    return ctx.fail("cannot reshape " + shape_str(x->shape) + " (" + std::to_string(total) + " elements) to " +
                    shape_str(out) + " (" + std::to_string(num_elements(out)) + " elements)");
  return Type::tensor(out, x->dtype);
}

Type transpose_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  auto attrs = ctx.attrs_as<TransposeAttrs>(); // axes in range, none repeated
  if (attrs.axes && int64_t(attrs.axes->size()) != x->rank())
    return ctx.fail_attr("axes", "axes " + ctx.attrs.get("axes").str() + " do not match rank " +
                                     std::to_string(x->rank()));
  Shape out;
  for (int64_t a : attrs.permutation(x->rank()))
    out.push_back(x->shape[a]);
  return Type::tensor(out, x->dtype);
}

Type expand_dims_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  auto attrs = ctx.attrs_as<ExpandDimsAttrs>();
  int64_t num = attrs.num_newaxis;
  if (num > int64_t(kMaxRank) - x->rank())
    return ctx.fail_attr("num_newaxis", "num_newaxis=" + std::to_string(num) + " makes the rank more than " +
                                            std::to_string(kMaxRank));
  Shape out = x->shape;
  out.insert(out.begin() + attrs.axis, num, 1);
  return Type::tensor(out, x->dtype);
}

Type squeeze_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  std::vector<bool> drop(x->rank(), false);
  auto attrs = ctx.attrs_as<SqueezeAttrs>();
  if (!attrs.axis) {
    for (int64_t i = 0; i < x->rank(); ++i)
      drop[i] = x->shape[i] == 1;
  } else {
    for (int64_t a : *attrs.axis) {
      if (x->shape[a] != 1)
        return ctx.fail_attr("axis", "cannot squeeze axis " + std::to_string(a) + " of size " +
                                         std::to_string(x->shape[a]));
      drop[a] = true;
    }
  }
  Shape out;
  for (int64_t i = 0; i < x->rank(); ++i)
    if (!drop[i])
      out.push_back(x->shape[i]);
  return Type::tensor(out, x->dtype);
}

Type batch_flatten_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (x->rank() < 1)
    return ctx.fail("expects a tensor of rank >= 1");
  // The product of the other dimensions, as TVM: (0, 3) flattens to (0, 3). It
  // is at most the element count unless the first dimension is 0.
  __int128 rest = 1;
  for (size_t i = 1; i < x->shape.size(); ++i)
    rest = std::min<__int128>(rest * x->shape[i], __int128(INT64_MAX) + 1);
  if (rest > INT64_MAX)
    return ctx.fail("the flattened dimension of " + shape_str(x->shape) + " is over 2^63 - 1");
  return Type::tensor({x->shape[0], int64_t(rest)}, x->dtype);
}

Type broadcast_to_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  Shape target = ctx.attrs_as<ShapeAttrs>().shape;
  auto b = broadcast_shapes(x->shape, target);
  if (!b || *b != target)
    return ctx.fail("cannot broadcast " + shape_str(x->shape) + " to " + shape_str(target));
  return Type::tensor(target, x->dtype);
}

Type collapse_to(RelationCtx &ctx, const Shape &target) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  auto b = broadcast_shapes(target, x->shape);
  if (!b || *b != x->shape)
    return ctx.fail("cannot collapse " + shape_str(x->shape) + " to " + shape_str(target) +
                    " (the target must broadcast to the input)");
  return Type::tensor(target, x->dtype);
}

Type collapse_sum_to_rel(RelationCtx &ctx) { return collapse_to(ctx, ctx.attrs_as<ShapeAttrs>().shape); }

Type collapse_sum_like_rel(RelationCtx &ctx) {
  const Type *like = ctx.tensor(1);
  return like ? collapse_to(ctx, like->shape) : Type::unknown();
}

Grads broadcast_grad(GradCtx &g) { // d collapse_sum(x) = broadcast_to(g, x.shape)
  Grads out{g.b.broadcast_to(g.grad, g.arg(0)->type.shape)};
  out.resize(g.call.args.size());
  return out;
}

Type reverse_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  return x ? *x : Type::unknown(); // the axis is checked with the attributes
}

} // namespace

void register_shape_ops(OpRegistry &reg) {
  reg.add("reshape")
      .describe("Reshape without moving data; newshape may use Relay's 0 (copy) and -1 (infer).")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<ReshapeAttrs>()
      .support_level(3)
      .relation("Reshape", reshape_rel)
      .gradient(reshape_grad)
      .element(reshape_element)
      .example(kTypes, "reshape(%x, newshape=[0, -1])")
      .example(kTypes, "reshape(%x, newshape=[4, 3, 2], allowzero=True)");

  reg.add("transpose")
      .describe("Permute the axes (None reverses them).")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<TransposeAttrs>()
      .support_level(3)
      .relation("Transpose", transpose_rel)
      .gradient([](GradCtx &g) -> Grads { // d transpose(x, p) = transpose(g, p^-1)
        auto axes = g.attrs_as<TransposeAttrs>().permutation(g.arg(0)->type.rank());
        std::vector<int64_t> inverse(axes.size());
        for (size_t i = 0; i < axes.size(); ++i)
          inverse[axes[i]] = int64_t(i);
        return {g.b.transpose(g.grad, inverse)};
      })
      .element([](ElementCtx &c) {
        auto axes = c.attrs_as<TransposeAttrs>().permutation(c.arg_type(0).rank());
        Index idx(axes.size());
        for (size_t i = 0; i < axes.size(); ++i)
          idx[axes[i]] = c.index[i];
        return c.in(0, idx);
      })
      .example(kTypes, "transpose(%x, axes=[1, 2, 0])")
      .alias("permute_dims");

  reg.add("expand_dims")
      .describe("Insert num_newaxis axes of size 1 at axis.")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<ExpandDimsAttrs>()
      .support_level(1)
      .relation("ExpandDims", expand_dims_rel)
      .gradient(reshape_grad)
      .element(reshape_element)
      .example(kTypes, "expand_dims(%x, axis=1, num_newaxis=2)");

  reg.add("squeeze")
      .describe("Remove axes of size 1 (None removes all of them).")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<SqueezeAttrs>()
      .support_level(3)
      .relation("Squeeze", squeeze_rel)
      .gradient(reshape_grad)
      .element(reshape_element)
      .example("%x: Tensor[(2, 1, 3), float64]", "squeeze(%x, axis=[1])");

  reg.add("nn.batch_flatten")
      .describe("Flatten every axis but the first.")
      .arg("data", "Tensor", "The input tensor.")
      .support_level(2)
      .relation("BatchFlatten", batch_flatten_rel)
      .gradient(reshape_grad)
      .element(reshape_element)
      .example(kTypes, "nn.batch_flatten(%x)");

  reg.add("broadcast_to")
      .describe("Broadcast to a shape (numpy rules).")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<ShapeAttrs>()
      .support_level(4)
      .relation("BroadcastTo", broadcast_to_rel)
      .gradient([](GradCtx &g) -> Grads { return {g.b.sum_to(g.grad, g.arg(0)->type.shape)}; })
      .element([](ElementCtx &c) { return c.in(0); })
      .example("%x: Tensor[(3, 1), float64]", "broadcast_to(%x, shape=[2, 3, 4])");

  reg.add("collapse_sum_to")
      .describe("Sum the broadcast axes away, down to `shape` (the inverse of broadcast_to).")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<ShapeAttrs>()
      .support_level(10)
      .relation("CollapseSumTo", collapse_sum_to_rel)
      .gradient(broadcast_grad)
      .kernel([](KernelCtx &k) { return sum_kernel(k, collapse_sum_shape(k), false); })
      .fuses_producers() // reads each element once
      .example(kTypes, "collapse_sum_to(%x, shape=[3, 1])");

  reg.add("collapse_sum_like")
      .describe("Sum the broadcast axes away, down to the shape of `collapse_type`.")
      .arg("data", "Tensor", "The input tensor.")
      .arg("collapse_type", "Tensor", "A tensor of the target shape.")
      .support_level(10)
      .relation("CollapseSumLike", collapse_sum_like_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) { return b.sum_to(a[0], a[1]->type.shape); })
      .example("%x: Tensor[(2, 3, 4), float64], %y: Tensor[(3, 1), float64]", "collapse_sum_like(%x, %y)");

  reg.add("nn.pad")
      .describe("Constant padding: pad_width [before, after] per axis (negative crops).")
      .arg("data", "Tensor", "The input.")
      .arg("pad_value", "Tensor[()]", "Optional: the padding value (else the pad_value attribute).")
      .arity(1, 2)
      .attrs<PadAttrs>()
      .support_level(2)
      .relation("Pad", pad_rel)
      .gradient([](GradCtx &g) -> Grads { // dx: g cropped back; d pad_value: Σ g over the padding
        auto a = g.attrs_as<PadAttrs>();
        for (auto &w : a.pad_width)
          w = {-w[0], -w[1]};
        a.pad_value = 0;
        ExprPtr dx = g.b.call(ops::pad, {g.grad}, a);
        if (g.call.args.size() == 1)
          return {dx};
        std::vector<int64_t> all;
        return {dx, g.b.sub(g.b.sum(g.grad, all), g.b.sum(dx, all))};
      })
      .element([](ElementCtx &c) {
        auto a = c.attrs_as<PadAttrs>();
        const Shape &in = c.arg_type(0).shape;
        Index idx;
        LExprPtr inside;
        for (size_t d = 0; d < in.size(); ++d) {
          LExprPtr i = binary(BinaryOp::Sub, c.index[d], int_imm(a.pad_width[d][0]));
          if (a.pad_width[d][0] <= 0 && a.pad_width[d][1] <= 0) { // only cropped: it reads inside, at an affine index
            idx.push_back(i);
            continue;
          }
          LExprPtr ok = in_range(i, 0, in[d]);
          inside = inside ? binary(BinaryOp::And, inside, ok) : ok;
          idx.push_back(clamp_index(i, in[d]));
        }
        DType dt = c.type().dtype;
        LExprPtr value = c.call.args.size() == 2 ? c.in(1, {}) : constant_of(a.pad_value, dt);
        if (!inside) // a scalar, or only cropped: nothing to pad
          return c.in(0, idx);
        if (num_elements(in) == 0) // nothing to read: all padding
          return value;
        return select(inside, c.in(0, idx), value);
      })
      .example(kTypes, "nn.pad(%x, pad_width=[[1, 0], [0, 2], [1, 1]], pad_value=0.5f)")
      .example("%x: Tensor[(3, 4), float64], %v: float64", "nn.pad(%x, %v, pad_width=[[-1, 2], [1, -2]])");

  reg.add("reverse")
      .describe("Reverse the elements along an axis.")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<ReverseAttrs>()
      .support_level(3)
      .relation("Reverse", reverse_rel)
      .gradient([](GradCtx &g) -> Grads { return {g.b.call(ops::reverse, {g.grad}, g.attrs())}; })
      .element([](ElementCtx &c) {
        int64_t axis = c.attrs_as<ReverseAttrs>().axis;
        Index idx = c.index;
        idx[axis] = binary(BinaryOp::Sub, int_imm(c.arg_type(0).shape[axis] - 1), idx[axis]);
        return c.in(0, idx);
      })
      .example(kTypes, "reverse(%x, axis=-1)");
}

} // namespace gradc
