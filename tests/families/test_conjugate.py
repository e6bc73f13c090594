"""Exactness tests of the conjugate component families.

The log marginal of every family is checked against computations that share no code
with it: scipy quadrature over the parameters of one data dimension, and closed forms
built from scipy densities (the multivariate normal of a cluster's stacked points,
Bayes' identity p(x) = p(x | theta) p(theta) / p(theta | x) at several theta, the
Dirichlet-multinomial chain rule, Beta functions). Then the predictive against ratios
of marginals, exchangeability, incremental statistics, posterior and prior draws against
analytic moments (tolerances of 5 Monte Carlo standard errors), the NumPyro side, data
checks and hyperparameter resolution.
"""

from __future__ import annotations

import dataclasses
import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.distributions.transforms import biject_to
from numpyro.infer.util import constrain_fn, potential_energy
from scipy import integrate, special, stats

import dpppl  # noqa: F401  (float64)
from dpppl.errors import DataError
from dpppl.families import (BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart,
                            NormalKnownCov)
from dpppl.families.base import add_point, segment_stats, take

# ----- cases: resolved families (every hyperparameter a numeric array of full shape) -----

CASES = {
    "nkc_1d": NormalKnownCov(sigma2=np.array([0.7]), mu0=np.array([0.3]), tau2=np.array([2.0])),
    "nkc_3d": NormalKnownCov(sigma2=np.array([0.5, 1.0, 2.0]), mu0=np.array([0.0, 1.0, -1.0]),
                             tau2=np.array([1.0, 3.0, 0.5])),
    "ng_1d": NormalGamma(mu0=np.array([0.2]), kappa0=np.array([0.5]), a0=np.array([3.0]),
                         b0=np.array([1.5])),
    "ng_2d": NormalGamma(mu0=np.array([0.0, 1.0]), kappa0=np.array([0.3, 2.0]),
                         a0=np.array([3.0, 4.5]), b0=np.array([1.0, 0.4])),
    "niw_1d": NormalInverseWishart(mu0=np.array([0.1]), kappa0=np.array(0.5), nu0=np.array(6.0),
                                   psi0=np.array([[3.0]])),
    "niw_3d": NormalInverseWishart(mu0=np.array([0.0, 0.5, -0.5]), kappa0=np.array(0.8),
                                   nu0=np.array(8.0),
                                   psi0=np.array([[4.0, 0.8, 0.0], [0.8, 3.0, -0.5],
                                                  [0.0, -0.5, 5.0]])),
    "dm_2": DirichletMultinomial(beta=np.array([0.7, 1.3])),
    "dm_4": DirichletMultinomial(beta=np.array([0.5, 1.0, 2.0, 0.3])),
    "bb_1": BetaBernoulli(a=np.array([0.8]), b=np.array([1.7])),
    "bb_3": BetaBernoulli(a=np.array([0.5, 1.0, 2.0]), b=np.array([1.5, 1.0, 0.7])),
}
NAMES = list(CASES)


def sample_data(family, n, seed):
    """n points of the kind the family observes (count data include an all-zero row)."""
    rng = np.random.default_rng(seed)
    D = family.dim
    if family.data_kind == "real":
        return rng.normal(0.5, 1.3, size=(n, D))
    if family.data_kind == "count":
        x = rng.integers(0, 4, size=(n, D)).astype(float)
        x[:1] = 0.0
        return x
    return rng.integers(0, 2, size=(n, D)).astype(float)


CAPACITY = 4


@functools.cache
def jitted(name):
    """The case's family methods under ``jax.jit``, compiled once per input shape.

    Kernels run these methods inside ``jit``; eagerly, JAX would compile every primitive
    for every new shape, which dominates the run time of this file.
    """
    f = CASES[name]
    return types.SimpleNamespace(
        set_stats=jax.jit(lambda x: take(segment_stats(f, x, jnp.zeros(len(x), int), 1), 0)),
        segment_stats=jax.jit(lambda x, labels: segment_stats(f, x, labels, CAPACITY)),
        point_stats=jax.jit(f.point_stats),
        log_marginal=jax.jit(f.log_marginal),
        log_predictive=jax.jit(lambda st, x: f.log_predictive(f.predictive_params(st), x)),
    )


