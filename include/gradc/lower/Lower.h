//===- Lower.h - from fused tensor IR to the loop IR ----------------------===//
//
// Each top-level binding of a fused function is one kernel. An injective
// operator contributes an element expression (ElementCtx); any other operator
// emits a loop nest (KernelCtx); see op/Kernel.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"
#include "gradc/loops/LoopIR.h"

namespace gradc {

/// Lowers every function of a fused, typed, ANF module. Arena offsets are
/// not planned yet (see MemoryPlan.h).
struct LowerOptions {
  bool gpu = false; // --target=cuda
};

LoweredModule lower_module(const Module &module, const LowerOptions &opts = {});

} // namespace gradc
