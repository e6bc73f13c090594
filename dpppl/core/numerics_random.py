"""JAX's random draws (`split`, `fold_in`, `bits`, `uniform`, `normal`), bit for bit, with the
Threefry hash as one native call on CPU.

Every `jax.random` call compiles to a Threefry-2x32 hash, which XLA's CPU backend writes out as a
loop of 20 rounds of 32-bit arithmetic at each call site: 150-450 HLO instructions each, a
thousand of the ~3,000 instructions of a default sampling chunk (issue 35), compiled anew in every
process whose compilation cache is empty. The functions here compute what `jax.random`'s do for
a key of JAX's default implementation (threefry, `jax_threefry_partitionable`, JAX's default: the
element at flat index i hashes the counter (0, i)), from the same hash of the same counters and
the same arithmetic on its bits, so they return the same values bit for bit; on the CPU backend,
when the native library builds (`dpppl.core.native`, `DPPPL_NATIVE`), the hash itself is one FFI
call of `numerics_threefry.cc` (one instruction in the program), elsewhere JAX's `threefry2x32`.

Any other key (another implementation, a raw uint32 key, an array of keys), or the
non-partitionable Threefry, is handed to `jax.random` itself. `host_split` computes
`jax.random.split`'s keys of a seed in NumPy, with no program (the runner's chains' keys).
"""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p

from dpppl.core import native

SOURCE = Path(__file__).with_name("numerics_threefry.cc")
_TARGET = "dpppl_threefry2x32"


def _native() -> bool:
    """Whether the hash runs as the native call: the CPU backend, `DPPPL_NATIVE` not off, the library built."""
    if jax.default_backend() != "cpu":
        return False
    choice = native.wanted(None)
    return choice is not False and native.load(SOURCE, {_TARGET: "DppplThreefry2x32"}, required=bool(choice))


def hash2x32(k0, k1, x0, x1) -> tuple[jax.Array, jax.Array]:
    """The Threefry-2x32 hash of the counters (x0, x1) under the keys (k0, k1) (uint32, broadcast
    together): `jax.extend.random.threefry2x32_p`'s values, as one native call on CPU."""
    operands = [jnp.asarray(a, jnp.uint32) for a in (k0, k1, x0, x1)]
    shape = jnp.broadcast_shapes(*(a.shape for a in operands))
    operands = [jnp.broadcast_to(a, shape) for a in operands]
    if math.prod(shape) == 0 or not _native():
        return tuple(threefry2x32_p.bind(*operands))
    out = jax.ShapeDtypeStruct(shape, jnp.uint32)
    return tuple(jax.ffi.ffi_call(_TARGET, (out, out), vmap_method="broadcast_all")(*operands))


def _words(key):
    """The two uint32 words of `key` when it is one key of JAX's partitionable Threefry, else None."""
    if (not hasattr(key, "dtype") or not jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape != ()
            or str(jax.random.key_impl(key)) != "threefry2x32" or not jax.config.jax_threefry_partitionable):
        return None
    words = jax.random.key_data(key)
    return words[0], words[1]


def _counters(shape) -> tuple[jax.Array, jax.Array]:
    """The high and low words of each element's flat index (`shape`, row-major), below 2^32."""
    lo = jax.lax.iota(jnp.uint32, math.prod(shape)).reshape(shape)
    return jnp.zeros(shape, jnp.uint32), lo


def _keys(b0, b1):
    return jax.random.wrap_key_data(jnp.stack([b0, b1], axis=-1), impl="threefry2x32")


def split(key, num: int | tuple[int, ...] = 2):
    """`jax.random.split(key, num)`: `num` keys, or an array of keys of the shape `num` (key i in
    row-major order hashes the counter (0, i), as `jax.random.split` numbers them)."""
    words = _words(key)
    shape = (num,) if isinstance(num, int) else tuple(num) if all(isinstance(n, int) for n in num) else None
    if words is None or shape is None:
        return jax.random.split(key, num)
    return _keys(*hash2x32(*words, *_counters(shape)))


def fold_in(key, data):
    """`jax.random.fold_in(key, data)` for a scalar `data` (uint32), or, for a 1-D `data`, the keys
    `fold_in(key, d)` of its numbers d, as one hash: the counter (0, d) hashed under the key."""
    words = _words(key)
    data = jnp.asarray(data, jnp.uint32) if words is not None else jnp.asarray(data)
    if words is None:
        return jax.random.fold_in(key, data) if data.ndim == 0 else jax.vmap(lambda d: jax.random.fold_in(key, d))(data)
    return _keys(*hash2x32(*words, jnp.zeros_like(data), data))


