"""The alpha moves (Escobar & West, and the slice on log alpha) leave the conditional invariant."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import dpppl
from dpppl.kernels.alpha import escobar_west
from dpppl.core.numerics import slice_log_alpha


def _alpha_posterior_mean(k, n, shape, rate, discount=0.0):
    """E[alpha | K, N] by quadrature of Gamma(shape, rate) x EPPF(alpha)."""
    prior = dpppl.PitmanYor(discount=discount, alpha=1.0)
    counts = jnp.asarray([n - k + 1] + [1] * (k - 1), dtype=float)

    def dens(a):
        return float(np.exp(prior.log_eppf(counts, a) + (shape - 1) * np.log(a) - rate * a))
    z = integrate.quad(dens, 0, np.inf, limit=200)[0]
    return integrate.quad(lambda a: a * dens(a), 0, np.inf, limit=200)[0] / z


@pytest.mark.parametrize("k, n, discount", [(1, 10, 0.0), (4, 10, 0.0), (9, 30, 0.0), (4, 10, 0.3)])
def test_alpha_moves_leave_the_conditional_invariant(k, n, discount):
    """Run the alpha move alone for fixed K, N; its mean must match quadrature within
    5 Monte Carlo standard errors (batch means over 64 independent chains)."""
    shape, rate = 2.0, 1.5
    prior = dpppl.PitmanYor(discount=discount, alpha=1.0)
    counts = jnp.asarray([n - k + 1] + [1] * (k - 1), dtype=float)

    if discount == 0:
        def move(key, a):
            return escobar_west(key, a, k, n, shape, rate)
    else:
        def move(key, a):
            return slice_log_alpha(key, a, lambda b: prior.log_eppf(counts, b)
                                   + (shape - 1) * jnp.log(b) - rate * b)

    def chain(key):
        def body(a, key):
            a = move(key, a)
            return a, a
        return jax.lax.scan(body, jnp.asarray(1.0), jax.random.split(key, 2000))[1][200:]

    draws = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(k + n), 64)))
    per_chain = draws.mean(axis=1)
    se = per_chain.std(ddof=1) / np.sqrt(len(per_chain))
    assert abs(per_chain.mean() - _alpha_posterior_mean(k, n, shape, rate, discount)) < 5 * se

