"""Gaussian components with a known diagonal covariance and a Gaussian prior on the mean.

Model, independently in every dimension d:

    mu_kd ~ N(mu0_d, tau2_d),    x_id | z_i = k ~ N(mu_kd, sigma2_d).

Sufficient statistics of a set c of n points: n, s1 = sum x and s2 = sum x**2 (per
dimension). With S = sum (x - mu0) and Q = sum (x - mu0)**2, the n values of one
dimension are jointly normal with mean mu0 1 and covariance sigma2 I + tau2 1 1^T, whose
determinant is sigma2^n (1 + n tau2 / sigma2) and whose inverse is
(I - tau2 / (sigma2 + n tau2) 1 1^T) / sigma2 (Sherman-Morrison), so

    log p(x_c) = sum_d [ -n/2 log(2 pi sigma2) - 1/2 log(1 + n tau2 / sigma2)
                         - (Q - tau2 S^2 / (sigma2 + n tau2)) / (2 sigma2) ].

The posterior of the mean is N(mu_n, v_n) with 1/v_n = 1/tau2 + n/sigma2 and
mu_n = v_n (mu0/tau2 + s1/sigma2), and the posterior predictive is N(mu_n, v_n + sigma2)
per dimension (Murphy 2007, section on the Normal prior; Bishop 2006, sec. 2.3.6). Evaluating the
predictive of one point against C clusters costs O(C D): this is the family of the
large benchmarks.

References
----------
K. P. Murphy, "Conjugate Bayesian analysis of the Gaussian distribution", 2007.
C. M. Bishop, "Pattern Recognition and Machine Learning", Springer, 2006.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from dpppl.core import numerics_random as random
from dpppl.core.expressions import check_hyper, float_limits
from dpppl.families.base import Family, resolve_fields, squared_deviations
from dpppl.families.gaussian import (centered_sums, diagonal_normal_log_likelihood, diagonal_normal_logpdf,
                                     diagonal_normal_params, diagonal_empty_stats, diagonal_point_stats,
                                     whitening_diagonal)


@dataclasses.dataclass(frozen=True)
class NormalKnownCov(Family):
    """Gaussian components with unknown mean and known diagonal covariance.

    Parameters
    ----------
    sigma2 : float or array (D,), default var(x) / 10
        Known within-cluster variance of every dimension (a scalar: `sigma2 I`).
        The default supposes clusters about ten times narrower than the data.
    mu0 : float or array (D,), default mean(x)
        Prior mean of the cluster means.
    tau2 : float or array (D,), default var(x)
        Prior variance of the cluster means: the cluster means spread as widely as the
        data do.

    Notes
    -----
    `var(x)` is the per-dimension sample variance. Parameters drawn by
    [`posterior_draw`][dpppl.families.normal_known.NormalKnownCov.posterior_draw] and `numpyro_sample_params` are
    `{"mu": (..., D)}`.
    """

    sigma2: Any = None
    mu0: Any = None
    tau2: Any = None

    name = "NormalKnownCov"
    data_kind = "real"
    observation = "Normal"
    locations = ("mu0",)
    parameter_locations = ("mu",)
    random_supports = {"sigma2": "positive", "mu0": "real", "tau2": "positive"}
    #: the random hyperparameters with a closed-form conditional given the clusters' means
    #: (`dpppl.kernels.hyperparameters`): mu_c ~ N(mu0, tau2) is a Normal likelihood of mu0
    conjugate_hyperparameters = {"mu0": "Normal"}
    defaults = {"sigma2": "var(x) / 10", "mu0": "mean(x)", "tau2": "var(x)"}

    def resolve(self, x: np.ndarray) -> "NormalKnownCov":
        """Resolved hyperparameters, checked where the log marginal's terms stay meaningful in
        the run's float dtype for every cluster of `x`: (Q - tau2 S^2 / (sigma2 + n tau2)) / sigma2
        (Q = sum (x - mu0)^2, module docstring) is a difference of terms of size Q whose rounding
        error, eps Q / sigma2, must stay below one nat (sigma2 >= eps Q over all the data), and
        log(1 + N tau2 / sigma2) must not overflow."""
        v = resolve_fields(self, x, self.defaults)
        N, D = x.shape
        mu0 = check_hyper(self.name, "mu0", v["mu0"], shape=(D,))
        limits = float_limits()
        largest = limits.max
        squares = squared_deviations(self.name, x, mu0)
        sigma2 = check_hyper(self.name, "sigma2", v["sigma2"], shape=(D,), positive=True, at_least=(
            limits.eps * squares, "eps sum (x - mu0)^2 over the data: below it the log marginal's rounding error "
            "exceeds one nat"), at_most=(largest / (2 * np.pi), "log(2 pi sigma2) overflows above it"))
        with np.errstate(over="ignore"):  # no bound on tau2 past the largest number
            ratio_bound = sigma2 / N * largest
        tau2 = check_hyper(self.name, "tau2", v["tau2"], shape=(D,), positive=True, at_most=(
            ratio_bound, "above it N tau2 / sigma2 overflows in log(1 + N tau2 / sigma2)"))
        return NormalKnownCov(sigma2=sigma2, mu0=mu0, tau2=tau2)

    @property
    def dim(self) -> int:
        return int(np.shape(self.mu0)[0])

    def empty_stats(self, shape=()):
        return diagonal_empty_stats(shape, self.dim)

    def point_stats(self, x):
        return diagonal_point_stats(x)

    def _posterior(self, stats):
        """Posterior mean `mu_n` and variance `v_n` of the cluster mean, per dimension."""
        vn = 1.0 / (1.0 / self.tau2 + stats.n[..., None] / self.sigma2)
        mun = vn * (self.mu0 / self.tau2 + stats.s1 / self.sigma2)
        return mun, vn

    def log_marginal(self, stats):
        n = stats.n[..., None]
        S, Q = centered_sums(stats, self.mu0)
        per_dim = (-0.5 * n * jnp.log(2 * jnp.pi * self.sigma2)
                   - 0.5 * jnp.log1p(n * self.tau2 / self.sigma2)
                   - 0.5 * (Q - self.tau2 * S * S / (self.sigma2 + n * self.tau2)) / self.sigma2)
        return jnp.sum(per_dim, axis=-1)

    def predictive_params(self, stats):
        mun, vn = self._posterior(stats)
        return diagonal_normal_params(mun, vn + self.sigma2)

    def log_predictive(self, params, x):
        return diagonal_normal_logpdf(params, x)

    def posterior_draw(self, rng_key, stats):
        """Draw `mu ~ N(mu_n, v_n)` per row."""
        mun, vn = self._posterior(stats)
        return {"mu": mun + jnp.sqrt(vn) * random.normal(rng_key, mun.shape)}

    def mean_precision(self, params):
        """The precision of each cluster mean's prior about `mu0`, diag(1 / tau2) (..., D, D), shaped
        for the means `params["mu"]` (..., D)."""
        mu = params["mu"]
        precision = jnp.diag(1.0 / jnp.broadcast_to(jnp.asarray(self.tau2, mu.dtype), mu.shape[-1:]))
        return jnp.broadcast_to(precision, mu.shape + mu.shape[-1:])

    def log_likelihood(self, params, x):
        return diagonal_normal_log_likelihood(params["mu"], self.sigma2, x, self.mu0)

    def whitening(self, params):
        """Parameters in the whitened form of `Whitening`."""
        return whitening_diagonal(params["mu"], jnp.asarray(self.sigma2, params["mu"].dtype))

    def sample_points(self, rng_key, params, labels):
        mu = params["mu"][labels]
        return mu + jnp.sqrt(self.sigma2) * random.normal(rng_key, mu.shape, mu.dtype)

    def numpyro_sample_params(self, num_components):
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("component", num_components):
            mu = numpyro.sample("theta_mu", dist.Normal(jnp.asarray(self.mu0),
                                                        jnp.sqrt(jnp.asarray(self.tau2))).to_event(1))
        return {"mu": mu}
