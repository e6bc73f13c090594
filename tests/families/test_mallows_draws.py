"""The moves on sigma and theta of the Generalized Mallows family (dpppl.families.mallows_draws)
against enumeration and quadrature.

Statistical checks use thresholds from the sampling distribution of their statistic at
a false-alarm rate of 1e-3 (chi-square / Kolmogorov-Smirnov), never tuned to pass."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from dpppl.families.generalized_mallows import all_permutations, code_logits_given_theta, theta_exact
from dpppl.families import mallows_draws as mv
from tests.helpers.mallows import family, np_log_psi, padded

LEVEL = 1e-3


def chi2_ok(counts, probs):
    """Pearson chi-square goodness of fit at LEVEL (cells with expected < 5 pooled)."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    expected = probs * counts.sum()
    small = expected < 5
    c = np.r_[counts[~small], counts[small].sum()]
    e = np.r_[expected[~small], expected[small].sum()]
    keep = e > 0
    stat = np.sum((c[keep] - e[keep]) ** 2 / e[keep])
    return stat < stats.chi2.isf(LEVEL, keep.sum() - 1), stat


# ---------------------------------------------------------------- sigma | theta ---
def _exact_sigma_law(W):
    perms = all_permutations(W.shape[0])
    logp = np.asarray(jax.jit(jax.vmap(mv.sigma_log_target, in_axes=(0, None)))(jnp.asarray(perms), W))
    p = np.exp(logp - logp.max())
    return perms, p / p.sum()


def _perm_index(pos, n):
    return np.asarray(pos) @ (n ** np.arange(n))


def _case_W(n, seed):
    rng = np.random.default_rng(seed)
    rows = [rng.permutation(n)[: rng.integers(1, n + 1)] for _ in range(4)]
    fam = family(n)
    theta = jnp.asarray(rng.uniform(0.1, 1.5, n - 1))
    return jax.jit(lambda x, theta: jnp.einsum("j,jab->ab", theta, jnp.sum(fam.point_stats(x).R, axis=0)))(
        jnp.asarray(padded(rows, n)), theta)


def test_stagewise_proposal_law_is_its_log_q_and_not_the_target():
    """Fig. 2's draws follow the q of :func:`stagewise_log_prob` (a proper law), but q is not
    p(sigma | theta): the paper's Lemma 2 fails (here by a measured TV distance)."""
    W = _case_W(4, 0)
    perms, p = _exact_sigma_law(W)
    log_q = jax.jit(jax.vmap(mv.stagewise_log_prob, in_axes=(0, None)))
    q = np.exp(np.asarray(log_q(jnp.asarray(perms), W)))
    assert abs(q.sum() - 1) < 1e-12
    draws = jax.jit(jax.vmap(lambda k: mv.stagewise(k, W)[0]))(jax.random.split(jax.random.key(1), 40000))
    codes_ = {v: i for i, v in enumerate(_perm_index(perms, 4))}
    counts = np.bincount([codes_[v] for v in _perm_index(draws, 4)], minlength=len(perms))
    assert chi2_ok(counts, q)[0]
    assert 0.5 * np.abs(q - p).sum() > 0.02       # the gap the MH correction removes
    # the three-item counterexample of the module docstring
    t1, t2 = 0.4, 1.7
    W3 = jnp.zeros((3, 3)).at[0, 1].set(t1).at[0, 2].set(t1).at[1, 2].set(t2)
    q_a = np.exp(np.asarray(log_q(jnp.array([[0, 1, 2], [0, 2, 1]]), W3))).sum()
    assert abs(q_a - 1 / (1 + np.exp(-t1) + np.exp(-t1 - t2))) < 1e-12
    assert abs(q_a - 1 / (1 + np.exp(-t1) + np.exp(-2 * t1))) > 0.01


def _mh_then_swaps(key, pos, W):
    k1, k2 = jax.random.split(key)
    return mv.sigma_adjacent_swaps(k2, mv.sigma_mh(k1, pos, W)[0], W)


@pytest.mark.parametrize("n, seed", [pytest.param(4, 2, marks=pytest.mark.slow), (5, 3)])  # n = 4: test-time budget
@pytest.mark.parametrize("move", [_mh_then_swaps, lambda key, pos, W: mv.sigma_step(key, pos, W)[0]],
                         ids=["sigma_mh then sigma_adjacent_swaps", "sigma_step"])
