"""The native mallows-slice step (`dpppl.kernels.mallows.native_slice`) against the JAX step: the same
draws from the same keys, up to floating-point rounding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl.errors import KernelError
from dpppl.kernels.base import build
from dpppl.models.init import initial_states
from dpppl.models.native_seating import threefry_words
from tests.helpers.mallows import MODEL_TEXT


def _steps(native, bound, states, keys, steps):
    kern = build("mallows-slice", bound, num_gibbs=3, num_slices=2, native=native)
    x = jnp.asarray(bound.x)

    @jax.jit
    def run(states, keys):
        def chain(state, key):
            def one(state, t):
                state, info = kern.step(jax.random.fold_in(key, t), state, x)
                return state, info.sigma_accept
            return jax.lax.scan(one, kern.init(state, x), jnp.arange(steps))
        return jax.vmap(chain)(states, keys)
    return run(states, keys)


def _rankings(rows, n, seed):
    """`rows` random rankings of `n` items, of lengths 1..n (full ones too: stage n carries nothing)."""
    rng = np.random.default_rng(seed)
    x = np.full((rows, n), -1.0)
    for i in range(rows):
        t = rng.integers(1, n + 1)
        x[i, :t] = rng.permutation(n)[:t]
    return x


def test_native_step_makes_the_jax_steps_draws():
    """Three steps of 3 chains on 30 rankings of 6 items under a Pitman-Yor prior (the CRP is its
    discount 0), every length 1..6: the same labels, statistics, central rankings and acceptance
    rates, and theta to rounding."""
    x = _rankings(30, 6, 0)
    model = dpppl.parse(MODEL_TEXT.replace("CRP(alpha)", "PitmanYor(0.3, 1.0)"))
    bound = model.bind(x)
    keys = jax.random.split(jax.random.key(5), 3)
    assert threefry_words(keys[0]) is not None
    states = initial_states(bound, "prior", jax.random.split(jax.random.key(6), 3), capacity=12)
    native_state, native_rate = _steps(True, bound, states, keys, 3)
    jax_state, jax_rate = _steps(False, bound, states, keys, 3)
    np.testing.assert_array_equal(native_state.z, jax_state.z)
    np.testing.assert_array_equal(native_state.extras.slots.pos, jax_state.extras.slots.pos)
    np.testing.assert_allclose(native_state.extras.slots.theta, jax_state.extras.slots.theta, rtol=1e-9)
    np.testing.assert_array_equal(native_state.stats.R, jax_state.stats.R)
    np.testing.assert_array_equal(native_state.stats.Nj, jax_state.stats.Nj)
    np.testing.assert_array_equal(native_state.stats.n, jax_state.stats.n)
    np.testing.assert_array_equal(native_state.overflow, jax_state.overflow)
    np.testing.assert_allclose(native_rate, jax_rate, rtol=1e-12)
    assert np.any(native_state.z != states.z) and np.any(native_rate > 0)  # the step moved labels and sigmas


def test_native_step_covers_crp_and_pitman_yor_priors_only():
    """native=True under a stick-breaking prior is an error; None falls back to the JAX step."""
    model = dpppl.parse(MODEL_TEXT.replace("CRP(alpha)", "StickBreaking(a = 1, b = 1)"))
    bound = model.bind(_rankings(5, 4, 1))
    with pytest.raises(KernelError, match="CRP and Pitman-Yor"):
        build("mallows-slice", bound, native=True)
    assert not build("mallows-slice", bound).light_compile  # the JAX step
