"""Small numerics shared by every layer (`dpppl.core.numerics`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpppl.core.numerics import log_gamma_draw, permutation_of_first

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


def test_log_gamma_draw_follows_the_log_gamma_law_small_shapes_included():
    """log G for G ~ Gamma(a): Kolmogorov-Smirnov against scipy's loggamma (the law of log G) for
    shapes from 1e-3 (the boost, whose draws underflow below the smallest float and must keep a
    finite log) to 82; one draw of all entries, as the alpha move makes it."""
    from scipy import stats

    shapes = np.array([1e-3, 0.5, 1.0, 3.7, 82.0])
    draws = np.asarray(jax.jit(lambda k: log_gamma_draw(k, shapes, (4000, len(shapes)), jnp.float64))(
        jax.random.key(3)))
    assert np.all(np.isfinite(draws))
    for column, a in enumerate(shapes):
        result = stats.kstest(draws[:, column], stats.loggamma(a).cdf)
        assert result.pvalue > 1e-3, (a, result)


def test_normal_draw_is_standard_normal_and_keeps_padded_points_draws():
    """Box-Muller normals: Kolmogorov-Smirnov against N(0, 1), and the draws of the first rows do
    not depend on how many rows are drawn (points padded to a shape class)."""
    from scipy import stats

    from dpppl.core.numerics import normal_draw

    key = jax.random.key(3)
    draws = np.asarray(normal_draw(key, (4000, 3)))
    for j in range(3):
        d = stats.kstest(draws[:, j], stats.norm.cdf).statistic
        assert d < stats.kstwo.isf(1e-3, draws.shape[0]), (j, d)
    np.testing.assert_array_equal(np.asarray(normal_draw(key, (4100, 3)))[:4000], draws)