jit_add_point = jax.jit(add_point)


def plus(stats, other):
    return jax.tree.map(jnp.add, stats, other)


def assert_stats_close(a, b):
    jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, atol=1e-12), a, b)


# ----- independent log marginals ---------------------------------------------------------

def log_integral(logf, lo, hi, grid=301):
    """log of the integral of exp(logf) over the box [lo, hi] of one or two parameters.

    ``logf`` maps points (P, ndim) to (P,). The box is first cut down (by a grid search)
    to where logf is within 60 of its maximum m; scipy's adaptive Gauss-Kronrod
    cubature then integrates exp(logf - m) there.
    """
    lo, hi = np.atleast_1d(np.asarray(lo, float)), np.atleast_1d(np.asarray(hi, float))
    axes = [np.linspace(a, b, grid) for a, b in zip(lo, hi)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(lo))
    vals = logf(pts)
    m = vals.max()
    keep = pts[vals > m - 60]
    step = (hi - lo) / (grid - 1)
    a, b = np.maximum(keep.min(0) - step, lo), np.minimum(keep.max(0) + step, hi)
    res = integrate.cubature(lambda p: np.exp(logf(p) - m), a, b, rtol=1e-11)
    assert res.status == "converged"
    return m + np.log(res.estimate)


def log_logistic(u):
    return -np.logaddexp(0.0, -u)


def niw_posterior(f, x):
    """Textbook NIW update written with the sample mean and scatter (Gelman et al., BDA3 3.6)."""
    n, D = x.shape
    kn, nun = f.kappa0 + n, f.nu0 + n
    if n == 0:
        return kn, nun, f.mu0, f.psi0
    xbar = x.mean(0)
    scatter = (x - xbar).T @ (x - xbar)
    mun = (f.kappa0 * f.mu0 + n * xbar) / kn
    psin = f.psi0 + scatter + f.kappa0 * n / kn * np.outer(xbar - f.mu0, xbar - f.mu0)
    return kn, nun, mun, psin


def ng_posterior(f, x):
    """Textbook Normal-Gamma update with the sample mean and sum of squares, per dimension."""
    n = len(x)
    kn, an = f.kappa0 + n, f.a0 + n / 2
    if n == 0:
        return f.mu0, kn, an, f.b0
    xbar = x.mean(0)
    mun = (f.kappa0 * f.mu0 + n * xbar) / kn
    bn = f.b0 + 0.5 * ((x - xbar) ** 2).sum(0) + f.kappa0 * n * (xbar - f.mu0) ** 2 / (2 * kn)
    return mun, kn, an, bn


