//===- cuda/scan.cpp - the GPU's cumsum and cumprod -----------------------===//
//
// A long axis with fewer rows than half the threads the device runs at once
// (tens of thousands) scanned in chunks (cumulative.h), three launches;
// otherwise a thread per row.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../cumulative.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {

constexpr int64_t kGpuThreads = 1 << 16;

StmtPtr cuda_scan(KernelCtx &k, bool product) {
  StmtPtr chunked = chunked_scan(k, product, kGpuThreads / 2);
  return chunked ? chunked : cumulative_kernel(k, product);
}

} // namespace

void register_cuda_scan(OpRegistry &reg) {
  reg.strategy("cumsum", TargetKind::CUDA, [](KernelCtx &k) { return cuda_scan(k, false); });
  reg.strategy("cumprod", TargetKind::CUDA, [](KernelCtx &k) { return cuda_scan(k, true); });
}

} // namespace gradc
