//===- Lanes.h - which vectorized loops are emitted as vector code --------===//
//
// A Vectorized loop of at most kMaxLanes iterations whose body only stores
// lane-wise arithmetic at unit stride is emitted by codegen as vector
// instructions of `extent` lanes (a register tile's columns), instead of a
// scalar loop left to LLVM's loop vectorizer: what a register tile needs so
// that its accumulators stay in registers. These are the analyses codegen
// asks before it does so.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

#include <functional>
#include <optional>

namespace gradc {

constexpr int64_t kMaxLanes = 64;

/// Whether codegen computes `op` on `dtype` with vector instructions on the
/// CPU: negation, and for floats abs and sqrt, and for float32 and float16
/// (computed in float32) exp, log, tanh and erf (lib/codegen/VectorMath.h).
/// Other math functions are scalar libm calls.
bool has_vector_form(UnaryOp op, DType dtype);

/// Whether `e` reads loop variable `var`.
bool uses_var(const LExprPtr &e, const LVar *var);

/// The constant step of the Int64 index `e` when `var` steps by one (0 when
/// it does not use `var`); nullopt where `e` is not affine in `var`.
std::optional<int64_t> index_stride(const LExprPtr &e, const LVar *var);

/// How many low bits of the Int64 index `e` are zero wherever `lane` is 0,
/// whatever the other loop variables are (64 where `e` is then always 0):
/// what an access at lane 0 may assume of its alignment. Constants count
/// only where `fixed` says so (a template's argument may take other values,
/// Templates.h); sums, differences, products, mins and maxes and a floor
/// modulo by a fixed constant combine their operands' bits; anything else
/// (a quotient, a load) may be odd.
int index_zero_bits(const LExprPtr &e, const LVar *lane, const std::function<bool(const LExpr &)> &fixed);

/// The largest constant stride of a lane-wise load (below).
constexpr int64_t kMaxLoadStride = 16;

/// Whether the body of Vectorized loop `loop` can be emitted lane-wise: a
/// sequence of stores at unit stride in the loop variable of values built from
/// loads at unit stride (or not depending on the lane), add, sub, mul, min and
/// max, float division, unary operations with a vector form (has_vector_form),
/// comparisons and casts of non-bool values, selects and fused multiply-adds;
/// no bool memory. With `strided_loads` (the CPU), loads may also step by a
/// constant 2 to kMaxLoadStride elements a lane: codegen reads the span once
/// and picks every s-th element with a shuffle (a de-interleave), where
/// LLVM's loop vectorizer gathered or kept them scalar (Winograd's weight
/// transform, nine taps a kernel: 2.4 ms for 512 x 512 channels); and stores
/// likewise: the lanes spread over the span by a shuffle, then one masked
/// store of every s-th element (the elements between are not touched).
bool lane_wise(const Stmt &loop, bool strided_loads = false);

/// Whether Unrolled loop `loop` is a transposing copy of an n × n block, n a
/// power of two up to kMaxLanes: its body one Vectorized loop of n lanes
/// that stores, at unit stride in the lane, a load of the same dtype (not
/// bool) from another buffer at unit stride in the unrolled index and a
/// constant stride in the lane. Codegen emits it as n vector loads, log2(n)
/// rounds of two-vector shuffles and n vector stores: a packed panel of
/// x·wT, where element-wise stores cost about a cycle each.
bool transposing_copy(const Stmt &loop);

} // namespace gradc
