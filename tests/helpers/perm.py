"""Brute-force laws of the permutation-augmented sampler shared by its tests."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from tests.helpers.cases import CASES


@functools.lru_cache(maxsize=None)
def bound(name):
    case = CASES[name]
    return case.model.bind(case.x)


_SUBSET_LOG_MARGINAL = {}


def explicit_log_marginal(b, points):
    """log p(x_c) from explicitly summed point statistics (no prefix sums)."""
    if id(b) not in _SUBSET_LOG_MARGINAL:
        x = jnp.asarray(b.x)

        @jax.jit
        def fn(mask):
            stats = jax.tree.map(lambda p: jnp.tensordot(mask.astype(p.dtype), p, axes=1), b.family.point_stats(x))
            return b.family.log_marginal(stats)
        _SUBSET_LOG_MARGINAL[id(b)] = fn
    mask = np.zeros(b.num_points, bool)
    mask[np.asarray(points)] = True
    return float(_SUBSET_LOG_MARGINAL[id(b)](jnp.asarray(mask)))


def brute_markov_log_h(b, order):
    """log h of a block in the given order: the Markov scan of sec. 4.1, with
    w(i -> j) = p(x_j | x_i) from marginal likelihoods, m(x_i, x_j) / m(x_i)."""
    def log_w(i, j):
        return explicit_log_marginal(b, [i, j]) - explicit_log_marginal(b, [i])
    total = -math.log(len(order))
    for t in range(1, len(order)):
        lw = np.array([log_w(order[t - 1], u) for u in order[t:]])
        total += lw[0] - special.logsumexp(lw)
    return total


NUM_DRAWS = 20000

