"""Diagonal Gaussian components with a Normal-Gamma prior on every dimension.

Model, independently in every dimension d:

    lambda_kd ~ Gamma(a0_d, rate b0_d),   mu_kd | lambda_kd ~ N(mu0_d, 1 / (kappa0_d lambda_kd)),
    x_id | z_i = k ~ N(mu_kd, 1 / lambda_kd).

Sufficient statistics of a set c of n points: n, s1 = sum x and s2 = sum x**2 (per
dimension). With S = sum (x - mu0) and Q = sum (x - mu0)**2 the posterior is
Normal-Gamma with (Murphy 2007, section on the Normal-Gamma prior)

    kappa_n = kappa0 + n,   mu_n = (kappa0 mu0 + s1) / kappa_n,   a_n = a0 + n/2,
    b_n = b0 + (Q - S^2 / kappa_n) / 2,

(Q - S^2 / kappa_n equals sum (x - xbar)^2 + kappa0 n (xbar - mu0)^2 / kappa_n), and

    log p(x_c) = sum_d [ log Gamma(a_n) - log Gamma(a0) + a0 log b0 - a_n log b_n
                         + 1/2 (log kappa0 - log kappa_n) - n/2 log(2 pi) ]

(the same section). The posterior predictive is a product of univariate Student-t
densities with 2 a_n degrees of freedom, location mu_n and squared scale
b_n (kappa_n + 1) / (a_n kappa_n).

References
----------
K. P. Murphy, "Conjugate Bayesian analysis of the Gaussian distribution", 2007.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from dpppl.core import numerics_random as random
from dpppl.core.expressions import check_hyper
from dpppl.families.base import Family, resolve_fields, squared_deviations
from dpppl.families.gaussian import (centered_sums, diagonal_normal_log_likelihood, diagonal_empty_stats,
                                     diagonal_point_stats, diagonal_student_t_logpdf, diagonal_student_t_params,
                                     DiagonalGaussianParams)


@dataclasses.dataclass(frozen=True)
class NormalGamma(DiagonalGaussianParams, Family):
    """Gaussian components with unknown mean and unknown diagonal covariance.

    Every hyperparameter is a scalar (shared by all dimensions) or a (D,) array.

    Parameters
    ----------
    mu0 : float or array (D,), default mean(x)
        Prior mean of the cluster means.
    kappa0 : float or array (D,), default 0.1
        Prior pseudo-count of the mean: mu_d has prior variance 1 / (kappa0 lambda_d).
    a0 : float or array (D,), default 2.0
        Gamma shape of the precisions, > 0. With `a0 = 2` the prior mean of each
        variance 1 / lambda_d is `b0` (as `NormalInverseWishart`'s defaults give a
        prior mean covariance `psi0`).
    b0 : float or array (D,), default var(x) / 10
        Gamma rate of the precisions, > 0.

    Notes
    -----
    `var(x)` is the per-dimension sample variance. Parameters drawn by
    [`posterior_draw`][dpppl.families.normal_gamma.NormalGamma.posterior_draw] and `numpyro_sample_params` are
    `{"mu": (..., D), "var": (..., D)}` with `var = 1 / lambda`.
    """

    mu0: Any = None
    kappa0: Any = None
    a0: Any = None
    b0: Any = None

    name = "NormalGamma"
    data_kind = "real"
    observation = "Normal"
    locations = ("mu0",)
    parameter_locations = ("mu",)
    random_supports = {"mu0": "real", "kappa0": "positive", "a0": "positive", "b0": "positive"}
    defaults = {"mu0": "mean(x)", "kappa0": 0.1, "a0": 2.0, "b0": "var(x) / 10"}

    def resolve(self, x: np.ndarray) -> "NormalGamma":
        v = resolve_fields(self, x, self.defaults)
        D = x.shape[1]
        mu0 = check_hyper(self.name, "mu0", v["mu0"], shape=(D,))
        squared_deviations(self.name, x, mu0)  # sum (x - mu0)^2 finite
        return NormalGamma(
            mu0=mu0,
            kappa0=check_hyper(self.name, "kappa0", v["kappa0"], shape=(D,), count=True),
            a0=check_hyper(self.name, "a0", v["a0"], shape=(D,), count=True),
            b0=check_hyper(self.name, "b0", v["b0"], shape=(D,), positive=True),
        )

    @property
    def dim(self) -> int:
        return int(np.shape(self.mu0)[0])

    def empty_stats(self, shape=()):
        return diagonal_empty_stats(shape, self.dim)

    def point_stats(self, x):
        return diagonal_point_stats(x)

    def _posterior(self, stats):
        """Posterior (mu_n, kappa_n, a_n, b_n), each (..., D)."""
        n = stats.n[..., None]
        S, Q = centered_sums(stats, self.mu0)
        kn = self.kappa0 + n
        mun = (self.kappa0 * self.mu0 + stats.s1) / kn
        an = self.a0 + 0.5 * n
        bn = self.b0 + 0.5 * (Q - S * S / kn)
        return mun, kn, an, bn

    def log_marginal(self, stats):
        _, kn, an, bn = self._posterior(stats)
        n = stats.n[..., None]
        per_dim = (gammaln(an) - gammaln(self.a0) + self.a0 * jnp.log(self.b0) - an * jnp.log(bn)
                   + 0.5 * (jnp.log(self.kappa0) - jnp.log(kn)) - 0.5 * n * jnp.log(2 * jnp.pi))
        return jnp.sum(per_dim, axis=-1)

    def predictive_params(self, stats):
        mun, kn, an, bn = self._posterior(stats)
        return diagonal_student_t_params(2 * an, mun, bn * (kn + 1) / (an * kn))

    def log_predictive(self, params, x):
        return diagonal_student_t_logpdf(params, x)

    def posterior_draw(self, rng_key, stats):
        """Draw `lambda ~ Gamma(a_n, b_n)`, `mu ~ N(mu_n, 1 / (kappa_n lambda))` per row."""
        mun, kn, an, bn = self._posterior(stats)
        k1, k2 = random.split(rng_key)
        lam = jax.random.gamma(k1, an) / bn
        mu = mun + random.normal(k2, mun.shape) / jnp.sqrt(kn * lam)
        return {"mu": mu, "var": 1.0 / lam}

    def log_likelihood(self, params, x):
        return diagonal_normal_log_likelihood(params["mu"], params["var"], x, self.mu0)

    def numpyro_sample_params(self, num_components):
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("component", num_components):
            prec = numpyro.sample("theta_prec", dist.Gamma(jnp.asarray(self.a0),
                                                           jnp.asarray(self.b0)).to_event(1))
            mu = numpyro.sample("theta_mu", dist.Normal(
                jnp.asarray(self.mu0), 1.0 / jnp.sqrt(self.kappa0 * prec)).to_event(1))
        return {"mu": mu, "var": 1.0 / prec}
