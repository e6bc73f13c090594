"""Gibbs sampling of the dependent DP mixture over time (Porteous et al. 2006, sec. 5).

The state instantiates the parameters of every *used* label i (one with a point in any
slice): its means mu_{i,t} in every slice and its covariance Sigma_i, or one
Sigma_{i,t} per slice (:class:`~dpppl.families.coupled.CoupledGaussian`; below Sigma_i
stands for the covariance of the point's slice); the sticks are integrated out
(:mod:`dpppl.priors.ddp`). One step of kernel ``ddp`` is

1. **assignments** (eq. 10): every point n, in slice t, in a fresh random order, is
   drawn from

       P(z_n = i | rest) ∝ E[pi_{t,i} | Z_{t,-n}] N(x_n; mu_{i,t}, Sigma_i)   for used labels i,

   and the unused labels (the empty ones below the largest label and all those above:
   the paper's lumping) together get E-weight W_new = sum_{i unused} E[pi_{t,i} | Z_{t,-n}]
   shared by m auxiliary parameter sets theta*_1..m (Neal 2000, algorithm 8), each with
   weight W_new / m times N(x_n; mu*_{k,t}, Sigma*_k): theta*_1 is the point's own
   label's parameters when no other point uses that label, the others fresh draws from
   the prior. If an auxiliary k is chosen, the label is drawn among the unused labels
   with probability proportional to E[pi_{t,i} | Z_{t,-n}] and takes theta*_k (all its T
   means and its covariance). This is a Gibbs step on the model augmented with the
   auxiliaries (whose conditional is exactly what is drawn), so it is exact, with no
   Monte Carlo estimate of the non-conjugate predictive integral of the paper's
   footnote 5. The unused labels' parameters are prior draws
   independent of everything, and are not part of the state. Eq. (10) needs of an
   auxiliary only its mean and covariance in the point's slice: mu*_{k,t} ~ N(m,
   Gamma_tt I) and Sigma*_k ~ IW are drawn for all points at once (the precision
   directly, :meth:`~dpppl.families.coupled.CoupledGaussian.draw_prior_cov`), and the
   chosen auxiliary's other means from their conditional given mu*_{k,t}
   (:meth:`~dpppl.families.coupled.CoupledGaussian.means_given_slice`), with per-slice
   covariances its other slices' covariances independent IW draws: the same prior
   draw, made lazily. The log-likelihoods log N(x_n; mu_{i,t_n}, Sigma_i) of all points
   and labels are computed once per sweep and a label's row is recomputed when it takes
   new parameters.
2. **parameters** (eq. 11): for every used label, Sigma_i | mu_i, x (inverse Wishart),
   then mu_i | Sigma_i, x (a T D-dimensional Gaussian coupling the slices through Gamma).

A sweep costs O(N C D^2 + N m D^3) for the assignments (C label slots, m auxiliaries;
O(N D^2) more per new label) and
O(C (T D)^3) for the means. Labels beyond the capacity have weight too (the remaining
stick): when one is drawn the state sets ``overflow`` and the driver grows the capacity
and re-runs the chunk from the same keys (draws do not depend on the capacity).
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..errors import KernelError
from .base import Kernel, register
from .state import PartitionState, sample_index


class DDPSlots(NamedTuple):
    """Per-label-slot state of the DDP, leading axis C (``PartitionState.stats``).

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
    """(n, nt, s1, s2) of points ``x`` with labels ``z`` and slice indices ``slices``."""
    cell = z * num_slices + slices
    count = capacity * num_slices
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
    """log N(x_n; mu_n, Sigma) for points ``x`` (..., D), means ``mu`` (..., D) and the
    precision ``prec`` (..., D, D) and ``logdet`` = log|Sigma| (...) of their covariances."""
    d = x - mu
    return -0.5 * (x.shape[-1] * np.log(2 * np.pi) + logdet + jnp.einsum("...d,...de,...e->...", d, prec, d))


