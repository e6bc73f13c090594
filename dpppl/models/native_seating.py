"""The collapsed-Gibbs point loop as one native call per sweep (CPU), inside the jitted step, and
split-merge's allocation pass as one native call per pass.

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

The split-merge move ([`dpppl.kernels.splitmerge`][dpppl.kernels.splitmerge], SAMS and
restricted Gibbs) places the points of its two clusters one at a time in the same way: its
[`allocation_pass`][dpppl.kernels.splitmerge.allocation_pass] runs as one call of the same
library ([`native_allocation_pass`][dpppl.models.native_seating.native_allocation_pass]) for the
same families and priors, with the order, the uniforms and the sides taken from JAX; with SAMS
(the default method) the whole step, every proposal's pair, allocation, marginal likelihoods and
Metropolis-Hastings test, is one call ([`native_splitmerge_step`][dpppl.models.native_seating.native_splitmerge_step]),
since the JAX remainder of a proposal (its O(N) member set and order, four marginals, the ratio
and the update of the state), not the allocation, had become most of the move's time.

The label moves of stick-breaking priors ([`labelswap`, `labelpermute`][dpppl.kernels.stick_breaking.labelswap])
accept or reject their proposals one after another; a chunk of proposals, drawn in JAX, is
accepted in one call ([`native_relabel`][dpppl.models.native_seating.native_relabel]) for every
stick-breaking prior and family (the ratio involves the labels' counts only). The `sbgibbs` sweep
([`native_sb_sweep`][dpppl.models.native_seating.native_sb_sweep]) runs natively for the families
above under every stick-breaking prior, with the same order and uniforms as its JAX loop.

The DDP's assignment sweep ([`seat`][dpppl.models.ddp_state.seat], eq. 10 of Porteous et al. 2006 with
Neal's algorithm-8 auxiliaries) runs as one call too ([`native_ddp_seat`][dpppl.models.native_seating.native_ddp_seat]),
for every stick-breaking prior and both covariance models, with the order, the uniforms and the
auxiliaries' draws taken from JAX; so do its parameter update
([`native_ddp_parameters`][dpppl.models.native_seating.native_ddp_parameters], from the Bartlett variates and
normals drawn in JAX), the proposals of one `ddpswap` step
([`native_ddp_swap`][dpppl.models.native_seating.native_ddp_swap]) and the labels' terms of the recorded
log joint ([`native_ddp_label_log_joints`][dpppl.models.native_seating.native_ddp_label_log_joints]).
The permutation move ([`perm-move`][dpppl.kernels.perm.sampler], `dp="mh"` without the Markov scan) draws
C | pi by a dynamic program over the segments of pi, each segment's marginal likelihood from prefix
sums of the statistics along pi: the program (the full one or the beam), the backward draw of the
segments and the beam's check of the current clustering are one call
([`native_perm_segments`][dpppl.models.native_seating.native_perm_segments]) for the families and priors
above, with the permutation and the uniforms taken from JAX.
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
DDP_SOURCE = Path(__file__).with_name("native_ddp.cc")
PERM_SOURCE = Path(__file__).with_name("native_perm.cc")
_TARGETS = {
    SOURCE: {"dpppl_seat_f64": "DppplSeatF64", "dpppl_seat_f32": "DppplSeatF32",
             "dpppl_allocate_f64": "DppplAllocateF64", "dpppl_allocate_f32": "DppplAllocateF32",
             "dpppl_splitmerge_f64": "DppplSplitMergeF64", "dpppl_splitmerge_f32": "DppplSplitMergeF32",
             "dpppl_relabel_f64": "DppplRelabelF64", "dpppl_relabel_f32": "DppplRelabelF32",
             "dpppl_sb_seat_f64": "DppplSbSeatF64", "dpppl_sb_seat_f32": "DppplSbSeatF32"},
    DDP_SOURCE: {"dpppl_ddp_seat_f64": "DppplDdpSeatF64", "dpppl_ddp_seat_f32": "DppplDdpSeatF32",
                 "dpppl_ddp_swap_f64": "DppplDdpSwapF64", "dpppl_ddp_swap_f32": "DppplDdpSwapF32",
                 "dpppl_ddp_parameters_f64": "DppplDdpParametersF64",
                 "dpppl_ddp_parameters_f32": "DppplDdpParametersF32",
                 "dpppl_ddp_lp_f64": "DppplDdpLpF64", "dpppl_ddp_lp_f32": "DppplDdpLpF32"},
    PERM_SOURCE: {"dpppl_perm_f64": "DppplPermF64", "dpppl_perm_f32": "DppplPermF32"},
}
"""Each native source (its own library, built on its first use only, sharing `native_seating.h`) and
the FFI targets it registers: a kernel's first call compiles only what it calls."""
_SOURCE_OF = {target[:-4]: source for source, targets in _TARGETS.items() for target in targets}
FAMILIES = (NormalInverseWishart, NormalKnownCov)
"""The component families the native code covers (exactly these classes), in the order of the
C++ code's `family` attribute."""
THREAD_WORK = 20_000
"""Threads are started for a call's chains when points x slots reaches this (below it
starting them costs more than the sweep)."""


