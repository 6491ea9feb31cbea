//===- slice.cpp - concatenate, split, stack, strided_slice ---------------===//
//
// The operators that join tensors into one or cut one into parts. A tuple
// flows through them: concatenate and stack take one (a tuple-typed
// argument, whose fields a kernel reads as its inputs 0, 1, ...: op/Kernel.h),
// split returns one (a kernel with an output per part). Their gradients are
// each other: the adjoint of concatenate is split at the same boundaries,
// that of split the concatenation of its parts' adjoints.
//
// strided_slice follows numpy's slicing (negative indices count from the
// end, bounds clip, negative steps walk backwards); its gradient places the
// adjoint back with grad.strided_slice_backward, injective like the slice.
//
//===----------------------------------------------------------------------===//
#include "slice.h"
#include "gradc/op/attrs/slice.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

#include <algorithm>

namespace gradc {
namespace {

/// The fields of a tuple type that a joining operator takes: every one a
/// tensor of one dtype and rank; null after a failure.
const std::vector<Type> *tensor_fields(RelationCtx &ctx) {
  const Type &t = ctx.args[0];
  if (!t.is_tuple()) {
    ctx.fail("expects a tuple of tensors, found " + t.str());
    return nullptr;
  }
  if (t.fields.empty()) {
    ctx.fail("expects a tuple of at least one tensor, found ()");
    return nullptr;
  }
  for (size_t i = 0; i < t.fields.size(); ++i) {
    const Type &f = t.fields[i];
    if (!f.is_tensor()) {
      ctx.fail("field " + std::to_string(i) + " of the tuple is " + f.str() + ", not a tensor");
      return nullptr;
    }
    if (f.dtype != t.fields[0].dtype || f.rank() != t.fields[0].rank()) {
      ctx.fail("field " + std::to_string(i) + " is " + f.str() + ", field 0 is " + t.fields[0].str() +
               ": every field needs the same dtype and rank");
      return nullptr;
    }
  }
  return &t.fields;
}

/// `axis` in [-rank, rank) normalised, or a failure against the attribute.
std::optional<int64_t> normal_axis(RelationCtx &ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    ctx.fail_attr("axis", "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
                              " (expects [" + std::to_string(-rank) + ", " + std::to_string(rank) + "))");
    return std::nullopt;
  }
  return axis < 0 ? axis + rank : axis;
}

Type concatenate_rel(RelationCtx &ctx) {
  const std::vector<Type> *fields = tensor_fields(ctx);
  if (!fields)
    return Type::unknown();
  const Type &first = (*fields)[0];
  if (first.rank() == 0)
    return ctx.fail("cannot concatenate scalars (rank 0); stack them");
  auto axis = normal_axis(ctx, ctx.attrs_as<ConcatenateAttrs>().axis, first.rank());
  if (!axis)
    return Type::unknown();
  Shape out = first.shape;
  __int128 total = 0;
  for (size_t i = 0; i < fields->size(); ++i) {
    const Shape &s = (*fields)[i].shape;
    for (int64_t d = 0; d < first.rank(); ++d)
      if (d != *axis && s[d] != first.shape[d])
        return ctx.fail("field " + std::to_string(i) + " has shape " + shape_str(s) + ", field 0 " +
                        shape_str(first.shape) + ": they differ on axis " + std::to_string(d) +
                        ", not only on the concatenation axis " + std::to_string(*axis));
    total += s[*axis];
  }
  if (total > kMaxElements)
    return ctx.fail("the concatenation axis would have " + std::to_string(int64_t(total)) + " elements");
  out[*axis] = int64_t(total);
  return Type::tensor(out, first.dtype);
}

Type stack_rel(RelationCtx &ctx) {
  const std::vector<Type> *fields = tensor_fields(ctx);
  if (!fields)
    return Type::unknown();
  const Type &first = (*fields)[0];
  for (size_t i = 1; i < fields->size(); ++i)
    if ((*fields)[i].shape != first.shape)
      return ctx.fail("field " + std::to_string(i) + " has shape " + shape_str((*fields)[i].shape) + ", field 0 " +
                      shape_str(first.shape) + ": stacked tensors need one shape");
  auto axis = normal_axis(ctx, ctx.attrs_as<StackAttrs>().axis, first.rank() + 1);
  if (!axis)
    return Type::unknown();
  Shape out = first.shape;
  out.insert(out.begin() + *axis, int64_t(fields->size()));
  return Type::tensor(out, first.dtype);
}

} // namespace