def seat(family, sticks, x, slices, rng_key, state: PartitionState, *, remove_first: bool,
         with_data: bool = True, num_aux: int = 1) -> PartitionState:
    """Draw every point's label from its conditional (eq. 10, with the auxiliary
    parameters of the module docstring), in a random order.

    With ``remove_first`` the points leave their labels first (a Gibbs sweep); without,
    they start unassigned (statistics zero) and are seated one by one: the DDP's
    sequential prediction (with ``with_data=False``: a draw of the labels from the
    sticks' prior, ignoring the data). ``num_aux`` is m of Neal's algorithm 8: the
    unused labels' weight W_new is shared equally by m auxiliary parameter sets (the
    first is the point's own label's when no other point uses it). Only the counts
    change here; the caller recomputes the other statistics (:func:`with_statistics`).
    """
    N = x.shape[0]
    C, T = state.stats.nt.shape
    k_order, k_u, k_aux_mu, k_aux_cov, k_rest = jax.random.split(rng_key, 5)
    order = jax.random.permutation(k_order, N)
    uniforms = jax.random.uniform(k_u, (2, N), dtype=x.dtype)
    m = num_aux
    # the auxiliaries of point n: their means in n's slice and covariances now (all
    # that eq. 10 needs); the other slices' means only for the one that is chosen
    # (means_given_slice, from the standard normals `rest`)
    scale = jnp.sqrt(jnp.asarray(np.diag(family.gamma)))[slices]
    aux_mu_t = (jnp.asarray(family.mu0)
                + scale[:, None, None] * jax.random.normal(k_aux_mu, (N, m, family.dim), x.dtype))
    aux_sigma, aux_prec, aux_logdet = family.draw_prior_cov(k_aux_cov, (N, m))
    if family.slice_covariances:  # the chosen auxiliary's covariances in the other slices too
        k_rest, k_rest_cov = jax.random.split(k_rest)
        rest_cov = family.draw_prior_cov(k_rest_cov, (N, T))
    rest = jax.random.normal(k_rest, (N, T, family.dim), x.dtype)
    cov_slot = family.covariance_index(slices)
    stats = state.stats
    prec, logdet = family.precision(_safe_cov(stats.sigma, stats.n > 0.5))

    def column(mu, prec, logdet):  # log N(x_n; mu_{t_n}, Sigma_{s(t_n)}) of every point for one label
        return _log_lik(x, mu[slices], prec[cov_slot], logdet[cov_slot]) if with_data else jnp.zeros(N, x.dtype)

    # lik[c, n] = log N(x_n; mu_{c, t_n}, Sigma_c), kept current as labels take new parameters
    lik = jax.vmap(column)(stats.mu, prec, logdet)
    lik_aux = _log_lik(x[:, None], aux_mu_t, aux_prec, aux_logdet) if with_data else jnp.zeros((N, m), x.dtype)

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
    z, counts, total, mu, sigma, _, _, _, overflow = jax.lax.fori_loop(0, N, body, carry)
    stats = stats._replace(n=total, nt=counts.T, mu=mu, sigma=sigma)
    return state._replace(z=z, stats=stats, overflow=overflow)


def update_parameters(family, rng_key, state: PartitionState) -> PartitionState:
    """Sigma_i | mu_i, x (per slice or shared) then mu_i | Sigma_i, x for every used label (eq. 11)."""
    stats = state.stats
    used = stats.n > 0.5
    k_cov, k_mu = jax.random.split(rng_key)
    sigma = family.draw_cov(k_cov, stats.nt, stats.s1, stats.s2, stats.mu)
    prec, _ = family.precision(sigma)
    mu = family.draw_means(k_mu, stats.nt, stats.s1, prec)
    return state._replace(stats=stats._replace(mu=jnp.where(used[:, None, None], mu, stats.mu),
                                               sigma=jnp.where(used[:, None, None, None], sigma, stats.sigma)))


DEFAULT_NUM_AUX = 10


def build_ddp_kernel(bound_model, *, num_aux: int = DEFAULT_NUM_AUX) -> Kernel:
    """One sweep over the assignments (eq. 10) then the parameters (eq. 11) per step.

    Parameters
    ----------
    num_aux : int, default 10
        m, the auxiliary parameter sets of Neal's algorithm 8 that carry the unused
        labels' weight (any m >= 1 is exact). The prior of the means is broad compared
        with a cluster, so one prior draw rarely lands near a point; m draws make a new
        cluster about m times as likely to be opened where the data call for it, for
        O(m D^3) more work per point.
    """
    if isinstance(num_aux, bool) or not isinstance(num_aux, numbers.Integral) or num_aux < 1:
        raise KernelError(f"ddp: num_aux must be an integer >= 1, got {num_aux!r}")
    family, prior, slices = bound_model.family, bound_model.prior, jnp.asarray(bound_model.slices)

    def step(rng_key, state, x):
        k_seat, k_params = jax.random.split(rng_key)
        state = seat(family, prior, x, slices, k_seat, state, remove_first=True, num_aux=num_aux)
        state = with_statistics(state, x, slices)
        return update_parameters(family, k_params, state), {}

    return Kernel("ddp", exact=True, step=step)


def applies_to_ddp(model):
    """``applies`` of the DDP kernels: None for a DDP model, else why not."""
    from ..ddp import DDPModel

    if isinstance(model, DDPModel):
        return None
    return "it samples dependent DP mixtures over time (dpppl.DDPMixture, 'z ~ DDP(...)' with 'by t' data)"


register("ddp", build_ddp_kernel, exact=True, applies=applies_to_ddp,
         description="DDP Gibbs over labels (eq. 10, new labels via Neal's alg. 8 auxiliary) and "
                     "time-coupled parameters (eq. 11); O(N C D^2 + N m D^3 + C (T D)^3) per sweep")
