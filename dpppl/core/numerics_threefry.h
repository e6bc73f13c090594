// JAX's Threefry-2x32 hash (20 rounds; Salmon et al. 2011; jax._src.random.threefry2x32), included by
// every native source that draws JAX's random numbers (numerics_threefry.cc, models/native_seating.h,
// kernels/mallows/native_slice.cc), with the uniform draw made from it;
// dpppl.core.native rebuilds a library when a header it includes changes.
#ifndef DPPPL_NUMERICS_THREEFRY_H_
#define DPPPL_NUMERICS_THREEFRY_H_

#include <cstdint>
#include <cstring>

namespace dpppl {

// The hash of the counter (x0, x1) under the key (k0, k1), in place.
inline void threefry2x32(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  static const int rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  x0 += ks[0], x1 += ks[1];
  for (int group = 0; group < 5; ++group) {
    for (const int r : rotations[group % 2]) {
      x0 += x1;
      x1 = x0 ^ ((x1 << r) | (x1 >> (32 - r)));
    }
    x0 += ks[(group + 1) % 3];
    x1 += ks[(group + 2) % 3] + uint32_t(group + 1);
  }
}

// Element `index` (< 2^32) of jax.random.uniform(key, shape, T) for a key of JAX's default
// implementation (threefry, partitionable: the element's bits hash its flat index as the counter
// (0, index)), bit for bit: the top mantissa bits of the hash under the exponent of 1, minus 1.
template <typename T>
T threefry_uniform(const uint32_t* key, uint32_t index);
template <>
inline double threefry_uniform<double>(const uint32_t* key, uint32_t index) {
  uint32_t hi = 0, lo = index;
  threefry2x32(key[0], key[1], hi, lo);
  const uint64_t bits = ((uint64_t(hi) << 32 | lo) >> 12) | 0x3FF0000000000000ull;
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value - 1.0;
}
template <>
inline float threefry_uniform<float>(const uint32_t* key, uint32_t index) {
  uint32_t hi = 0, lo = index;
  threefry2x32(key[0], key[1], hi, lo);
  const uint32_t bits = ((hi ^ lo) >> 9) | 0x3F800000u;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value - 1.0f;
}

}  // namespace dpppl

#endif  // DPPPL_NUMERICS_THREEFRY_H_
