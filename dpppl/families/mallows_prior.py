"""The conjugate prior P0(sigma, theta | nu, r) of Generalized Mallows components as NumPyro distributions.

Meilă & Chen (2010, sec. 2; module `dpppl.families.generalized_mallows`): sigma is uniform
over the n! permutations and, independently, each dispersion theta_j (j = 1..n-1) has the
density

    p(theta_j) = exp(-a_j theta_j - c ln psi_{m_j}(theta_j)) / B~eta(a_j, c, m_j),   theta_j >= 0,

with a_j = nu r_j, c = nu, m_j = n - j and B~eta of eq. (14) (`log_tbeta`). These are what
the compiled NumPyro model (`dpppl.models.compile`) samples the components of a rankings
model from: `Predictive` draws them (exact draws, `theta_exact`), and `log_prob` is the
normalised density. sigma is discrete, so NUTS cannot move it (the rankings model is
sampled by the `mallows-*` kernels).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from dpppl.families.generalized_mallows import log_tbeta
from dpppl.families.mallows_draws import theta_exact, theta_log_density


class UniformPermutation(dist.Distribution):
    """sigma uniform over the permutations of `n` items, as the position vector `pos`
    (`pos[l]` = sigma(l), the 0-based rank of item l): log p = -log n!."""

    def __init__(self, n: int, batch_shape=(), *, validate_args=None):
        self.n = int(n)
        super().__init__(batch_shape=tuple(batch_shape), event_shape=(self.n,), validate_args=validate_args)

    @property
    def support(self):
        return constraints.independent(constraints.integer_interval(0, self.n - 1), 1)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        size = math.prod(shape)
        keys = jax.random.split(key, size)
        pos = jax.vmap(lambda k: jax.random.permutation(k, self.n))(keys)
        return pos.reshape(shape + (self.n,)).astype(jnp.int32)

    def log_prob(self, value):
        return jnp.full(jnp.shape(value)[:-1], -math.lgamma(self.n + 1.0))


class MallowsTheta(dist.Distribution):
    """The dispersions theta (n-1,) of P0: independent, theta_j with density
    exp(-a_j theta_j - c ln psi_{m_j}(theta_j)) / B~eta(a_j, c, m_j) (eq. 14)."""

    support = constraints.independent(constraints.positive, 1)

    def __init__(self, a, c, m, batch_shape=(), *, validate_args=None):
        self.a, self.m = jnp.asarray(a), jnp.asarray(m)
        self.c = jnp.broadcast_to(jnp.asarray(c, self.a.dtype), self.a.shape)
        super().__init__(batch_shape=tuple(batch_shape), event_shape=self.a.shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape + self.event_shape
        a, c, m = (jnp.broadcast_to(v, shape).ravel() for v in (self.a, self.c, self.m))
        keys = jax.random.split(key, a.shape[0])
        return jax.vmap(theta_exact)(keys, a, c, m).reshape(shape)

    def log_prob(self, value):
        return jnp.sum(theta_log_density(value, self.a, self.c, self.m) - log_tbeta(self.a, self.c, self.m), axis=-1)


__all__ = ["MallowsTheta", "UniformPermutation"]
