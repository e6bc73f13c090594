// JAX's Threefry-2x32 hash as one native call (CPU), for dpppl.core.numerics_random.
//
// XLA's CPU lowering of JAX's `threefry2x32` is a loop of 20 rounds of 32-bit arithmetic written
// out in the program: 150-450 HLO instructions at every call site, some thousand of the ~3,000 of a
// default sampling chunk, all compiled anew in every process with an empty compilation cache. This
// is the same hash (Salmon et al. 2011, the rounds and key schedule of
// jax._src.random.threefry2x32._threefry2x32_lowering), bit for bit, as one FFI custom call: a call
// site costs one instruction. Built and loaded by dpppl.core.native.

#include <cstdint>

#include "numerics_threefry.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Element i of the outputs is the hash of (x0[i], x1[i]) under (k0[i], k1[i]); the four operands
// have the outputs' shape (numerics_random broadcasts them).
ffi::Error Threefry(ffi::Buffer<ffi::U32> k0, ffi::Buffer<ffi::U32> k1, ffi::Buffer<ffi::U32> x0,
                    ffi::Buffer<ffi::U32> x1, ffi::ResultBuffer<ffi::U32> y0, ffi::ResultBuffer<ffi::U32> y1) {
  const size_t n = y0->element_count();
  if (k0.element_count() != n || k1.element_count() != n || x0.element_count() != n || x1.element_count() != n) {
    return ffi::Error::InvalidArgument("dpppl_threefry2x32: operands of different sizes");
  }
  const uint32_t *a = k0.typed_data(), *b = k1.typed_data(), *c = x0.typed_data(), *d = x1.typed_data();
  uint32_t *out0 = y0->typed_data(), *out1 = y1->typed_data();
  for (size_t i = 0; i < n; ++i) {
    uint32_t u = c[i], v = d[i];
    dpppl::threefry2x32(a[i], b[i], u, v);
    out0[i] = u, out1[i] = v;
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplThreefry2x32, Threefry,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U32>>()  /* k0 */
                                  .Arg<ffi::Buffer<ffi::U32>>()  /* k1 */
                                  .Arg<ffi::Buffer<ffi::U32>>()  /* x0 */
                                  .Arg<ffi::Buffer<ffi::U32>>()  /* x1 */
                                  .Ret<ffi::Buffer<ffi::U32>>()  /* y0 */
                                  .Ret<ffi::Buffer<ffi::U32>>()); /* y1 */
