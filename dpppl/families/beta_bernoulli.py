"""Independent Bernoulli components of binary vectors with Beta priors.

Model, independently in every dimension d: p_kd ~ Beta(a_d, b_d),
x_id | z_i = k ~ Bernoulli(p_kd), for x_i in {0, 1}^D.

Sufficient statistics of a set c of n points: n and the per-dimension numbers of ones
s1 = sum x. Integrating p out (Gelman et al. 2013, sec. 2.4; Bishop 2006, sec. 2.1.1):

    log p(x_c) = sum_d [log B(a_d + s1_d, b_d + n - s1_d) - log B(a_d, b_d)],

with B the Beta function; the posterior is Beta(a + s1, b + n - s1) and the predictive
probability of a one is (a + s1) / (a + b + n). The predictive of one point against C
clusters is one matrix-vector product, `log p0 + x . log(p1 / p0)`: O(C D).

References
----------
A. Gelman, J. B. Carlin, H. S. Stern, D. B. Dunson, A. Vehtari and D. B. Rubin,
"Bayesian Data Analysis", 3rd ed., CRC Press, 2013.
C. M. Bishop, "Pattern Recognition and Machine Learning", Springer, 2006.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betaln

from dpppl.core.expressions import check_hyper
from dpppl.families.base import Family, check_entries, log_clipped, resolve_fields


class BinaryStats(NamedTuple):
    """Statistics of a set of binary vectors: `n` points and `s1 = sum x` (D,)."""

    n: jax.Array
    s1: jax.Array


class BernoulliParams(NamedTuple):
    """Product of Bernoullis as `log p(x) = log_p0 + x . log_odds`: `log_odds` (..., D)
    and `log_p0 = sum_d log(1 - p_d)` (...)."""

    log_odds: jax.Array
    log_p0: jax.Array


@dataclasses.dataclass(frozen=True)
class BetaBernoulli(Family):
    """Independent Bernoulli components of binary vectors with Beta(a, b) priors.

    Parameters
    ----------
    a, b : float or array (D,), default 1.0
        Beta prior of each dimension's probability of a one, > 0 (a scalar: shared by all
        dimensions). The default is the uniform prior.

    Notes
    -----
    Parameters drawn by [`posterior_draw`][dpppl.families.beta_bernoulli.BetaBernoulli.posterior_draw] and
    `numpyro_sample_params` are
    `{"probs": (..., D)}`.
    """

    a: Any = None
    b: Any = None

    name = "BetaBernoulli"
    data_kind = "binary"
    observation = "Bernoulli"
    defaults = {"a": 1.0, "b": 1.0}
    random_supports = {"a": "positive", "b": "positive"}

    def check_data(self, x):
        """Values must be 0 or 1 (booleans are accepted)."""
        x = np.asarray(x, dtype=float)
        check_entries(self.name, x, (x == 0) | (x == 1), "binary (0 or 1)")
        return x

    def resolve(self, x: np.ndarray) -> "BetaBernoulli":
        v = resolve_fields(self, x, self.defaults)
        D = x.shape[1]
        return BetaBernoulli(
            a=check_hyper(self.name, "a", v["a"], shape=(D,), count=True),
            b=check_hyper(self.name, "b", v["b"], shape=(D,), count=True),
        )

    @property
    def dim(self) -> int:
        return int(np.shape(self.a)[0])

    def empty_stats(self, shape=()):
        return BinaryStats(jnp.zeros(shape), jnp.zeros(shape + (self.dim,)))

    def point_stats(self, x):
        x = jnp.asarray(x)
        return BinaryStats(jnp.ones(x.shape[:-1], x.dtype), x)

    def _posterior(self, stats):
        """Posterior Beta parameters (a + s1, b + n - s1), each (..., D)."""
        return self.a + stats.s1, self.b + stats.n[..., None] - stats.s1

    def log_marginal(self, stats):
        an, bn = self._posterior(stats)
        return jnp.sum(betaln(an, bn) - betaln(self.a, self.b), axis=-1)

    def predictive_params(self, stats):
        an, bn = self._posterior(stats)
        log_total = jnp.log(an + bn)
        log_p0 = jnp.log(bn) - log_total
        return BernoulliParams(jnp.log(an) - jnp.log(bn), jnp.sum(log_p0, axis=-1))

    def log_predictive(self, params, x):
        return params.log_p0 + params.log_odds @ x

    def posterior_draw(self, rng_key, stats):
        """Draw `probs ~ Beta(a + s1, b + n - s1)` per row."""
        an, bn = self._posterior(stats)
        return {"probs": jax.random.beta(rng_key, an, bn)}

    def log_likelihood(self, params, x):
        p = params["probs"]
        log_p1, log_p0 = log_clipped(p), log_clipped(1.0 - p)
        return x @ (log_p1 - log_p0).T + jnp.sum(log_p0, axis=-1)

    def sample_points(self, rng_key, params, labels):
        p = params["probs"][labels]
        return jax.random.bernoulli(rng_key, p).astype(p.dtype)

    def numpyro_sample_params(self, num_components):
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("component", num_components):
            probs = numpyro.sample("theta_probs", dist.Beta(jnp.asarray(self.a),
                                                            jnp.asarray(self.b)).to_event(1))
        return {"probs": probs}
