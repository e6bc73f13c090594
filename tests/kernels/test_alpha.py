"""The alpha moves (Escobar & West, and the slice on log alpha) leave the conditional invariant."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from scipy.special import gammaln

import dpppl
from dpppl.kernels.alpha import build_alpha_kernel, escobar_west
from dpppl.core.numerics import slice_log_alpha

SHAPE, RATE = 2.0, 1.5
DP_CASES = [(1, 10), (4, 10), (9, 30)]  # (K, N)


def _counts(k, n):
    return jnp.asarray([n - k + 1] + [1] * (k - 1), dtype=float)


def _alpha_posterior_mean(k, n, shape, rate, discount=0.0):
    """E[alpha | K, N] by quadrature of Gamma(shape, rate) x EPPF(alpha)."""
    prior = dpppl.PitmanYor(discount=discount, alpha=1.0)
    log_eppf = jax.jit(prior.log_eppf)
    counts = _counts(k, n)

    def dens(a):
        return float(np.exp(log_eppf(counts, a) + (shape - 1) * np.log(a) - rate * a))
    z = integrate.quad(dens, 0, np.inf, limit=200)[0]
    return integrate.quad(lambda a: a * dens(a), 0, np.inf, limit=200)[0] / z


def _chains(move, key):
    """64 independent chains of 2,000 moves from alpha = 1, the first 200 of each dropped."""
    def chain(key):
        def body(a, key):
            a = move(key, a)
            return a, a
        return jax.lax.scan(body, jnp.asarray(1.0), jax.random.split(key, 2000))[1][200:]
    return jax.vmap(chain)(jax.random.split(key, 64))


@pytest.fixture(scope="module")
def escobar_west_draws():
    """The chains of every DP case in one jitted program (K and N are its arguments)."""
    ks, ns = (jnp.asarray([case[i] for case in DP_CASES], float) for i in (0, 1))
    keys = jnp.stack([jax.random.key(k + n) for k, n in DP_CASES])
    run = jax.jit(jax.vmap(lambda key, k, n: _chains(lambda kk, a: escobar_west(kk, a, k, n, SHAPE, RATE), key)))
    return dict(zip(DP_CASES, np.asarray(run(keys, ks, ns))))


@pytest.mark.parametrize("k, n, discount", [(1, 10, 0.0), (4, 10, 0.0), (9, 30, 0.0), (4, 10, 0.3)])
def test_alpha_moves_leave_the_conditional_invariant(k, n, discount, request):
    """Run the alpha move alone for fixed K, N; its mean must match quadrature within
    5 Monte Carlo standard errors (batch means over 64 independent chains)."""
    if discount == 0:
        draws = request.getfixturevalue("escobar_west_draws")[k, n]
    else:
        prior = dpppl.PitmanYor(discount=discount, alpha=1.0)
        counts = _counts(k, n)

        def move(key, a):
            return slice_log_alpha(key, a, lambda b: prior.log_eppf(counts, b)
                                   + (SHAPE - 1) * jnp.log(b) - RATE * b)
        draws = np.asarray(jax.jit(lambda key: _chains(move, key))(jax.random.key(k + n)))
    per_chain = draws.mean(axis=1)
    se = per_chain.std(ddof=1) / np.sqrt(len(per_chain))
    assert abs(per_chain.mean() - _alpha_posterior_mean(k, n, SHAPE, RATE, discount)) < 5 * se


def test_escobar_west_keeps_draws_below_the_smallest_normal_number_exact():
    """alpha ~ Gamma(1e-3, 1e3) given one cluster puts ~40% of alpha below the smallest normal
    number `tiny` (XLA computes it as 0; log 0 made the log joint NaN). Such draws are kept as
    `tiny`: the fraction of draws at `tiny` must match the posterior mass below it (quadrature
    on u = log alpha) within 5 Monte Carlo standard errors, and the log joint stays finite."""
    shape, rate, k, n = 1e-3, 1e3, 1, 5
    tiny = np.finfo(np.float64).tiny
    draws = np.asarray(jax.jit(lambda key: _chains(lambda kk, a: escobar_west(kk, a, k, n, shape, rate), key))(
        jax.random.key(7)))
    assert draws.min() == tiny and np.isfinite(draws).all()

    def dens(u):  # p(u | K = 1, N): Gamma(alpha; shape, rate) alpha Gamma(alpha + 1) / Gamma(alpha + N)
        a = np.exp(u)
        return np.exp(shape * u - rate * a + gammaln(a + 1) - gammaln(a + n) + gammaln(n))
    upper = integrate.quad(dens, np.log(tiny), np.log(1.0), limit=400, points=[-50.0, -10.0])[0]
    below = tiny ** shape / shape                 # dens(u) = exp(shape u) there, to rounding
    per_chain = (draws == tiny).mean(axis=1)
    se = per_chain.std(ddof=1) / np.sqrt(len(per_chain))
    assert abs(per_chain.mean() - below / (below + upper)) < 5 * se

    prior = dpppl.CRP(alpha=dpppl.Gamma(shape, rate))
    prior.check_hyperparameters(n)  # inside the documented range
    lp = prior.log_eppf(_counts(k, n), tiny) + prior.log_prior_alpha(tiny)
    assert np.isfinite(lp)


@pytest.mark.parametrize("shape, rate", [(np.finfo(np.float64).tiny, 1.0), (1e-3, 1e-3 / 2.3e-308)])
def test_pitman_yor_alpha_move_stays_finite_at_the_smallest_shapes(shape, rate):
    """The slice on log alpha evaluates the Gamma density on u = log alpha, so a current alpha
    at the smallest normal number, and proposals below it, keep a finite target; every draw is
    a normal number."""
    tiny = np.finfo(np.float64).tiny
    model = dpppl.PitmanYorMixture(0.3, dpppl.Gamma(shape, rate), dpppl.NormalKnownCov(sigma2=1.0, tau2=1.0))
    bound = model.bind(np.asarray([[0.0], [0.1], [3.0], [3.2], [-2.0]]))
    move = build_alpha_kernel(bound)
    state = bound.state_from_labels(None, np.asarray([0, 0, 1, 1, 2]), 6)._replace(alpha=jnp.asarray(tiny))

    def chain(key):
        return jax.lax.scan(lambda s, kk: (move.step(kk, s, None)[0],) * 2, state, jax.random.split(key, 200))[1]
    alphas = np.asarray(jax.jit(chain)(jax.random.key(3)).alpha)
    assert np.all(alphas >= tiny) and np.isfinite(alphas).all()
    lp = jax.vmap(lambda a: bound.prior.log_eppf(state.stats.n, a) + bound.prior.log_prior_alpha(a))(alphas)
    assert np.isfinite(np.asarray(lp)).all()
