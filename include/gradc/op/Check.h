//===- Check.h - checking one call against its operator record ------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <functional>

namespace gradc {

/// Receives each error found, with the span it belongs to.
using Report = std::function<void(Span, const std::string &)>;

/// Builds a call of `op` on typed `args`, checked against the operator's
/// record: arity, attributes against its schema (unknown or ill-typed ones
/// are errors; defaults are filled in), then its type relation, whose result
/// must be within the limits of ir/Type.h (rank, elements). Reports every
/// problem; the call's type is Unknown after an error, or when an argument's
/// type is Unknown (an error already reported elsewhere).
ExprPtr check_call(const OpDef *op, std::vector<ExprPtr> args, const Attrs &attrs, Span span, const Report &report);

/// Builds `tuple.index`, reporting a projection of a non-tuple or an index
/// out of range.
ExprPtr check_tuple_get(ExprPtr tuple, int index, Span span, const Report &report);

} // namespace gradc
