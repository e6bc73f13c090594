"""Exact answers and Geweke tests for [`PartitionGibbs`][dpppl.PartitionGibbs] on a regression with DP-mixture errors.

The model (`regression_model`): a coefficient beta ~ N(0, s^2), a partition C of the n points
from the mixture's exchangeable prior (alpha fixed), residuals r = y - x beta, and the
collapsed NormalKnownCov likelihood of the residuals, p(r | C) = prod_c p(r_c). For the
exact answer (`exact_regression_posterior`) nothing is sampled: given C the residuals of a
cluster c are jointly normal, r_c ~ N(mu0 1, sigma2 I + tau2 1 1^T) (the cluster mean
integrated out), so y | C, beta ~ N(x beta + mu0 1, Sigma_C) with Sigma_C = sigma2 I +
tau2 A_C (A_C the co-clustering matrix), and with beta integrated out

    y | C ~ N(mu0 1, Sigma_C + s^2 x x^T),
    beta | C, y ~ N(m_C, v_C),   1 / v_C = 1 / s^2 + x^T Sigma_C^-1 x,   m_C = v_C x^T Sigma_C^-1 (y - mu0 1).

So p(C | y) ∝ EPPF(C) N(y; mu0 1, Sigma_C + s^2 x x^T) over every set partition of the n
points (Bell(6) = 203), and the posterior of beta is the mixture sum_C p(C | y) N(m_C, v_C):
its mean, variance and quantiles follow. Neither the family's `log_marginal` nor the prior's
`log_eppf` is used (the EPPF is written out with `scipy.special.gammaln`), so the answer is
independent of the code under test.

`check_regression_samples` compares draws of independent chains with it: the partition law,
P(K = k) and co-clustering by [`check_kernel_samples`][dpppl.testing.check_kernel_samples],
and E[beta] and P(beta <= q_p) at the exact quantiles q_p (p = 0.1, 0.5, 0.9) by Student-t
tests over chains (the across-chain variance of per-chain estimates gives the Monte Carlo
error whatever the autocorrelation, DESIGN.md sec. 6); `family_alpha` is split between the two.

`geweke_regression` is Geweke's (2004) joint-distribution test
([`dpppl.testing.geweke`][dpppl.testing.geweke]) of the composed kernel: forward draws of
(beta, C, y) against chains that alternate one `PartitionGibbs` step on (beta, C) | y with a
fresh y | beta, C (r drawn from the collapsed mixture's prior simulation, y = x beta + r).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import NUTS
from scipy import optimize, special, stats

from dpppl.config import float_dtype
from dpppl.models.sites import CollapsedMixture, Partition, dp_mixture
from dpppl.run.partition_gibbs import PartitionGibbs
from dpppl.testing.exact import ExactPosterior, HarnessResult, _t_checks, check_kernel_samples, set_partitions
from dpppl.testing.geweke import GewekeResult, compare

QUANTILES = (0.1, 0.5, 0.9)
GEWEKE_FUNCTIONS = ("beta", "beta_squared", "beta_times_xy", "num_clusters", "largest_share", "coclustered_pairs",
                    "tanh_residual_mean", "near_residual_pairs_coclustered")


def regression_model(mixture, beta_sd: float):
    """The NumPyro model `f(x, y)`: beta ~ N(0, beta_sd^2), then `dp_mixture("resid", mixture,
    obs=y - x * beta)` (sites `beta`, `resid_labels`, `resid`, and `resid_alpha` when alpha
    has a Gamma prior)."""

    def model(x, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, beta_sd))
        dp_mixture("resid", mixture, obs=y - x * beta)

    return model


def _log_eppf(counts: np.ndarray, alpha: float, d: float) -> float:
    """The Pitman-Yor EPPF of cluster sizes `counts` (Pitman 2006, eq. 3.6), in numpy."""
    counts = counts[counts > 0]
    k, n = counts.size, counts.sum()
    new = np.sum(np.log(alpha + d * np.arange(1, k)))
    sizes = np.sum(special.gammaln(counts - d) - special.gammaln(1.0 - d))
    return float(new + sizes - (special.gammaln(alpha + n) - special.gammaln(alpha + 1.0)))


@dataclasses.dataclass(frozen=True)
class ExactRegression:
    """The exact joint posterior of (beta, C) (module docstring).

    Attributes
    ----------
    partition : ExactPosterior
        p(C | y): the law `check_kernel_samples` takes.
    beta_mean, beta_var : ndarray (B,)
        m_C and v_C of each partition.
    """

    partition: ExactPosterior
    beta_mean_given: np.ndarray
    beta_var_given: np.ndarray

    @property
    def beta_mean(self) -> float:
        return float(self.partition.prob @ self.beta_mean_given)

    @property
    def beta_var(self) -> float:
        second = self.partition.prob @ (self.beta_var_given + self.beta_mean_given ** 2)
        return float(second - self.beta_mean ** 2)

    def beta_cdf(self, b: float) -> float:
        return float(self.partition.prob @ stats.norm.cdf(b, self.beta_mean_given, np.sqrt(self.beta_var_given)))

    def beta_quantile(self, p: float) -> float:
        sd = np.sqrt(self.beta_var)
        return float(optimize.brentq(lambda b: self.beta_cdf(b) - p, self.beta_mean - 20 * sd,
                                     self.beta_mean + 20 * sd, xtol=1e-12))


def exact_regression_posterior(mixture, beta_sd: float, x, y) -> ExactRegression:
    """p(C | y) and beta | y of `regression_model(mixture, beta_sd)` on (x, y) (n <= 8), in
    closed form (module docstring). `mixture`: a DP / Pitman-Yor mixture of a 1-D
    NormalKnownCov with numeric hyperparameters and a fixed alpha."""
    prior, family = mixture.prior, mixture.component
    if prior.alpha_is_random:
        raise ValueError("exact_regression_posterior takes a fixed alpha")
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    sigma2, mu0, tau2 = (float(np.squeeze(getattr(family, name))) for name in ("sigma2", "mu0", "tau2"))
    partitions = set_partitions(n)
    log_w, means, variances = [], [], []
    for labels in partitions:
        same = (labels[:, None] == labels[None, :]).astype(float)
        cov = sigma2 * np.eye(n) + tau2 * same
        log_w.append(_log_eppf(np.bincount(labels).astype(float), float(prior.alpha), float(prior.discount))
                     + stats.multivariate_normal.logpdf(y, mu0 * np.ones(n), cov + beta_sd ** 2 * np.outer(x, x)))
        solve_x = np.linalg.solve(cov, x)
        precision = 1.0 / beta_sd ** 2 + x @ solve_x
        variances.append(1.0 / precision)
        means.append(solve_x @ (y - mu0) / precision)
    log_w = np.asarray(log_w)
    log_prob = log_w - special.logsumexp(log_w)
    prob = np.exp(log_prob)
    k = partitions.max(axis=1) + 1
    p_k = np.bincount(k, weights=prob, minlength=n + 1)
    same_all = (partitions[:, :, None] == partitions[:, None, :]).astype(float)
    coclustering = np.einsum("b,bij->ij", prob, same_all)
    exact = ExactPosterior(partitions, log_prob, k, p_k, coclustering)
    return ExactRegression(exact, np.asarray(means), np.asarray(variances))


@dataclasses.dataclass(frozen=True)
class RegressionCheck:
    """Result of `check_regression_samples`: the partition checks, the beta checks
    (`QuantityCheck`s of E[beta] and P(beta <= q_p)), and a report."""

    passed: bool
    partition: HarnessResult
    beta: tuple
    report: str


def check_regression_samples(exact: ExactRegression, labels, beta, *, family_alpha: float = 1e-3,
                             min_effective_count: float = 20.0) -> RegressionCheck:
    """Test draws (chains, draws, n) of the labels and (chains, draws) of beta from independent
    chains against `exact` (module docstring); `family_alpha` bounds the probability that an
    exact sampler fails."""
    beta = np.asarray(beta, float)
    C, T = beta.shape
    share = family_alpha / 2
    partition = check_kernel_samples(exact.partition, labels, family_alpha=share,
                                     min_effective_count=min_effective_count)
    q = np.array([exact.beta_quantile(p) for p in QUANTILES])
    below = (beta[:, :, None] <= q).mean(axis=1)
    checks = _t_checks("beta", [f"P(beta <= q{p})" for p in QUANTILES], below, np.asarray(QUANTILES), T,
                       min_effective_count, share / 2)
    checks += _t_checks("beta", ["E[beta]"], beta.mean(axis=1, keepdims=True), np.array([exact.beta_mean]), T,
                        min_effective_count, share / 2, exact_variance=exact.beta_var)
    passed = partition.passed and all(c.passed for c in checks)
    report = "\n".join([f"composed-kernel check {'PASSED' if passed else 'FAILED'}", partition.report]
                       + [c.describe() for c in checks])
    return RegressionCheck(passed, partition, tuple(checks), report)


def geweke_regression(mixture, beta_sd: float, x, partition_kernel: str = "gibbs", *, kernel_mixture=None,
                      kernel_beta_sd: float | None = None, step_size: float = 0.5, sweeps: int = 1,
                      kernel_steps: int = 2,
                      num_chains: int = 128, num_steps: int = 200, num_forward: int = 20000, seed: int = 0,
                      family_alpha: float = 1e-3, **options) -> GewekeResult:
    """Geweke's test of `PartitionGibbs(NUTS(model), partition_kernel)` on
    `regression_model(mixture, beta_sd)` with covariates `x` (module docstring).

    `kernel_mixture` / `kernel_beta_sd` build the kernel on another model (a wrong EPPF or
    likelihood for the partition step, a wrong prior for NUTS), to show the test's power.
    NUTS runs without adaptation at `step_size` (any fixed step size leaves its target
    invariant). The chains take `kernel_steps` composed steps between two draws of y (a power
    of a kernel that leaves the posterior invariant leaves it invariant): with one, the partition
    block would always see residuals drawn at the current beta, and a partition step reading a
    stale beta would go unseen; from the second on it sees the beta NUTS moved. Test functions:
    `GEWEKE_FUNCTIONS`, and alpha, log alpha when it has a prior.
    """
    dtype = float_dtype()
    x = jnp.asarray(x, dtype)
    n = int(x.shape[0])
    prior, family = mixture.prior, mixture.component
    model = regression_model(kernel_mixture or mixture, beta_sd if kernel_beta_sd is None else kernel_beta_sd)
    kern = PartitionGibbs(NUTS(model, step_size=step_size), partition_kernel, sweeps=sweeps, capacity=n + 1,
                          **options)
    names = GEWEKE_FUNCTIONS + (("alpha", "log_alpha") if prior.alpha_is_random else ())

    def residuals(key, labels):
        return CollapsedMixture(family, labels).sample(key)

    def forward(key):
        k_alpha, k_beta, k_z, k_r = jax.random.split(key, 4)
        alpha = (jax.random.gamma(k_alpha, prior.alpha.shape, dtype=dtype) / prior.alpha.rate
                 if prior.alpha_is_random else None)
        beta = jax.random.normal(k_beta, dtype=dtype) * beta_sd
        labels = Partition(prior, n, alpha=alpha).sample(k_z)
        return {"beta": beta, "resid_labels": labels, "resid_alpha": alpha}, x * beta + residuals(k_r, labels)

    def functions(values, y):
        beta, labels = values["beta"], values["resid_labels"]
        r = y - x * beta
        same = (labels[:, None] == labels[None, :]) & ~jnp.eye(n, dtype=bool)
        counts = jax.ops.segment_sum(jnp.ones(n, dtype), labels, num_segments=n)
        out = {"beta": beta, "beta_squared": beta ** 2, "beta_times_xy": beta * jnp.mean(x * y),
               "num_clusters": jnp.sum(counts > 0), "largest_share": jnp.max(counts) / n,
               "coclustered_pairs": jnp.sum(same) / (n * (n - 1)), "tanh_residual_mean": jnp.tanh(jnp.mean(r)),
               "near_residual_pairs_coclustered": jnp.sum(jnp.where(same, jnp.exp(-(r[:, None] - r[None, :]) ** 2),
                                                                    0.0)) / (n * (n - 1))}
        if prior.alpha_is_random:
            out.update(alpha=values["resid_alpha"], log_alpha=jnp.log(values["resid_alpha"]))
        return jnp.stack([jnp.asarray(out[k], dtype) for k in names])

    def successive(key):
        k_draw, k_init, k_run = jax.random.split(key, 3)
        values, y = forward(k_draw)
        init = {"beta": values["beta"], "resid_labels": values["resid_labels"]}
        if prior.alpha_is_random:
            init["resid_alpha"] = jnp.log(values["resid_alpha"])  # the inner kernel's unconstrained value
        state = kern.init(k_init, 0, init, (x, y), {})
        constrain = kern.get_constrain_fn((x, y), {})

        def step(carry, t):
            state, y = carry
            state = jax.lax.fori_loop(0, kernel_steps, lambda _, s: kern.sample(s, (x, y), {}), state)
            values = constrain(state.z)
            y = x * values["beta"] + residuals(jax.random.fold_in(k_run, t), values["resid_labels"])
            state = kern.refresh(state, (x, y), {})
            return (state, y), functions(values, y)

        _, g = jax.lax.scan(step, (state, y), jnp.arange(num_steps))
        return g.mean(axis=0), state.block_states[0].overflow

    key_forward, key_successive = jax.random.split(jax.random.key(seed))
    fwd = jax.jit(jax.vmap(lambda k: functions(*forward(k))))(jax.random.split(key_forward, num_forward))
    means, overflow = jax.jit(jax.vmap(successive))(jax.random.split(key_successive, num_chains))
    return compare(f"PartitionGibbs(NUTS, {partition_kernel!r})", names, np.asarray(fwd), np.asarray(means),
                   num_steps, family_alpha, overflowed=int(np.sum(np.asarray(overflow))), capacity=n + 1)


__all__ = ["ExactRegression", "GEWEKE_FUNCTIONS", "QUANTILES", "RegressionCheck", "check_regression_samples",
           "exact_regression_posterior", "geweke_regression", "regression_model"]
