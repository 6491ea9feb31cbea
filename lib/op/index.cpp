//===- index.cpp - take, grad.take_backward, one_hot ----------------------===//
//
// Operators that read or write at indices held in a tensor. take gathers
// (injective: each output element is one input element, at an index read
// from `indices`); its gradient grad.take_backward scatters the adjoint back
// and adds where indices repeat (an embedding row looked up twice gets both
// adjoints), in a fixed order: the index axes run serially inside loops over
// the other axes, so results do not depend on threads. Out-of-range indices
// are clipped or wrapped by `mode`. "fast" promises they are in range and is
// not checked: take is injective, fused into its consumers as an expression,
// which has no statement to report with (nn.nll_loss's kernel reports its
// out-of-range classes through the function's status); an index outside is
// clipped all the same, so memory stays safe. one_hot compares.
//
//===----------------------------------------------------------------------===//
#include "take.h"
#include "gradc/op/attrs/index.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {

TakeShape take_shape(const Expr &call, const Type &data, const Type &indices) {
  auto a = call_attrs<TakeAttrs>(call);
  TakeShape t;
  t.data = data.shape;
  t.indices = indices.shape;
  t.batch = a.batch_dims;
  t.mode = a.mode;
  if (!a.axis) {
    t.data = {num_elements(data.shape)};
    t.axis = 0;
  } else {
    t.axis = *a.axis < 0 ? *a.axis + data.rank() : *a.axis;
  }
  t.out.assign(t.data.begin(), t.data.begin() + t.axis);
  t.out.insert(t.out.end(), t.indices.begin() + t.batch, t.indices.end());
  t.out.insert(t.out.end(), t.data.begin() + t.axis + 1, t.data.end());
  return t;
}

namespace {

Type take_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0), *ind = ctx.tensor(1);
  if (!x || !ind)
    return Type::unknown();
  if (ind->dtype != DType::Int32 && ind->dtype != DType::Int64)
    return ctx.fail("indices must be int32 or int64, found " + ind->str());
  auto a = ctx.attrs_as<TakeAttrs>();
  if (a.axis && (*a.axis < -x->rank() || *a.axis >= x->rank()))
    return ctx.fail_attr("axis", "axis " + std::to_string(*a.axis) + " is out of range for data of rank " +
                                     std::to_string(x->rank()));
  if (!a.axis && a.batch_dims != 0)
    return ctx.fail_attr("batch_dims", "batch_dims needs an axis (the data is flattened when axis is None)");
  int64_t axis = a.axis ? (*a.axis < 0 ? *a.axis + x->rank() : *a.axis) : 0;
  if (a.batch_dims > ind->rank() || (a.axis && a.batch_dims > axis))
    return ctx.fail_attr("batch_dims", "batch_dims " + std::to_string(a.batch_dims) +
                                           " must be at most the rank of indices (" + std::to_string(ind->rank()) +
                                           ") and the axis (" + std::to_string(axis) + ")");
  for (int64_t d = 0; d < a.batch_dims; ++d)
    if (x->shape[d] != ind->shape[d])
      return ctx.fail("batch axis " + std::to_string(d) + " differs: data " + shape_str(x->shape) + ", indices " +
                      shape_str(ind->shape));
  int64_t n = a.axis ? x->shape[axis] : num_elements(x->shape);
  if (n == 0 && num_elements(ind->shape) > 0)
    return ctx.fail("cannot take from an empty axis");
  Shape data = a.axis ? x->shape : Shape{n};
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), ind->shape.begin() + a.batch_dims, ind->shape.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  if (auto problem = shape_problem(out))
    return ctx.fail("the result " + *problem);
  return Type::tensor(out, x->dtype);
}

} // namespace

Index data_index(const TakeShape &t, const Index &o, const std::function<LExprPtr(const Index &)> &index) {
  size_t rest = t.indices.size() - t.batch;
  Index ind(o.begin(), o.begin() + t.batch);
  ind.insert(ind.end(), o.begin() + t.axis, o.begin() + t.axis + rest);
  LExprPtr i = cast(DType::Int64, index(ind));
  int64_t n = std::max<int64_t>(t.data[t.axis], 1);
  if (t.mode == "wrap")
    i = binary(BinaryOp::FloorMod, i, imm(n));
  i = clamp_index(i, n); // clip; and memory safety for "wrap" and "fast"
  Index d(o.begin(), o.begin() + t.axis);
  d.push_back(i);
  d.insert(d.end(), o.begin() + t.axis + rest, o.end());
  return d;
}

