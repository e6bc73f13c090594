"""Slice-Gibbs and Beta-Gibbs for DP mixtures of Generalized Mallows models (Meilă & Chen 2010).

Both kernels instantiate a central permutation sigma_c and, for Slice-Gibbs, dispersions theta_c
per cluster slot; one step is (1) the parameters of every occupied cluster, `num_gibbs`
(T_Gibbs) rounds, then (2) one sweep over the points in random order (eq. 11, Neal 2000 alg. 2):

    P(z_i = c) ∝ w_c GM(pi_i | sigma_c, theta_c),      P(z_i = new) ∝ w_new (n - t_i)!/n!  (Lemma 1),

w the CRP (Pitman-Yor) seating weights; a new cluster draws (sigma, theta) exactly from p(. | pi_i).

**mallows-slice** (Fig. 1; exact): sigma_c | theta_c by an independence Metropolis-Hastings step
with the stagewise proposal (Fig. 2) plus adjacent swaps (`dpppl.families.mallows_draws`),
theta_c | sigma_c by `num_slices` slice updates per stage (Fig. 3, eq. 10).

**mallows-beta** (Fig. 5; approximate): theta integrated out with the infinite-n Beta forms of
Lemmas 4-7, `P(z_i = c) ∝ w_c prod_{j<=t_i} Beta(s_j + nu r_j + S_cj, nu + N_cj + 2) /
Beta(nu r_j + S_cj, nu + N_cj + 1)`; theta | sigma by eq. (12), singletons' sigma by
Sample-sigma-N1 (Fig. 4). Registered `exact=False`.

The slots' layout, the order of the two updates, what is recorded and `lp` are in
`docs/kernels/mallows-slice.md` and `docs/kernels/mallows-beta.md`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import betaln, gammaln

from dpppl.core import numerics_random as random
from dpppl.errors import KernelError
from dpppl.families.generalized_mallows import (GeneralizedMallows, after_mask, code_logits_given_theta, codes, log_gm,
                                                log_lemma1, log_psi, lsigma, ranking_lengths, theta_exact)
from dpppl.kernels.base import Kernel, register
from dpppl.families.mallows_draws import (code_logits_n1, insert_code, insert_code_given, sigma_step, theta_beta,
                                          theta_slice)
from dpppl.kernels.mallows.native_slice import native_slice_step, use_native
from dpppl.core.state import PartitionState
from dpppl.core.numerics import permutation_of_first, sample_index


class MallowsSlots(NamedTuple):
    """Each cluster slot's instantiated parameters: `pos` (C, n), the position of each item in
    the central permutation sigma_c, and `theta` (C, n - 1), the dispersions per stage (for
    mallows-beta, the last draw of eq. (12))."""

    pos: jax.Array
    theta: jax.Array


class MallowsExtras(NamedTuple):
    """What both Mallows kernels carry: the slots' parameters (`grow` pads them)."""

    slots: MallowsSlots


class MallowsInfo(NamedTuple):
    """The statistics of one Mallows step: `sigma_accept`, the acceptance rate of the sigma
    moves over the occupied clusters."""

    sigma_accept: jax.Array


def applies(model):
    """None for a GeneralizedMallows model, else why the Mallows kernels cannot run."""
    if isinstance(model.component, GeneralizedMallows):
        return None
    return (f"the Mallows kernels sample GeneralizedMallows components of rankings, "
            f"not {model.component.name}")


