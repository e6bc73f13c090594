"""The collapsed-Gibbs point loop as one native call per sweep (CPU), inside the jitted step.

On XLA's CPU runtime the JAX loop of [`seat_points`][dpppl.models.seating.seat_points] costs
4-5 us per point whatever the arithmetic: its body is ~80 small kernels, each dispatched
separately (docs/kernels/gibbs.md). `native_seating.cc` runs the same loop as one C++
function, called through `jax.ffi.ffi_call` (about 0.4 us per call measured in a
`fori_loop`), so the runner's chunks, `vmap` over chains and checkpoints are unchanged; it
takes the visiting order and the uniforms the JAX loop would use (drawn from the step's key)
and makes the same draws up to floating-point rounding. Under `vmap` the chains of one call
run on threads when the work is large enough (`dpppl.core.native.num_threads`).

Covered: [`NormalInverseWishart`][dpppl.families.NormalInverseWishart] and
[`NormalKnownCov`][dpppl.families.NormalKnownCov] components under the CRP and Pitman-Yor
priors, in float64 and float32; every other family (`NormalGamma`, `DirichletMultinomial`,
`BetaBernoulli`, the non-conjugate ones) or prior runs the JAX loop. The equations are in the
C++ source and are those of `dpppl.families.niw`, `dpppl.families.normal_known` and
`dpppl.priors.crp`; tests/statistical run both paths against enumeration and Geweke.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core import native
from dpppl.core.state import PartitionState
from dpppl.errors import KernelError
from dpppl.families.niw import NormalInverseWishart
from dpppl.families.normal_known import NormalKnownCov
from dpppl.priors.crp import PitmanYor

SOURCE = Path(__file__).with_name("native_seating.cc")
_TARGETS = {"dpppl_seat_f64": "DppplSeatF64", "dpppl_seat_f32": "DppplSeatF32"}
FAMILIES = (NormalInverseWishart, NormalKnownCov)
"""The component families the native sweep covers (exactly these classes), in the order of the
C++ code's `family` attribute."""
THREAD_WORK = 20_000
"""Threads are started for a call's chains when points x slots reaches this (below it
starting them costs more than the sweep)."""


def covers(family, prior) -> str | None:
    """None when the native loop covers `family` under `prior`, else why not."""
    if type(family) not in FAMILIES:
        return (f"the native sweep covers {' and '.join(f.name for f in FAMILIES)} components, "
                f"not {family.name}")
    if not isinstance(prior, PitmanYor):
        return f"the native sweep covers the CRP and Pitman-Yor priors only, not {prior.describe()}"
    return None


def use_native(family, prior, requested: bool | None) -> bool:
    """Whether `seat_points` takes the native loop: `requested` (the gibbs kernel's
    `native` option; None follows `DPPPL_NATIVE`), the model covered, and the library built."""
    choice = native.wanted(requested)
    if choice is False:
        return False
    reason = covers(family, prior)
    if reason is not None:
        if requested:  # the kernel option asked for it; DPPPL_NATIVE=1 means "wherever covered"
            raise KernelError(f"native=True: {reason}")
        return False
    return native.load(SOURCE, _TARGETS, required=bool(choice))


def native_seat_points(family, prior, x, shuffle, uniforms, state: PartitionState, remove_first: bool,
                       num_valid=None):
    """[`seat_points`][dpppl.models.seating.seat_points] in one FFI call (its first `num_valid`
    points when they are padded)."""
    stats = state.stats
    dtype = jnp.result_type(x)
    target = {jnp.dtype(jnp.float64): "dpppl_seat_f64", jnp.dtype(jnp.float32): "dpppl_seat_f32"}[dtype]
    n_points, capacity = x.shape[0], stats.n.shape[-1]
    threads = native.num_threads() if n_points * capacity >= THREAD_WORK else 1
    if isinstance(family, NormalInverseWishart):
        hyper = (family.mu0, family.psi0, jnp.zeros(family.dim))
        kappa0, nu0 = family.kappa0, family.nu0
    else:
        hyper = (family.mu0, family.sigma2, family.tau2)
        kappa0, nu0 = 0.0, 0.0
    scalars = jnp.stack([jnp.asarray(v, dtype) for v in (kappa0, nu0, prior.discount)])
    out = (jax.ShapeDtypeStruct(state.z.shape, jnp.int32),) + tuple(
        jax.ShapeDtypeStruct(s.shape, dtype) for s in stats) + (jax.ShapeDtypeStruct((), jnp.bool_),)
    call = jax.ffi.ffi_call(target, out, vmap_method="expand_dims")
    z, n, s1, s2, overflow = call(
        x, shuffle.astype(dtype), uniforms.astype(dtype), state.z, *(s.astype(dtype) for s in stats),
        jnp.asarray(state.alpha, dtype), *(jnp.asarray(h, dtype) for h in hyper), scalars,
        jnp.asarray(n_points if num_valid is None else num_valid, jnp.int32),
        family=np.int64(FAMILIES.index(type(family))), remove_first=np.int64(remove_first),
        num_threads=np.int64(threads))
    return state._replace(z=z, stats=type(stats)(n, s1, s2), overflow=state.overflow | overflow)