int64_t concat_axis(const Expr &call) {
  int64_t axis = call_attrs<ConcatenateAttrs>(call).axis;
  int64_t rank = call.type.rank();
  return axis < 0 ? axis + rank : axis;
}

ConcatParts::ConcatParts(const Expr &call) : axis(concat_axis(call)), inputs(input_leaves(call)) {
  offsets.push_back(0);
  for (const Type &t : inputs)
    offsets.push_back(offsets.back() + t.shape[axis]);
}

namespace {

/// Each part copied to its place: a loop nest per part (vectorized along
/// the innermost axis), each a kernel of its own (KernelCtx::separate_parts):
/// a DenseNet's concatenations join one more part at each layer, and as one
/// kernel each they were a function each (densenet201: 303 functions, a
/// fifth of its code), where the parts of one layout share a template.
StmtPtr concatenate_kernel(KernelCtx &k) {
  k.separate_parts = true;
  const Shape &out = k.out()->shape;
  auto [axis, inputs, offsets] = ConcatParts(k.call);
  std::vector<StmtPtr> parts;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Shape &s = inputs[j].shape;
    if (num_elements(s) > 0)
      parts.push_back(loop_nest(s, [&](const Index &idx) {
        Index o = idx;
        o[axis] = add(o[axis], imm(offsets[j]));
        return store(k.out(), flat_index(out, o), k.in(j, idx));
      }));
  }
  return seq(parts);
}

} // namespace

/// The parts of split: [begin, end) along the axis for each.
std::vector<std::pair<int64_t, int64_t>> split_parts(const SplitAttrs &a, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> parts;
  if (a.indices_or_sections.count) {
    int64_t k = *a.indices_or_sections.count, size = n / k;
    for (int64_t i = 0; i < k; ++i)
      parts.push_back({i * size, (i + 1) * size});
    return parts;
  }
  // numpy: part i is x[idx[i-1]:idx[i]] with numpy's clipping, so an index
  // below the one before gives an empty part that starts where it says.
  auto clip = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t(0), n); };
  int64_t begin = 0;
  for (int64_t i : a.indices_or_sections.list) {
    int64_t end = clip(i);
    parts.push_back({begin, std::max(begin, end)});
    begin = end;
  }
  parts.push_back({begin, std::max(begin, n)});
  return parts;
}

namespace {

Type split_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (x->rank() == 0)
    return ctx.fail("cannot split a scalar");
  auto a = ctx.attrs_as<SplitAttrs>();
  int64_t n = x->shape[a.axis];
  if (a.indices_or_sections.count) {
    int64_t k = *a.indices_or_sections.count;
    if (k < 1)
      return ctx.fail_attr("indices_or_sections", "the number of sections must be at least 1, found " +
                                                      std::to_string(k));
    if (n % k != 0)
      return ctx.fail_attr("indices_or_sections", "axis " + std::to_string(a.axis) + " of size " + std::to_string(n) +
                                                      " does not split into " + std::to_string(k) +
                                                      " equal sections");
  }
  std::vector<Type> fields;
  for (auto [begin, end] : split_parts(a, n)) {
    Shape s = x->shape;
    s[a.axis] = end - begin;
    fields.push_back(Type::tensor(s, x->dtype));
  }
  return Type::tuple(fields);
}

/// Each part copied out: a loop nest per part.
StmtPtr split_kernel(KernelCtx &k) {
  auto a = k.attrs_as<SplitAttrs>();
  const Shape &in = k.arg_type(0).shape;
  auto ranges = split_parts(a, in[a.axis]);
  std::vector<StmtPtr> parts;
  for (size_t j = 0; j < ranges.size(); ++j) {
    const Shape &s = k.out(j)->shape;
    if (num_elements(s) > 0)
      parts.push_back(loop_nest(s, [&](const Index &idx) {
        Index i = idx;
        i[a.axis] = add(i[a.axis], imm(ranges[j].first));
        return store(k.out(j), flat_index(s, idx), k.in(0, i));
      }));
  }
  return seq(parts);
}

/// The slice of one axis: the input index of output index i is begin + i·step.
struct AxisSlice {
  int64_t begin = 0, step = 1, size = 0;
};