def covers(family, prior, what: str = "sweep") -> str | None:
    """None when the native code covers `family` under `prior`, else why not (`what`: the
    native `"sweep"` or `"split-merge"`, as the sentence names it)."""
    if type(family) not in FAMILIES:
        return (f"the native {what} covers {' and '.join(f.name for f in FAMILIES)} components, "
                f"not {family.name}")
    if not isinstance(prior, PitmanYor):
        return f"the native {what} covers the CRP and Pitman-Yor priors only, not {prior.describe()}"
    return None


def use_native(family, prior, requested: bool | None, what: str = "sweep", source: Path = SOURCE) -> bool:
    """Whether the native code runs: `requested` (the gibbs or splitmerge kernel's `native`
    option; None follows `DPPPL_NATIVE`), the model covered, and the library of `source` built
    (`PERM_SOURCE` for the permutation move)."""
    choice = native.wanted(requested)
    if choice is False:
        return False
    reason = covers(family, prior, what)
    if reason is not None:
        if requested:  # the kernel option asked for it; DPPPL_NATIVE=1 means "wherever covered"
            raise KernelError(f"native=True: {reason}")
        return False
    return native.load(source, _TARGETS[source], required=bool(choice))


def use_native_sticks(family=None, requested: bool | None = None, source: Path = SOURCE) -> bool:
    """Whether a stick-breaking kernel runs natively: `requested` (the `ddp` kernel's `native`
    option; None, and for the kernels with no such option, follows `DPPPL_NATIVE`), `family` covered
    (the `sbgibbs` sweep; the label moves, which read counts only, and the DDP sweep, which covers
    its one family, pass None) and the library of `source` built (`DDP_SOURCE` for the DDP's kernels)."""
    choice = native.wanted(requested)
    if choice is False or (family is not None and type(family) not in FAMILIES):
        return False
    return native.load(source, _TARGETS[source], required=bool(choice))


def _family_operands(family, prior, dtype):
    """The hyperparameter operands h1, h2, h3 and scalars (kappa0, nu0, discount) of the C++
    code's `Hyper`, and the `family` attribute (`prior` None: discount 0, unused)."""
    if isinstance(family, NormalInverseWishart):
        hyper = (family.mu0, family.psi0, jnp.zeros(family.dim))
        kappa0, nu0 = family.kappa0, family.nu0
    else:
        hyper = (family.mu0, family.sigma2, family.tau2)
        kappa0, nu0 = 0.0, 0.0
    scalars = jnp.stack([jnp.asarray(v, dtype) for v in (kappa0, nu0, 0.0 if prior is None else prior.discount)])
    return tuple(jnp.asarray(h, dtype) for h in hyper) + (scalars,), np.int64(FAMILIES.index(type(family)))


def _call(name, dtype, out, n_points, slots):
    """The FFI call of target `name` in `dtype`, with the threads for `n_points` x `slots` of work
    (the library of its source built and loaded first: a caller that asks for the native code requires it)."""
    source = _SOURCE_OF[name]
    native.load(source, _TARGETS[source], required=True)
    suffix = {jnp.dtype(jnp.float64): "f64", jnp.dtype(jnp.float32): "f32"}[jnp.dtype(dtype)]
    threads = native.num_threads() if n_points * slots >= THREAD_WORK else 1
    return jax.ffi.ffi_call(f"{name}_{suffix}", out, vmap_method="expand_dims"), np.int64(threads)