def bits(key, shape=()):
    """`jax.random.bits(key, shape, jnp.uint32)`."""
    shape = tuple(shape)
    words = _words(key)
    if words is None or math.prod(shape) >= 2**32:
        return jax.random.bits(key, shape, jnp.uint32)
    b0, b1 = hash2x32(*words, *_counters(shape))
    return b0 ^ b1


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """`jax.random.uniform(key, shape, dtype, minval, maxval)`: the top mantissa bits of the hash
    under the exponent of 1, minus 1, scaled to [minval, maxval) (float32 or float64)."""
    shape = tuple(shape)
    dtype = jnp.dtype(dtype or jnp.result_type(float))
    words = _words(key)
    if words is None or dtype not in (jnp.float32, jnp.float64) or math.prod(shape) >= 2**32:
        return jax.random.uniform(key, shape, dtype, minval, maxval)
    b0, b1 = hash2x32(*words, *_counters(shape))
    finfo = jnp.finfo(dtype)
    if finfo.bits == 64:
        raw = jax.lax.shift_left(b0.astype(jnp.uint64), jnp.uint64(32)) | b1.astype(jnp.uint64)
    else:
        raw = b0 ^ b1
    uint = raw.dtype
    mantissa = jax.lax.shift_right_logical(raw, jnp.asarray(finfo.bits - finfo.nmant, uint))
    one = jnp.asarray(np.array(1.0, dtype).view(uint), uint)
    floats = jax.lax.bitcast_convert_type(jax.lax.bitwise_or(mantissa, one), dtype) - jnp.asarray(1.0, dtype)
    minval = jax.lax.broadcast_to_rank(jax.lax.convert_element_type(minval, dtype), len(shape))
    maxval = jax.lax.broadcast_to_rank(jax.lax.convert_element_type(maxval, dtype), len(shape))
    return jax.lax.max(minval, jax.lax.reshape(floats * (maxval - minval) + minval, shape))


def normal(key, shape=(), dtype=None):
    """`jax.random.normal(key, shape, dtype)` (real dtypes): sqrt(2) erfinv(u), u uniform on [-1, 1)."""
    dtype = jnp.dtype(dtype or jnp.result_type(float))
    if _words(key) is None or dtype not in (jnp.float32, jnp.float64):
        return jax.random.normal(key, shape, dtype)
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return jax.lax.mul(np.array(np.sqrt(2), dtype), jax.lax.erf_inv(u))


THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
"""The rotations of the Threefry-2x32 hash's rounds (Salmon et al. 2011), alternating by groups of four."""


def host_hash2x32(k1: np.ndarray, k2: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Threefry-2x32 hash (20 rounds) of the counters (x1, x2) under the key (k1, k2), all uint32
    arrays (broadcast): the function of JAX's `threefry2x32_p` (and of `hash2x32`), in NumPy on the host."""
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x1, x2 = x1 + ks[0], x2 + ks[1]
    for group in range(5):
        for r in THREEFRY_ROTATIONS[group % 2]:
            x1 = x1 + x2
            x2 = x1 ^ ((x2 << np.uint32(r)) | (x2 >> np.uint32(32 - r)))
        x1 = x1 + ks[(group + 1) % 3]
        x2 = x2 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x1, x2


def host_split(seed: int, shape: tuple) -> np.ndarray:
    """The key data (`shape` + (2,), uint32) of `jax.random.split(jax.random.key(seed), shape)` with
    threefry keys and `jax_threefry_partitionable` (JAX's default): the key (seed >> 32, seed mod 2^32)
    hashes each key's flat index as a 64-bit counter (high word, low word)."""
    with np.errstate(over="ignore"):
        k1, k2 = np.uint32((seed >> 32) & 0xFFFFFFFF), np.uint32(seed & 0xFFFFFFFF)
        index = np.arange(int(np.prod(shape)), dtype=np.uint64)
        bits = host_hash2x32(k1, k2, (index >> np.uint64(32)).astype(np.uint32), index.astype(np.uint32))
    return np.stack(bits, axis=-1).reshape(tuple(shape) + (2,))
