"""The non-conjugate NormalLogNormal family: closed forms (prior, likelihood from
statistics, proposal) against direct sums and scipy, its numerical marginal against a
2-D quadrature by scipy and against importance sampling with its own proposal."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import dpppl
from tests.helpers.nonconjugate import FAMILY_ALPHA, X_SMALL, _resolved, _stats


def test_closed_forms_match_direct_sums():
    fam = _resolved()
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 0.7, size=(40, 3))
    fam3 = dpppl.NormalLogNormal(m0=0.1, s0=[1.0, 2.0, 3.0], l0=-0.5, t0=0.8).resolve(x)
    u = jnp.asarray(rng.normal(size=(4, 6)))
    direct, from_stats, log_prior = jax.jit(lambda u, x: (  # one program: eagerly, each primitive compiles alone
        fam3.log_likelihood(fam3.params_of(u), x).sum(axis=0), fam3.log_likelihood_of_stats(u, _stats(fam3, x)),
        fam3.log_prior(u)))(u, jnp.asarray(x))
    np.testing.assert_allclose(from_stats, direct, rtol=1e-10)
    mu, log_sd = np.asarray(u[:, :3]), np.asarray(u[:, 3:])
    prior = (stats.norm.logpdf(mu, 0.1, [1.0, 2.0, 3.0]) + stats.norm.logpdf(log_sd, -0.5, 0.8)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(log_prior), prior, rtol=1e-10)
    # the proposal of an empty cluster is the prior
    loc, scale = fam.proposal(fam.empty_stats())
    np.testing.assert_allclose(np.asarray(loc), [0.0, np.log(0.5)])
    np.testing.assert_allclose(np.asarray(scale), [2.0, 0.5])


def test_numerical_marginal_matches_scipy():
    fam = _resolved()
    x = X_SMALL[:3, 0]

    def integrand(mu, log_sd):
        return np.exp(stats.norm.logpdf(x, mu, np.exp(log_sd)).sum() + stats.norm.logpdf(mu, 0.0, 2.0)
                      + stats.norm.logpdf(log_sd, np.log(0.5), 0.5))

    reference, _ = integrate.dblquad(integrand, np.log(0.5) - 6, np.log(0.5) + 6, -10, 10, epsabs=1e-13)
    numerical = jax.jit(lambda x: fam.log_marginal_numerical(_stats(fam, x)))(jnp.asarray(X_SMALL[:3], float))
    assert abs(float(numerical) - np.log(reference)) < 1e-6


@pytest.mark.parametrize("n", [3, 2000])
def test_numerical_marginal_matches_importance_sampling(n):
    """E_q[p(x, u) / q(u)] = p(x): the proposal's density, the prior, the likelihood from
    statistics and the quadrature agree, for a few points and for many (where the
    posterior of log sigma is far narrower than its prior)."""
    x = np.random.default_rng(2).normal(0.3, 0.8, size=(n, 2))
    fam = dpppl.NormalLogNormal(m0=0.0, s0=2.0, l0=float(np.log(0.5)), t0=0.5).resolve(x)
    draws = 200_000

    @jax.jit  # one program (eagerly, each primitive compiles on its own)
    def marginal_and_log_weights(x, key):
        s = _stats(fam, x)
        u = fam.draw_proposal(key, jax.tree.map(lambda a: jnp.broadcast_to(a, (draws,) + a.shape), s))
        log_w = fam.log_prior(u) + fam.log_likelihood_of_stats(u, s) - fam.log_proposal(u, s)
        return fam.log_marginal_numerical(s), log_w
    numerical, log_w = marginal_and_log_weights(jnp.asarray(x), jax.random.key(0))
    numerical, log_w = float(numerical), np.asarray(log_w)
    w = np.exp(log_w - log_w.max())
    estimate = np.log(w.mean()) + log_w.max()
    standard_error = w.std() / w.mean() / np.sqrt(draws)  # of the log, by the delta method
    assert abs(estimate - numerical) < stats.norm.isf(FAMILY_ALPHA / 2) * standard_error + 1e-9