/// numpy's slicing of every axis of `shape` (axes not named: all of it).
std::vector<AxisSlice> slice_axes(const StridedSliceAttrs &a, const Shape &shape) {
  int64_t rank = int64_t(shape.size());
  std::vector<AxisSlice> out;
  for (int64_t n : shape)
    out.push_back({0, 1, n});
  std::vector<int64_t> axes;
  if (a.axes)
    axes = *a.axes;
  else
    for (int64_t i = 0; i < int64_t(a.begin.size()) && i < rank; ++i)
      axes.push_back(i);
  for (size_t j = 0; j < axes.size(); ++j) {
    int64_t d = axes[j], n = shape[d];
    int64_t step = 1;
    if (a.slice_mode == "end" && a.strides)
      step = a.strides->size() == 1 ? a.strides->front() : j < a.strides->size() ? (*a.strides)[j] : 1;
    // In 128 bits: any int64 bound clamps as numpy's and TVM's do (begin
    // 2^62, end -2^63, a size that overflows begin + size, a step of -2^63).
    __int128 b = a.begin[j], e = a.end[j], st = step;
    if (a.slice_mode == "size")
      e = e < 0 ? n : (b < 0 ? b + n : b) + e;
    auto wrap = [n](__int128 i) { return i < 0 ? i + n : i; };
    auto clamp = [](__int128 i, __int128 lo, __int128 hi) { return std::min(std::max(i, lo), hi); };
    __int128 size;
    if (step > 0) {
      b = clamp(wrap(b), 0, n);
      e = clamp(wrap(e), 0, n);
      size = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = clamp(wrap(b), -1, n - 1);
      e = clamp(wrap(e), -1, n - 1);
      size = b > e ? (b - e - st - 1) / -st : 0;
    }
    AxisSlice s;
    s.step = size > 1 ? step : step > 0 ? 1 : -1; // one element or none: any step reads the same
    s.size = int64_t(size);                       // at most n
    s.begin = s.size > 0 ? int64_t(b) : 0;
    out[d] = s;
  }
  return out;
}

/// The checks shared by strided_slice and its backward: list lengths and steps.
bool check_slice(RelationCtx &ctx, const StridedSliceAttrs &a, const Type &x) {
  size_t n = a.begin.size();
  if (a.end.size() != n) {
    ctx.fail_attr("end", "end has " + std::to_string(a.end.size()) + " entries, begin " + std::to_string(n));
    return false;
  }
  if (a.axes && a.axes->size() != n) {
    ctx.fail_attr("axes", "axes has " + std::to_string(a.axes->size()) + " entries, begin " + std::to_string(n));
    return false;
  }
  if (!a.axes && int64_t(n) > x.rank()) {
    ctx.fail_attr("begin", "begin has " + std::to_string(n) + " entries for data of rank " + std::to_string(x.rank()));
    return false;
  }
  if (a.strides && a.slice_mode == "end") {
    if (a.strides->size() > n) {
      ctx.fail_attr("strides", "strides has " + std::to_string(a.strides->size()) + " entries, begin " +
                                   std::to_string(n));
      return false;
    }
    for (int64_t s : *a.strides)
      if (s == 0) {
        ctx.fail_attr("strides", "a step of 0");
        return false;
      }
  }
  return true;
}

Shape sliced_shape(const std::vector<AxisSlice> &s) {
  Shape out;
  for (const AxisSlice &a : s)
    out.push_back(a.size);
  return out;
}

Type strided_slice_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  auto a = ctx.attrs_as<StridedSliceAttrs>();
  if (!check_slice(ctx, a, *x))
    return Type::unknown();
  return Type::tensor(sliced_shape(slice_axes(a, x->shape)), x->dtype);
}

/// grad.strided_slice_backward(output_grad, data): the adjoint of the slice,
/// placed back into data's shape (zeros elsewhere).
Type strided_slice_backward_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *x = ctx.tensor(1);
  if (!g || !x)
    return Type::unknown();
  auto a = ctx.attrs_as<StridedSliceAttrs>();
  if (!check_slice(ctx, a, *x))
    return Type::unknown();
  Type expected = Type::tensor(sliced_shape(slice_axes(a, x->shape)), x->dtype);
  if (*g != expected)
    return ctx.fail("output_grad is " + g->str() + "; the slice of data is " + expected.str());
  return *x;
}

LExprPtr strided_slice_element(ElementCtx &c) {
  auto s = slice_axes(c.attrs_as<StridedSliceAttrs>(), c.arg_type(0).shape);
  Index idx;
  for (size_t d = 0; d < s.size(); ++d)
    idx.push_back(s[d].step == 1 && s[d].begin == 0 ? c.index[d]
                                                     : add(imm(s[d].begin), mul(c.index[d], imm(s[d].step))));
  return c.in(0, idx);
}

