//===- cuda/linear.cpp - the GPU's nn.dense and matmul --------------------===//
//
// The products of linear.cpp tiled through shared memory (cuda/Gemm.cpp);
// a batched matmul's batch becomes more blocks (lower/BindGpu.cpp).
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../linear.h"
#include "gradc/op/Registry.h"

namespace gradc {

void register_cuda_linear(OpRegistry &reg) {
  reg.strategy("nn.dense", TargetKind::CUDA, [](KernelCtx &k) { return dense_as_gemm(k, gemm_cuda_tiled); });
  reg.strategy("matmul", TargetKind::CUDA, [](KernelCtx &k) { return matmul_as_gemms(k, gemm_cuda_tiled); });
}

} // namespace gradc
