//===- Gradient.h - reverse-mode differentiation (SPEC §5) ----------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <string>
#include <vector>

namespace gradc {

/// Builds `@FN_adjoint` from `fn` and returns it.
///
/// Pre: `fn` is typed, in ANF, with no GlobalCall (see Passes.h).
/// `wrt` names parameters (without '%'); empty means every floating-point
/// parameter. Post: the adjoint has fn's parameters (fresh Vars) and returns
/// `(result, (d_p1, ..., d_pk))` for the wrt parameters in declared order.
/// The target is the result (field 0 of a tuple result); a non-scalar target
/// is seeded with ones. Parameters the target does not depend on get zeros.
/// The forward bindings are kept verbatim (checkpoint markers included) and
/// the backward bindings follow them. A leaf of the result that `fn` writes
/// into a parameter (inplace_indices) the adjoint writes there too.
///
/// Errors (reported through `diag`, then CompileError): an unknown or
/// integer wrt parameter, a non-floating target, and every reachable
/// operator without a gradient, all at once.
FunctionPtr build_adjoint(const Function &fn, const std::vector<std::string> &wrt, DiagEngine &diag);

/// Builds `@FN_vjp`, the vector-Jacobian product of `fn`, by the same
/// reverse walk: the gradient of any function, for a rule that needs one (a
/// scan differentiates its body; GradCtx::differentiate).
///
/// Pre: as build_adjoint. Post: the parameters are fn's (fresh Vars) and a
/// last one, `%d_out`, of fn's result type (a tuple for a tuple result);
/// the result is the tuple of adj[p] for each parameter p with a
/// floating-point part (a float tensor, or a tuple with one at any depth),
/// in declared order, zeros where no path reaches p and for the integer
/// parts of a tuple. Unlike the adjoint, it does not return fn's result.
/// With `keep_primal`, dead code is kept: the first fn.body.bindings.size()
/// bindings are a copy of fn's, in order (op/VjpSplit.h pairs them up).
/// Errors: every reachable operator without a gradient, all at once.
FunctionPtr build_vjp(const Function &fn, DiagEngine &diag, bool keep_primal = false);

} // namespace gradc
