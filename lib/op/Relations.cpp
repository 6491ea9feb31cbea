//===- Relations.cpp - shared type relations ------------------------------===//
#include "gradc/op/Relations.h"
#include "gradc/op/attrs/reduce.h"

#include <algorithm>
#include <set>

namespace gradc {

Type identity_rel(RelationCtx &ctx) {
  const Type *t = ctx.tensor(0);
  return t ? *t : Type::unknown();
}

bool require_numeric(RelationCtx &ctx, const Type &t, const std::string &hint) {
  if (t.dtype != DType::Bool)
    return true;
  ctx.fail("expects a numeric tensor, found bool (" + hint + ")");
  return false;
}

bool require_float(RelationCtx &ctx, const Type &t) {
  if (is_float(t.dtype))
    return true;
  ctx.fail(std::string("expects a floating-point tensor, found ") + dtype_name(t.dtype));
  return false;
}

Type numeric_identity_rel(RelationCtx &ctx) {
  const Type *t = ctx.tensor(0);
  if (!t || !require_numeric(ctx, *t, "cast it to a numeric dtype first"))
    return Type::unknown();
  return *t;
}

Type float_identity_rel(RelationCtx &ctx) {
  const Type *t = ctx.tensor(0);
  if (!t || !require_float(ctx, *t))
    return Type::unknown();
  return *t;
}

std::optional<Shape> broadcast_shapes(const Shape &a, const Shape &b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

static Type broadcast_common(RelationCtx &ctx, bool comparison) {
  const Type *a = ctx.tensor(0);
  const Type *b = a ? ctx.tensor(1) : nullptr;
  if (!a || !b)
    return Type::unknown();
  if (a->dtype != b->dtype)
    return ctx.fail(std::string("dtypes ") + dtype_name(a->dtype) + " and " + dtype_name(b->dtype) +
                    " differ (no implicit promotion; use cast)");
  auto shape = broadcast_shapes(a->shape, b->shape);
  if (!shape)
    return ctx.fail("shapes " + shape_str(a->shape) + " and " + shape_str(b->shape) + " are not broadcast-compatible");
  return Type::tensor(*shape, comparison ? DType::Bool : a->dtype);
}

Type broadcast_rel(RelationCtx &ctx) { return broadcast_common(ctx, false); }
Type numeric_broadcast_rel(RelationCtx &ctx) {
  Type t = broadcast_common(ctx, false);
  if (!t.is_unknown() && !require_numeric(ctx, t, "cast the operands to a numeric dtype first"))
    return Type::unknown();
  return t;
}
Type broadcast_comp_rel(RelationCtx &ctx) { return broadcast_common(ctx, true); }

std::vector<int64_t> ReduceAttrs::reduced(int64_t rank) const {
  // As TVM: no axis (None or []) reduces every axis, whatever `exclude` says.
  std::set<int64_t> axes;
  if (axis)
    axes.insert(axis->begin(), axis->end());
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i)
    if (axes.empty() || axes.count(i) != size_t(exclude))
      out.push_back(i);
  return out;
}

Shape reduced_shape(const Shape &shape, const std::vector<int64_t> &axes, bool keepdims) {
  Shape out;
  for (int64_t i = 0; i < (int64_t)shape.size(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

Type reduce_rel(RelationCtx &ctx) {
  const Type *t = ctx.tensor(0);
  if (!t)
    return Type::unknown();
  auto a = ctx.attrs_as<ReduceAttrs>();
  return Type::tensor(reduced_shape(t->shape, a.reduced(t->rank()), a.keepdims), t->dtype);
}

Type numeric_reduce_rel(RelationCtx &ctx) {
  Type t = reduce_rel(ctx);
  if (!t.is_unknown() && !require_numeric(ctx, t,
                                          "numpy counts the True values: cast to int32 or int64 first; "
                                          "max is any, min is all"))
    return Type::unknown();
  return t;
}

} // namespace gradc
