//===- Fuse.h - fuse chains of injective operators into one kernel --------===//
#pragma once

#include "gradc/ir/Expr.h"

namespace gradc {

/// Fuses each injective call whose value has exactly one user, and that user
/// is injective too, into the user: the producer's binding disappears and its
/// call becomes a nested argument. Afterwards every top-level binding is one
/// kernel (what `--dump-ir=fused` shows).
/// Pre: typed ANF. Post: typed; bindings may hold nested injective calls.
FunctionPtr fuse_injective(const Function &fn);

} // namespace gradc
