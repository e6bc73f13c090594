"""Multinomial components of count vectors with a Dirichlet prior.

Model: theta_k ~ Dirichlet(beta), x_i | z_i = k ~ Multinomial(n_i, theta_k) with
n_i = sum_v x_iv, for count vectors x_i in N^V (bag-of-words documents, histograms).

Sufficient statistics of a set c of points: the number of points n, the summed counts
c_v = sum_i x_iv and the summed log multinomial coefficients
L = sum_i [log Gamma(n_i + 1) - sum_v log Gamma(x_iv + 1)]. With B = sum_v beta_v and
T = sum_v c_v, integrating theta out gives the Dirichlet-multinomial (Polya) law
(Minka 2000; Frigyik et al. 2010, sec. 3)

    log p(x_c) = L + log Gamma(B) - log Gamma(B + T) + sum_v [log Gamma(beta_v + c_v) - log Gamma(beta_v)],

a true log probability of the count vectors (the coefficients are kept so that the
marginal is comparable across families and data sets). The posterior is
Dirichlet(beta + c) and the predictive of one more vector is the same formula with the
prior beta + c.

References
----------
T. P. Minka, "Estimating a Dirichlet distribution", 2000.
B. A. Frigyik, A. Kapila and M. R. Gupta, "Introduction to the Dirichlet distribution and
related processes", UWEE Technical Report 2010-0006, 2010.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from dpppl.core.expressions import check_hyper, count_limit
from dpppl.errors import ArgumentError
from dpppl.families.base import Family, check_entries, log_clipped, resolve_fields


class CountStats(NamedTuple):
    """Statistics of a set of count vectors: `n` points, `counts = sum x` (V,) and
    `log_coef`, the sum of the points' log multinomial coefficients."""

    n: jax.Array
    counts: jax.Array
    log_coef: jax.Array


class DirichletMultinomialParams(NamedTuple):
    """Posterior Dirichlet `alpha = beta + c` (..., V), `log Gamma(alpha)` and
    `log Gamma(sum alpha)` (...), precomputed for the predictive."""

    alpha: jax.Array
    lgamma_alpha: jax.Array
    alpha_sum: jax.Array
    lgamma_alpha_sum: jax.Array


def log_multinomial_coef(x):
    """log (n! / prod_v x_v!) of count vectors `x` (..., V)."""
    return gammaln(jnp.sum(x, axis=-1) + 1) - jnp.sum(gammaln(x + 1), axis=-1)


@dataclasses.dataclass(frozen=True)
class DirichletMultinomial(Family):
    """Multinomial components of count vectors with a Dirichlet(beta) prior.

    Parameters
    ----------
    beta : float or array (V,), default 1.0
        Dirichlet concentration, > 0 (a scalar: symmetric). The default is the uniform
        prior on the simplex; smaller values (e.g. 0.1) suit large sparse vocabularies,
        where they let clusters put their mass on few words.

    Notes
    -----
    Parameters drawn by [`posterior_draw`][dpppl.families.dirichlet_multinomial.DirichletMultinomial.posterior_draw] and
    `numpyro_sample_params` are
    `{"probs": (..., V)}`.
    """

    beta: Any = None

    name = "DirichletMultinomial"
    data_kind = "count"
    observation = "Multinomial"
    defaults = {"beta": 1.0}
    random_supports = {"beta": "positive"}

    def check_data(self, x):
        """Counts must be non-negative integers (a float array holding integers passes)."""
        x = np.asarray(x, dtype=float)
        check_entries(self.name, x, (x >= 0) & (x == np.floor(x)), "non-negative integer counts")
        return x

    def resolve(self, x: np.ndarray) -> "DirichletMultinomial":
        v = resolve_fields(self, x, self.defaults)
        V = x.shape[1]
        return DirichletMultinomial(beta=check_hyper(self.name, "beta", v["beta"], shape=(V,), count=True, at_most=(
            count_limit() / V, "above it the total B = sum(beta), a pseudo-count, no longer changes when a count "
            "is added")))

    @property
    def dim(self) -> int:
        return int(np.shape(self.beta)[0])

    def empty_stats(self, shape=()):
        return CountStats(jnp.zeros(shape), jnp.zeros(shape + (self.dim,)), jnp.zeros(shape))

    def point_stats(self, x):
        x = jnp.asarray(x)
        return CountStats(jnp.ones(x.shape[:-1], x.dtype), x, log_multinomial_coef(x))

    def log_marginal(self, stats):
        alpha = self.beta + stats.counts
        B = jnp.sum(self.beta)
        return (stats.log_coef + gammaln(B) - gammaln(jnp.sum(alpha, axis=-1))
                + jnp.sum(gammaln(alpha) - gammaln(self.beta), axis=-1))

    def predictive_params(self, stats):
        alpha = self.beta + stats.counts
        alpha_sum = jnp.sum(alpha, axis=-1)
        return DirichletMultinomialParams(alpha, gammaln(alpha), alpha_sum, gammaln(alpha_sum))

    def log_predictive(self, params, x):
        return (log_multinomial_coef(x) + params.lgamma_alpha_sum
                - gammaln(params.alpha_sum + jnp.sum(x))
                + jnp.sum(gammaln(params.alpha + x) - params.lgamma_alpha, axis=-1))

    def posterior_draw(self, rng_key, stats):
        """Draw `probs ~ Dirichlet(beta + c)` per row."""
        return {"probs": jax.random.dirichlet(rng_key, self.beta + stats.counts)}

    def log_likelihood(self, params, x):
        return log_multinomial_coef(x)[:, None] + x @ log_clipped(params["probs"]).T

    def sample_points(self, rng_key, params, labels, num_trials=None):
        """Draw count vectors `x ~ Multinomial(num_trials, probs[label])`.

        The model has no law for a vector's total count, so `num_trials` (an integer,
        or an array broadcastable to `labels.shape`) must be given.
        """
        if num_trials is None:
            raise ArgumentError(f"{self.name}.sample_points needs num_trials, the total count of "
                             f"each simulated vector")
        p = params["probs"][labels]
        return jax.random.multinomial(rng_key, jnp.asarray(num_trials, p.dtype), p)

    def numpyro_sample_params(self, num_components):
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("component", num_components):
            probs = numpyro.sample("theta_probs", dist.Dirichlet(jnp.asarray(self.beta)))
        return {"probs": probs}