def reference_log_marginals(f, x):
    """Independent values of log p(x): a list of (method, value)."""
    n, D = x.shape
    out = []
    if isinstance(f, NormalKnownCov):
        # each dimension's n values: N(mu0 1, sigma2 I + tau2 1 1^T); dimensions independent
        out.append(("stacked mvn", sum(
            stats.multivariate_normal(np.full(n, f.mu0[d]),
                                      f.sigma2[d] * np.eye(n) + f.tau2[d] * np.ones((n, n))).logpdf(x[:, d])
            for d in range(D))))
        if D == 1:
            s, t = np.sqrt(f.sigma2[0]), np.sqrt(f.tau2[0])

            def logf(p):
                mu = p[:, 0]
                return (stats.norm.logpdf(x[None, :, 0], mu[:, None], s).sum(1)
                        + stats.norm.logpdf(mu, f.mu0[0], t))
            out.append(("quadrature", log_integral(logf, f.mu0[0] - 15 * t, f.mu0[0] + 15 * t)))
    elif isinstance(f, NormalGamma):
        total = 0.0
        for d in range(D):  # over (mu, log lambda), with the Jacobian lambda
            def logf(p, d=d):
                mu, t = p[:, 0], p[:, 1]
                lam = np.exp(t)
                return (stats.gamma.logpdf(lam, f.a0[d], scale=1 / f.b0[d]) + t
                        + stats.norm.logpdf(mu, f.mu0[d], 1 / np.sqrt(f.kappa0[d] * lam))
                        + stats.norm.logpdf(x[None, :, d], mu[:, None],
                                            1 / np.sqrt(lam)[:, None]).sum(1))
            total += log_integral(logf, [-15, -12], [15, 8])
        out.append(("quadrature", total))
    elif isinstance(f, NormalInverseWishart):
        if D == 1:  # over (mu, log sigma2), with the Jacobian sigma2; IW in 1-D is InvGamma(nu/2, psi/2)
            def logf(p):
                mu, t = p[:, 0], p[:, 1]
                s2 = np.exp(t)
                return (stats.invgamma.logpdf(s2, f.nu0 / 2, scale=f.psi0[0, 0] / 2) + t
                        + stats.norm.logpdf(mu, f.mu0[0], np.sqrt(s2 / f.kappa0))
                        + stats.norm.logpdf(x[None, :, 0], mu[:, None], np.sqrt(s2)[:, None]).sum(1))
            out.append(("quadrature", log_integral(logf, [-15, -8], [15, 8])))
        kn, nun, mun, psin = niw_posterior(f, x)
        for name, mu, sigma in [("bayes identity at mode", mun, psin / (nun + D + 1)),
                                ("bayes identity off mode", mun + 0.4, psin / nun + np.eye(D))]:
            log_lik = stats.multivariate_normal(mu, sigma).logpdf(x).sum()
            log_prior = (stats.invwishart(float(f.nu0), f.psi0).logpdf(sigma)
                         + stats.multivariate_normal(f.mu0, sigma / f.kappa0).logpdf(mu))
            log_post = (stats.invwishart(float(nun), psin).logpdf(sigma)
                        + stats.multivariate_normal(mun, sigma / kn).logpdf(mu))
            out.append((name, log_lik + log_prior - log_post))
    elif isinstance(f, DirichletMultinomial):
        counts = x.astype(int)
        alpha, chain = f.beta.copy(), 0.0
        for row in counts:  # chain rule with scipy's Dirichlet-multinomial
            chain += stats.dirichlet_multinomial.logpmf(row, alpha, row.sum())
            alpha = alpha + row
        out.append(("scipy dirichlet_multinomial chain", chain))
        if D == 2:  # a two-category multinomial is a binomial; theta = logistic(u)
            def logf(p):
                u = p[:, 0]
                th = np.exp(log_logistic(u))
                return (stats.binom.logpmf(counts[None, :, 0], counts.sum(1)[None, :], th[:, None]).sum(1)
                        + stats.beta.logpdf(th, *f.beta) + log_logistic(u) + log_logistic(-u))
            out.append(("quadrature", log_integral(logf, -35, 35)))
    elif isinstance(f, BetaBernoulli):
        s = x.sum(0)
        out.append(("beta functions", np.sum(special.betaln(f.a + s, f.b + n - s)
                                             - special.betaln(f.a, f.b))))
        total = 0.0
        for d in range(D):  # p = logistic(u), with the Jacobian p (1 - p)
            def logf(q, d=d):
                u = q[:, 0]
                p = np.exp(log_logistic(u))
                return (stats.bernoulli.logpmf(x[None, :, d], p[:, None]).sum(1)
                        + stats.beta.logpdf(p, f.a[d], f.b[d]) + log_logistic(u) + log_logistic(-u))
            total += log_integral(logf, -35, 35)
        out.append(("quadrature", total))
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [1, 6])
def test_log_marginal_matches_independent_computation(name, n):
    f = CASES[name]
    x = sample_data(f, n, seed=n)
    got = float(jitted(name).log_marginal(jitted(name).set_stats(jnp.asarray(x))))
    refs = reference_log_marginals(f, x)
    assert refs
    for method, ref in refs:
        assert got == pytest.approx(ref, rel=1e-7, abs=1e-7), method


