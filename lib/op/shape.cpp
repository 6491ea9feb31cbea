//===- shape.cpp - reshape, transpose, broadcast and collapse operators ---===//
//
// Layout operators are injective (an output element is one input element at
// a remapped index), so they fuse with their neighbours and never copy on
// their own. collapse_sum_* are the reductions that undo broadcasting; the
// gradient pass uses collapse_sum_to to sum adjoints back to input shapes.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

#include <algorithm>
#include <numeric>

namespace gradc {
namespace {

const char *kTypes = "%x: Tensor[(2, 3, 4), float64]";

/// Every reshape-like operator reads the input element with the same flat index.
LExprPtr reshape_element(ElementCtx &c) {
  LExprPtr flat = flat_index(c.type().shape, c.index);
  return c.in(0, unravel_index(flat, c.arg_type(0).shape));
}

/// d reshape(x) = reshape(g) back to x's shape.
Grads reshape_grad(GradCtx &g) { return {g.b.reshape(g.grad, g.arg(0)->type.shape)}; }

Type reshape_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  Shape out;
  int infer = -1;
  std::vector<int64_t> spec = ctx.attrs.get_ints("newshape");
  bool copy_zero = !ctx.attrs.get_bool("allowzero");
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

std::vector<int64_t> transpose_axes(const Attrs &attrs, int64_t rank) {
  std::vector<int64_t> axes;
  if (attrs.is_none("axes")) {
    for (int64_t i = rank - 1; i >= 0; --i)
      axes.push_back(i);
  } else {
    for (int64_t a : attrs.get_ints("axes"))
      axes.push_back(a < 0 ? a + rank : a);
  }
  return axes;
}

Type transpose_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (!ctx.attrs.is_none("axes")) {
    std::vector<int64_t> given = ctx.attrs.get_ints("axes");
    if ((int64_t)given.size() != x->rank())
      return ctx.fail("axes " + AttrValue::ints(given).str() + " do not match rank " + std::to_string(x->rank()));
    std::vector<bool> seen(x->rank());
    for (int64_t a : given) {
      auto ax = ctx.axis(a, x->rank());
      if (!ax)
        return Type::unknown();
      if (seen[*ax])
        return ctx.fail("axes " + AttrValue::ints(given).str() + " is not a permutation");
      seen[*ax] = true;
    }
  }
  Shape out;
  for (int64_t a : transpose_axes(ctx.attrs, x->rank()))
    out.push_back(x->shape[a]);
  return Type::tensor(out, x->dtype);
}

Type expand_dims_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  int64_t num = ctx.attrs.get_int("num_newaxis");
  if (num < 0)
    return ctx.fail("num_newaxis must be non-negative");
  if (num > int64_t(kMaxRank) - x->rank())
    return ctx.fail("num_newaxis=" + std::to_string(num) + " makes the rank more than " + std::to_string(kMaxRank));
  int64_t axis = ctx.attrs.get_int("axis"), rank = x->rank();
  if (axis < -rank - 1 || axis > rank) // the new axes go before axis `axis` of the result
    return ctx.fail("axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(rank) +
                    " (expected " + std::to_string(-rank - 1) + " to " + std::to_string(rank) + ")");
  auto ax = ctx.axis(axis, rank + 1);
  if (!ax)
    return Type::unknown();
  Shape out = x->shape;
  out.insert(out.begin() + *ax, num, 1);
  return Type::tensor(out, x->dtype);
}

Type squeeze_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  std::vector<bool> drop(x->rank(), false);
  if (ctx.attrs.is_none("axis")) {
    for (int64_t i = 0; i < x->rank(); ++i)
      drop[i] = x->shape[i] == 1;
  } else {
    for (int64_t a : ctx.attrs.get_ints("axis")) {
      auto ax = ctx.axis(a, x->rank());
      if (!ax)
        return Type::unknown();
      if (x->shape[*ax] != 1)
        return ctx.fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(x->shape[*ax]));
      drop[*ax] = true;
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
  Shape target = ctx.attrs.get_ints("shape");
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

Type collapse_sum_to_rel(RelationCtx &ctx) { return collapse_to(ctx, ctx.attrs.get_ints("shape")); }

Type collapse_sum_like_rel(RelationCtx &ctx) {
  const Type *like = ctx.tensor(1);
  return like ? collapse_to(ctx, like->shape) : Type::unknown();
}

/// out[j] = sum of x over every element that broadcasting maps to j.
/// A compensated sum over the broadcast axes (Kernel.h: compensated_sum).
StmtPtr collapse_sum_kernel(KernelCtx &k) {
  const Shape &in = k.arg_type(0).shape;
  const Shape &out = k.out()->shape;
  size_t lead = in.size() - out.size();
  Shape red_shape;
  for (size_t d = 0; d < in.size(); ++d)
    if (d < lead || out[d - lead] != in[d])
      red_shape.push_back(in[d]);
  DType acc = dtype_info(k.out()->dtype).accumulator;
  return loop_nest(out, [&](const Index &oidx) {
    auto element = [&](const LExprPtr &flat) {
      Index ridx = unravel_index(flat, red_shape), idx;
      size_t r = 0;
      for (size_t d = 0; d < in.size(); ++d)
        idx.push_back(d < lead || out[d - lead] != in[d] ? ridx[r++] : oidx[d - lead]);
      return k.in(0, idx);
    };
    return compensated_sum(k, num_elements(red_shape), acc, element, [&](const LExprPtr &total) {
      return store(k.out(), flat_index(out, oidx), cast(k.out()->dtype, total));
    });
  });
}

Grads broadcast_grad(GradCtx &g) { // d collapse_sum(x) = broadcast_to(g, x.shape)
  Attrs a;
  a.set("shape", AttrValue::ints(g.arg(0)->type.shape));
  Grads out{g.b.call(ops::broadcast_to, {g.grad}, a)};
  out.resize(g.call.args.size());
  return out;
}

Type reverse_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x || !ctx.axis(ctx.attrs.get_int("axis"), x->rank()))
    return Type::unknown();
  return *x;
}

} // namespace

