//===- Random.cpp - counter-based random bits (Philox-4x32-10) ------------===//
#include "gradc/loops/Random.h"

namespace gradc {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint64_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;
  constexpr uint32_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
  }
  return c;
}

int64_t philox_bits(int64_t key, int64_t counter) {
  uint64_t n = uint64_t(counter), s = uint64_t(key);
  return philox4x32_10({uint32_t(n), uint32_t(n >> 32), 0, 0}, {uint32_t(s), uint32_t(s >> 32)})[0];
}

} // namespace gradc
