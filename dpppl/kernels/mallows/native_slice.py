"""One `mallows-slice` step as one native call (CPU), inside the jitted step.

The JAX step of [`build_slice_gibbs`][dpppl.kernels.mallows.sampler.build_slice_gibbs] is ~4,500
HLO instructions (the stagewise proposal and the adjacent swaps, the slice sampler's stepping out and
shrinkage, the exact prior draw of theta, the code-built sigma and the sweep's loop over the points),
6 of the 8 CPU seconds its sampling chunk took to compile (issue 35). `native_slice.cc` runs the same
step as one C++ function called through `jax.ffi.ffi_call`: the program holds the call, the visiting
order (`permutation_of_first`, as the JAX step draws it) and the step's three threefry keys. The C++
code derives every other key and uniform from those keys as `dpppl.core.numerics_random` does, bit for
bit, and follows the JAX step's arithmetic, so both make the same draws from the same random numbers up
to floating-point rounding (tests/kernels/test_mallows_native.py runs both on the same keys). Under
`vmap` the chains of one call run on threads (`dpppl.core.native.num_threads`).

Covered: the CRP and Pitman-Yor priors (a fixed or random discount), float64 and float32, keys of
JAX's default implementation (threefry, partitionable); elsewhere (stick-breaking priors, another key
implementation, `DPPPL_NATIVE=0`, no C++ compiler) the JAX step runs.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core import native
from dpppl.core import numerics_random as random
from dpppl.core.state import PartitionState
from dpppl.errors import KernelError
from dpppl.families.generalized_mallows import log_factorials
from dpppl.models.native_seating import threefry_words
from dpppl.priors.crp import PitmanYor

SOURCE = Path(__file__).with_name("native_slice.cc")
_TARGETS = {"dpppl_mallows_slice_f64": "DppplMallowsSliceF64", "dpppl_mallows_slice_f32": "DppplMallowsSliceF32"}
THREAD_WORK = 20_000
"""Threads are started for a call's chains when points x slots reaches this."""


def use_native(prior, requested: bool | None) -> bool:
    """Whether the native step runs: `requested` (the kernel's `native` option; None follows
    `DPPPL_NATIVE`), a CRP or Pitman-Yor prior, and the library built."""
    choice = native.wanted(requested)
    if choice is False:
        return False
    if not isinstance(prior, PitmanYor):
        if requested:
            raise KernelError(f"native=True: the native mallows-slice step covers the CRP and Pitman-Yor priors "
                              f"only, not {prior.describe()}")
        return False
    return native.load(SOURCE, _TARGETS, required=bool(choice))


def native_slice_step(family, prior, rng_key, state: PartitionState, x, visiting, *, num_gibbs: int,
                      num_slices: int):
    """The `mallows-slice` step (slots' parameters, then the label sweep) in one FFI call, with the
    keys the JAX step splits from `rng_key` (`k_par, k_lab = split(rng_key)`,
    `k_order, k_u, k_theta = split(k_lab, 3)`) and the visiting order `visiting(k_order, x) -> (order,
    visits)` (the first `visits` of `order` (N,) are visited). Returns (state, sigma_accept); None when
    `rng_key` is not a key the native code draws from (`threefry_words`): the caller runs the JAX step."""
    if threefry_words(rng_key) is None:
        return None
    k_par, k_lab = random.split(rng_key)
    k_order, k_u, k_theta = random.split(k_lab, 3)
    order, visits = visiting(k_order, x)
    keys = jnp.stack([jax.random.key_data(k) for k in (k_par, k_u, k_theta)])
    slots, stats = state.extras.slots, state.stats
    dtype = jnp.result_type(x)
    n_points, capacity = x.shape[0], stats.n.shape[-1]
    suffix = {jnp.dtype(jnp.float64): "f64", jnp.dtype(jnp.float32): "f32"}[jnp.dtype(dtype)]
    native.load(SOURCE, _TARGETS, required=True)
    like = (state.z, stats.n, stats.R, stats.Nj, slots.pos, slots.theta)
    out = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype if a.dtype == jnp.int32 else dtype) for a in like) + (
        jax.ShapeDtypeStruct((), jnp.bool_), jax.ShapeDtypeStruct((), dtype))
    call = jax.ffi.ffi_call(f"dpppl_mallows_slice_{suffix}", out, vmap_method="expand_dims")
    scalars = jnp.stack([jnp.asarray(v, dtype) for v in (state.alpha, prior.discount, family.nu)])
    n = int(family.n_items)
    z, count, R, Nj, pos, theta, overflow, rate = call(
        x, order.astype(jnp.int32), jnp.asarray(visits, jnp.int32), state.z, *(a.astype(dtype) for a in like[1:4]),
        slots.pos.astype(jnp.int32), slots.theta.astype(dtype), scalars,
        jnp.broadcast_to(jnp.asarray(family.r, dtype), (n - 1,)), jnp.asarray(log_factorials(n), dtype), keys,
        num_gibbs=np.int64(num_gibbs), num_slices=np.int64(num_slices),
        num_threads=np.int64(native.num_threads() if n_points * capacity >= THREAD_WORK else 1))
    slots = type(slots)(pos, theta)
    state = state._replace(z=z, stats=type(stats)(count, R, Nj), overflow=state.overflow | overflow,
                           extras=type(state.extras)(slots))
    return state, rate
