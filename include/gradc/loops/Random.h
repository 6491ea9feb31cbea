//===- Random.h - counter-based random bits (Philox-4x32-10) --------------===//
//
// gradc draws random numbers the way GPU libraries and JAX do: as a pure
// function of a key and a counter (Salmon et al., "Parallel Random Numbers:
// As Easy as 1, 2, 3", SC'11), so that an element's bits depend on nothing
// but (key, its index): the same on every thread count, on the CPU and the
// GPU, and when a rematerialized value is computed again. The loop IR's
// BinaryOp::Philox is word 0 of philox4x32_10 below; codegen emits the same
// rounds, and this function is the reference the tests and the constant
// folder use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>

namespace gradc {

/// Philox-4x32-10: ten rounds over the 128-bit counter with the 64-bit key.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

/// BinaryOp::Philox: word 0 of philox4x32_10 with counter (lo, hi, 0, 0) of
/// `counter` and key (lo, hi) of `key`, as an integer in [0, 2^32).
int64_t philox_bits(int64_t key, int64_t counter);

} // namespace gradc
