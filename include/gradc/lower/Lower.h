//===- Lower.h - fused tensor IR to loop IR -------------------------------===//
//
// One kernel per top-level binding of each function, built by the operator's
// element function (injective roots and their fused producers) or by the
// kernel it registered for the target's kind (OpDef::kernel_for). The nests
// are schedule-neutral; the loop passes (Passes.h) schedule them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"
#include "gradc/loops/LoopIR.h"
#include "gradc/loops/Memory.h"
#include "gradc/loops/Target.h"

namespace gradc {

struct LowerOptions {
  Target target;
};

LoweredModule lower_module(const Module &module, const LowerOptions &opts = {});

/// The footprint of every top-level binding of `fn` (fused) in `lowered`,
/// its lowering, read off by provenance (Footprint.cpp); Tuple and TupleGet
/// bindings, which only alias, have empty ones.
std::vector<Footprint> binding_footprints(const Function &fn, const LoweredFunction &lowered);

} // namespace gradc
