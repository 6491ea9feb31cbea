//===- Fuse.h - fuse operators into kernels -------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

namespace gradc {

/// Fuses each value that has exactly one user into it when the pair can be
/// one kernel (Fuse.cpp: injective chains, injective producers into
/// operators that fuses_producers, an operator that fuses_epilogue into the
/// injective consumers that read it elementwise): the producer's binding
/// disappears and its call becomes a nested argument. Afterwards every
/// top-level binding is one kernel (what `--dump-ir=fused` shows).
/// Pre: typed ANF. Post: typed; bindings may hold nested calls.
FunctionPtr fuse_operators(const Function &fn);

} // namespace gradc
