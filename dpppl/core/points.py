"""Which rows of a compiled program's points are real, and per-point uniforms by a point's index.

A program's points may be padded (`BoundModel.padded`, `dpppl.run.runner.point_class`): its
`num_valid` says which rows are real. It is either a scalar, the number of real rows, which are
the first ones, or, in a run over several processes (docs/distributed.md), a vector of one count
per segment: the N rows are S equal segments (one per process, each on that process's devices),
and the first `num_valid[s]` rows of segment s are real. Real point k (k-th in process order) is
then row `s * N / S + k - sum_{r < s} num_valid[r]` of its segment s. With `num_valid` None every
row is real. These helpers are traceable and work on the rows' indices (an iota), so under
`jax.jit` each device computes its own rows' values: nothing indexed by point is gathered.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend.random import threefry2x32_p


def _segments(num_valid, n: int):
    """`num_valid` as (counts per segment (S,), segment length): a scalar is one segment of n rows."""
    counts = jnp.atleast_1d(jnp.asarray(num_valid, jnp.int32))
    return counts, n // counts.shape[0]


def real_rows(num_valid, n: int) -> jax.Array:
    """The mask (n,) of the real rows of n rows with `num_valid` (module docstring)."""
    if num_valid is None:
        return jnp.ones(n, bool)
    counts, length = _segments(num_valid, n)
    rows = jnp.arange(n, dtype=jnp.int32)
    return rows % length < counts[rows // length]


def num_real(num_valid, n: int):
    """The number of real rows of n rows with `num_valid` (an int, or traced)."""
    return n if num_valid is None else jnp.sum(jnp.asarray(num_valid, jnp.int32))


def real_index(num_valid, n: int) -> jax.Array:
    """Each row's index among the real points (n,): the row itself when the real rows are the first
    ones; in segments, the offset of its segment's real points plus its place in the segment (a padded
    row gets the index that follows its segment's real points: a value no real row of it has)."""
    rows = jnp.arange(n, dtype=jnp.int32)
    if num_valid is None or jnp.ndim(num_valid) == 0:
        return rows
    counts, length = _segments(num_valid, n)
    offsets = jnp.cumsum(counts) - counts
    return offsets[rows // length] + rows % length


def row_of_real(num_valid, n: int, k) -> jax.Array:
    """The rows of real points `k` (their indices among the real points, in process order)."""
    k = jnp.asarray(k, jnp.int32)
    if num_valid is None or jnp.ndim(num_valid) == 0:
        return k
    counts, length = _segments(num_valid, n)
    ends = jnp.cumsum(counts)
    segment = jnp.searchsorted(ends, k, side="right").astype(jnp.int32)
    return segment * length + k - (ends - counts)[segment]


def uniforms_at(rng_key, index, per_point: tuple, dtype) -> jax.Array:
    """`jax.random.uniform(rng_key, (M,) + per_point, dtype)[index]` for any M above `index`,
    computed from the indices (partitionable threefry: element f of a draw has the counter f):
    a point's uniforms from its index among the real points whatever row holds it. Needs
    `jax_threefry_partitionable` (JAX's default)."""
    index = jnp.asarray(index)
    width = 1
    for extent in per_point:
        width *= int(extent)
    flat = (index.astype(jnp.uint64)[..., None] * width + jnp.arange(width, dtype=jnp.uint64)).reshape(
        index.shape + tuple(per_point))
    hi, lo = (flat >> 32).astype(jnp.uint32), (flat & 0xFFFFFFFF).astype(jnp.uint32)
    k1, k2 = jax.random.key_data(rng_key)
    bits1, bits2 = threefry2x32_p.bind(k1, k2, hi, lo)
    finfo = jnp.finfo(dtype)
    if finfo.bits == 64:
        bits = (bits1.astype(jnp.uint64) << 32) | bits2.astype(jnp.uint64)
        uint = jnp.uint64
    else:
        bits, uint = bits1 ^ bits2, jnp.uint32
    one = jnp.asarray(jnp.ones((), dtype)).view(uint)
    floats = jax.lax.bitcast_convert_type((bits >> (finfo.bits - finfo.nmant)) | one, dtype) - jnp.asarray(1, dtype)
    return jnp.maximum(jnp.zeros((), dtype), floats)


__all__ = ["num_real", "real_index", "real_rows", "row_of_real", "uniforms_at"]
