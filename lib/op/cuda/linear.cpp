//===- cuda/linear.cpp - the GPU's nn.dense and matmul --------------------===//
//
// The products of linear.cpp tiled through shared memory (cuda/Gemm.cpp);
// a batched matmul's batch becomes more blocks (lower/BindGpu.cpp); a
// product alone in its kernel with few tiles and a long K (a weight
// gradient over many tokens) split along K.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../linear.h"
#include "gradc/op/Registry.h"

namespace gradc {

void register_cuda_linear(OpRegistry &reg) {
  reg.strategy("nn.dense", TargetKind::CUDA, [](KernelCtx &k) { return dense_as_gemm(k, gemm_cuda); });
  reg.strategy("matmul", TargetKind::CUDA, [](KernelCtx &k) { return matmul_as_gemms(k, gemm_cuda); });
}

} // namespace gradc
