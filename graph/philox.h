// Philox4x32-10 on the host (Salmon, Moraes, Dror, Shaw: "Parallel random
// numbers: as easy as 1, 2, 3", SC'11): the numbers the kernels' fb_philox
// (backend/c_printer.cc's shared prelude) draws, for the op table's float64
// reference of rand/randn and for host code that must agree with kernels.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace fusebox::graph {

// The four 32-bit words for the 128-bit counter (lo, hi) under the 64-bit key.
constexpr std::array<uint32_t, 4> Philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;  // the Weyl key schedule (one bump after the last round is unused)
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// An element's words: its position is the counter's low half, the random
// op's offset the high half, the seed the key (as fb_philox_uniform).
constexpr std::array<uint32_t, 4> PhiloxAt(uint64_t position, uint64_t seed, uint64_t offset) {
  return Philox4x32(position, offset, seed);
}

// rand: the top 24 bits of word 0 scaled into [0, 1), exact in float32.
constexpr double PhiloxUniform(uint64_t position, uint64_t seed, uint64_t offset) {
  return static_cast<double>(PhiloxAt(position, seed, offset)[0] >> 8) * 0x1p-24;
}

// randn: Box-Muller of u1 = (word 0's top 24 bits + 1) / 2^24 in (0, 1] and
// u2 = word 1's top 24 bits / 2^24, in float64 (the kernels compute it in float32).
inline double PhiloxNormal(uint64_t position, uint64_t seed, uint64_t offset) {
  const std::array<uint32_t, 4> w = PhiloxAt(position, seed, offset);
  const double u1 = static_cast<double>((w[0] >> 8) + 1) * 0x1p-24, u2 = static_cast<double>(w[1] >> 8) * 0x1p-24;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// A reference argument (a double holding an int64 value) as the bits the kernel sees.
inline uint64_t ToBits(double v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

}  // namespace fusebox::graph
