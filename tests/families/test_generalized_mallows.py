"""The Generalized Mallows family (Meilă & Chen 2010): normalisation, the
incomplete beta and the marginal against quadrature."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from dpppl.families.generalized_mallows import (MallowsTheta, UniformPermutation, all_permutations, log_gm,
                                                log_psi, log_tbeta, lsigma)
from tests.helpers.mallows import family, np_log_psi, padded


# ----------------------------------------------------------------------- family ---
@pytest.mark.parametrize("n", [3, 4, 5])
def test_gm_normalises_over_all_top_t_rankings(n):
    rng = np.random.default_rng(n)
    fam = family(n)
    pos = jnp.asarray(rng.permutation(n))
    theta = jnp.asarray(rng.uniform(0.05, 2.0, n - 1))
    rows = np.concatenate([padded(itertools.permutations(range(n), t), n) for t in range(1, n + 1)])
    logp, given = (np.asarray(v) for v in jax.jit(jax.vmap(lambda x: (
        log_gm(x.astype(jnp.int32), pos, theta, fam.m),
        log_gm(x.astype(jnp.int32), pos, theta, fam.m, log_psi(theta, fam.m)))))(jnp.asarray(rows)))
    np.testing.assert_array_equal(given, logp)  # log psi given (what the Mallows sweeps carry) changes nothing
    t_of_row = (rows >= 0).sum(axis=1)
    for t in range(1, n + 1):
        total = np.exp(logp[t_of_row == t]).sum()
        assert abs(total - 1.0) < 1e-12, (t, total)
    th = np.linspace(0.0, 5.0, 11)
    np.testing.assert_allclose(np.asarray(log_psi(jnp.asarray(th), 7.0)), [np_log_psi(v, 7) for v in th], rtol=1e-12)


def test_tbeta_matches_adaptive_quadrature():
    for a, c, m in [(0.05, 1.0, 19), (0.3, 200.0, 19), (1.0, 1.0, 3), (7.0, 30.0, 5), (60.0, 0.5, 1)]:
        mode = np.log1p(c / a)
        f = lambda th: np.exp(-a * th - c * np_log_psi(th, m))  # noqa: E731
        pts = [0, mode / 10, mode, 10 * mode, np.inf]
        q = sum(integrate.quad(f, lo, hi, limit=400, epsabs=0, epsrel=1e-12)[0] for lo, hi in zip(pts, pts[1:]))
        assert abs(float(log_tbeta(a, c, m)) - np.log(q)) < 1e-9


def test_the_mallows_sweeps_lemma1_table():
    """The Mallows kernels' new-cluster likelihood (n - t)!/n! (Lemma 1), read from a table of
    log k!, for every ranking length t of n = 4 items; the family's prior predictive is it."""
    from dpppl.families.generalized_mallows import log_lemma1

    x = padded([[2, 0, 3, 1][:t] for t in (1, 2, 3, 4)], 4)
    want = [math.log(math.factorial(4 - t) / math.factorial(4)) for t in (1, 2, 3, 4)]
    np.testing.assert_allclose(np.asarray(log_lemma1(jnp.asarray(x, jnp.int32))), want, rtol=1e-6)
    for row, value in zip(x, want):
        predictive = family(4).log_predictive(jnp.zeros(3), jnp.asarray(row))
        np.testing.assert_allclose(np.asarray(predictive), value, rtol=1e-6)


def test_lemma1_and_marginal_against_direct_integration():
    fam = family(4)
    log_marginal = jax.jit(lambda x: fam.log_marginal(fam.point_stats(x)))
    for t in (1, 2, 3, 4):
        x = padded([[2, 0, 3, 1][:t]], 4)
        lm = float(log_marginal(jnp.asarray(x[0])))
        assert abs(lm - math.log(math.factorial(4 - t) / math.factorial(4))) < 1e-10
    # two rankings of n = 3: sum over sigma of prod_j integrals done by scipy, term by term
    fam = family(3, nu=1.5, r=[0.7, 1.3])
    x = padded([[0, 1, 2], [1, 0]], 3)
    st = jax.jit(lambda x: jax.tree.map(lambda s: s.sum(0), fam.point_stats(x)))(jnp.asarray(x))
    perms = all_permutations(3)
    S_all = np.asarray(jax.jit(jax.vmap(lsigma, in_axes=(None, 0)))(st.R, jnp.asarray(perms)))
    total = 0.0
    for S in S_all:
        term = 1.0
        for j in range(2):
            mj, rj = 3 - (j + 1), fam.r[j]
            def density(th):
                return np.exp(-th * (1.5 * rj + S[j]) - (1.5 + st.Nj[j]) * np_log_psi(th, mj))
            post = integrate.quad(density, 0, np.inf, epsabs=0, epsrel=1e-12)[0]
            prior = integrate.quad(lambda th: np.exp(-th * 1.5 * rj - 1.5 * np_log_psi(th, mj)),
                                   0, np.inf, epsabs=0, epsrel=1e-12)[0]
            term *= post / prior
        total += term / 6
    assert abs(float(jax.jit(fam.log_marginal)(st)) - np.log(total)) < 1e-8



def test_p0_as_numpyro_distributions_is_normalised_and_draws_match_it():
    """MallowsTheta: exp(log_prob) of each stage integrates to one, and exact draws
    (theta_exact) have the quadrature mean within Monte Carlo error; UniformPermutation draws
    permutations with log p = -log n!."""
    a, c, m = np.array([0.7, 2.0]), 1.5, np.array([3.0, 2.0])
    draws = np.asarray(jax.jit(lambda key: MallowsTheta(a, c, m).sample(key, (4000,)))(jax.random.key(0)))
    assert draws.shape == (4000, 2) and np.all(draws >= 0)
    t = np.linspace(0.0, 60.0, 200001)  # the densities decay like e^{-a_j t}: nothing left past 60
    log_prob = jax.jit(lambda t: [MallowsTheta(a[j:j + 1], c, m[j:j + 1]).log_prob(t) for j in range(2)])(
        jnp.asarray(t[:, None]))  # each stage's density, in one program
    for j in range(2):
        density = np.exp(np.asarray(log_prob[j]))
        total, mean, square = (integrate.trapezoid(t ** k * density, t) for k in range(3))
        assert abs(total - 1.0) < 1e-6
        assert abs(draws[:, j].mean() - mean) < 4 * np.sqrt(square - mean ** 2) / np.sqrt(len(draws))
    pos = np.asarray(jax.jit(lambda key: UniformPermutation(4, (3,)).sample(key, (5,)))(jax.random.key(0)))
    assert pos.shape == (5, 3, 4) and all(sorted(p) == [0, 1, 2, 3] for p in pos.reshape(-1, 4))
    np.testing.assert_allclose(UniformPermutation(4).log_prob(pos[0, 0]), -np.log(24.0))
