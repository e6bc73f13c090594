"""Full-covariance Gaussian components with a Normal-Inverse-Wishart prior.

Model: Sigma_k ~ IW(psi0, nu0), mu_k | Sigma_k ~ N(mu0, Sigma_k / kappa0),
x_i | z_i = k ~ N(mu_k, Sigma_k).

Sufficient statistics of a set c of points: n, s1 = sum x, s2 = sum x x^T. With
kappa_n = kappa0 + n, nu_n = nu0 + n, mu_n = (kappa0 mu0 + s1) / kappa_n and
psi_n = psi0 + s2 + kappa0 mu0 mu0^T - kappa_n mu_n mu_n^T (Murphy 2007, eqs. 250-254):

    log p(x_c) = -n D/2 log pi + log Gamma_D(nu_n/2) - log Gamma_D(nu0/2)
                 + nu0/2 log|psi0| - nu_n/2 log|psi_n| + D/2 (log kappa0 - log kappa_n)

and the posterior predictive is a multivariate Student-t with nu_n - D + 1 degrees of
freedom, location mu_n and scale psi_n (kappa_n + 1) / (kappa_n (nu_n - D + 1)).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import multigammaln

from dpppl.core import numerics_random as random
from dpppl.core.expressions import check_hyper, float_limits
from dpppl.core.numerics import normal_draw
from dpppl.families.base import Family, resolve_fields, scale_matrix, squared_deviations
from dpppl.families.gaussian import (GaussianStats, cholesky, gaussian_point_stats, inverse_wishart_bartlett,
                                     logdet_pd, mvn_log_likelihood, solve_lower, student_t_logpdf, student_t_params,
                                     whitened_log_likelihood_rows, whitening_cholesky, whitening_full)


@dataclasses.dataclass(frozen=True)
class NormalInverseWishart(Family):
    """Gaussian components with unknown mean and full covariance.

    Parameters
    ----------
    mu0 : array (D,), default mean(x)
        Prior mean of the cluster means.
    kappa0 : float, default 0.1
        Prior pseudo-count of the mean: the cluster mean has prior covariance
        Sigma / kappa0.
    nu0 : float, default D + 2
        Inverse-Wishart degrees of freedom, > D - 1. With `D + 2` the prior mean of
        Sigma is `psi0`.
    psi0 : array (D, D) or float, default cov(x) / 10
        Inverse-Wishart scale matrix, positive definite; a number s stands for s I (the
        identity scaled, not a matrix of s).
    """

    mu0: Any = None
    kappa0: Any = None
    nu0: Any = None
    psi0: Any = None

    name = "NormalInverseWishart"
    data_kind = "real"
    observation = "Normal"
    locations = ("mu0",)
    parameter_locations = ("mu",)
    random_supports = {"mu0": "real", "kappa0": "positive", "psi0": "positive"}
    #: the random hyperparameters with a closed-form conditional given the clusters' parameters, and
    #: the prior that makes it conjugate (`dpppl.kernels.hyperparameters`): mu_c ~ N(mu0, Sigma_c / kappa0)
    #: is a Normal likelihood of mu0 and a Gamma one of kappa0
    conjugate_hyperparameters = {"mu0": "Normal", "kappa0": "Gamma", "psi0": "Gamma"}
    defaults = {"mu0": "mean(x)", "kappa0": 0.1, "nu0": "D + 2", "psi0": "cov(x) / 10"}

    def resolve(self, x: np.ndarray) -> "NormalInverseWishart":
        """Resolved hyperparameters, checked (`check_hyper`) so that psi_n = psi0 + s2 +
        kappa0 mu0 mu0^T - kappa_n mu_n mu_n^T stays positive definite in the run's float dtype:
        its terms of size kappa0 |mu0 - xbar|^2 (about the data mean xbar) carry a rounding error
        eps times that, which must stay below a quarter of psi0's smallest eigenvalue; and the
        scatter a cluster adds to psi0 (at most sum |x - mu0|^2) must not make psi_n numerically
        singular (psi0 = cov(x) / 1e300 gave NaN for clusters of one point)."""
        v = resolve_fields(self, x, self.defaults)
        D = x.shape[1]
        mu0 = check_hyper(self.name, "mu0", v["mu0"], shape=(D,))
        kappa0 = check_hyper(self.name, "kappa0", v["kappa0"], shape=(), count=True)
        psi0 = check_hyper(self.name, "psi0", scale_matrix(self.name, "psi0", v["psi0"], D), shape=(D, D),
                           pos_def=True)
        with np.errstate(over="ignore"):  # a tiny kappa0 puts no bound on mu0
            distance = np.sqrt(np.linalg.eigvalsh(psi0)[0] / (4 * float_limits().eps * kappa0))
        check_hyper(self.name, "mu0", np.linalg.norm(mu0 - x.mean(axis=0)), at_most=(
            distance, "the distance |mu0 - mean(x)| beyond which rounding makes the posterior scale psi_n "
            "indefinite"))
        eig = np.linalg.eigvalsh(psi0)
        scatter = float(np.sum(squared_deviations(self.name, x, mu0)))
        check_hyper(self.name, "psi0", eig[0], at_least=(
            D * float_limits().eps * (eig[-1] + scatter), "its smallest eigenvalue, against D eps (its largest + "
            "sum |x - mu0|^2, the largest scatter a cluster adds): below it psi_n is numerically singular"))
        return NormalInverseWishart(
            mu0=mu0, kappa0=kappa0,
            nu0=check_hyper(self.name, "nu0", v["nu0"], shape=(), greater_than=D - 1, count=True),
            psi0=psi0,
        )

    @property
    def dim(self) -> int:
        return int(np.shape(self.mu0)[0])

    def empty_stats(self, shape=()):
        D = self.dim
        return GaussianStats(jnp.zeros(shape), jnp.zeros(shape + (D,)), jnp.zeros(shape + (D, D)))

    def point_stats(self, x):
        return gaussian_point_stats(x)

    def weighted_stats(self, x, weights):
        """sum_i w_i (1, x_i, x_i x_i^T) as matrix products (no (B, D, D) array)."""
        wx = weights[:, None] * x
        return GaussianStats(jnp.sum(weights), jnp.sum(wx, axis=0), wx.T @ x)

    def _posterior(self, stats):
        n = stats.n
        kn = self.kappa0 + n
        nun = self.nu0 + n
        mun = (self.kappa0 * self.mu0 + stats.s1) / kn[..., None]
        psin = (self.psi0 + stats.s2 + self.kappa0 * jnp.outer(self.mu0, self.mu0)
                - kn[..., None, None] * mun[..., :, None] * mun[..., None, :])
        return kn, nun, mun, psin

    def log_marginal(self, stats):
        D = self.dim
        kn, nun, _, psin = self._posterior(stats)
        logdet_n = logdet_pd(psin)
        logdet_0 = logdet_pd(self.psi0)
        return (-0.5 * stats.n * D * jnp.log(jnp.pi)
                + multigammaln(nun / 2, D) - multigammaln(self.nu0 / 2, D)
                + 0.5 * self.nu0 * logdet_0 - 0.5 * nun * logdet_n
                + 0.5 * D * (jnp.log(self.kappa0) - jnp.log(kn)))

    def predictive_params(self, stats):
        D = self.dim
        kn, nun, mun, psin = self._posterior(stats)
        df = nun - D + 1
        scale = psin * ((kn + 1) / (kn * df))[..., None, None]
        return student_t_params(df, mun, scale)

    def log_predictive(self, params, x):
        return student_t_logpdf(params, x)

    def posterior_draw(self, rng_key, stats):
        """Draw (mu, Sigma) per row: Sigma ~ IW(psi_n, nu_n), mu ~ N(mu_n, Sigma/kappa_n).

        Sigma by the Bartlett decomposition (`dpppl.families.gaussian.inverse_wishart_bartlett`: its
        chi-squares by `gamma_draw`, its normals and mu's by `normal_draw`, a few HLO instructions where
        `jax.random.gamma` and float64 `jax.random.normal` are hundreds to thousands per call site).
        Plain XLA operations only (see `dpppl.families.gaussian.cholesky`).
        """
        kn, nun, mun, psin = self._posterior(stats)
        k_sigma, k_mu = random.split(rng_key)
        sigma, _, _ = inverse_wishart_bartlett(k_sigma, psin, nun, psin.shape[:-2])
        chol = cholesky(sigma / kn[..., None, None])
        eps = normal_draw(k_mu, mun.shape, mun.dtype)
        mu = mun + jnp.einsum("...ij,...j->...i", chol, eps)
        return {"mu": mu, "cov": sigma}

    def mean_precision(self, params):
        """The precision of each cluster mean's prior about `mu0`, kappa0 Sigma^-1 (..., D, D), at the
        parameters `params` (`posterior_draw`'s); proportional to kappa0."""
        chol = cholesky(params["cov"])
        eye = jnp.broadcast_to(jnp.eye(self.dim, dtype=chol.dtype), chol.shape)
        inverse_chol = solve_lower(chol, eye)
        return self.kappa0 * jnp.einsum("...ki,...kj->...ij", inverse_chol, inverse_chol)

    def log_likelihood(self, params, x):
        """log N(x_i | mu_k, Sigma_k) (N, K); from the Cholesky factors when `params` carry them
        (`cov_tril`, the compiled NumPyro model's: `numpyro_sample_params`), else from `cov`."""
        if "cov_tril" in params:
            return whitened_log_likelihood_rows(whitening_cholesky(params["mu"], params["cov_tril"]), x).T
        return mvn_log_likelihood(params["mu"], params["cov"], x)

    def whitening(self, params):
        """Parameters in the whitened form of `Whitening`."""
        return whitening_full(params["mu"], params["cov"])

    def sample_points(self, rng_key, params, labels):
        mu, cov = params["mu"][labels], params["cov"][labels]
        eps = random.normal(rng_key, mu.shape, mu.dtype)
        return mu + jnp.einsum("...ij,...j->...i", cholesky(cov), eps)

    def numpyro_sample_params(self, num_components):
        """Inside a NumPyro model: `num_components` components from the prior. The covariance
        Sigma_k = L_k L_k^T is drawn as its Cholesky factor, the site `theta_cov_tril` with the law
        of the factor of an IW(psi0, nu0) matrix (NumPyro's `InverseWishartCholesky`), and recorded
        as the deterministic site `theta_cov`; mu_k (site `theta_mu`) ~ N(mu0, Sigma_k / kappa0)
        with scale L_k / sqrt(kappa0). NUTS moves the same unconstrained coordinates, under the same
        potential, as for an `InverseWishart` site `theta_cov` (whose support transform is this
        factor's, then L L^T); the factor is not computed again from Sigma_k by the prior, the mean's
        prior and the likelihood (three Cholesky factorisations and their gradients fewer in every
        gradient of the potential)."""
        import numpyro
        import numpyro.distributions as dist

        psi0 = jnp.asarray(self.psi0)  # the factors' law batched already: NumPyro cannot draw it plate-expanded
        scale_tril = jnp.broadcast_to(jnp.linalg.cholesky(psi0), (num_components,) + psi0.shape)
        with numpyro.plate("component", num_components):
            tril = numpyro.sample("theta_cov_tril", dist.InverseWishartCholesky(self.nu0, scale_tril=scale_tril))
            cov = numpyro.deterministic("theta_cov", tril @ jnp.swapaxes(tril, -1, -2))
            mu = numpyro.sample("theta_mu", dist.MultivariateNormal(
                jnp.asarray(self.mu0), scale_tril=tril / jnp.sqrt(self.kappa0)))
        return {"mu": mu, "cov": cov, "cov_tril": tril}
