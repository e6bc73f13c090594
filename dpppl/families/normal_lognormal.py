"""Diagonal Gaussian components with a non-conjugate prior: Normal means, log-normal scales.

Model, independently in every dimension d:

    mu_kd ~ N(m0_d, s0_d^2),   log sigma_kd ~ N(l0_d, t0_d^2),   x_id | z_i = k ~ N(mu_kd, sigma_kd^2).

The prior of the mean does not scale with the variance (as it does in
[`NormalGamma`][dpppl.families.NormalGamma]), so p(mu, sigma | x_c) and the marginal p(x_c) have
no closed form: the standard non-conjugate case (Neal 2000, sec. 6). The collapsed kernels
need p(x_c), so this family is sampled by the kernels that instantiate parameters:
`kernel="subcluster"` (Chang & Fisher 2013, the first expression of eq. 21) and NUTS on
the truncated model. The collapsed log joint `lp` they report uses p(x_c) by numerical
integration
([`NormalLogNormal.log_marginal_numerical`][dpppl.families.normal_lognormal.NormalLogNormal.log_marginal_numerical]).

The instantiating kernels work with each cluster's parameters as one unconstrained vector
`u = (mu_1..mu_D, log sigma_1..log sigma_D)` (P = 2D numbers), on which the prior is a
product of normals, and with the likelihood of a whole cluster computed from its additive
statistics (n, sum x, sum x^2): for S = sum (x - m0) and Q = sum (x - m0)^2 per dimension,

    sum_i log N(x_id | mu_d, sigma_d^2) = -n/2 log(2 pi) - n log sigma_d
                                          - (Q - 2 (mu_d - m0_d) S + n (mu_d - m0_d)^2) / (2 sigma_d^2).

So a parameter update costs O(K D), not a pass over the points. The data-driven proposal
q(u | x_c) of [`NormalLogNormal.proposal`][dpppl.families.normal_lognormal.NormalLogNormal.proposal] (a normal in u, a
function of the
statistics only, equal to the prior when the cluster is empty) is what the sampler draws
new clusters' parameters from in a split or merge, and the scale of its parameter moves.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jax.scipy.stats import norm

from dpppl.core import numerics_random as random
from dpppl.core.expressions import check_hyper, float_limits
from dpppl.families.base import Family, resolve_fields, squared_deviations
from dpppl.families.gaussian import (centered_sums, diagonal_empty_stats, diagonal_normal_log_likelihood,
                                     diagonal_point_stats, DiagonalGaussianParams)

_LOG_2PI = float(np.log(2 * np.pi))
PROPOSAL_TEMPER = 0.5
"""The likelihood's weight in the proposal q: below 1, so q is wider than the posterior it
approximates (an independence proposal narrower than its target mixes badly in the tails)."""


@dataclasses.dataclass(frozen=True)
class NormalLogNormal(DiagonalGaussianParams, Family):
    """Gaussian components with diagonal covariance and independent Normal / log-normal priors.

    Every hyperparameter is a scalar (shared by all dimensions) or a (D,) array.

    Parameters
    ----------
    m0 : float or array (D,), default mean(x)
        Prior mean of the cluster means.
    s0 : float or array (D,), default sqrt(var(x))
        Prior standard deviation of the cluster means, > 0.
    l0 : float or array (D,), default log(var(x)) / 2 - log(3)
        Prior mean of log sigma: by default clusters are about a third as spread as the data.
    t0 : float or array (D,), default 1
        Prior standard deviation of log sigma, > 0.

    Notes
    -----
    Not conjugate: only the kernels in [`kernels`][dpppl.families.normal_lognormal.NormalLogNormal.kernels] sample it.
    Parameters are
    `{"mu": (..., D), "var": (..., D)}` as for [`NormalGamma`][dpppl.families.NormalGamma].
    """

    m0: Any = None
    s0: Any = None
    l0: Any = None
    t0: Any = None

    name = "NormalLogNormal"
    data_kind = "real"
    observation = "Normal"
    conjugate: ClassVar[bool] = False
    kernels = ("subcluster", "nuts")
    """The kernels that can sample this family (the others need a closed-form marginal)."""
    locations = ("m0",)
    parameter_locations = ("mu",)
    defaults = {"m0": "mean(x)", "s0": "sqrt(var(x))", "l0": "log(var(x)) / 2 - log(3)", "t0": 1.0}

    def resolve(self, x: np.ndarray) -> "NormalLogNormal":
        v = resolve_fields(self, x, self.defaults)
        D = x.shape[1]
        limits = float_limits()
        log_tiny = np.log(limits.tiny)
        variance = "the prior's typical variance exp(2 l0) leaves the normal float range beyond it"
        square = "its square, a prior variance, must be a normal number"
        m0 = check_hyper(self.name, "m0", v["m0"], shape=(D,))
        squared_deviations(self.name, x, m0, name="m0")  # sum (x - m0)^2 finite
        return NormalLogNormal(
            m0=m0,
            s0=check_hyper(self.name, "s0", v["s0"], shape=(D,), at_least=(np.sqrt(limits.tiny), square),
                           at_most=(np.sqrt(limits.max), square)),
            l0=check_hyper(self.name, "l0", v["l0"], shape=(D,), at_least=(log_tiny / 2, variance),
                           at_most=(np.log(limits.max) / 2, variance)),
            t0=check_hyper(self.name, "t0", v["t0"], shape=(D,), at_least=(np.sqrt(limits.tiny), square),
                           at_most=(np.sqrt(limits.max) / 2.5, "measured: the log marginal is -inf from "
                                    "5.35e153 in float64 and 7.36e18 in float32")),
        )

    @property
    def dim(self) -> int:
        return int(np.shape(self.m0)[0])

    @property
    def num_unconstrained(self) -> int:
        """P, the length of the unconstrained parameter vector u = (mu, log sigma)."""
        return 2 * self.dim

    def empty_stats(self, shape=()):
        return diagonal_empty_stats(shape, self.dim)

    def point_stats(self, x):
        return diagonal_point_stats(x)

    # ----- the unconstrained parameters u = (mu, log sigma) ----------------------------
    def params_of(self, u):
        """`{"mu", "var"}` of unconstrained vectors `u` (..., 2D)."""
        D = self.dim
        return {"mu": u[..., :D], "var": jnp.exp(2.0 * u[..., D:])}

    def log_prior(self, u):
        """log p(u) (the prior density of (mu, log sigma)) per row of `u` (..., 2D)."""
        D = self.dim
        return jnp.sum(norm.logpdf(u[..., :D], self.m0, self.s0) + norm.logpdf(u[..., D:], self.l0, self.t0),
                       axis=-1)

    def prior_draw(self, rng_key, shape=()):
        """Unconstrained parameters drawn from the prior, `shape + (2D,)`."""
        loc = jnp.concatenate([self.m0, self.l0])
        scale = jnp.concatenate([self.s0, self.t0])
        return loc + scale * random.normal(rng_key, shape + loc.shape)

    def log_likelihood_of_stats(self, u, stats):
        """sum_{i in c} log f(x_i | u) per row, from the statistics of c (module docstring)."""
        D = self.dim
        mu, log_sd = u[..., :D], u[..., D:]
        n = stats.n[..., None]
        S, Q = centered_sums(stats, self.m0)
        shift = mu - self.m0
        squares = Q - 2.0 * shift * S + n * shift * shift
        return jnp.sum(-0.5 * n * _LOG_2PI - n * log_sd - 0.5 * squares * jnp.exp(-2.0 * log_sd), axis=-1)

    def _spread(self, stats):
        """(n, max(n, 1), S = sum (x - m0), ss = sum (x - xbar)^2) per dimension, n with a
        trailing axis of 1 to broadcast against the (..., D) sums."""
        n = stats.n[..., None]
        S, Q = centered_sums(stats, self.m0)
        safe_n = jnp.maximum(n, 1.0)
        return n, safe_n, S, jnp.maximum(Q - S * S / safe_n, 0.0)

    def proposal(self, stats):
        """(location, scale) per coordinate of the normal proposal q(u | x_c), a function of
        the statistics only. With n points of mean xbar and sum of squared deviations ss,
        sigma_hat^2 = (ss + exp(2 l0)) / (n + 1) (one pseudo-point at the prior's scale) and
        w = `PROPOSAL_TEMPER`:

            mu:        precision w n / sigma_hat^2 + 1 / s0^2,  mean (w n xbar / sigma_hat^2 + m0 / s0^2) / precision;
            log sigma: precision 2 w n + 1 / t0^2,              mean (2 w n log sigma_hat + l0 / t0^2) / precision

        (2n is the curvature of the log likelihood in log sigma at its maximum); with n = 0
        this is the prior."""
        n, safe_n, S, ss = self._spread(stats)
        var_hat = (ss + jnp.exp(2.0 * self.l0)) / (n + 1.0)
        w = PROPOSAL_TEMPER
        prec_mu = w * n / var_hat + 1.0 / self.s0**2
        loc_mu = (w * n * (self.m0 + S / safe_n) / var_hat + self.m0 / self.s0**2) / prec_mu
        prec_ls = 2.0 * w * n + 1.0 / self.t0**2
        loc_ls = (w * n * jnp.log(var_hat) + self.l0 / self.t0**2) / prec_ls
        return (jnp.concatenate([loc_mu, loc_ls], axis=-1),
                jnp.concatenate([jax.lax.rsqrt(prec_mu), jax.lax.rsqrt(prec_ls)], axis=-1))

    def log_proposal(self, u, stats):
        """log q(u | x_c) per row."""
        loc, scale = self.proposal(stats)
        return jnp.sum(norm.logpdf(u, loc, scale), axis=-1)

    def draw_proposal(self, rng_key, stats):
        """u ~ q(u | x_c) per row of `stats`."""
        loc, scale = self.proposal(stats)
        return loc + scale * random.normal(rng_key, loc.shape, loc.dtype)

    def log_marginal_numerical(self, stats, grid_points: int = 2001, width: float = 12.0):
        """log p(x_c) by numerical integration: what the collapsed log joint `lp` and the
        enumeration tests use for this family.

        Per dimension, mu integrates out in closed form given sigma (a normal prior and a
        normal likelihood): with xbar, ss as in [`proposal`][dpppl.families.normal_lognormal.NormalLogNormal.proposal]
        and sigma^2 = exp(2 l),

            log p(x_c | l) = -n/2 log(2 pi sigma^2) - ss / (2 sigma^2) + 1/2 log(2 pi sigma^2 / n)
                             + log N(xbar | m0, s0^2 + sigma^2 / n),

        and l = log sigma is integrated against its N(l0, t0^2) prior with the trapezoidal
        rule on `grid_points` nodes over `+- width` scales of the proposal for log sigma
        ([`proposal`][dpppl.families.normal_lognormal.NormalLogNormal.proposal]; wider than the posterior, and the prior
        itself when n = 0), so
        the grid follows the posterior of l however many points the cluster holds."""
        D = self.dim
        loc, scale = self.proposal(stats)
        loc, scale = loc[..., D:, None], scale[..., D:, None]                   # (..., D, 1)
        n, safe_n, S, ss = (a[..., None] for a in self._spread(stats))           # (..., D or 1, 1)
        xi = jnp.linspace(-width, width, grid_points)
        log_sd = loc + scale * xi                                               # (..., D, G)
        var = jnp.exp(2.0 * log_sd)
        given_sd = (-0.5 * n * (_LOG_2PI + 2.0 * log_sd) - 0.5 * ss / var
                    + 0.5 * (_LOG_2PI + 2.0 * log_sd - jnp.log(safe_n))
                    + norm.logpdf(S / safe_n, 0.0, jnp.sqrt(self.s0[:, None] ** 2 + var / safe_n)))
        given_sd = jnp.where(n > 0, given_sd, 0.0)
        ends = (jnp.arange(grid_points) == 0) | (jnp.arange(grid_points) == grid_points - 1)
        log_weights = (norm.logpdf(log_sd, self.l0[:, None], self.t0[:, None]) + jnp.log(scale)
                       + jnp.log(2.0 * width / (grid_points - 1)) + jnp.where(ends, jnp.log(0.5), 0.0))
        return jnp.sum(logsumexp(given_sd + log_weights, axis=-1), axis=-1)

    # ----- what every family offers -------------------------------------------------
    def log_likelihood(self, params, x):
        return diagonal_normal_log_likelihood(params["mu"], params["var"], x, self.m0)

    def numpyro_sample_params(self, num_components):
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("component", num_components):
            mu = numpyro.sample("theta_mu", dist.Normal(jnp.asarray(self.m0), jnp.asarray(self.s0)).to_event(1))
            sd = numpyro.sample("theta_sd", dist.LogNormal(jnp.asarray(self.l0), jnp.asarray(self.t0)).to_event(1))
        return {"mu": mu, "var": sd * sd}