@pytest.mark.parametrize("name", NAMES)
def test_empty_stats_have_zero_log_marginal(name):
    f = CASES[name]
    np.testing.assert_allclose(jitted(name).log_marginal(f.empty_stats((CAPACITY,))), 0.0, atol=1e-12)


# ----- predictive, exchangeability, vectorisation ------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_log_predictive_is_a_ratio_of_marginals(name):
    f, ops = CASES[name], jitted(name)
    x = jnp.asarray(sample_data(f, 9, seed=1))
    # rows: clusters of sizes 4, 3, 1 and an empty slot
    st = ops.segment_stats(x[:8], jnp.array([0, 1, 0, 0, 2, 1, 0, 1]))
    new = x[8]
    lp = ops.log_predictive(st, new)
    assert lp.shape == (CAPACITY,)
    expected = ops.log_marginal(plus(st, ops.point_stats(new))) - ops.log_marginal(st)
    np.testing.assert_allclose(lp, expected, rtol=1e-10, atol=1e-10)
    # the empty row gives the prior predictive, log p({x})
    np.testing.assert_allclose(lp[3], ops.log_marginal(ops.point_stats(new)), rtol=1e-10)
    # every method is vectorised over leading axes: rows agree one by one and on a (2, 2) grid
    for k in range(CAPACITY):
        row = take(st, k)
        np.testing.assert_allclose(ops.log_marginal(row), ops.log_marginal(st)[k], rtol=1e-12)
        np.testing.assert_allclose(ops.log_predictive(row, new), lp[k], rtol=1e-12)
    grid = jax.tree.map(lambda s: s.reshape((2, 2) + s.shape[1:]), st)
    np.testing.assert_allclose(ops.log_marginal(grid), ops.log_marginal(st).reshape(2, 2), rtol=1e-12)
    np.testing.assert_allclose(ops.log_predictive(grid, new), lp.reshape(2, 2), rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_exchangeability_and_chain_rule(name):
    f, ops = CASES[name], jitted(name)
    x = jnp.asarray(sample_data(f, 7, seed=2))
    lm = float(ops.log_marginal(ops.set_stats(x)))
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(x))
        assert float(ops.log_marginal(ops.set_stats(x[perm]))) == pytest.approx(lm, rel=1e-12)
    st, chain = f.empty_stats(), 0.0
    for xi in x:
        chain += float(ops.log_predictive(st, xi))
        st = plus(st, ops.point_stats(xi))
    assert chain == pytest.approx(lm, rel=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_add_remove_round_trip_equals_segment_stats(name):
    f, ops = CASES[name], jitted(name)
    x = jnp.asarray(sample_data(f, 10, seed=3))
    labels = np.array([0, 1, 1, 0, 2, 2, 0, 1, 3, 0])
    st = ops.segment_stats(x, jnp.asarray(labels))
    pts = ops.point_stats(x)
    moved = st
    for i, new in [(1, 2), (8, 0), (4, 1)]:  # point 8 leaves cluster 3 empty
        moved = jit_add_point(moved, labels[i], take(pts, i), -1.0)
        moved = jit_add_point(moved, new, take(pts, i), 1.0)
        labels[i] = new
    assert_stats_close(moved, ops.segment_stats(x, jnp.asarray(labels)))
    assert float(moved.n[3]) == 0.0
    np.testing.assert_allclose(ops.log_marginal(moved)[3], 0.0, atol=1e-10)
    back = jit_add_point(jit_add_point(st, 2, take(pts, 5), -1.0), 2, take(pts, 5), 1.0)
    assert_stats_close(back, st)


# ----- posterior draws -----------------------------------------------------------------------

def expected_moments(f, x):
    """Analytic posterior moments: a list of (label, g(draws) -> (M, ...), E[g])."""
    n = len(x)
    if isinstance(f, NormalKnownCov):
        vn = 1 / (1 / f.tau2 + n / f.sigma2)
        mun = vn * (f.mu0 / f.tau2 + x.sum(0) / f.sigma2)
        return [("mu", lambda d: d["mu"], mun), ("var mu", lambda d: (d["mu"] - mun) ** 2, vn)]
    if isinstance(f, NormalGamma):
        mun, kn, an, bn = ng_posterior(f, x)
        return [("mu", lambda d: d["mu"], mun),
                ("var mu", lambda d: (d["mu"] - mun) ** 2, bn / ((an - 1) * kn)),
                ("var", lambda d: d["var"], bn / (an - 1))]
    if isinstance(f, NormalInverseWishart):
        kn, nun, mun, psin = niw_posterior(f, x)
        mean_cov = psin / (nun - f.dim - 1)
        return [("mu", lambda d: d["mu"], mun),
                ("var mu", lambda d: (d["mu"] - mun) ** 2, np.diag(mean_cov) / kn),
                ("cov", lambda d: d["cov"], mean_cov)]
    if isinstance(f, DirichletMultinomial):
        alpha = f.beta + x.sum(0)
        a0 = alpha.sum()
        mean = alpha / a0
        return [("probs", lambda d: d["probs"], mean),
                ("var probs", lambda d: (d["probs"] - mean) ** 2, mean * (1 - mean) / (a0 + 1))]
    a, b = f.a + x.sum(0), f.b + n - x.sum(0)
    mean = a / (a + b)
    return [("probs", lambda d: d["probs"], mean),
            ("var probs", lambda d: (d["probs"] - mean) ** 2, mean * (1 - mean) / (a + b + 1))]


def assert_moments(draws, moments):
    """Each sample mean within 5 Monte Carlo standard errors of its analytic value."""
    for label, g, want in moments:
        vals = np.asarray(g(draws))
        mean = vals.mean(0)
        se = vals.std(0) / np.sqrt(len(vals))
        assert np.all(np.abs(mean - want) <= 5 * se + 1e-12), (label, mean, want, se)


M = 20_000


#: one case per family for the tests that sample: the 1-D cases add nothing there, and
#: every program holding a Gamma sampler takes seconds to compile
DRAW_CASES = ["nkc_3d", "ng_2d", "niw_3d", "dm_4", "bb_3"]


@pytest.mark.parametrize("name", DRAW_CASES)
def test_posterior_and_prior_draw_moments(name):
    """posterior_draw from empty stats (the prior) and from 8 points, and
    numpyro_sample_params (the prior), against the analytic moments."""
    f = CASES[name]
    x = sample_data(f, 8, seed=4)

    @jax.jit
    def draw(key, x):
        rows = jax.tree.map(lambda e, s: jnp.stack([e, s]), f.empty_stats(),
                            take(segment_stats(f, x, jnp.zeros(len(x), int), 1), 0))
        tiled = jax.tree.map(lambda s: jnp.broadcast_to(s[:, None], (2, M) + s.shape[1:]), rows)
        k1, k2 = jax.random.split(key)
        return f.posterior_draw(k1, tiled), numpyro.handlers.seed(f.numpyro_sample_params, k2)(M)

    # the moments are taken in numpy: eager jax ops on the draws would each compile a program
    post, prior_numpyro = jax.tree.map(np.asarray, draw(jax.random.key(0), jnp.asarray(x)))
    for v in post.values():
        assert v.shape[:2] == (2, M) and np.all(np.isfinite(v))
    prior_moments = expected_moments(f, x[:0])
    assert_moments({k: v[0] for k, v in post.items()}, prior_moments)
    assert_moments({k: v[1] for k, v in post.items()}, expected_moments(f, x))
    assert_moments(prior_numpyro, prior_moments)


def fixed_params(f):
    """Two parameter sets (K = 2) of the family and the mean and variance of x under each."""
    D = f.dim
    if f.data_kind == "real":
        mu = np.stack([np.linspace(-1.0, 1.0, D), np.linspace(2.0, 0.5, D)])
        var = np.stack([np.linspace(0.5, 2.0, D), np.linspace(1.5, 0.3, D)])
        if isinstance(f, NormalKnownCov):
            return {"mu": mu}, mu, np.broadcast_to(f.sigma2, mu.shape)
        if isinstance(f, NormalGamma):
            return {"mu": mu, "var": var}, mu, var
        corr = 0.3 * (np.ones((D, D)) - np.eye(D)) + np.eye(D)
        cov = np.stack([np.sqrt(np.outer(v, v)) * corr for v in var])
        return {"mu": mu, "cov": cov}, mu, var
    probs = np.stack([np.linspace(1.0, 2.0, D), np.linspace(3.0, 0.5, D)])
    if f.data_kind == "count":
        probs = probs / probs.sum(1, keepdims=True)
        return {"probs": probs}, 5 * probs, 5 * probs * (1 - probs)
    probs = probs / 3.5
    return {"probs": probs}, probs, probs * (1 - probs)


@pytest.mark.parametrize("name", DRAW_CASES)
def test_sample_points_moments(name):
    f = CASES[name]
    params, mean, var = fixed_params(f)
    labels = jnp.arange(M) % 2
    kwargs = {"num_trials": 5} if isinstance(f, DirichletMultinomial) else {}
    x = np.asarray(jax.jit(lambda key: f.sample_points(key, params, labels, **kwargs))(jax.random.key(2)))
    assert x.shape == (M, f.dim)
    for k in range(2):
        xk = {"x": np.asarray(x[k::2])}
        assert_moments(xk, [("mean", lambda d: d["x"], mean[k]),
                            ("var", lambda d: (d["x"] - mean[k]) ** 2, var[k])])
    if isinstance(f, DirichletMultinomial):
        with pytest.raises(dpppl.ArgumentError, match="sample_points needs num_trials"):
            f.sample_points(jax.random.key(0), params, labels)


# ----- likelihood and NumPyro ----------------------------------------------------------------

def reference_log_likelihood(f, params, x):
    """log p(x_i | theta_k) with scipy: (N, K)."""
    K = len(next(iter(params.values())))
    out = np.empty((len(x), K))
    for k in range(K):
        p = {key: np.asarray(v[k]) for key, v in params.items()}
        if isinstance(f, NormalKnownCov):
            out[:, k] = stats.norm.logpdf(x, p["mu"], np.sqrt(f.sigma2)).sum(1)
        elif isinstance(f, NormalGamma):
            out[:, k] = stats.norm.logpdf(x, p["mu"], np.sqrt(p["var"])).sum(1)
        elif isinstance(f, NormalInverseWishart):
            out[:, k] = stats.multivariate_normal(p["mu"], p["cov"]).logpdf(x)
        elif isinstance(f, DirichletMultinomial):
            out[:, k] = [stats.multinomial.logpmf(r, r.sum(), p["probs"]) for r in x.astype(int)]
        else:
            out[:, k] = stats.bernoulli.logpmf(x, p["probs"]).sum(1)
    return out


@pytest.mark.parametrize("name", DRAW_CASES)
def test_numpyro_mixture_model(name):
    """numpyro_sample_params inside a truncated mixture model: sites and shapes, a finite
    potential energy and gradient at a random unconstrained point (what NUTS needs), and
    log_likelihood at the corresponding parameters against scipy."""
    f = CASES[name]
    K = 3
    x = jnp.asarray(sample_data(f, 6, seed=5))

    def model(x):
        w = numpyro.sample("weights", dist.Dirichlet(jnp.ones(K)))
        params = f.numpyro_sample_params(K)
        numpyro.factor("obs", jax.nn.logsumexp(jnp.log(w) + f.log_likelihood(params, x), -1).sum())
        return params

    sites = {}

    def trace_sites(key):  # traced abstractly by eval_shape: nothing is compiled
        with numpyro.handlers.trace() as tr:
            numpyro.handlers.seed(model, key)(x)
        sites.update({k: s for k, s in tr.items() if s["type"] == "sample" and not s["is_observed"]})

    jax.eval_shape(trace_sites, jax.random.key(0))
    theta = set(sites) - {"weights"}
    assert theta and all(k.startswith("theta_") for k in theta)
    for k in theta:
        assert [p.name for p in sites[k]["cond_indep_stack"]] == ["component"]
        assert sites[k]["value"].shape[:2] == (K, f.dim)

    rng = np.random.default_rng(0)
    z = {k: jnp.asarray(rng.normal(0.0, 0.5, biject_to(s["fn"].support).inverse_shape(s["value"].shape)))
         for k, s in sites.items()}

    def energy(z):  # the potential NUTS differentiates, and the parameters at z
        params = numpyro.handlers.substitute(model, data=constrain_fn(model, (x,), {}, z))(x)
        return potential_energy(model, (x,), {}, z), (params, f.log_likelihood(params, x))

    (pe, (params, ll)), grad = jax.tree.map(np.asarray, jax.jit(jax.value_and_grad(energy, has_aux=True))(z))
    assert np.isfinite(pe)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grad))
    for v in params.values():
        assert v.shape[:2] == (K, f.dim)
    assert ll.shape == (len(x), K)
    np.testing.assert_allclose(ll, reference_log_likelihood(f, params, np.asarray(x)), rtol=1e-9, atol=1e-9)


