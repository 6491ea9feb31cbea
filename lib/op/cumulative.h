//===- cumulative.h - cumsum and cumprod's kernels, for the strategies ----===//
//
// Internal to lib/op (scan.cpp defines the operators).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Kernel.h"

namespace gradc {

/// The generic kernel: each row's running sum (product) in order, one row
/// per iteration of the data-parallel loops.
StmtPtr cumulative_kernel(KernelCtx &k, bool product);

/// Rows cut into chunks scanned in parallel, where a long axis has fewer
/// rows than `threads` (the threads a target keeps busy); null where the
/// generic kernel is the better one.
StmtPtr chunked_scan(KernelCtx &k, bool product, int64_t threads);

} // namespace gradc
