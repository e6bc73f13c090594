"""dpppl.core.numerics_random draws what jax.random draws, bit for bit, whether the Threefry hash
runs as the native call or as JAX's own, so switching the draws to it changed no run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpppl.core import native
from dpppl.core import numerics_random as random

DRAWS = {
    "uniform float64": (lambda k: random.uniform(k, (5, 3), jnp.float64),
                        lambda k: jax.random.uniform(k, (5, 3), jnp.float64)),
    "uniform float32 in [2, 5)": (lambda k: random.uniform(k, (7,), jnp.float32, 2.0, 5.0),
                                  lambda k: jax.random.uniform(k, (7,), jnp.float32, 2.0, 5.0)),
    "uniform, array bounds": (lambda k: random.uniform(k, (4,), jnp.float64, jnp.arange(4.0), 10.0),
                              lambda k: jax.random.uniform(k, (4,), jnp.float64, jnp.arange(4.0), 10.0)),
    "uniform scalar, minval": (lambda k: random.uniform(k, minval=1e-300),
                               lambda k: jax.random.uniform(k, minval=1e-300)),
    "normal": (lambda k: random.normal(k, (9,), jnp.float64), lambda k: jax.random.normal(k, (9,), jnp.float64)),
    "bits": (lambda k: random.bits(k, (2, 6)), lambda k: jax.random.bits(k, (2, 6), jnp.uint32)),
    "split": (lambda k: jax.random.key_data(random.split(k, 3)), lambda k: jax.random.key_data(jax.random.split(k, 3))),
    "split to a shape": (lambda k: jax.random.key_data(random.split(k, (2, 3, 2))),
                         lambda k: jax.random.key_data(jax.random.split(k, (2, 3, 2)))),
    "fold_in": (lambda k: jax.random.key_data(random.fold_in(k, 5)),
                lambda k: jax.random.key_data(jax.random.fold_in(k, 5))),
    "fold_in of many": (lambda k: jax.random.key_data(random.fold_in(k, jnp.arange(4))),
                        lambda k: jax.random.key_data(jax.vmap(lambda d: jax.random.fold_in(k, d))(
                            jnp.arange(4, dtype=jnp.uint32)))),
}


@pytest.fixture(params=["native", "jax"])
def hash_path(request, monkeypatch):
    """Each test runs with the hash as the native call, then with JAX's `threefry2x32` (DPPPL_NATIVE=0)."""
    if request.param == "native" and native._compiler() is None:
        pytest.skip("no C++ compiler")
    monkeypatch.setenv("DPPPL_NATIVE", "auto" if request.param == "native" else "0")
    assert random._native() is (request.param == "native")
    return request.param


@pytest.mark.parametrize("name", DRAWS)
def test_the_draws_are_jax_randoms_bit_for_bit(hash_path, name):
    ours, theirs = DRAWS[name]
    keys = jax.random.split(jax.random.key(3), 2)
    for got, want in [(ours(keys[0]), theirs(keys[0])),
                      (jax.jit(ours)(keys[0]), theirs(keys[0])),
                      (jax.jit(jax.vmap(ours))(keys), jax.vmap(theirs)(keys))]:  # as the chains draw them
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_the_native_hash_is_one_call_in_the_program(hash_path):
    text = jax.jit(lambda k: random.uniform(k, (3,))).lower(jax.random.key(0)).as_text()
    assert text.count(random._TARGET) == (1 if hash_path == "native" else 0)


def test_keys_of_another_implementation_are_drawn_by_jax_random():
    key = jax.random.key(4, impl="rbg")
    np.testing.assert_array_equal(random.uniform(key, (3,)), jax.random.uniform(key, (3,)))
    np.testing.assert_array_equal(jax.random.key_data(random.split(key, 2)),
                                  jax.random.key_data(jax.random.split(key, 2)))
