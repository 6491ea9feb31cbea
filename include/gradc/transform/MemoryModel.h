//===- MemoryModel.h - a fused function's planned workspace, before lowering ===//
//
// The workspace a fused function will plan, composed from footprints
// (loops/Memory.h: what lowering makes of each binding) exactly as lowering
// composes kernels: one buffer per leaf of each Call's result, tuples and
// projections as aliases, a constant tuple field materialized, the result's
// leaves retargeted to the outputs or copied, and the status word shared;
// then the same lifetimes (buffer_lifetimes) and the same placement
// (place()). With the footprints of the function's own lowering it is that
// lowering's plan, byte for byte (checked under --verify-each); a binding's
// footprint depends only on its value, so a function rewritten by
// rematerialization (copies of bindings, bindings moved) is estimated from
// the footprints of the one it was rewritten from, without lowering it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"
#include "gradc/loops/Memory.h"

#include <functional>

namespace gradc {

/// The footprint of Call binding `i` of the function being estimated.
using FootprintFn = std::function<const Footprint &(size_t binding)>;

/// The planned workspace (arena bytes) of `fn`, fused.
int64_t estimate_workspace(const Function &fn, const FootprintFn &footprint);

} // namespace gradc
