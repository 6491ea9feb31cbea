//===- TypeInfer.h - type inference through operator relations ------------===//
#pragma once

#include "gradc/ir/Expr.h"

namespace gradc {

/// Infers the type of every expression of `module` (first pass after
/// parsing). Validates each call's arity and attributes against the
/// operator's schema, fills in attribute defaults, and runs the type
/// relation. Reports every independent error with its span: an expression
/// whose inputs are already wrong gets type Unknown and reports nothing more.
/// Postcondition (no error reported): every Expr has a known type and every
/// function's result matches its declared return type.
Module infer_types(const Module &module, DiagEngine &diag);

} // namespace gradc