/// Element i of axis d comes from slice element t / |step| where t = ±(i - begin)
/// is a non-negative multiple of |step| below size·|step|; zero elsewhere.
LExprPtr strided_slice_backward_element(ElementCtx &c) {
  const Shape &x = c.type().shape;
  auto s = slice_axes(c.attrs_as<StridedSliceAttrs>(), x);
  Index idx;
  LExprPtr inside;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d].step == 1 && s[d].begin == 0 && s[d].size == x[d]) {
      idx.push_back(c.index[d]);
      continue;
    }
    int64_t step = std::abs(s[d].step);
    LExprPtr t = s[d].step > 0 ? sub(c.index[d], imm(s[d].begin)) : sub(imm(s[d].begin), c.index[d]);
    LExprPtr q = binary(BinaryOp::FloorDiv, t, imm(step));
    LExprPtr ok = in_range(q, 0, s[d].size);
    if (step > 1)
      ok = both(ok, compare(CompareOp::EQ, binary(BinaryOp::FloorMod, t, imm(step)), imm(0)));
    inside = inside ? both(inside, ok) : ok;
    idx.push_back(clamp_index(q, std::max<int64_t>(s[d].size, 1)));
  }
  if (!inside)
    return c.in(0, idx);
  if (num_elements(c.arg_type(0).shape) == 0)
    return constant_of(0, c.type().dtype);
  return select(inside, c.in(0, idx), constant_of(0, c.type().dtype));
}

} // namespace

