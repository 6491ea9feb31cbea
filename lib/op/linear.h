//===- linear.h - the products of nn.dense and matmul, for the strategies -===//
//
// Internal to lib/op. Each product is described as a Gemm (op/Gemm.h) and
// emitted by a GemmStrategy: the generic kernels pass gemm_nest, the CPU's
// strategies (cpu/linear.cpp) the packed product.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Gemm.h"

namespace gradc {

/// out[m, n] = sum_k x[m, k] w[n, k] (m ranges over the flattened batch).
StmtPtr dense_as_gemm(KernelCtx &k, GemmStrategy strategy);

/// out[.., i, j] = sum_k a[.., i, k] b[.., k, j], one matrix product per
/// batch index (batch axes broadcast), each accumulated in k order.
StmtPtr matmul_as_gemms(KernelCtx &k, GemmStrategy strategy);

} // namespace gradc
