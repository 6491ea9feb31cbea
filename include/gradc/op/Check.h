//===- Check.h - checking one call against its operator record ------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <functional>

namespace gradc {

/// Receives each error found, with the span it belongs to.
using Report = std::function<void(Span, const std::string &)>;

/// Checks a call whose arguments are typed: arity, attributes against the
/// operator's schema (defaults are filled into `call.attrs`), then the type
/// relation. Reports every problem and returns the call's type (Unknown
/// after an error, or when an argument's type is Unknown).
Type check_call(Expr &call, const Report &report);

/// Types a Tuple, TupleGet, Var or Constant whose operands are typed.
Type check_structural(Expr &e, const Report &report);

/// check_call for passes that build calls: the first error goes to `*error`.
Type infer_call(Expr &call, std::string *error);
/// check_structural for passes: the first error goes to `*error`.
Type infer_structural(Expr &e, std::string *error);

} // namespace gradc
