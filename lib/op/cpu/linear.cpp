//===- cpu/linear.cpp - the CPU's nn.dense and matmul ---------------------===//
//
// The products of linear.cpp through the packed schedule (cpu/Gemm.cpp).
//
//===----------------------------------------------------------------------===//
#include "Cpu.h"
#include "../linear.h"
#include "gradc/op/Registry.h"

namespace gradc {

void register_cpu_linear(OpRegistry &reg) {
  reg.strategy("nn.dense", TargetKind::CPU, [](KernelCtx &k) { return dense_as_gemm(k, gemm_cpu_packed); });
  reg.strategy("matmul", TargetKind::CPU, [](KernelCtx &k) { return matmul_as_gemms(k, gemm_cpu_packed); });
}

} // namespace gradc
