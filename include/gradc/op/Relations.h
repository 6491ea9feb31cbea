//===- Relations.h - type relations shared by several operators -----------===//
//
// Like TVM's type_relations.h: Identity, Broadcast, BroadcastComp, Reduce.
// Operator-specific relations live next to their operator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Registry.h"

namespace gradc {

Type identity_rel(RelationCtx &ctx);       // one tensor -> same type
Type float_identity_rel(RelationCtx &ctx); // one floating tensor -> same type
Type broadcast_rel(RelationCtx &ctx);      // two tensors, same dtype -> broadcast shape
Type broadcast_comp_rel(RelationCtx &ctx); // like broadcast_rel, result bool
Type reduce_rel(RelationCtx &ctx);         // axis / keepdims / exclude

/// numpy broadcasting of two shapes; nullopt if incompatible.
std::optional<Shape> broadcast_shapes(const Shape &a, const Shape &b);
/// The axes a reduce operator reduces (sorted, normalised), from validated
/// `axis` and `exclude` attributes.
std::vector<int64_t> reduced_axes(const Attrs &attrs, int64_t rank);
/// The shape of a reduction over `axes` of `shape`.
Shape reduced_shape(const Shape &shape, const std::vector<int64_t> &axes, bool keepdims);

/// Attribute sets shared by the reduce operators.
OpBuilder &reduce_attrs(OpBuilder &b);

} // namespace gradc
