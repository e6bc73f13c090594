"""Small numerics shared by every layer (`dpppl.core.numerics`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpppl.core.numerics import permutation_of_first

_padded = jax.jit(permutation_of_first, static_argnums=1)


@pytest.mark.parametrize("n, size", [(1, 4), (70, 80), (1625, 1792), (1626, 1792)])
def test_a_padded_permutation_orders_the_real_points_as_jax_does(n, size):
    """The real points' order is `jax.random.permutation(key, n)` bit for bit whatever the padding,
    on both sides of the size where JAX's shuffle takes a second sorting round (1625 -> 1626), and
    the padded indices stay last in place: what a sweep over points padded to a shape class visits."""
    for seed in range(2):
        key = jax.random.key(seed)
        order = np.asarray(_padded(key, size, jnp.int32(n)))
        np.testing.assert_array_equal(order[:n], jax.random.permutation(key, n))
        np.testing.assert_array_equal(order[n:], np.arange(n, size))
        np.testing.assert_array_equal(permutation_of_first(key, n), jax.random.permutation(key, n))
