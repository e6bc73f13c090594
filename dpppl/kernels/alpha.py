"""Resampling the concentration alpha given the partition.

For a Dirichlet process with alpha ~ Gamma(a, b) (rate b), Escobar & West (1995,
sec. 6) introduce eta | alpha, K ~ Beta(alpha + 1, N); then alpha | eta, K is the
two-component mixture

    pi Gamma(a + K, b - log eta) + (1 - pi) Gamma(a + K - 1, b - log eta),
    pi / (1 - pi) = (a + K - 1) / (N (b - log eta)),

which leaves p(alpha | K, N) ∝ Gamma(alpha; a, b) alpha^K Gamma(alpha) / Gamma(alpha + N)
invariant. For a Pitman-Yor prior (discount d > 0) the EPPF's dependence on alpha,
prod_{j<K}(alpha + j d) / (alpha + 1)_{N-1}, has no such augmentation here, so alpha is
updated by slice sampling on log alpha (Neal 2003, stepping out and shrinkage).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .base import Kernel
from .state import num_clusters


def escobar_west(rng_key, alpha, k, n, shape, rate):
    """One Escobar & West (1995) update of a DP concentration with a Gamma(shape, rate) prior."""
    k_eta, k_mix, k_gamma = jax.random.split(rng_key, 3)
    eta = jax.random.beta(k_eta, alpha + 1.0, n)
    rate_post = rate - jnp.log(eta)
    odds = (shape + k - 1.0) / (n * rate_post)
    pick_first = jax.random.uniform(k_mix) < odds / (1.0 + odds)
    shape_post = jnp.where(pick_first, shape + k, shape + k - 1.0)
    return jax.random.gamma(k_gamma, shape_post) / rate_post


def slice_log_alpha(rng_key, alpha, log_density, width=1.0, max_steps=32, max_shrinks=200):
    """Slice-sample u = log alpha with target log_density(alpha) + u (the Jacobian).

    Stepping out is capped at ``max_steps`` per side and shrinkage at ``max_shrinks``
    proposals; the level is drawn with ``log U <= 0`` and accepted with ``>=``, so the
    current point always lies in the slice and the loop ends even when rounding makes the
    level equal to the current density. If the target is not finite at the current
    point, or no proposal is accepted within the cap (each rejection shrinks the
    interval, so this takes more than 2^-200 of its width), alpha is left unchanged.
    """
    def target(u):
        return log_density(jnp.exp(u)) + u

    k_level, k_pos, k_shrink = jax.random.split(rng_key, 3)
    u0 = jnp.log(alpha)
    target0 = target(u0)
    level = target0 + jnp.log(jax.random.uniform(k_level, minval=1e-300))
    left = u0 - width * jax.random.uniform(k_pos)
    right = left + width

    def step_out(bound, direction):
        def cond(c):
            b, i = c
            return (i < max_steps) & (target(b) >= level)
        return jax.lax.while_loop(cond, lambda c: (c[0] + direction * width, c[1] + 1), (bound, 0))[0]

    left, right = step_out(left, -1.0), step_out(right, 1.0)

    def cond(c):
        return ~c[3] & (c[5] < max_shrinks)

    def shrink(c):
        lo, hi, key, _, _, i = c
        key, sub = jax.random.split(key)
        u = jax.random.uniform(sub, minval=lo, maxval=hi)
        ok = target(u) >= level
        lo = jnp.where(~ok & (u < u0), u, lo)
        hi = jnp.where(~ok & (u >= u0), u, hi)
        return lo, hi, key, ok, u, i + 1

    finite = jnp.isfinite(target0)
    _, _, _, ok, u, _ = jax.lax.while_loop(cond, shrink, (left, right, k_shrink, ~finite, u0, 0))
    return jnp.exp(jnp.where(ok & finite, u, u0))


def build_alpha_kernel(bound_model) -> Kernel:
    """The alpha move appended to every kernel when alpha has a Gamma prior."""
    prior = bound_model.prior
    gamma = prior.alpha
    n = bound_model.num_points

    if prior.discount == 0:
        def step(rng_key, state, x):
            k = num_clusters(state)
            alpha = escobar_west(rng_key, state.alpha, k, n, gamma.shape, gamma.rate)
            return state._replace(alpha=alpha.astype(state.alpha.dtype)), {}
    else:
        def step(rng_key, state, x):
            counts = state.stats.n

            def log_density(a):
                return prior.log_eppf(counts, a) + gamma.log_prob(a)
            alpha = slice_log_alpha(rng_key, state.alpha, log_density)
            return state._replace(alpha=alpha.astype(state.alpha.dtype)), {}

    return Kernel("alpha", exact=True, step=step)
