"""Exchangeable seating: the functions built on it refuse priors on explicit labels, and a sweep's
random numbers do not depend on padded points."""

import jax
import numpy as np
import pytest

import dpppl
from dpppl.models.seating import sweep_draws
from tests.helpers.stick_breaking import FIG1_PRIOR, NKC, X4


def test_functions_built_on_exchangeable_seating_refuse_stick_breaking_priors():
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    for call in (lambda: dpppl.map_search(model, X4), lambda: dpppl.sample_prior(model, 4)):
        with pytest.raises(dpppl.ModelError, match="prior on explicit labels"):
            call()



def test_a_sweep_draws_the_real_points_numbers_whatever_the_padding():
    """The visiting-order and seating uniforms of point i are the same for any number of points past i
    (one (N, 2) draw whose counters run row by row), so padded points never shift the real ones'."""
    key = jax.random.key(3)
    short = sweep_draws(key, np.zeros((5, 2)))
    long = sweep_draws(key, np.zeros((8, 2)))
    assert [a.shape for a in short] == [(5,), (5,)] and [a.shape for a in long] == [(8,), (8,)]
    for few, more in zip(short, long):
        np.testing.assert_array_equal(few, more[:5])
    assert not np.array_equal(*short)  # the two columns are different numbers
