//===- test_random.cpp - Philox-4x32-10: the published answers ------------===//
#include "gradc/loops/Random.h"

#include <catch2/catch.hpp>

using namespace gradc;

// The known-answer vectors of Random123 (Salmon et al., SC'11) for
// philox4x32 with 10 rounds: zeros, all ones, and digits of pi.
TEST_CASE("philox4x32_10 gives Random123's known answers", "[random]") {
  using C = std::array<uint32_t, 4>;
  using K = std::array<uint32_t, 2>;
  CHECK(philox4x32_10(C{0, 0, 0, 0}, K{0, 0}) == C{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10(C{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, K{0xffffffff, 0xffffffff}) ==
        C{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10(C{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, K{0xa4093822, 0x299f31d0}) ==
        C{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("philox_bits splits key and counter into 32-bit halves, low first", "[random]") {
  CHECK(philox_bits(0, 0) == 0x6627e8d5);
  int64_t ones = -1;
  CHECK(philox_bits(ones, 0) == philox4x32_10({0, 0, 0, 0}, {0xffffffff, 0xffffffff})[0]);
  CHECK(philox_bits(0, int64_t(0x0000000100000002)) == philox4x32_10({2, 1, 0, 0}, {0, 0})[0]);
  CHECK(philox_bits(0, 1) != philox_bits(0, 0));
  CHECK(philox_bits(1, 0) != philox_bits(0, 0));
}
