//===- cpu/scan.cpp - the CPU's cumsum and cumprod ------------------------===//
//
// A long axis with fewer rows than the pool has cores, less one, scanned in
// chunks (cumulative.h); otherwise a row per iteration.
//
//===----------------------------------------------------------------------===//
#include "Cpu.h"
#include "../cumulative.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {

StmtPtr cpu_scan(KernelCtx &k, bool product) {
  StmtPtr chunked = chunked_scan(k, product, k.target.cpu_tuning().cores - 1);
  return chunked ? chunked : cumulative_kernel(k, product);
}

} // namespace

void register_cpu_scan(OpRegistry &reg) {
  reg.strategy("cumsum", TargetKind::CPU, [](KernelCtx &k) { return cpu_scan(k, false); });
  reg.strategy("cumprod", TargetKind::CPU, [](KernelCtx &k) { return cpu_scan(k, true); });
}

} // namespace gradc