void register_slice_ops(OpRegistry &reg) {
  reg.add("concatenate")
      .describe("Join the tensors of a tuple along an existing axis.")
      .arg("data", "Tuple of Tensor", "The tensors, equal but for the axis.")
      .attrs<ConcatenateAttrs>()
      .support_level(1)
      .relation("Concatenate", concatenate_rel)
      .gradient([](GradCtx &g) -> Grads { // split at the same boundaries
        int64_t axis = concat_axis(g.call), at = 0;
        SplitAttrs s;
        s.axis = axis;
        s.indices_or_sections = {std::nullopt, {}};
        const auto &fields = g.arg(0)->type.fields;
        for (size_t i = 0; i + 1 < fields.size(); ++i)
          s.indices_or_sections.list.push_back(at += fields[i].shape[axis]);
        return {g.b.call(ops::split, {g.grad}, s)};
      })
      .kernel(concatenate_kernel)
      .fuses_producers() // reads each element of each part once
      .alias("concat")
      .example("%a: Tensor[(3, 3), float64], %b: Tensor[(3, 4), float64], %c: Tensor[(3, 5), float64]",
               "concatenate((%a, %b, %c), axis=1)")
      .example("%a: Tensor[(2, 3), float64], %b: Tensor[(0, 3), float64]", "concatenate((%a, %b, %a), axis=-2)");

  reg.add("split")
      .describe("Cut a tensor along an axis into a tuple of parts (numpy's split).")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<SplitAttrs>()
      .support_level(3)
      .relation("Split", split_rel)
      .gradient([](GradCtx &g) -> Grads {
        auto a = g.attrs_as<SplitAttrs>();
        const Shape &in = g.arg(0)->type.shape;
        auto parts = split_parts(a, in[a.axis]);
        bool tiles = parts.back().second == in[a.axis];
        for (size_t i = 0; i < parts.size(); ++i)
          tiles = tiles && parts[i].first == (i ? parts[i - 1].second : 0);
        ExprPtr grad = g.b.bind(g.grad);
        if (tiles) { // the parts' adjoints side by side
          ConcatenateAttrs c;
          c.axis = a.axis;
          return {g.b.call(ops::concatenate, {grad}, c)};
        }
        // Parts that overlap or leave gaps (indices not ascending): each
        // adjoint padded to its place, summed.
        ExprPtr total;
        for (size_t i = 0; i < parts.size(); ++i) {
          IntPairs widths(in.size(), {0, 0});
          widths[a.axis] = {parts[i].first, in[a.axis] - parts[i].second};
          ExprPtr placed = g.b.pad(g.b.get(grad, int(i)), widths);
          total = total ? g.b.add(total, placed) : placed;
        }
        return {total};
      })
      .kernel(split_kernel)
      .project([](Builder &b, const std::vector<ExprPtr> &args, const Attrs &attrs, size_t field) {
        auto a = composite_attrs<SplitAttrs>(args, attrs);
        auto [begin, end] = split_parts(a, args[0]->type.shape[a.axis]).at(field);
        StridedSliceAttrs s{.begin = {begin}, .end = {end}, .strides = std::nullopt, .axes = std::vector<int64_t>{a.axis}};
        return b.call(ops::strided_slice, {args[0]}, s);
      })
      .example("%x: Tensor[(3, 12), float64]", "split(%x, indices_or_sections=3, axis=1).1")
      .example("%x: Tensor[(3, 12), float64]",
               "%0 = split(%x, indices_or_sections=[3, 7], axis=1); %0.0 * %0.0 + sum(%0.2) - sum(%0.1 * %0.1)")
      .example("%x: Tensor[(6, 2), float64]",
               "%0 = split(%x, indices_or_sections=[4, 2, 2], axis=0); sum(%0.0) + sum(%0.1 * %0.1) + %0.3 * %0.3");

  reg.add("stack")
      .describe("Join the tensors of a tuple along a new axis.")
      .arg("data", "Tuple of Tensor", "The tensors, all of one shape.")
      .attrs<StackAttrs>()
      .support_level(3)
      .relation("Stack", stack_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &attrs) {
        const Type &t = a[0]->type;
        int64_t rank = t.is_tuple() && !t.fields.empty() ? t.fields[0].rank() : 0;
        int64_t axis = composite_attrs<StackAttrs>(a, attrs).axis;
        axis = axis < 0 ? axis + rank + 1 : axis;
        std::vector<ExprPtr> parts;
        for (size_t i = 0; i < t.fields.size(); ++i) {
          ExprPtr f = a[0]->kind == ExprKind::Tuple ? a[0]->args[i] : b.get(a[0], int(i));
          Shape s = f->type.shape;
          if (axis >= 0 && axis <= int64_t(s.size()))
            s.insert(s.begin() + axis, 1);
          parts.push_back(b.reshape(f, s));
        }
        ConcatenateAttrs c;
        c.axis = axis;
        return b.call(ops::concatenate, {b.tuple(parts)}, c);
      })
      .example("%a: Tensor[(2, 3), float64], %b: Tensor[(2, 3), float64]", "stack((%a, %b, %a), axis=1)")
      .example("%a: Tensor[(2, 3), float64]", "stack((%a, %a), axis=-1)");

  reg.add("strided_slice")
      .describe("numpy slicing: begin, end and a step per axis, negative indices and steps, clipped bounds.")
      .arg("data", "Tensor", "The input tensor.")
      .attrs<StridedSliceAttrs>()
      .support_level(4)
      .relation("StridedSlice", strided_slice_rel)
      .gradient([](GradCtx &g) -> Grads {
        return {g.b.call(ops::strided_slice_backward, {g.grad, g.arg(0)}, g.attrs())};
      })
      .element(strided_slice_element)
      .example("%x: Tensor[(5, 6), float64]", "strided_slice(%x, begin=[4, 1], end=[0, 6], strides=[-2, 2])")
      .example("%x: Tensor[(2, 7, 3), float64]",
               "strided_slice(%x, begin=[-1, 100], end=[-8, -100], strides=[-3, -1], axes=[1, 2])")
      .example("%x: Tensor[(4, 5), float64]", "strided_slice(%x, begin=[1, 2], end=[2, -1], slice_mode=\"size\")");

  reg.add("grad.strided_slice_backward")
      .describe("The adjoint of strided_slice: output_grad placed at the sliced elements of data's shape, zeros "
                "elsewhere.")
      .arg("output_grad", "Tensor", "The adjoint of the slice.")
      .arg("data", "Tensor", "The sliced tensor (for its shape).")
      .attrs<StridedSliceAttrs>()
      .support_level(4)
      .relation("StridedSliceBackward", strided_slice_backward_rel)
      .gradient([](GradCtx &g) -> Grads { // linear in output_grad; data gives only its shape
        return {g.b.call(ops::strided_slice, {g.grad}, g.attrs()), nullptr};
      })
      .element(strided_slice_backward_element)
      .example("%g: Tensor[(2, 3), float64], %x: Tensor[(5, 6), float64]",
               "grad.strided_slice_backward(%g, %x, begin=[4, 1], end=[0, 6], strides=[-2, 2])");
}

} // namespace gradc
