//===- Builder.cpp - emit typed bindings ----------------------------------===//
#include "gradc/op/Ops.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/op/Check.h"

namespace gradc {

namespace {

/// A pass that builds an ill-typed value is a compiler bug.
void builder_bug(Span, const std::string &message) {
  internal_error("builder", "a pass built an ill-typed value: " + message);
}

} // namespace

ExprPtr Builder::call(const OpDef *op, std::vector<ExprPtr> args, Attrs attrs) {
  return bind(check_call(op, std::move(args), attrs, span_, report_ ? report_ : Report(builder_bug)), hint_);
}

ExprPtr Builder::bind(ExprPtr value, const std::string &hint) {
  if (value->is_atom() || (report_ && value->type.has_unknown()))
    return value;
  GRADC_CHECK(!value->type.has_unknown(), "builder", "a pass bound a value of unknown type");
  ExprPtr v = make_var(hint, {}, span_, value->type);
  out_.push_back({v, value, false});
  return v;
}

ExprPtr Builder::constant(double value, DType dtype) { return make_constant(value, dtype, span_); }

ExprPtr Builder::tuple(std::vector<ExprPtr> fields) { return bind(make_tuple(std::move(fields), span_), hint_); }

ExprPtr Builder::get(ExprPtr tuple, int index) {
  return bind(check_tuple_get(std::move(tuple), index, span_, report_ ? report_ : Report(builder_bug)), hint_);
}

ExprPtr Builder::scale(ExprPtr a, double c) { return mul(a, constant(c, a->type.dtype)); }

ExprPtr Builder::zeros(const Type &type) {
  if (type.is_tuple()) {
    std::vector<ExprPtr> fields;
    for (const Type &f : type.fields)
      fields.push_back(zeros(f));
    return tuple(std::move(fields));
  }
  Attrs attrs;
  attrs.set("shape", AttrValue::ints(type.shape));
  attrs.set("dtype", AttrValue::of(dtype_name(type.dtype)));
  return call(ops::zeros, {}, std::move(attrs));
}

ExprPtr Builder::sum_to(ExprPtr a, const Shape &shape) {
  if (a->type.shape == shape)
    return a;
  Attrs attrs;
  attrs.set("shape", AttrValue::ints(shape));
  return call(ops::collapse_sum_to, {a}, attrs);
}

ExprPtr Builder::reshape(ExprPtr a, const Shape &shape) {
  if (a->type.shape == shape)
    return a;
  Attrs attrs;
  attrs.set("newshape", AttrValue::ints(shape));
  attrs.set("allowzero", AttrValue::of(true));
  return call(ops::reshape, {a}, attrs);
}

ExprPtr Builder::transpose(ExprPtr a, const std::vector<int64_t> &axes) {
  Attrs attrs;
  attrs.set("axes", AttrValue::ints(axes));
  return call(ops::transpose, {a}, attrs);
}

ExprPtr Builder::pad(ExprPtr a, const IntPairs &widths) {
  Attrs attrs;
  attrs.set("pad_width", AttrSchemaBuilder::describe(widths, {}).value);
  return call(ops::pad, {a}, attrs);
}

ExprPtr Builder::transpose_last2(ExprPtr a) {
  int64_t r = a->type.rank();
  std::vector<int64_t> axes(r);
  for (int64_t i = 0; i < r; ++i)
    axes[i] = i;
  std::swap(axes[r - 1], axes[r - 2]);
  return transpose(a, axes);
}

ExprPtr Builder::broadcast_to(ExprPtr a, const Shape &shape) {
  Attrs attrs;
  attrs.set("shape", AttrValue::ints(shape));
  return call(ops::broadcast_to, {a}, attrs);
}

ExprPtr Builder::sum(ExprPtr a, const std::vector<int64_t> &axes, bool keepdims, bool exclude) {
  Attrs attrs;
  attrs.set("axis", AttrValue::ints(axes));
  attrs.set("keepdims", AttrValue::of(keepdims));
  attrs.set("exclude", AttrValue::of(exclude));
  return call(ops::sum, {a}, attrs);
}

ExprPtr Builder::cast(ExprPtr a, DType dtype) {
  Attrs attrs;
  attrs.set("dtype", AttrValue::of(dtype_name(dtype)));
  return call(ops::cast, {a}, attrs);
}

ExprPtr Builder::reverse(ExprPtr a, int64_t axis) {
  Attrs attrs;
  attrs.set("axis", AttrValue::of(axis));
  return call(ops::reverse, {a}, attrs);
}

} // namespace gradc