def _check_options(num_gibbs, num_slices, record_clusters):
    for name, v in (("num_gibbs", num_gibbs), ("num_slices", num_slices), ("record_clusters", record_clusters)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise KernelError(f"{name} must be an integer >= 1, got {v!r}")


class _GM:
    """The pieces both kernels share, closed over a resolved family and prior."""

    def __init__(self, bound_model, record_clusters):
        self.family = bound_model.family
        self.prior = bound_model.prior
        self.n = int(self.family.n_items)
        self.m = self.family.m
        self.nu = jnp.asarray(self.family.nu)
        self.r = jnp.asarray(self.family.r)
        self.record_clusters = record_clusters
        self.num_valid = bound_model.num_valid

    # ----- state --------------------------------------------------------------------
    def init(self, state: PartitionState, x) -> PartitionState:
        cap = state.stats.n.shape[-1]
        slots = MallowsSlots(pos=jnp.tile(jnp.arange(self.n, dtype=jnp.int32), (cap, 1)),
                             theta=jnp.ones((cap, self.n - 1), state.alpha.dtype))
        return state._replace(extras=MallowsExtras(slots))

    def move_point(self, stats, k, ranking, sign):
        """Add (sign 1) or remove (sign -1) one ranking's statistics at slot k (row scatter)."""
        A = after_mask(ranking)
        first = jnp.maximum(ranking[: self.n - 1], 0)
        valid = (jnp.arange(self.n - 1) < ranking_lengths(ranking)).astype(A.dtype)
        return stats._replace(n=stats.n.at[k].add(sign), Nj=stats.Nj.at[k].add(sign * valid),
                              R=stats.R.at[k, jnp.arange(self.n - 1), first].add(sign * A))

    def order(self, rng_key, x):
        """The visiting order of a sweep and the number of points it visits: a uniform
        permutation of the points (of the first `num_valid`, the real points, when they are
        padded to a shape class: the order of the unpadded sweep, `permutation_of_first`)."""
        size = x.shape[0]
        return permutation_of_first(rng_key, size, self.num_valid), (size if self.num_valid is None
                                                                     else self.num_valid)

    def seat_logits(self, counts, alpha, log_lik_existing, log_lik_new):
        """Seating logits over slots and the first empty slot (None-safe: `has_empty`);
        `log_lik_new` is the ranking's `log_lemma1`."""
        log_existing, log_new = self.prior.log_seat_weights(counts, alpha)
        empty = counts < 0.5
        has_empty = jnp.any(empty)
        first_empty = jnp.argmax(empty)
        logits = jnp.where(empty, -jnp.inf, log_existing + log_lik_existing)
        logits = jnp.where(has_empty, logits.at[first_empty].set(log_new + log_lik_new), logits)
        return logits, has_empty

    def visits(self, k_order, k_u, x, code_logits):
        """What a sweep needs per visit before it starts: `(order, visits, uniforms, rankings,
        lemma, new_pos)`, the visiting order and its length (`order`, from `k_order`), one (N, 2n)
        uniform block (from `k_u`) by point (its seat, then a new sigma's 2n - 1), the rankings in visiting order, their
        `log_lemma1`, and the central permutation each would take if it opened a new cluster
        (`insert_code_given` with `code_logits` (N, n-1, n) by visit): drawn for every visit at
        once, vectorised, where the sweep's loop reads one row (the draws are the same as
        drawing inside the loop, which under the chains' vmap ran for every point)."""
        order, visits = self.order(k_order, x)
        uniforms = random.uniform(k_u, (x.shape[0], 2 * self.n), x.dtype)
        rankings = x[order].astype(jnp.int32)
        new_pos = jax.vmap(insert_code_given)(uniforms[order, 1:], rankings, code_logits)
        return order, visits, uniforms, rankings, log_lemma1(rankings), new_pos

    def update_slots(self, rng_key, state, one_slot):
        """Apply `one_slot(key, R, Nj, n, pos, theta) -> (pos, theta, accepted)` to every
        occupied slot with a per-slot key (independent of the capacity)."""
        slots = state.extras.slots
        cap = state.stats.n.shape[-1]
        keys = random.fold_in(rng_key, jnp.arange(cap))
        pos, theta, acc = jax.vmap(one_slot)(keys, state.stats.R, state.stats.Nj, state.stats.n,
                                             slots.pos, slots.theta)
        occupied = state.stats.n > 0.5
        pos = jnp.where(occupied[:, None], pos, slots.pos)
        theta = jnp.where(occupied[:, None], theta, slots.theta)
        rate = jnp.sum(jnp.where(occupied, acc, 0.0)) / jnp.maximum(jnp.sum(occupied), 1)
        return state._replace(extras=MallowsExtras(MallowsSlots(pos, theta))), rate

    # ----- recording ------------------------------------------------------------------
    def kernel(self, name, exact, one_slot, sweep, log_joint, native_step=None) -> Kernel:
        """A kernel whose step updates every slot's parameters (`one_slot`), then sweeps the
        labels (`sweep`); `sigma_accept` is the acceptance rate of the sigma moves. `native_step(rng_key,
        state, x)`, when given, makes the same step in one native call (`(state, rate)`, or None where
        it cannot: then the JAX step runs); the kernel is then `light_compile`."""
        def step(rng_key, state, x):
            done = None if native_step is None else native_step(rng_key, state, x)
            if done is None:
                k_par, k_lab = random.split(rng_key)
                state, rate = self.update_slots(k_par, state, one_slot)
                done = sweep(k_lab, state, x), rate
            return done[0], MallowsInfo(sigma_accept=done[1])

        return Kernel(name, exact=exact, step=step, info_type=MallowsInfo, init=self.init,
                      log_joint=log_joint, record=self.record, record_dims=self.record_dims, masked_points=True,
                      light_compile=native_step is not None)

    def record(self, state):
        K = self.record_clusters
        counts = state.stats.n
        cap = counts.shape[-1]
        order = jnp.argsort(-counts, stable=True)
        idx = jnp.concatenate([order, jnp.zeros(max(K - cap, 0), order.dtype)])[:K]
        present = (jnp.arange(K) < cap) & (counts[idx] > 0.5)
        slots = state.extras.slots
        sigma = jnp.argsort(slots.pos[idx], axis=-1).astype(jnp.int32)
        return {"sigma": jnp.where(present[:, None], sigma, -1),
                "theta": jnp.where(present[:, None], slots.theta[idx], jnp.nan),
                "gm_cluster_size": jnp.where(present, counts[idx], 0).astype(jnp.int32),
                "gm_cluster_slot": jnp.where(present, idx, -1).astype(jnp.int32)}

    record_dims = {"sigma": ["gm_cluster", "rank"], "theta": ["gm_cluster", "stage"],
                   "gm_cluster_size": ["gm_cluster"], "gm_cluster_slot": ["gm_cluster"]}

    def log_partition_prior(self, state):
        return self.prior.log_eppf(state.stats.n, state.alpha) + self.prior.log_prior_alpha(state.alpha)


# ---------------------------------------------------------------------- Slice-Gibbs ---
def build_slice_gibbs(bound_model, *, num_gibbs: int = 10, num_slices: int = 3,
                      record_clusters: int = 20, native: bool | None = None) -> Kernel:
    """Slice-Gibbs (Fig. 1). `num_gibbs` = T_Gibbs rounds of (sigma, theta) per cluster and
    step, `num_slices` = T_Slices slice updates per theta_j (the paper's 10 and 3);
    `record_clusters` largest clusters' parameters are recorded per draw. `native`: the step as one
    native call (`dpppl.kernels.mallows.native_slice`; the same draws up to rounding): None (default)
    where it builds and covers the prior (`DPPPL_NATIVE`), True required, False never."""
    _check_options(num_gibbs, num_slices, record_clusters)
    gm = _GM(bound_model, record_clusters)
    n, m, nu, r = gm.n, gm.m, gm.nu, gm.r

    def one_slot(key, R, Nj, count, pos, theta):
        keys = random.split(key, (num_gibbs, 2))  # round i: sigma's key, theta's key

        def body(i, carry):
            pos, theta, acc = carry
            pos, ok = sigma_step(keys[i, 0], pos, jnp.einsum("j,jab->ab", theta, R))
            theta = theta_slice(keys[i, 1], theta, nu * r + lsigma(R, pos), nu + Nj, m, num_slices)
            return pos, theta, acc + ok
        pos, theta, acc = jax.lax.fori_loop(0, num_gibbs, body, (pos, theta, jnp.zeros((), theta.dtype)))
        return pos, theta, acc / num_gibbs

    def prior_thetas(key, num):
        """`num` exact draws of theta ~ P0 (num, n-1): a new cluster's theta given its one
        ranking (drawn for every point before the sweep, vectorised; shapes independent of C)."""
        keys = random.split(key, (num, n - 1))
        return jax.vmap(jax.vmap(theta_exact))(keys, jnp.broadcast_to(nu * r, (num, n - 1)),
                                               jnp.full((num, n - 1), nu), jnp.broadcast_to(m, (num, n - 1)))

    def sweep(rng_key, state, x):
        k_order, k_u, k_theta = random.split(rng_key, 3)
        new_theta = prior_thetas(k_theta, x.shape[0])  # by visit
        order, visits, uniforms, rankings, lemma, new_pos = gm.visits(
            k_order, k_u, x, jax.vmap(code_logits_given_theta, in_axes=(0, None, None))(new_theta, m, n))
        new_log_psi = log_psi(new_theta, m)

        def body(t, carry):  # the slots' log psi_m(theta) carried: a point's likelihoods need no log
            z, stats, pos, theta, lpsi, overflow = carry
            i, ranking = order[t], rankings[t]
            stats = gm.move_point(stats, z[i], ranking, -1.0)
            ll = log_gm(ranking, pos, theta, m, lpsi)
            logits, has_empty = gm.seat_logits(stats.n, state.alpha, ll, lemma[t])
            k = sample_index(logits, uniforms[i, 0])
            is_new = stats.n[k] < 0.5
            stats = gm.move_point(stats, k, ranking, 1.0)
            return (z.at[i].set(k), stats, pos.at[k].set(jnp.where(is_new, new_pos[t], pos[k])),
                    theta.at[k].set(jnp.where(is_new, new_theta[t], theta[k])),
                    lpsi.at[k].set(jnp.where(is_new, new_log_psi[t], lpsi[k])), overflow | ~has_empty)

        slots = state.extras.slots
        z, stats, pos, theta, _, overflow = jax.lax.fori_loop(
            0, visits, body, (state.z, state.stats, slots.pos, slots.theta, log_psi(slots.theta, m), state.overflow))
        return state._replace(z=z, stats=stats, overflow=overflow, extras=MallowsExtras(MallowsSlots(pos, theta)))

    def log_joint(state):
        slots, stats = state.extras.slots, state.stats
        S = lsigma(stats.R, slots.pos)
        th = slots.theta
        per = (gm.family.log_prior(slots.pos, th)
               - jnp.sum(th * S + stats.Nj * log_psi(th, m), axis=-1))
        return gm.log_partition_prior(state) + jnp.sum(jnp.where(stats.n > 0.5, per, 0.0))

    def native_step(rng_key, state, x):
        return native_slice_step(gm.family, gm.prior, rng_key, state, x, gm.order, num_gibbs=num_gibbs,
                                 num_slices=num_slices)

    return gm.kernel("mallows-slice", True, one_slot, sweep, log_joint,
                     native_step if use_native(gm.prior, native) else None)


# ----------------------------------------------------------------------- Beta-Gibbs ---
def _singleton_ranking(R, Nj):
    """The one ranking of a singleton cluster, read off its R_j rows (-1 past t)."""
    items = jnp.argmax(jnp.sum(R, axis=-1), axis=-1).astype(jnp.int32)      # (n-1,)
    valid = Nj > 0.5
    return jnp.concatenate([jnp.where(valid, items, -1), jnp.full(1, -1, jnp.int32)])


def _beta_cached_terms(nu, r, S, Nj):
    """The s-free terms of Beta-Gibbs's label weights, (gammaln(a), gammaln(a + b), log b) with
    a = nu r + S, b = nu + N + 1; kept per slot and refreshed for the two slots a move changes."""
    a = nu * r + S
    b = nu + Nj + 1.0
    return jnp.stack([gammaln(a), gammaln(a + b), jnp.log(b)])


def _beta_log_lik_existing(nu, r, ranking, pos, S, Nj, cache):
    """log of Beta-Gibbs's likelihood of `ranking` in every existing cluster (Fig. 5, theta
    integrated out by Lemmas 4-7): prod_{j<=t} Beta(s_j + a_j, b_j + 1) / Beta(a_j, b_j), with
    `_beta_cached_terms` `cache` of a = nu r + S, b = nu + N + 1."""
    s = codes(ranking, pos)                                                   # (C, n-1)
    a = nu * r + S
    b = nu + Nj + 1.0
    stage = jnp.arange(s.shape[-1]) < ranking_lengths(ranking)
    # log Beta(s + a, b + 1) - log Beta(a, b) by log-gamma, the s-free terms cached
    ratio = gammaln(s + a) - cache[0] + cache[2] + cache[1] - gammaln(a + b + s + 1.0)
    return jnp.sum(jnp.where(stage, ratio, 0.0), axis=-1)


def build_beta_gibbs(bound_model, *, num_gibbs: int = 10, record_clusters: int = 20) -> Kernel:
    """Beta-Gibbs (Fig. 5; approximate). `num_gibbs` = T_Gibbs rounds of (theta, sigma) per
    cluster of two or more points and step; `record_clusters` as for mallows-slice."""
    _check_options(num_gibbs, 1, record_clusters)
    gm = _GM(bound_model, record_clusters)
    n, m, nu, r = gm.n, gm.m, gm.nu, gm.r
    n1_logits = code_logits_n1(nu, r, m, n)

    def one_slot(key, R, Nj, count, pos, theta):
        # round i: sigma's key, theta's key; then a singleton's
        keys = random.split(key, (num_gibbs + 1, 2))

        def body(i, carry):
            pos, theta, acc = carry
            pos, ok = sigma_step(keys[i, 0], pos, jnp.einsum("j,jab->ab", theta, R))
            theta = theta_beta(keys[i, 1], nu * r + lsigma(R, pos), nu + Nj)
            return pos, theta, acc + ok
        k_n1, k_theta = keys[num_gibbs]
        pos, theta, acc = jax.lax.fori_loop(0, num_gibbs, body, (pos, theta, jnp.zeros((), theta.dtype)))
        single = count < 1.5
        pos1 = insert_code(k_n1, _singleton_ranking(R, Nj), n1_logits)
        theta1 = theta_beta(k_theta, nu * r + lsigma(R, pos1), nu + Nj)
        return (jnp.where(single, pos1, pos), jnp.where(single, theta1, theta),
                jnp.where(single, 1.0, acc / num_gibbs))

    def sweep(rng_key, state, x):
        order, visits, uniforms, rankings, lemma, new_pos = gm.visits(
            *random.split(rng_key), x, jnp.broadcast_to(n1_logits, (x.shape[0],) + n1_logits.shape))
        slots = state.extras.slots

        def refresh(cache, S, Nj, c):
            return cache.at[:, c].set(_beta_cached_terms(nu, r, S[c], Nj[c]))

        def body(t, carry):
            z, stats, pos, S, cache, overflow = carry
            i, ranking = order[t], rankings[t]
            c = z[i]
            stats = gm.move_point(stats, c, ranking, -1.0)
            S = S.at[c].add(-codes(ranking, pos[c]))
            cache = refresh(cache, S, stats.Nj, c)
            ll = _beta_log_lik_existing(nu, r, ranking, pos, S, stats.Nj, cache)
            logits, has_empty = gm.seat_logits(stats.n, state.alpha, ll, lemma[t])
            k = sample_index(logits, uniforms[i, 0])
            is_new = stats.n[k] < 0.5
            pos_k = jnp.where(is_new, new_pos[t], pos[k])
            pos = pos.at[k].set(pos_k)
            S = S.at[k].set(jnp.where(is_new, 0.0, S[k]) + codes(ranking, pos_k))
            stats = gm.move_point(stats, k, ranking, 1.0)
            cache = refresh(cache, S, stats.Nj, k)
            return z.at[i].set(k), stats, pos, S, cache, overflow | ~has_empty

        S0 = lsigma(state.stats.R, slots.pos)
        z, stats, pos, _, _, overflow = jax.lax.fori_loop(
            0, visits, body, (state.z, state.stats, slots.pos, S0, _beta_cached_terms(nu, r, S0, state.stats.Nj),
                         state.overflow))
        return state._replace(z=z, stats=stats, overflow=overflow, extras=MallowsExtras(slots._replace(pos=pos)))

    def log_joint(state):
        slots, stats = state.extras.slots, state.stats
        a0 = nu * r
        S = lsigma(stats.R, slots.pos)
        per = jnp.sum(betaln(a0 + S, nu + stats.Nj + 1.0) - betaln(a0, nu + 1.0), axis=-1) - math.lgamma(n + 1)
        return gm.log_partition_prior(state) + jnp.sum(jnp.where(stats.n > 0.5, per, 0.0))

    return gm.kernel("mallows-beta", False, one_slot, sweep, log_joint)


register("mallows-slice", build_slice_gibbs, exact=True, applies=applies,
         description="Slice-Gibbs for DP mixtures of Generalized Mallows rankings (Meila & Chen 2010, "
                     "Fig. 1): sigma by stagewise-proposal MH, theta by slice sampling; exact")
register("mallows-beta", build_beta_gibbs, exact=False, applies=applies,
         description="Beta-Gibbs for DP mixtures of Generalized Mallows rankings (Meila & Chen 2010, "
                     "Fig. 5): theta integrated out in the infinite-n approximation; APPROXIMATE")