Index real_index(const Shape &data, const TakeShape &t, const Index &d) {
  return t.data.size() == data.size() && t.data == data ? d : unravel_index(d[0], data);
}

namespace {

LExprPtr take_element(ElementCtx &c) {
  TakeShape t = take_shape(c.call, c.arg_type(0), c.arg_type(1));
  if (num_elements(c.arg_type(0).shape) == 0)
    return constant_of(0, c.type().dtype); // (no element is read: the result is empty)
  Index d = data_index(t, c.index, [&](const Index &i) { return c.in(1, i); });
  return c.in(0, real_index(c.arg_type(0).shape, t, d));
}

Type take_backward_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *x = ctx.tensor(1);
  if (!g || !x)
    return Type::unknown();
  std::vector<Type> fwd(ctx.args.begin() + 1, ctx.args.end());
  RelationCtx forward{ctx.op, fwd, ctx.attrs, "", ctx.first_arg + 1}; // fwd[i] is argument i + 1
  Type out = take_rel(forward);
  if (!forward.error.empty()) {
    ctx.error = forward.error;
    ctx.error_span = forward.error_span;
    return Type::unknown();
  }
  if (*g != out)
    return ctx.fail("output_grad is " + g->str() + "; take of data gives " + out.str());
  return *x;
}

/// out = 0, then out[data_index(o)] += g[o] for every o. The zeros are one
/// contiguous pass; the scatter loops over the axes before the taken one and
/// over blocks of the axes after it (independent destinations: the pool may
/// share them out), with the index axes serial inside, in order, and a block
/// of up to 16 consecutive elements innermost (one vector: an embedding's
/// rows are added a vector at a time).
StmtPtr take_backward_kernel(KernelCtx &k) {
  const Type &g = k.arg_type(0), &x = k.arg_type(1);
  TakeShape t = take_shape(k.call, x, k.arg_type(2));
  const BufferPtr &out = k.out();
  StmtPtr zero = loop_nest(x.shape, [&](const Index &i) {
    return store(out, flat_index(x.shape, i), constant_of(0, out->dtype));
  });
  Shape pre(t.data.begin(), t.data.begin() + t.axis), post(t.data.begin() + t.axis + 1, t.data.end());
  Shape rest(t.indices.begin() + t.batch, t.indices.end());
  if (num_elements(rest) == 0 || num_elements(g.shape) == 0)
    return zero;
  int64_t width = num_elements(post), block = 1;
  for (int64_t b : {16, 8, 4, 2})
    if (width % b == 0) {
      block = b;
      break;
    }
  Shape outer = pre;
  outer.push_back(width / block);
  StmtPtr scatter = loop_nest(outer, [&](const Index &o) {
    Index before(o.begin(), o.end() - 1);
    return loop_nest(
        rest,
        [&](const Index &r) {
          return loop_nest({block}, [&](const Index &lane) {
            Index after = unravel_index(add(mul(o.back(), imm(block)), lane[0]), post);
            Index go = before;
            go.insert(go.end(), r.begin(), r.end());
            go.insert(go.end(), after.begin(), after.end());
            Index d = data_index(t, go, [&](const Index &i) { return k.in(2, i); });
            LExprPtr at = flat_index(x.shape, real_index(x.shape, t, d));
            return store(out, at, add(load(out, at), k.in(0, go)));
          }, ForKind::Spatial, "v");
        },
        ForKind::Reduce, "r");
  });
  return seq({zero, scatter});
}

