//===- Passes.h - the small structural passes of the tensor IR ------------===//
//
// Each is one function in one .cpp under lib/transform/. The larger passes
// (Gradient, Remat, Fuse) have headers of their own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

namespace gradc {

/// A-normal form. Pre: typed. Post: every Call, GlobalCall, Tuple and TupleGet
/// is the whole value of its own binding, arguments and the result are atoms,
/// and bindings whose value is an atom are substituted away.
void normalize(Function &fn);

/// Replaces every `@f(...)` call by a fresh copy of @f's body.
/// Pre: typed, ANF, no recursion. Post: no GlobalCall remains in `fn`.
void inline_calls(Function &fn, const Module &module);

/// Removes bindings whose value the result does not depend on.
/// Pre and post: ANF.
void eliminate_dead_code(Function &fn);

} // namespace gradc
