"""Label swaps over time intervals for the dependent DP mixture (Porteous et al. 2006, sec. 5).

Labels matter in the stick-breaking representation, and a DDP cluster that carries different
labels in different slices is a deep local mode that the Gibbs sweep (`dpppl.kernels.ddp`)
cannot undo one point at a time. A *label-swap over an interval* exchanges labels i and j in
every slice t of [t1, t2] (`"single"`: t1 = t2; `"random"`: a sorted pair of uniform slices;
`"full"`: all slices), the means mu_{i,t}, mu_{j,t} of those slices (and per-slice covariances;
one covariance per label is exchanged on the full interval only) travelling with their points.
Each proposal is a deterministic involution given (i, j, [t1, t2]), so the Metropolis-Hastings
ratio is the ratio of joints,

    [prod_{t in I} P(Z'_t) / P(Z_t)] [P(mu'_i) P(mu'_j) / (P(mu_i) P(mu_j))] [p(x | z', theta') / p(x | z, theta)],

the paper's P(Z_new)/P(Z_old) and P(mu_new)/P(mu_old) terms plus the covariance change of
partial swaps; an unused label gets a fresh prior draw. Pairs are drawn by prior stick weight
(`pairs="prior"`, the paper) or uniformly among the used labels and one above
(`"uniform"`, with its Hastings factor). The pair rules, the exactness argument and the cost
are in `docs/kernels/ddpswap.md`.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.errors import KernelError
from dpppl.kernels.base import Kernel, register
from dpppl.kernels.ddp.gibbs import applies_to_ddp
from dpppl.models.native_seating import DDP_SOURCE, native_ddp_swap, use_native_sticks
from dpppl.core.state import PartitionState
from dpppl.core.numerics import sample_index

INTERVALS = ("single", "random", "full", "all")
PAIRS = ("uniform", "prior")
DEFAULT_NUM_SWAPS = 100


class SwapInfo(NamedTuple):
    """The statistics of one `ddpswap` step: `accept_prob`, the mean acceptance probability of
    its proposals, and the counts (int32) of accepted proposals, in all (`accepted`) and by
    interval kind (one slice, a random interval, every slice)."""

    accept_prob: jax.Array
    accepted: jax.Array
    accepted_single: jax.Array
    accepted_random: jax.Array
    accepted_full: jax.Array


def _rows(stats, k):
    return stats.nt[k], stats.s1[k], stats.s2[k], stats.mu[k], stats.sigma[k]


def _label_log_joint(family, nt, s1, s2, mu, sigma):
    """log [P(mu) prod_s P(Sigma_s) prod_t p(x_{label,t} | mu_t, Sigma_{s(t)})] of labels
    (any use) stacked on leading axes (`nt` (..., T), `sigma` (..., S, D, D))."""
    root = family.inverse_root(sigma)
    prec, logdet = family.precision(sigma, root)
    lik = family.log_likelihood_stats(nt, s1, s2, mu, prec, logdet)
    return family.log_prior_means(mu) + jnp.sum(family.log_prior_cov(sigma, root), axis=-1) + jnp.sum(lik, axis=-1)


def swap_log_ratio(family, sticks, stats, i, j, inside, swap_cov, aug_i, aug_j):
    """log p(state') - log p(state) for the swap of labels i, j on the slices `inside`
    (bool (T,)); the covariances of those slices too when they are per slice, the shared
    ones when `swap_cov`. `aug_i`, `aug_j`: the (mu, sigma) used for a label no point
    uses. Returns (log ratio, new row i, new row j)."""
    used = stats.n > 0.5

    def row(k, aug):
        nt, s1, s2, mu, sigma = _rows(stats, k)
        return nt, s1, s2, jnp.where(used[k], mu, aug[0]), jnp.where(used[k], sigma, aug[1])

    ri, rj = row(i, aug_i), row(j, aug_j)

    def mix(p, q, mask):
        m = mask.reshape(mask.shape + (1,) * (p.ndim - mask.ndim))
        return jnp.where(m, q, p)

    cov_inside = inside if family.slice_covariances else jnp.asarray(swap_cov)[None]  # (S,)
    masks = (inside,) * 4 + (cov_inside,)
    new_i = tuple(mix(p, q, mask) for p, q, mask in zip(ri, rj, masks))
    new_j = tuple(mix(q, p, mask) for p, q, mask in zip(ri, rj, masks))
    counts = stats.nt.T  # (T, C)
    new_counts = counts.at[:, i].set(new_i[0]).at[:, j].set(new_j[0])
    # one evaluation on the stacked (new, old) counts and (new i, new j, old i, old j) rows
    new_lp, old_lp = sticks.log_prob_labels(jnp.stack([new_counts, counts]))
    partition = jnp.sum(jnp.where(inside, new_lp - old_lp, 0.0))
    joint = _label_log_joint(family, *(jnp.stack(rows) for rows in zip(new_i, new_j, ri, rj)))
    labels = joint[0] + joint[1] - joint[2] - joint[3]
    return partition + labels, new_i, new_j


def _uniform_index(u, size: int):
    """floor(u size) for a uniform `u` in [0, 1): an index uniform on 0..size-1."""
    return jnp.minimum(jnp.floor(u * size), size - 1).astype(jnp.int32)


def _choose_interval(u, T: int, kinds):
    """(kind index into ("single", "random", "full"), t1, t2) by the allowed `kinds`, from three
    uniforms `u` (the kind, then two uniform slices)."""
    kind = jnp.asarray(kinds)[_uniform_index(u[0], len(kinds))]
    a, b = _uniform_index(u[1], T), _uniform_index(u[2], T)
    t1 = jnp.where(kind == 0, a, jnp.where(kind == 1, jnp.minimum(a, b), 0))
    t2 = jnp.where(kind == 0, a, jnp.where(kind == 1, jnp.maximum(a, b), T - 1))
    return kind, t1, t2


def _top(stats):
    """Largest used label (-1 when none)."""
    C = stats.n.shape[-1]
    return jnp.max(jnp.where(stats.n > 0.5, jnp.arange(C), -1))


def _choose_labels(pairs, u, stats, C, prior_cdf):
    """The two labels of a proposal, from two uniforms `u`: by prior stick weight
    (`pairs="prior"`, no Hastings term) or two distinct labels uniformly among 0..R-1, R the largest
    used label + 2 (log R (R - 1) of the forward draw returned); and whether both fall inside the
    capacity C."""
    if pairs == "prior":
        i, j = sample_index(prior_cdf, u[0]), sample_index(prior_cdf, u[1])
        return i, j, jnp.zeros(()), (i < C) & (j < C)
    r = _top(stats) + 2
    i = _uniform_index(u[0], r)
    j = _uniform_index(u[1], r - 1)
    j = j + (j >= i)
    return i, j, jnp.log(r * (r - 1.0)), (i < C) & (j < C)


def _with_rows(stats, rows):
    """`stats` with the label rows (k, (nt, s1, s2, mu, sigma)) of `rows` replaced, and n
    recounted."""
    for k, row in rows:
        stats = stats._replace(
            nt=stats.nt.at[k].set(row[0]), s1=stats.s1.at[k].set(row[1]),
            s2=stats.s2.at[k].set(row[2]), mu=stats.mu.at[k].set(row[3]),
            sigma=stats.sigma.at[k].set(row[4]))
    return stats._replace(n=stats.nt.sum(axis=1))


def build_ddpswap_kernel(bound_model, *, num_swaps: int = DEFAULT_NUM_SWAPS, intervals: str = "all",
                         pairs: str = "uniform", native: bool | None = None) -> Kernel:
    """Label swaps over time intervals (see the module docstring).

    Parameters
    ----------
    num_swaps : int, default 100
        Proposals per step. The paper proposes a move after every assignment update
        (probability M = 1 for the DDP), i.e. N per sweep; 100 per sweep of the
        assignments costs a small fraction of the sweep at N ~ 1000.
    intervals : {"all", "single", "random", "full"}, default "all"
        Which of the paper's three interval choices to use; `"all"` picks one of the
        three uniformly for every proposal.
    pairs : {"uniform", "prior"}, default "uniform"
        How the two labels are drawn (`"prior"`: by prior stick weight, as in the paper).
    native : bool or None, default None
        Accept or reject the step's proposals in one native call on CPU
        ([`native_ddp_swap`][dpppl.models.native_seating.native_ddp_swap]; the same decisions up to
        rounding, and no XLA loop to compile): True requires it, False runs the JAX loop, None
        follows `DPPPL_NATIVE` (default: native where it builds).

    Returns
    -------
    Kernel
        `exact=True`. `info`: a `SwapInfo`: `accept_prob` (mean acceptance probability of the
        step's proposals), `accepted` and `accepted_single` / `_random` / `_full`
        (accepted proposals in the step, by interval kind).
    """
    if isinstance(num_swaps, bool) or not isinstance(num_swaps, numbers.Integral) or num_swaps < 1:
        raise KernelError(f"ddpswap: num_swaps must be an integer >= 1, got {num_swaps!r}")
    if intervals not in INTERVALS:
        raise KernelError(f"ddpswap: intervals must be one of {INTERVALS}, got {intervals!r}")
    if pairs not in PAIRS:
        raise KernelError(f"ddpswap: pairs must be one of {PAIRS}, got {pairs!r}")
    family, prior = bound_model.family, bound_model.prior
    T = bound_model.num_slices
    kinds = (0, 1, 2) if intervals == "all" else (INTERVALS.index(intervals),)
    run_native = use_native_sticks(requested=native, source=DDP_SOURCE)

    def step(rng_key, state: PartitionState, x):
        stats = state.stats
        C = stats.n.shape[-1]
        log_w, log_rest = prior.log_prior_weights(C, x.dtype)
        prior_logits = jnp.concatenate([log_w, log_rest[None]])
        k_aug, k_props = random.split(rng_key)
        aug_mu, aug_sigma = family.draw_prior(k_aug, (num_swaps, 2))
        # proposal s: its pair (2), its interval (3) and its acceptance (1), one draw for all
        uniforms = random.uniform(k_props, (num_swaps, 6), x.dtype)
        if run_native:
            stats, perm, total_p, accepted, overflow = native_ddp_swap(
                family, prior, stats, aug_mu, aug_sigma, uniforms, prior_logits, kinds, prior_pairs=pairs == "prior")
            return relabelled(state, stats, perm, total_p, accepted, state.overflow | overflow)

        def one(s, carry):
            stats, perm, total_p, accepted, overflow = carry
            u = uniforms[s]
            i, j, log_q, inside_capacity = _choose_labels(pairs, u[:2], stats, C, prior_logits)
            i, j = jnp.minimum(i, C - 1), jnp.minimum(j, C - 1)
            kind, t1, t2 = _choose_interval(u[2:5], T, kinds)
            inside = (jnp.arange(T) >= t1) & (jnp.arange(T) <= t2)
            swap_cov = (t1 == 0) & (t2 == T - 1)
            log_ratio, new_i, new_j = swap_log_ratio(
                family, prior, stats, i, j, inside, swap_cov,
                (aug_mu[s, 0], aug_sigma[s, 0]), (aug_mu[s, 1], aug_sigma[s, 1]))
            new_stats = _with_rows(stats, ((i, new_i), (j, new_j)))
            if pairs == "uniform":  # the reverse move's pair probability
                r_new = _top(new_stats) + 2
                log_q = log_q - jnp.log(r_new * (r_new - 1.0))
                reachable = (i < r_new) & (j < r_new)
            else:
                reachable = i != j
            log_accept = jnp.where(reachable & inside_capacity, log_ratio + log_q, -jnp.inf)
            accept = jnp.log(u[5]) < log_accept
            stats = jax.tree.map(lambda new, old: jnp.where(accept, new, old), new_stats, stats)
            swapped = jnp.where(perm == i, j, jnp.where(perm == j, i, perm))
            perm = jnp.where(accept & inside[:, None], swapped, perm)
            total_p = total_p + jnp.exp(jnp.minimum(log_accept, 0.0))
            accepted = accepted.at[kind].add(accept.astype(jnp.int32))
            return stats, perm, total_p, accepted, overflow | ~inside_capacity

        perm = jnp.broadcast_to(jnp.arange(C, dtype=jnp.int32), (T, C))
        carry = (stats, perm, jnp.zeros((), x.dtype), jnp.zeros(3, jnp.int32), state.overflow)
        return relabelled(state, *jax.lax.fori_loop(0, num_swaps, one, carry))

    def relabelled(state, stats, perm, total_p, accepted, overflow):
        # padded points (label -1, `DDPBound.padded`) keep it
        slices = jnp.asarray(bound_model.slices)  # in the step: building the kernel on the host runs nothing
        state = state._replace(z=jnp.where(state.z >= 0, perm[slices, state.z], -1), stats=stats, overflow=overflow)
        return state, SwapInfo(accept_prob=total_p / num_swaps, accepted=accepted.sum(),
                               accepted_single=accepted[0], accepted_random=accepted[1], accepted_full=accepted[2])

    return Kernel("ddpswap", exact=True, step=step, info_type=SwapInfo, masked_points=True,
                  light_compile=run_native)  # the proposals one native call (Kernel)


register("ddpswap", build_ddpswap_kernel, exact=True, applies=applies_to_ddp,
         description="DDP label swaps over time intervals (one slice, random, all; Porteous et al. "
                     "2006, sec. 5), Metropolis-Hastings; O(T C + T D^2) per proposal")
