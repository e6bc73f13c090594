// JAX's Threefry-2x32 hash (20 rounds; Salmon et al. 2011; jax._src.random.threefry2x32), included by
// every native source that draws JAX's random numbers (numerics_threefry.cc, models/native_seating.cc);
// dpppl.core.native rebuilds a library when a header it includes changes.
#ifndef DPPPL_NUMERICS_THREEFRY_H_
#define DPPPL_NUMERICS_THREEFRY_H_

#include <cstdint>

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

}  // namespace dpppl

#endif  // DPPPL_NUMERICS_THREEFRY_H_
