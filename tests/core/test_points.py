"""Which rows of a program's points are real and each point's uniforms by its index (`dpppl.core.points`):
the real rows of a scalar count are the first ones; of one count per process, the first of each process's
segment; uniforms computed from the indices are the rows of `jax.random.uniform`'s draw."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpppl.core.points import num_real, real_index, real_rows, row_of_real, uniforms_at


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("per_point", [(), (4,)])
def test_uniforms_from_the_indices_are_the_rows_of_one_draw(dtype, per_point):
    key = jax.random.key(3)
    index = jnp.array([0, 5, 999, 17, 640])
    with jax.enable_x64(True):
        whole = jax.random.uniform(key, (1000,) + per_point, dtype)
        np.testing.assert_array_equal(uniforms_at(key, index, per_point, dtype), whole[index])


def test_the_real_rows_of_segments_are_the_first_of_each():
    counts = np.array([3, 5], np.int32)  # two processes, 8 rows each
    np.testing.assert_array_equal(real_rows(counts, 16), [1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0])
    assert int(num_real(counts, 16)) == 8
    real = np.asarray(real_rows(counts, 16))
    np.testing.assert_array_equal(np.asarray(real_index(counts, 16))[real], np.arange(8))
    np.testing.assert_array_equal(row_of_real(counts, 16, jnp.arange(8)), np.flatnonzero(real))


def test_a_scalar_count_is_the_first_rows():
    np.testing.assert_array_equal(real_rows(np.int32(5), 8), [1, 1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(real_index(np.int32(5), 8), np.arange(8))
    assert int(row_of_real(np.int32(5), 8, 3)) == 3 and num_real(None, 8) == 8
