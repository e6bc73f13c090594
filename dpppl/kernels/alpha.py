"""Resampling the concentration alpha given the partition.

For a Dirichlet process with alpha ~ Gamma(a, b) (rate b), Escobar & West (1995,
sec. 6) introduce eta | alpha, K ~ Beta(alpha + 1, N); then alpha | eta, K is the
two-component mixture

    pi Gamma(a + K, b - log eta) + (1 - pi) Gamma(a + K - 1, b - log eta),
    pi / (1 - pi) = (a + K - 1) / (N (b - log eta)),

which leaves p(alpha | K, N) ∝ Gamma(alpha; a, b) alpha^K Gamma(alpha) / Gamma(alpha + N)
invariant. For a Pitman-Yor prior (discount d > 0) the EPPF's dependence on alpha,
prod_{j<K}(alpha + j d) / (alpha + 1)_{N-1}, has no such augmentation here, so alpha is
updated by slice sampling on log alpha (Neal 2003, stepping out and shrinkage). A random
discount (`dpppl.kernels.discount`) is a Pitman-Yor prior too: alpha's slice update then
conditions on the state's d (the EPPF at `BoundModel.at_hyperparameters(state.hyper).prior`).

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

import jax.numpy as jnp

from dpppl.core.numerics import log_gamma_draw, slice_log
from dpppl.core.state import num_clusters
from dpppl.kernels.base import Kernel, NoInfo, register_prior_move


def escobar_west(rng_key, alpha, k, n, shape, rate):
    """One Escobar & West (1995) update of a DP concentration with a Gamma(shape, rate) prior:
    the new alpha, drawn as log alpha and kept as `_normal(log alpha)`.

    Every random number it needs comes from one vectorised gamma draw (one copy of the gamma
    rejection sampler and one random draw per round in the compiled step;
    [`log_gamma_draw`][dpppl.core.numerics.log_gamma_draw]): G1 ~ Gamma(alpha + 1), G2 ~ Gamma(N),
    G3 ~ Gamma(a + K - 1) and E, E1, E2 ~ Gamma(1) = Exp(1), independent. eta = G1 / (G1 + G2) ~
    Beta(alpha + 1, N); since Gamma(s + 1) is the law of G + E for G ~ Gamma(s) and E ~ Exp(1)
    independent, the mixture's first component is (G3 + E) / (b - log eta) and its second
    G3 / (b - log eta); the first is picked when U < pi with U = E1 / (E1 + E2) ~ Beta(1, 1), the
    uniform law."""
    dtype = jnp.result_type(alpha, float)
    one = jnp.ones((), dtype)
    shapes = jnp.stack([alpha + 1.0, n, shape + k - 1.0, one, one, one]).astype(dtype)
    log_g1, log_g2, log_g3, log_e, log_e1, log_e2 = log_gamma_draw(rng_key, shapes, (6,), dtype)
    log_eta = log_g1 - jnp.logaddexp(log_g1, log_g2)
    rate_post = rate - log_eta
    odds = (shape + k - 1.0) / (n * rate_post)
    pick_first = log_e1 - jnp.logaddexp(log_e1, log_e2) < jnp.log(odds / (1.0 + odds))
    log_gamma = jnp.where(pick_first, jnp.logaddexp(log_g3, log_e), log_g3)
    return _normal(log_gamma - jnp.log(rate_post))


def _normal(log_alpha):
    """exp(log_alpha), at least the smallest normal number of its dtype (module docstring)."""
    return jnp.maximum(jnp.exp(log_alpha), jnp.finfo(log_alpha.dtype).tiny)


def build_alpha_kernel(bound_model) -> Kernel:
    """The alpha move appended to every kernel when alpha has a Gamma prior."""
    prior = bound_model.prior
    gamma = prior.alpha
    n = bound_model.points  # traced when the points are padded (Kernel.masked_points)

    if prior.random_discount is None and prior.discount == 0:
        def step(rng_key, state, x):
            k = num_clusters(state)
            alpha = escobar_west(rng_key, state.alpha, k, n, gamma.shape, gamma.rate)
            return state._replace(alpha=alpha.astype(state.alpha.dtype)), NoInfo()
    else:
        def step(rng_key, state, x):
            counts = state.stats.n
            eppf = bound_model.at_hyperparameters(state.hyper).prior.log_eppf  # at the state's discount

            def target(u):
                return eppf(counts, jnp.exp(u)) + gamma.log_prob_of_log(u)
            alpha = _normal(slice_log(rng_key, jnp.log(state.alpha), target))
            return state._replace(alpha=alpha.astype(state.alpha.dtype)), NoInfo()

    return Kernel("alpha", exact=True, step=step, masked_points=True, light_compile=True)


register_prior_move("alpha", build_alpha_kernel)
