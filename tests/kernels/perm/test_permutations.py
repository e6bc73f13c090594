"""The permutation samplers of the permutation move (kernel="perm-move", and "perm", which runs
it; dpppl.kernels.perm.permutations): consistent with C and with the right law."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.kernels.perm.permutations import markov_permutation, projection_permutation, uniform_permutation
from tests.helpers.perm import NUM_DRAWS, bound, brute_markov_log_h


# --------------------------------------------------------------------------- (e) ---
def is_consistent(pi, z):
    zp = np.asarray(z)[np.asarray(pi)]
    changes = np.sum(zp[1:] != zp[:-1])
    return sorted(pi.tolist()) == list(range(len(z))) and changes == len(np.unique(zp)) - 1


def test_permutation_samplers_are_consistent_and_uniform():
    b = bound("beta_bernoulli_overlap")
    x = jnp.asarray(b.x)
    z = jnp.asarray([2, 0, 2, 5, 0, 2, 5, 2], jnp.int32)     # slots 0, 2, 5 of capacity 7
    keys = jax.random.split(jax.random.key(3), 6000)
    uni = np.asarray(jax.jit(jax.vmap(lambda k: uniform_permutation(jax.random.uniform(k, (8, 2)), z, 7)))(keys))
    proj = np.asarray(jax.jit(jax.vmap(lambda k: projection_permutation(k, b.family, x, z, 7)))(keys[:200]))
    mark = np.asarray(jax.jit(jax.vmap(lambda k: markov_permutation(k, b.family, x, z, 7)))(keys[:200]))
    for draws in (uni, proj[:50], mark[:50]):
        assert all(is_consistent(p, z) for p in draws)
    # cluster order uniform over the 3! orders, and the first point of the block of size 4 uniform
    labels = np.asarray(z)  # indexed 48,000 times below: NumPy's, not a JAX array's one dispatch per index
    first = labels[uni[:, 0]]
    np.testing.assert_allclose([np.mean(first == c) for c in (0, 2, 5)], 1 / 3, atol=5 * math.sqrt(2 / 9 / 6000))
    block = np.array([[p for p in row if labels[p] == 2][0] for row in uni])
    np.testing.assert_allclose([np.mean(block == i) for i in (0, 2, 5, 7)], 0.25, atol=5 * math.sqrt(3 / 16 / 6000))


def test_markov_permutation_law():
    """Orders of one block of 4 points drawn by the Markov scan follow h."""
    b = bound("niw_2d_overlap")
    x = jnp.asarray(b.x)
    z = jnp.asarray([0, 1, 0, 0, 0], jnp.int32)
    block = [0, 2, 3, 4]
    keys = jax.random.split(jax.random.key(11), NUM_DRAWS)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: markov_permutation(k, b.family, x, z, 2)))(keys))
    orders = ["".join(str(p) for p in row if p != 1) for row in draws]
    law = {"".join(map(str, o)): math.exp(brute_markov_log_h(b, list(o))) for o in itertools.permutations(block)}
    values, counts = np.unique(orders, return_counts=True)
    freq = dict(zip(values, counts / NUM_DRAWS))
    for k, p in law.items():
        assert abs(freq.get(k, 0.0) - p) <= 5 * math.sqrt(p * (1 - p) / NUM_DRAWS) + 1e-12, (k, p)