# ----- data checks ---------------------------------------------------------------------------

def test_dirichlet_multinomial_check_data():
    f = DirichletMultinomial()
    ok = f.check_data(np.array([[0, 3, 1], [2, 0, 0]]))
    assert ok.dtype == float
    bad = np.array([[0.0, 3.0, 1.0], [2.0, 0.0, -1.0], [1.5, 0.0, 0.0]])
    with pytest.raises(DataError, match=r"row 1, column 2 holds -1\b"):
        f.check_data(bad)
    with pytest.raises(DataError, match=r"row 0, column 1 holds 2\.5"):
        f.check_data(np.array([[0.0, 2.5], [1.0, 1.0]]))


def test_beta_bernoulli_check_data():
    f = BetaBernoulli()
    np.testing.assert_array_equal(f.check_data(np.array([[True, False], [False, True]])),
                                  [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(DataError, match=r"row 2, column 0 holds 2\b"):
        f.check_data(np.array([[0, 1], [1, 1], [2, 0]]))
    with pytest.raises(DataError, match=r"row 0, column 1 holds 0\.5"):
        f.check_data(np.array([[0.0, 0.5]]))


# ----- resolving hyperparameters -------------------------------------------------------------

REAL_X = np.random.default_rng(7).normal([1.0, -2.0, 0.5], [1.0, 2.0, 0.5], size=(50, 3))
COUNT_X = np.random.default_rng(8).integers(0, 5, size=(20, 4)).astype(float)
BINARY_X = np.random.default_rng(9).integers(0, 2, size=(20, 3)).astype(float)


def test_resolve_defaults():
    mean, var = REAL_X.mean(0), REAL_X.var(0, ddof=1)
    nkc = NormalKnownCov().resolve(REAL_X)
    np.testing.assert_allclose(nkc.mu0, mean)
    np.testing.assert_allclose(nkc.tau2, var)
    np.testing.assert_allclose(nkc.sigma2, var / 10)
    ng = NormalGamma().resolve(REAL_X)
    np.testing.assert_allclose(ng.mu0, mean)
    np.testing.assert_allclose(ng.kappa0, [0.1] * 3)
    np.testing.assert_allclose(ng.a0, [2.0] * 3)
    np.testing.assert_allclose(ng.b0, var / 10)
    niw = NormalInverseWishart().resolve(REAL_X)
    np.testing.assert_allclose(niw.mu0, mean)
    np.testing.assert_allclose(niw.nu0, 5.0)
    np.testing.assert_allclose(niw.psi0, np.cov(REAL_X.T) / 10)
    np.testing.assert_allclose(DirichletMultinomial().resolve(COUNT_X).beta, np.ones(4))
    bb = BetaBernoulli().resolve(BINARY_X)
    np.testing.assert_allclose(bb.a, np.ones(3))
    np.testing.assert_allclose(bb.b, np.ones(3))


def test_resolve_expressions_and_scalars():
    var = REAL_X.var(0, ddof=1)
    nkc = NormalKnownCov(sigma2="var(x) / 4", mu0=0.0, tau2=2.5).resolve(REAL_X)
    np.testing.assert_allclose(nkc.sigma2, var / 4)
    np.testing.assert_allclose(nkc.mu0, np.zeros(3))
    np.testing.assert_allclose(nkc.tau2, np.full(3, 2.5))
    ng = NormalGamma(b0="2 * var(x)", a0=[2.0, 3.0, 4.0]).resolve(REAL_X)
    np.testing.assert_allclose(ng.b0, 2 * var)
    np.testing.assert_allclose(ng.a0, [2.0, 3.0, 4.0])
    niw = NormalInverseWishart(psi0="cov(x) / 5", nu0="D + 4").resolve(REAL_X)
    np.testing.assert_allclose(niw.psi0, np.cov(REAL_X.T) / 5)
    assert float(niw.nu0) == 7.0
    np.testing.assert_allclose(DirichletMultinomial(beta="1 / V").resolve(COUNT_X).beta, np.full(4, 0.25))
    np.testing.assert_allclose(BetaBernoulli(a="mean(x)").resolve(BINARY_X).a, BINARY_X.mean(0))


@pytest.mark.parametrize("family, x, hyper", [
    (NormalKnownCov(sigma2=-1.0), REAL_X, "sigma2"),
    (NormalKnownCov(mu0=[0.0, 1.0]), REAL_X, "mu0"),
    (NormalKnownCov(tau2=[1.0, 0.0, 1.0]), REAL_X, "tau2"),
    (NormalGamma(kappa0=0.0), REAL_X, "kappa0"),
    (NormalGamma(a0=-2.0), REAL_X, "a0"),
    (NormalGamma(b0=np.inf), REAL_X, "b0"),
    (NormalInverseWishart(nu0=2.0), REAL_X, "nu0"),
    (NormalInverseWishart(psi0=-np.eye(3)), REAL_X, "psi0"),
    (NormalInverseWishart(kappa0=-1.0), REAL_X, "kappa0"),
    (DirichletMultinomial(beta=[1.0, 1.0]), COUNT_X, "beta"),
    (DirichletMultinomial(beta=0.0), COUNT_X, "beta"),
    (BetaBernoulli(a=-1.0), BINARY_X, "a"),
    (BetaBernoulli(b=[1.0, 1.0]), BINARY_X, "b"),
])
def test_bad_hyperparameters_name_the_hyperparameter(family, x, hyper):
    with pytest.raises(DataError, match=rf"{family.name}: hyperparameter {hyper} "):
        family.resolve(x)


def test_resolved_families_are_fixed_points_of_resolve():
    for f in CASES.values():
        x = sample_data(f, 5, seed=0)
        again = f.resolve(x)
        for fld in dataclasses.fields(f):
            np.testing.assert_allclose(getattr(again, fld.name), getattr(f, fld.name))
