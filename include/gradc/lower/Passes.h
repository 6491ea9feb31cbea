//===- Passes.h - passes over the loop IR ---------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

namespace gradc {

/// Static memory planning: gives every Arena buffer a 64-byte-aligned offset
/// in one workspace, reusing space between buffers whose lifetimes (from the
/// kernel that writes them to the last kernel that reads them) do not
/// overlap. Sets workspace_bytes, the planned peak (SPEC §6).
void plan_memory(LoweredFunction &fn);

/// For CUDA: each kernel's outermost nest of Parallel/Vectorized loops is
/// flattened onto blockIdx.x * block + threadIdx.x with a bounds guard; a
/// kernel with no parallel loop runs on one thread. Sets Kernel::grid/block.
void bind_gpu_threads(LoweredFunction &fn);

constexpr int64_t kBufferAlignment = 64;

} // namespace gradc