Type one_hot_rel(RelationCtx &ctx) {
  const Type *ind = ctx.tensor(0), *on = ctx.tensor(1), *off = ctx.tensor(2);
  if (!ind || !on || !off)
    return Type::unknown();
  if (ind->dtype != DType::Int32 && ind->dtype != DType::Int64)
    return ctx.fail("indices must be int32 or int64, found " + ind->str());
  if (on->rank() != 0 || *off != *on)
    return ctx.fail("on_value and off_value must be scalars of one dtype, found " + on->str() + " and " + off->str());
  auto a = ctx.attrs_as<OneHotAttrs>();
  int64_t r = ind->rank();
  if (a.axis < -1 - r || a.axis > r)
    return ctx.fail_attr("axis", "axis " + std::to_string(a.axis) + " is out of range for a result of rank " +
                                     std::to_string(r + 1));
  int64_t axis = a.axis < 0 ? a.axis + r + 1 : a.axis;
  Shape out = ind->shape;
  out.insert(out.begin() + axis, a.depth);
  if (auto problem = shape_problem(out))
    return ctx.fail("the result " + *problem);
  return Type::tensor(out, a.dtype.value_or(on->dtype));
}

LExprPtr one_hot_element(ElementCtx &c) {
  auto a = c.attrs_as<OneHotAttrs>();
  int64_t r = c.arg_type(0).rank();
  int64_t axis = a.axis < 0 ? a.axis + r + 1 : a.axis;
  Index i = c.index;
  LExprPtr pos = i[axis];
  i.erase(i.begin() + axis);
  LExprPtr hit = compare(CompareOp::EQ, cast(DType::Int64, c.in(0, i)), pos);
  DType dt = c.type().dtype;
  return select(hit, cast(dt, c.in(1, {})), cast(dt, c.in(2, {})));
}

} // namespace

void register_index_ops(OpRegistry &reg) {
  reg.add("take")
      .describe("Gather the elements of data at indices along an axis (numpy's take; Relay's modes).")
      .arg("data", "Tensor", "The tensor to read.")
      .arg("indices", "Tensor of int32 or int64", "Where to read.")
      .attrs<TakeAttrs>()
      .support_level(3)
      .relation("Take", take_rel)
      .gradient([](GradCtx &g) -> Grads { // scatter-add the adjoint; none for integer indices
        return {g.b.call(ops::take_backward, {g.grad, g.arg(0), g.arg(1)}, g.attrs()), nullptr};
      })
      .element(take_element)
      .example("%x: Tensor[(5, 3), float64], %i: Tensor[(4,), int64]", "take(%x, %i, axis=0)", false, 5)
      .example("%x: Tensor[(3, 4), float64], %i: Tensor[(2, 3), int32]", "take(%x, %i, axis=1, mode=\"wrap\")", false,
               9)
      .example("%x: Tensor[(2, 6), float64], %i: Tensor[(2, 3), int64]", "take(%x, %i, axis=1, batch_dims=1)", false,
               6)
      .example("%x: Tensor[(2, 3), float64], %i: Tensor[(7,), int64]", "take(%x, %i)", false, 9);

  reg.add("grad.take_backward")
      .describe("The adjoint of take: output_grad scattered into data's shape, added where indices repeat.")
      .arg("output_grad", "Tensor", "The adjoint of take's result.")
      .arg("data", "Tensor", "take's data (for its shape).")
      .arg("indices", "Tensor of int32 or int64", "take's indices.")
      .attrs<TakeAttrs>()
      .support_level(3)
      .relation("TakeBackward", take_backward_rel)
      .gradient([](GradCtx &g) -> Grads { // linear in output_grad: take again
        return {g.b.call(ops::take, {g.grad, g.arg(2)}, g.attrs()), nullptr, nullptr};
      })
      .kernel(take_backward_kernel)
      .example("%g: Tensor[(6, 3), float64], %x: Tensor[(4, 3), float64], %i: Tensor[(6,), int64]",
               "grad.take_backward(%g, %x, %i, axis=0)", false, 4);

  reg.add("one_hot")
      .describe("on_value where the new axis's position equals the index, off_value elsewhere.")
      .arg("indices", "Tensor of int32 or int64", "The hot positions.")
      .arg("on_value", "scalar Tensor", "The value at the hot position.")
      .arg("off_value", "scalar Tensor", "The value elsewhere.")
      .attrs<OneHotAttrs>()
      .support_level(10)
      .relation("OneHot", one_hot_rel)
      .no_gradient()
      .element(one_hot_element);
}

} // namespace gradc
