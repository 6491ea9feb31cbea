//===- VectorMath.h - float32 exp, log, tanh, erf as plain arithmetic -----===//
//
// libm's expf/logf/tanhf/erff are scalar calls: a loop that calls them is never
// vectorized, and softmax, log_softmax, sigmoid and tanh layers were bound by
// them. These build the same functions from IR arithmetic (range reduction,
// a minimax polynomial, exponent bits), for a float scalar or a vector of
// floats alike, so loops around them vectorize. Every input is handled:
// NaN propagates, overflow gives inf, underflow 0 (through the subnormals),
// log of a negative is NaN and of ±0 is -inf, tanh and erf (odd functions)
// keep the sign of x, -0 included. Accuracy against libm is tested
// over 2^22 float32 patterns in test/codegen/vector_math.test (at most 2 ulp;
// 1 ulp measured).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace gradc::codegen {

/// e^x, x a float or a vector of floats; `fma`: the target has fused
/// multiply-add, which the polynomials then use (a result may differ from
/// the unfused one in the last bit; each is within the tested bound).
llvm::Value *inline_expf(llvm::IRBuilder<> &b, llvm::Value *x, bool fma);
/// The natural logarithm.
llvm::Value *inline_logf(llvm::IRBuilder<> &b, llvm::Value *x, bool fma);
/// The hyperbolic tangent.
llvm::Value *inline_tanhf(llvm::IRBuilder<> &b, llvm::Value *x, bool fma);
/// The Gauss error function.
llvm::Value *inline_erff(llvm::IRBuilder<> &b, llvm::Value *x, bool fma);

} // namespace gradc::codegen
