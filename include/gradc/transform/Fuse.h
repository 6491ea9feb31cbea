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
///
/// A cheap value with several users is recomputed in each rather than kept
/// in memory (Fuse.cpp). Lean fusion also recomputes one that replicates an
/// operand (OpDef::replicates: the unpooling of a max pool's gradient),
/// whose gathers cost time: fewer bytes for more time, what the remat stage
/// tries when no plan fits the memory budget otherwise.
struct FuseOptions {
  bool lean = false;
};
FunctionPtr fuse_operators(const Function &fn, FuseOptions options = {});

} // namespace gradc