def native_seat_points(family, prior, x, shuffle, uniforms, state: PartitionState, remove_first: bool,
                       num_valid=None):
    """[`seat_points`][dpppl.models.seating.seat_points] in one FFI call (its first `num_valid`
    points when they are padded)."""
    stats = state.stats
    dtype = jnp.result_type(x)
    n_points = x.shape[0]
    out = (jax.ShapeDtypeStruct(state.z.shape, jnp.int32),) + tuple(
        jax.ShapeDtypeStruct(s.shape, dtype) for s in stats) + (jax.ShapeDtypeStruct((), jnp.bool_),)
    call, threads = _call("dpppl_seat", dtype, out, n_points, stats.n.shape[-1])
    hyper, family_index = _family_operands(family, prior, dtype)
    z, n, s1, s2, overflow = call(
        x, shuffle.astype(dtype), uniforms.astype(dtype), state.z, *(s.astype(dtype) for s in stats),
        jnp.asarray(state.alpha, dtype), *hyper, jnp.asarray(n_points if num_valid is None else num_valid, jnp.int32),
        family=family_index, remove_first=np.int64(remove_first), num_threads=threads)
    return state._replace(z=z, stats=type(stats)(n, s1, s2), overflow=state.overflow | overflow)


def native_allocation_pass(family, prior, x, stats2, side, order, count, uniforms, force, target, *,
                           reseat: bool):
    """[`allocation_pass`][dpppl.kernels.splitmerge.allocation_pass] in one FFI call: the same
    arguments (`alpha` aside: both sides are occupied, so only the discount enters) and the same
    `(stats2, side, log_q)`."""
    dtype = jnp.result_type(x)
    out = tuple(jax.ShapeDtypeStruct(s.shape, dtype) for s in stats2) + (
        jax.ShapeDtypeStruct(side.shape, jnp.int32), jax.ShapeDtypeStruct((), dtype))
    call, threads = _call("dpppl_allocate", dtype, out, x.shape[0], 2)
    hyper, family_index = _family_operands(family, prior, dtype)
    n, s1, s2, side, log_q = call(
        x, order.astype(jnp.int32), jnp.asarray(count, jnp.int32), uniforms.astype(dtype), side.astype(jnp.int32),
        target.astype(jnp.int32), jnp.asarray(force, jnp.bool_), *(s.astype(dtype) for s in stats2), *hyper,
        family=family_index, reseat=np.int64(reseat), num_threads=threads)
    return type(stats2)(n, s1, s2), side, log_q


