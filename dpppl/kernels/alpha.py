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

Both moves draw log alpha, never alpha itself: with a small Gamma shape a (Gamma(1e-3, 1e3),
or the common Gamma(1e-3, 1e-3)) the conditional puts mass near alpha^(a - 1) around 0, so
about half the Gamma(a) draws given one cluster lie below the smallest normal number
(2.2e-308 in float64), which XLA on the CPU computes as 0; log 0 then made the log joint NaN.
The kept value is max(exp(log alpha), tiny): a draw below the smallest normal number `tiny`
is recorded as `tiny`, the nearest value inside alpha's support (0, inf) that the run's float
dtype computes with. Every quantity a move computes from alpha is then the same as for the
exact draw to the dtype's rounding (tiny + 1 == 1; the new-cluster weight alpha / (N - 1 +
alpha) is below 1e-307 either way), so the partition and eta draws keep their exact law.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpppl.core.numerics import slice_log
from dpppl.core.state import num_clusters
from dpppl.kernels.base import Kernel, NoInfo, register_prior_move


def escobar_west(rng_key, alpha, k, n, shape, rate):
    """One Escobar & West (1995) update of a DP concentration with a Gamma(shape, rate) prior:
    the new alpha, drawn as log alpha and kept as `_normal(log alpha)`."""
    k_eta, k_mix, k_gamma = jax.random.split(rng_key, 3)
    eta = jax.random.beta(k_eta, alpha + 1.0, n)
    rate_post = rate - jnp.log(eta)
    odds = (shape + k - 1.0) / (n * rate_post)
    pick_first = jax.random.uniform(k_mix) < odds / (1.0 + odds)
    shape_post = jnp.where(pick_first, shape + k, shape + k - 1.0)
    return _normal(jax.random.loggamma(k_gamma, shape_post) - jnp.log(rate_post))


def _normal(log_alpha):
    """exp(log_alpha), at least the smallest normal number of its dtype (module docstring)."""
    return jnp.maximum(jnp.exp(log_alpha), jnp.finfo(log_alpha.dtype).tiny)


def build_alpha_kernel(bound_model) -> Kernel:
    """The alpha move appended to every kernel when alpha has a Gamma prior."""
    prior = bound_model.prior
    gamma = prior.alpha
    n = bound_model.points  # traced when the points are padded (Kernel.masked_points)

    if prior.discount == 0:
        def step(rng_key, state, x):
            k = num_clusters(state)
            alpha = escobar_west(rng_key, state.alpha, k, n, gamma.shape, gamma.rate)
            return state._replace(alpha=alpha.astype(state.alpha.dtype)), NoInfo()
    else:
        def step(rng_key, state, x):
            counts = state.stats.n

            def target(u):
                return prior.log_eppf(counts, jnp.exp(u)) + gamma.log_prob_of_log(u)
            alpha = _normal(slice_log(rng_key, jnp.log(state.alpha), target))
            return state._replace(alpha=alpha.astype(state.alpha.dtype)), NoInfo()

    return Kernel("alpha", exact=True, step=step, masked_points=True)


register_prior_move("alpha", build_alpha_kernel)