void register_shape_ops(OpRegistry &reg) {
  reg.add("reshape")
      .describe("Reshape without moving data; newshape may use Relay's 0 (copy) and -1 (infer).")
      .arg("data", "Tensor", "The input tensor.")
      .required_attr("newshape", AttrKind::IntList, "The new shape.")
      .attr("allowzero", AttrKind::Bool, AttrValue::of(false),
            "A 0 in newshape is a dimension of size 0, not a copy of the input's (TVM's allowzero).")
      .support_level(3)
      .relation("Reshape", reshape_rel)
      .gradient(reshape_grad)
      .element(reshape_element)
      .example(kTypes, "reshape(%x, newshape=[0, -1])")
      .example(kTypes, "reshape(%x, newshape=[4, 3, 2], allowzero=True)");

  reg.add("transpose")
      .describe("Permute the axes (None reverses them).")
      .arg("data", "Tensor", "The input tensor.")
      .attr("axes", AttrKind::OptIntList, AttrValue::none(), "The permutation.")
      .support_level(3)
      .relation("Transpose", transpose_rel)
      .gradient([](GradCtx &g) -> Grads { // d transpose(x, p) = transpose(g, p^-1)
        auto axes = transpose_axes(g.attrs(), g.arg(0)->type.rank());
        std::vector<int64_t> inverse(axes.size());
        for (size_t i = 0; i < axes.size(); ++i)
          inverse[axes[i]] = int64_t(i);
        Attrs a;
        a.set("axes", AttrValue::ints(inverse));
        return {g.b.call(ops::transpose, {g.grad}, a)};
      })
      .element([](ElementCtx &c) {
        auto axes = transpose_axes(c.attrs(), c.arg_type(0).rank());
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
      .required_attr("axis", AttrKind::Int, "Where to insert.")
      .attr("num_newaxis", AttrKind::Int, AttrValue::of(1), "How many axes to insert.")
      .support_level(1)
      .relation("ExpandDims", expand_dims_rel)
      .gradient(reshape_grad)
      .element(reshape_element)
      .example(kTypes, "expand_dims(%x, axis=1, num_newaxis=2)");

  reg.add("squeeze")
      .describe("Remove axes of size 1 (None removes all of them).")
      .arg("data", "Tensor", "The input tensor.")
      .attr("axis", AttrKind::OptIntList, AttrValue::none(), "The axes to remove.")
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
      .required_attr("shape", AttrKind::Shape, "The target shape.")
      .support_level(4)
      .relation("BroadcastTo", broadcast_to_rel)
      .gradient([](GradCtx &g) -> Grads { return {g.b.sum_to(g.grad, g.arg(0)->type.shape)}; })
      .element([](ElementCtx &c) { return c.in(0); })
      .example("%x: Tensor[(3, 1), float64]", "broadcast_to(%x, shape=[2, 3, 4])");

  reg.add("collapse_sum_to")
      .describe("Sum the broadcast axes away, down to `shape` (the inverse of broadcast_to).")
      .arg("data", "Tensor", "The input tensor.")
      .required_attr("shape", AttrKind::Shape, "The target shape.")
      .support_level(10)
      .relation("CollapseSumTo", collapse_sum_to_rel)
      .gradient(broadcast_grad)
      .kernel(collapse_sum_kernel)
      .example(kTypes, "collapse_sum_to(%x, shape=[3, 1])");

  reg.add("collapse_sum_like")
      .describe("Sum the broadcast axes away, down to the shape of `collapse_type`.")
      .arg("data", "Tensor", "The input tensor.")
      .arg("collapse_type", "Tensor", "A tensor of the target shape.")
      .support_level(10)
      .relation("CollapseSumLike", collapse_sum_like_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        Attrs attrs;
        attrs.set("shape", AttrValue::ints(a[1]->type.shape));
        return b.call(ops::collapse_sum_to, {a[0]}, attrs);
      })
      .example("%x: Tensor[(2, 3, 4), float64], %y: Tensor[(3, 1), float64]", "collapse_sum_like(%x, %y)");

  reg.add("reverse")
      .describe("Reverse the elements along an axis.")
      .arg("data", "Tensor", "The input tensor.")
      .required_attr("axis", AttrKind::Int, "The axis to reverse.")
      .support_level(3)
      .relation("Reverse", reverse_rel)
      .gradient([](GradCtx &g) -> Grads { return {g.b.call(ops::reverse, {g.grad}, g.attrs())}; })
      .element([](ElementCtx &c) {
        int64_t rank = c.arg_type(0).rank(), axis = c.attrs().get_int("axis");
        axis = axis < 0 ? axis + rank : axis;
        Index idx = c.index;
        idx[axis] = binary(BinaryOp::Sub, int_imm(c.arg_type(0).shape[axis] - 1), idx[axis]);
        return c.in(0, idx);
      })
      .example(kTypes, "reverse(%x, axis=-1)");
}

} // namespace gradc