def test_sigma_mh_matches_enumeration(n, seed, move):
    """Both forms of the sigma update, by keys (what `dpppl.datasets.synthetic` draws with) and from
    one block of uniforms (`sigma_step`, what the kernels run), leave p(sigma | theta) invariant."""
    W = _case_W(n, seed)
    perms, p = _exact_sigma_law(W)

    def chain(key):
        def body(i, pos):
            return move(jax.random.fold_in(key, i), pos, W)
        start = jax.random.permutation(jax.random.fold_in(key, 99), n).astype(jnp.int32)
        return jax.lax.fori_loop(0, 15, body, start)

    draws = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(seed), 30000))
    codes_ = {v: i for i, v in enumerate(_perm_index(perms, n))}
    counts = np.bincount([codes_[v] for v in _perm_index(draws, n)], minlength=len(perms))
    ok, stat = chi2_ok(counts, p)
    assert ok, stat


def test_insert_code_is_the_exact_sigma_given_one_ranking():
    n = 4
    fam = family(n)
    x = jnp.asarray(padded([[2, 0]], n)[0]).astype(jnp.int32)
    theta = jnp.array([0.8, 0.3, 1.1])
    W, logits = jax.jit(lambda x, theta: (jnp.einsum("j,jab->ab", theta, fam.point_stats(x).R),
                                          code_logits_given_theta(theta, fam.m, n)))(x, theta)
    perms, p = _exact_sigma_law(W)
    draws = jax.jit(jax.vmap(lambda k: mv.insert_code(k, x, logits)))(jax.random.split(jax.random.key(3), 30000))
    codes_ = {v: i for i, v in enumerate(_perm_index(perms, n))}
    counts = np.bincount([codes_[v] for v in _perm_index(draws, n)], minlength=len(perms))
    assert chi2_ok(counts, p)[0]


# ---------------------------------------------------------------- theta | sigma ---
def _theta_cdf(a, c, m):
    f = lambda th: np.exp(-a * th - c * np_log_psi(th, m))  # noqa: E731
    z = integrate.quad(f, 0, np.inf, epsabs=0, epsrel=1e-11)[0]
    return lambda v: np.array([integrate.quad(f, 0, vi, epsabs=0, epsrel=1e-10)[0] / z for vi in np.atleast_1d(v)])


@jax.jit
def _theta_draws(keys, a, c, m):
    """Slice and exact draws of theta (a, c, m traced: one compile for every case)."""
    aa, cc, mm = (jnp.full(1, v) for v in (a, c, m))
    slice_draws = jax.vmap(lambda k: mv.theta_slice(k, jnp.ones(1), aa, cc, mm, num_slices=20)[0])(keys)
    return slice_draws, jax.vmap(lambda k: theta_exact(k, a, c, m))(keys)


@pytest.mark.parametrize("a, c, m", [(1.0, 1.0, 4), (3.5, 12.0, 2)])
def test_theta_slice_and_exact_draws_match_quadrature(a, c, m):
    cdf = _theta_cdf(a, c, m)
    keys = jax.random.split(jax.random.key(5), 4000)
    slice_draws, exact_draws = _theta_draws(keys, *(jnp.asarray(v, float) for v in (a, c, m)))
    for draws in (np.asarray(slice_draws), np.asarray(exact_draws)):
        grid = np.quantile(draws, np.linspace(0.02, 0.98, 25))
        d = np.max(np.abs(np.searchsorted(np.sort(draws), grid, side="right") / draws.size - cdf(grid)))
        assert d < stats.kstwo.isf(LEVEL, draws.size), d   # KS bound on the CDF grid



def test_theta_beta_draws_follow_the_beta_law_of_eq_12():
    """e^{-theta} of Beta-Gibbs's theta draw (a ratio of two Gamma draws) is Beta(a, c + 1)."""
    a, c = jnp.array([0.7, 4.0]), jnp.array([2.0, 30.0])
    draws = np.exp(-np.asarray(jax.jit(jax.vmap(lambda k: mv.theta_beta(k, a, c)))(
        jax.random.split(jax.random.key(7), 4000))))
    for j in range(2):
        d = stats.kstest(draws[:, j], stats.beta(float(a[j]), float(c[j]) + 1.0).cdf).statistic
        assert d < stats.kstwo.isf(LEVEL, draws.shape[0]), (j, d)
