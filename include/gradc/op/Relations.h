//===- Relations.h - type relations shared by several operators -----------===//
//
// Like TVM's type_relations.h: Identity, Broadcast, BroadcastComp, Reduce.
// Operator-specific relations live next to their operator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Registry.h"

namespace gradc {

Type identity_rel(RelationCtx &ctx);          // one tensor -> same type
Type numeric_identity_rel(RelationCtx &ctx);  // one tensor, not bool -> same type
Type float_identity_rel(RelationCtx &ctx);    // one floating tensor -> same type
Type broadcast_rel(RelationCtx &ctx);         // two tensors, same dtype -> broadcast shape
Type numeric_broadcast_rel(RelationCtx &ctx); // like broadcast_rel, not bool
Type broadcast_comp_rel(RelationCtx &ctx);    // like broadcast_rel, result bool
Type reduce_rel(RelationCtx &ctx);            // axis / keepdims / exclude
Type numeric_reduce_rel(RelationCtx &ctx);    // like reduce_rel, not bool

/// Arithmetic on bool: add, multiply, maximum and minimum keep bool and are
/// logical or/and, as in numpy (so are max/min, any/all, and matmul/dense).
/// What numpy rejects on bool (subtract, negative) or computes in another
/// dtype (divide and power give floats or int8, sum and cumsum count in
/// int64) is a type error: gradc has no implicit promotion, and a bool result
/// would silently differ from numpy's. These checks record
/// "expects a numeric tensor, found bool (HINT)" and return false.
bool require_numeric(RelationCtx &ctx, const Type &t, const std::string &hint);
/// `t` floating-point, else "expects a floating-point tensor, found DTYPE".
bool require_float(RelationCtx &ctx, const Type &t);

/// numpy broadcasting of two shapes; nullopt if incompatible.
std::optional<Shape> broadcast_shapes(const Shape &a, const Shape &b);
/// The shape of a reduction over `axes` of `shape`.
Shape reduced_shape(const Shape &shape, const std::vector<int64_t> &axes, bool keepdims);

} // namespace gradc
