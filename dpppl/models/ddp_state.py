"""The state of a dependent DP mixture and its Gibbs updates (Porteous et al. 2006, sec. 5).

Label slots hold the statistics of each label in every slice and its instantiated
parameters (means mu_{i,t}, covariances). `seat` draws assignments by eq. (10) with
Neal's (2000) algorithm-8 auxiliaries for the unused labels; `update_parameters`
draws covariances then means by eq. (11). The target (`dpppl.models.ddp.DDPBound`)
uses both to start chains; the `ddp` kernel is one of each per step (the derivation and
cost are in `docs/kernels/ddp.md`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from dpppl.core import numerics_random as random
from dpppl.core.numerics import normal_draw, permutation_of_first, sample_index
from dpppl.core.state import PartitionState
from dpppl.families.gaussian import bartlett_variates
from dpppl.models.native_seating import native_ddp_parameters, native_ddp_seat

class DDPSlots(NamedTuple):
    """Per-label-slot state of the DDP, leading axis C (`PartitionState.stats`).

    - **n** (C,) - points with the label over all slices (0: unused).
    - **nt** (C, T) - points with the label in each slice.
    - **s1** (C, T, D), **s2** (C, T, D, D) - sums of x and x x^T of those points.
    - **mu** (C, T, D) - the label's mean in each slice (meaningful where n > 0).
    - **sigma** (C, S, D, D) - the label's covariance, one per slice (S = T) or shared
      (S = 1) (meaningful where n > 0).
    """

    n: jax.Array
    nt: jax.Array
    s1: jax.Array
    s2: jax.Array
    mu: jax.Array
    sigma: jax.Array


def slot_statistics(x, slices, z, capacity: int, num_slices: int):
    """(n, nt, s1, s2) of points `x` with labels `z` and slice indices `slices`; a point with
    the label -1 (padding, `DDPBound.padded`) is in no label's and no slice's statistics."""
    count = capacity * num_slices
    cell = jnp.where(z >= 0, z * num_slices + slices, count)  # cell `count` is dropped
    D = x.shape[1]
    nt = jax.ops.segment_sum(jnp.ones_like(x[:, 0]), cell, count).reshape(capacity, num_slices)
    s1 = jax.ops.segment_sum(x, cell, count).reshape(capacity, num_slices, D)
    s2 = jax.ops.segment_sum(x[:, :, None] * x[:, None, :], cell, count).reshape(capacity, num_slices, D, D)
    return nt.sum(axis=1), nt, s1, s2


def with_statistics(state: PartitionState, x, slices) -> PartitionState:
    """The state with its statistics recomputed from its labels (O(N D^2))."""
    C, T = state.stats.nt.shape
    n, nt, s1, s2 = slot_statistics(x, slices, state.z, C, T)
    return state._replace(stats=state.stats._replace(n=n, nt=nt, s1=s1, s2=s2))


def _safe_cov(sigma, used):
    """Covariances (C, S, D, D) with the unused slots (whose values may be zero padding) set to I."""
    eye = jnp.eye(sigma.shape[-1], dtype=sigma.dtype)
    return jnp.where(used[:, None, None, None], sigma, eye)


def _log_lik(x, mu, prec, logdet):
    """log N(x_n; mu_n, Sigma) for points `x` (..., D), means `mu` (..., D) and the
    precision `prec` (..., D, D) and `logdet` = log|Sigma| (...) of their covariances."""
    d = x - mu
    return -0.5 * (x.shape[-1] * np.log(2 * np.pi) + logdet + jnp.einsum("...d,...de,...e->...", d, prec, d))


def seat(family, sticks, x, slices, rng_key, state: PartitionState, *, remove_first: bool,
         num_aux: int = 1, num_valid=None, native: bool = False) -> PartitionState:
    """Draw every point's label from its conditional (eq. 10, with the auxiliary
    parameters of the module docstring), in a random order.

    With `remove_first` the points leave their labels first (a Gibbs sweep); without,
    they start unassigned (statistics zero) and are seated one by one: the DDP's
    sequential prediction. `num_aux` is m of Neal's algorithm 8: the
    unused labels' weight W_new is shared equally by m auxiliary parameter sets (the
    first is the point's own label's when no other point uses it). Only the counts
    change here; the caller recomputes the other statistics (`with_statistics`).

    `num_valid` (traced): only the first `num_valid` points are real (`DDPBound.padded`); the
    others are never visited, and every draw is the unpadded run's: the order is
    `permutation_of_first`, the draws per point have the points on their leading axis, and the
    two uniforms of point i are entries i and n + i of one draw of 2 N (the unpadded run's
    (2, n) draw, flattened).

    With `native` the loop over the points is one native call
    ([`native_ddp_seat`][dpppl.models.native_seating.native_ddp_seat]) on the same order, uniforms and
    auxiliaries' draws: the same draws up to rounding, with no XLA loop in the compiled program.
    """
    N = x.shape[0]
    n = N if num_valid is None else num_valid
    C, T = state.stats.nt.shape
    k_order, k_u, k_normal, k_cov = random.split(rng_key, 4)
    order = permutation_of_first(k_order, N, num_valid)
    flat = random.uniform(k_u, (2 * N,), dtype=x.dtype)
    uniforms = jnp.stack([flat[:N], jax.lax.dynamic_slice(flat, (n,), (N,))])
    m = num_aux
    # the auxiliaries of point n: their means in n's slice and covariances now (all
    # that eq. 10 needs); the other slices' means only for the one that is chosen
    # (means_given_slice, from the standard normals `rest`). One normal draw for both kinds of
    # means and one covariance draw for the auxiliaries and the other slices' covariances: one
    # threefry expansion and one Bartlett construction each in the compiled program.
    normals = normal_draw(k_normal, (N, m + T, family.dim), x.dtype)
    scale = jnp.sqrt(jnp.diag(jnp.asarray(family.gamma)))[slices]
    aux_mu_t = jnp.asarray(family.mu0) + scale[:, None, None] * normals[:, :m]
    rest = normals[:, m:]
    covs = family.draw_prior_cov(k_cov, (N, m + T if family.slice_covariances else m))
    if native:
        return native_ddp_seat(family, sticks, x, slices, order, uniforms, state, aux_mu_t, rest, covs,
                               remove_first=remove_first, num_valid=num_valid)
    aux_sigma, aux_prec, aux_logdet = (c[:, :m] for c in covs)
    if family.slice_covariances:  # the chosen auxiliary's covariances in the other slices too
        rest_cov = tuple(c[:, m:] for c in covs)
    cov_slot = family.covariance_index(slices)
    stats = state.stats
    if remove_first:
        prec, logdet = family.precision(_safe_cov(stats.sigma, stats.n > 0.5))
    else:  # no label is used yet: a label's row is set when it is placed, so no factorisation here
        prec = jnp.broadcast_to(jnp.eye(family.dim, dtype=stats.sigma.dtype), stats.sigma.shape)
        logdet = jnp.zeros(stats.sigma.shape[:-2], stats.sigma.dtype)

    def column(mu, prec, logdet):  # log N(x_n; mu_{t_n}, Sigma_{s(t_n)}) of every point for one label
        return _log_lik(x, mu[slices], prec[cov_slot], logdet[cov_slot])

    # lik[c, n] = log N(x_n; mu_{c, t_n}, Sigma_c), kept current as labels take new parameters
    lik = jax.vmap(column)(stats.mu, prec, logdet)
    lik_aux = _log_lik(x[:, None], aux_mu_t, aux_prec, aux_logdet)

    def body(k, carry):
        z, counts, total, mu, sigma, prec, logdet, lik, overflow = carry
        i = order[k]
        t = slices[i]
        old = z[i]
        if remove_first:
            counts = counts.at[t, old].add(-1.0)
            total = total.at[old].add(-1.0)
            alone = total[old] < 0.5
        else:
            alone = jnp.zeros((), bool)
        used = total > 0.5
        log_w, log_tail = sticks.log_expected_weights(counts[t])
        ll = lik[:, i]
        # auxiliary 1 is the point's own label's parameters when it was alone there
        ll_aux = lik_aux[i].at[0].set(jnp.where(alone, ll[old], lik_aux[i, 0]))
        free = jnp.concatenate([jnp.where(used, -jnp.inf, log_w), log_tail[None]])
        logits = jnp.concatenate([jnp.where(used, log_w + ll, -jnp.inf), logsumexp(free) - np.log(m) + ll_aux])
        pick = sample_index(logits, uniforms[0, i])
        is_new = pick >= C
        k = jnp.clip(pick - C, 0, m - 1)
        label = sample_index(free, uniforms[1, i])
        beyond = is_new & (label == C)  # a label past the capacity: grow and re-run
        j = jnp.where(is_new, jnp.where(beyond, old, label), pick)

        def place(_):  # label j takes auxiliary k (or the old label's own parameters)
            own = alone & (k == 0)
            covs = (aux_sigma[i, k], aux_prec[i, k], aux_logdet[i, k])
            if family.slice_covariances:  # (T, ...): the other slices' draws, slice t the auxiliary's
                covs = tuple(other[i].at[t].set(value) for other, value in zip(rest_cov, covs))
            else:  # (1, ...)
                covs = tuple(value[None] for value in covs)
            fresh = (family.means_given_slice(t, aux_mu_t[i, k], rest[i]),) + covs
            new = tuple(jnp.where(own, arr[old], value) for value, arr in zip(fresh, (mu, sigma, prec, logdet)))
            return new + (column(new[0], new[2], new[3]),)

        # a cond, so that the O(N) column is only computed when a label is placed (under
        # vmap it becomes a select over these small outputs)
        new = jax.lax.cond(is_new & ~beyond, place, lambda _: (mu[j], sigma[j], prec[j], logdet[j], lik[j]), None)
        mu, sigma, prec, logdet, lik = (arr.at[j].set(value) for arr, value in
                                        zip((mu, sigma, prec, logdet, lik), new))
        counts = counts.at[t, j].add(1.0)
        total = total.at[j].add(1.0)
        return z.at[i].set(j), counts, total, mu, sigma, prec, logdet, lik, overflow | beyond

    carry = (state.z, stats.nt.T, stats.n, stats.mu, stats.sigma, prec, logdet, lik, state.overflow)
    z, counts, total, mu, sigma, _, _, _, overflow = jax.lax.fori_loop(0, n, body, carry)
    stats = stats._replace(n=total, nt=counts.T, mu=mu, sigma=sigma)
    return state._replace(z=z, stats=stats, overflow=overflow)


def update_parameters(family, rng_key, state: PartitionState, native: bool = False) -> PartitionState:
    """Sigma_i | mu_i, x (per slice or shared) then mu_i | Sigma_i, x for every used label (eq. 11).
    With `native` both draws are one native call
    ([`native_ddp_parameters`][dpppl.models.native_seating.native_ddp_parameters]) from the same
    random numbers (the covariances' Bartlett variates, the means' normals): the same draws up to
    rounding."""
    stats = state.stats
    used = stats.n > 0.5
    k_cov, k_mu = random.split(rng_key)
    if native:
        n = stats.nt if family.slice_covariances else jnp.sum(stats.nt, axis=1, keepdims=True)
        below, chi2 = bartlett_variates(k_cov, family.nu0 + n, family.dim, n.shape)
        eps = normal_draw(k_mu, (stats.mu.shape[0], stats.mu.shape[1] * stats.mu.shape[2], 1), stats.mu.dtype)
        mu, sigma = native_ddp_parameters(family, stats, below, chi2, eps)
        return state._replace(stats=stats._replace(mu=mu, sigma=sigma))
    sigma, prec, _ = family.draw_cov(k_cov, stats.nt, stats.s1, stats.s2, stats.mu)
    mu = family.draw_means(k_mu, stats.nt, stats.s1, prec)
    return state._replace(stats=stats._replace(mu=jnp.where(used[:, None, None], mu, stats.mu),
                                               sigma=jnp.where(used[:, None, None, None], sigma, stats.sigma)))


DEFAULT_NUM_AUX = 10