def threefry_words(key):
    """The two uint32 words of `key` when the native code can draw what `jax.random.uniform(key, ...)`
    draws: a threefry key (typed, or raw uint32 (2,)) with JAX's partitionable threefry (its default);
    None for any other key or setting."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if str(jax.random.key_impl(key)) != "threefry2x32":
            return None
        key = jax.random.key_data(key)
    if key.dtype != jnp.uint32 or key.shape[-1:] != (2,) or not jax.config.jax_threefry_partitionable:
        return None
    return key


def native_splitmerge_step(family, prior, x, state: PartitionState, pairs, u_accept, keys, allocation_keys):
    """The proposals of one SAMS split-merge step (the `step` of
    [`build_splitmerge_kernel`][dpppl.kernels.splitmerge.build_splitmerge_kernel] with
    `method="sams"`) in one FFI call, each on the state the one before left: proposal t pairs the
    points `pairs[t]` (P, 2), visits S in the order of `argsort(keys)` (`keys` (N,), ties by index,
    as `jnp.argsort`) with the allocation uniforms of `jax.random.uniform(k_t, (N, 1))` for the
    threefry key words `allocation_keys[t]` (P, 2; `threefry_words`), computed natively as the pass
    uses them (a merge's pass, whose sides are forced, draws none), and is accepted when
    `log(u_accept[t])` is below its log Metropolis-Hastings ratio
    ([`propose`][dpppl.kernels.splitmerge.propose]'s, the same up to rounding). A merge whose
    ratio falls below both `log(u_accept[t])` and log 1e-12 while its reverse split is scored is
    rejected there (the pass can only lower it): its acceptance probability is counted as the bound
    reached (below 1e-12) instead of its exact value. Returns the new state (its `overflow` set when
    a split found no empty slot), the sum of the acceptance probabilities and the counts (4,) of
    splits proposed, accepted, merges proposed, accepted."""
    stats = state.stats
    dtype = jnp.result_type(x)
    out = (jax.ShapeDtypeStruct(state.z.shape, jnp.int32),) + tuple(
        jax.ShapeDtypeStruct(s.shape, dtype) for s in stats) + (
        jax.ShapeDtypeStruct((), jnp.bool_), jax.ShapeDtypeStruct((), dtype), jax.ShapeDtypeStruct((4,), jnp.int32))
    call, threads = _call("dpppl_splitmerge", dtype, out, x.shape[0], stats.n.shape[-1])
    hyper, family_index = _family_operands(family, prior, dtype)
    z, n, s1, s2, overflow, total_p, counts = call(
        x, state.z, *(s.astype(dtype) for s in stats), jnp.asarray(state.alpha, dtype), pairs.astype(jnp.int32),
        u_accept.astype(dtype), keys.astype(dtype), allocation_keys.astype(jnp.uint32), *hyper,
        family=family_index, num_threads=threads)
    return state._replace(z=z, stats=type(stats)(n, s1, s2), overflow=state.overflow | overflow), total_p, counts


def _sticks(prior, C, dtype):
    """The operands a, b (C,) and `last` (the last stick's slot, or -1) of a stick-breaking prior."""
    a, b = prior.sticks(C)
    last = prior.num_sticks - 1 if prior.num_sticks is not None and prior.num_sticks <= C else -1
    return jnp.asarray(a, dtype), jnp.asarray(b, dtype), jnp.asarray(last, jnp.int32)


def native_sb_sweep(family, prior, x, shuffle, uniforms, state: PartitionState, num_valid=None,
                    sequential: bool = False):
    """`sbgibbs`'s sweep ([`_sweep`][dpppl.kernels.stick_breaking.sbgibbs]) in one FFI call: every point
    (the first `num_valid` when padded) leaves its label and takes one by eq. (9), in the order
    `visiting_order(shuffle)`, point t with `uniforms[t]`. `sequential`: instead the sequential seating
    of [`seat_points`][dpppl.models.seating.seat_points] (`remove_first=False`) under the stick-breaking
    prior's `log_seat_weights` (an occupied label by E[pi_k | Z], a new cluster at the first empty label
    with the weight of every empty one), the same draws up to rounding."""
    stats = state.stats
    dtype = jnp.result_type(x)
    n_points, C = x.shape[0], stats.n.shape[-1]
    out = (jax.ShapeDtypeStruct(state.z.shape, jnp.int32),) + tuple(
        jax.ShapeDtypeStruct(s.shape, dtype) for s in stats) + (jax.ShapeDtypeStruct((), jnp.bool_),)
    call, threads = _call("dpppl_sb_seat", dtype, out, n_points, C)
    hyper, family_index = _family_operands(family, None, dtype)
    z, n, s1, s2, overflow = call(
        x, shuffle.astype(dtype), uniforms.astype(dtype), state.z, *(s.astype(dtype) for s in stats),
        *_sticks(prior, C, dtype), *hyper, jnp.asarray(n_points if num_valid is None else num_valid, jnp.int32),
        family=family_index, sequential=np.int64(sequential), num_threads=threads)
    return state._replace(z=z, stats=type(stats)(n, s1, s2), overflow=state.overflow | overflow)


def native_relabel(prior, counts, slot_of, labels, keys, uniforms, count, *, permute: bool):
    """The first `count` relabelling proposals of a chunk accepted or rejected in order in one FFI
    call: `labels` (P, 2), `keys` (P, W), proposal t the move
    [`proposed_move`][dpppl.kernels.stick_breaking.labelswap.proposed_move]`(labels[t], keys[t], C, permute)`
    reaching label `max(labels[t])` (C: past the slots); `uniforms` (P,), accepted when below
    min(1, P(Z') / P(Z)) (`prior.log_prob_labels`), rejected when the reach is past the horizon of Z or
    of Z' ([`horizon`][dpppl.kernels.stick_breaking.labelswap.horizon]). Returns `(slot_of, counts,
    acc_sum, accepted, overflow)`: the map from each original slot to its slot now, the counts, the
    sum of the acceptance probabilities, the number accepted (int32), and whether a proposal past
    the slots was within the horizon (the chunk must be re-run with more slots)."""
    dtype = counts.dtype
    C = counts.shape[-1]
    out = (jax.ShapeDtypeStruct(counts.shape, dtype), jax.ShapeDtypeStruct(slot_of.shape, jnp.int32),
           jax.ShapeDtypeStruct((), dtype), jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((), jnp.bool_))
    call, _ = _call("dpppl_relabel", dtype, out, 0, C)
    counts, slot_of, acc_sum, accepted, overflow = call(
        counts, slot_of.astype(jnp.int32), labels.astype(jnp.int32), keys.astype(dtype), uniforms.astype(dtype),
        jnp.asarray(count, jnp.int32), *_sticks(prior, C, dtype), permute=np.int64(permute))
    return slot_of, counts, acc_sum, accepted, overflow


def native_ddp_seat(family, sticks, x, slices, order, uniforms, state: PartitionState, aux_mu, rest, covs, *,
                    remove_first: bool, num_valid=None) -> PartitionState:
    """[`seat`][dpppl.models.ddp_state.seat]'s loop over the points in one FFI call, with the same
    visiting `order`, `uniforms` (2, N), auxiliary means `aux_mu` (N, m, D), normals `rest` (N, T, D) and
    covariance draws `covs` ((N, M, D, D) covariances and precisions, (N, M) log determinants: the m
    auxiliaries', then with per-slice covariances the T other slices'); the labels, counts and the
    parameters of the labels it opens are the JAX loop's up to rounding."""
    stats = state.stats
    dtype = jnp.result_type(x)
    C = stats.n.shape[-1]
    out = (jax.ShapeDtypeStruct(state.z.shape, jnp.int32),) + tuple(
        jax.ShapeDtypeStruct(a.shape, dtype) for a in (stats.nt, stats.n, stats.mu, stats.sigma)) + (
        jax.ShapeDtypeStruct((), jnp.bool_),)
    call, threads = _call("dpppl_ddp_seat", dtype, out, x.shape[0], C)
    gain, cond = family.slice_conditionals
    a, b, last = _sticks(sticks, C, dtype)
    z, nt, n, mu, sigma, overflow = call(
        x, slices.astype(jnp.int32), order.astype(jnp.int32), uniforms.astype(dtype), state.z,
        *(v.astype(dtype) for v in (stats.nt, stats.n, stats.mu, stats.sigma, aux_mu, rest, *covs)),
        jnp.asarray(gain, dtype), jnp.asarray(cond, dtype), jnp.asarray(family.mu0, dtype), a, b, last,
        jnp.asarray(x.shape[0] if num_valid is None else num_valid, jnp.int32),
        remove_first=np.int64(remove_first), num_threads=threads)
    stats = stats._replace(n=n, nt=nt, mu=mu, sigma=sigma)
    return state._replace(z=z, stats=stats, overflow=state.overflow | overflow)


def native_ddp_swap(family, sticks, stats, aug_mu, aug_sigma, uniforms, prior_logits, kinds, *, prior_pairs: bool):
    """The proposals of one `ddpswap` step ([`build_ddpswap_kernel`][dpppl.kernels.ddp.swap.build_ddpswap_kernel])
    in one FFI call, each on the state the one before left, from the same prior draws `aug_mu`
    (P, 2, T, D), `aug_sigma` (P, 2, S, D, D) and uniforms (P, 6), the prior's log weights
    `prior_logits` (C + 1) and the allowed interval `kinds`: the same decisions as the JAX loop up to
    rounding. Returns `(stats, perm, total_p, accepted, overflow)`: the statistics after the step, each
    slice's map of old labels to new (T, C), the sum of the acceptance probabilities, the accepted
    proposals by interval kind (3,) and whether a pair fell past the slots."""
    dtype = stats.mu.dtype
    C, T = stats.nt.shape
    out = tuple(jax.ShapeDtypeStruct(v.shape, dtype) for v in (stats.nt, stats.s1, stats.s2, stats.mu, stats.sigma,
                                                                 stats.n)) + (
        jax.ShapeDtypeStruct((T, C), jnp.int32), jax.ShapeDtypeStruct((), dtype), jax.ShapeDtypeStruct((3,), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.bool_))
    call, _ = _call("dpppl_ddp_swap", dtype, out, 0, C)
    nt, s1, s2, mu, sigma, n, perm, total_p, accepted, overflow = call(
        *(v.astype(dtype) for v in (stats.nt, stats.s1, stats.s2, stats.mu, stats.sigma, aug_mu, aug_sigma, uniforms,
                                    prior_logits)),
        jnp.asarray(kinds, jnp.int32), jnp.asarray(family.gamma_inv, dtype), jnp.asarray(family.mu0, dtype),
        jnp.asarray(family.psi0, dtype), jnp.asarray(family.nu0, dtype), *_sticks(sticks, C, dtype),
        prior_pairs=np.int64(prior_pairs))
    return type(stats)(n, nt, s1, s2, mu, sigma), perm, total_p, accepted, overflow


def native_ddp_parameters(family, stats, below, chi2, eps):
    """[`update_parameters`][dpppl.models.ddp_state.update_parameters]'s draws of every used label's
    covariances and means (eq. 11) in one FFI call, from the random numbers the JAX path draws: the
    Bartlett variates `below`, `chi2` of the covariances' inverse-Wishart draws
    (`dpppl.families.gaussian.bartlett_variates`) and the means' standard normals `eps` (C, T D, 1).
    Returns the means and covariances (unused labels' as they were), the JAX path's up to rounding."""
    dtype = stats.mu.dtype
    out = (jax.ShapeDtypeStruct(stats.mu.shape, dtype), jax.ShapeDtypeStruct(stats.sigma.shape, dtype))
    call, _ = _call("dpppl_ddp_parameters", dtype, out, 0, stats.n.shape[-1])
    return call(*(v.astype(dtype) for v in (stats.nt, stats.s1, stats.s2, stats.mu, stats.sigma, below, chi2, eps)),
                jnp.asarray(family.psi0, dtype), jnp.asarray(family.gamma_inv, dtype), jnp.asarray(family.mu0, dtype))


def native_ddp_label_log_joints(family, stats):
    """The labels' terms of [`log_joint_state`][dpppl.families.coupled.CoupledGaussian.log_joint_state]
    in one FFI call: for each label with points, log N(vec mu; m, Gamma (x) I) + sum_s log IW(Sigma_s;
    psi0, nu0) + sum over its points of log N(x; mu_t, Sigma_s(t)) from its statistics (C,), 0 for the
    others; the JAX expression's values up to rounding."""
    dtype = stats.mu.dtype
    call, _ = _call("dpppl_ddp_lp", dtype, jax.ShapeDtypeStruct(stats.n.shape, dtype), 0, stats.n.shape[-1])
    constants = jnp.stack([jnp.asarray(v, dtype) for v in family.log_normalisers()])
    return call(*(v.astype(dtype) for v in (stats.nt, stats.s1, stats.s2, stats.mu, stats.sigma)),
                jnp.asarray(family.gamma_inv, dtype), jnp.asarray(family.mu0, dtype), jnp.asarray(family.psi0, dtype),
                jnp.asarray(family.nu0, dtype), constants)
def native_perm_segments(family, prior, x, pi, z, uniforms, lam, points, beam, augmented: bool):
    """The segments of C ~ q(C | pi) of the permutation move's `dp="mh"` in one FFI call
    ([`_draw_factored`][dpppl.kernels.perm.sampler]'s draw without the Markov scan): the dynamic program
    of eq. (6) over the first `points` positions of `pi` (the real points) with every segment's
    log B' (`segment_log_weights`, `augmented`: the uniform within-cluster order's 1/m!) plus the slope
    `lam`, the full program (`beam` None) or the beam (`beam` = (epsilon, width): `forward_beam`'s kept
    lengths, slot for slot), and the segments drawn backwards, segment i from the end with
    `uniforms[i]`, as `sample_factored` / `sample_beam` draw them (up to rounding). Returns the segment
    starts (N + 1,) bool and whether the clustering `z` has every segment along `pi` within the beam
    (`in_beam`; True without a beam or when not `augmented`)."""
    dtype = jnp.result_type(x)
    n_points = x.shape[0]
    out = (jax.ShapeDtypeStruct((n_points + 1,), jnp.bool_), jax.ShapeDtypeStruct((), jnp.bool_))
    call, threads = _call("dpppl_perm", dtype, out, n_points, n_points if beam is None else beam[1])
    hyper, family_index = _family_operands(family, prior, dtype)
    epsilon, width = (0.0, 0) if beam is None else beam
    return call(x, pi.astype(jnp.int32), z.astype(jnp.int32), uniforms.astype(dtype), jnp.asarray(lam, dtype),
                jnp.asarray(epsilon, dtype), jnp.asarray(points, jnp.int32), *hyper, family=family_index,
                width=np.int64(width), augmented=np.int64(augmented), num_threads=threads)
