"""Geweke tests of the dependent-DP kernels (the default run is small; the longer ones and
a power check are slow)."""


import pytest

from dpppl.testing.ddp_geweke import ddp_geweke_test
from tests.helpers.ddp import small_model


# ----------------------------------------------------------------------------- Geweke

SLICES = [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("slice_covariances", [True, pytest.param(False, marks=pytest.mark.slow)])  # ~30-50 s each
def test_geweke_ddp_with_swaps_small(slice_covariances):
    """Default-run budget: the hybrid (assignments, parameters and all three interval
    kinds), with per-slice covariances (the default) and with shared ones."""
    # capacity 48: with b = 2 a state uses a label >= 24 with probability ~6 (2/3)^24 ~ 4e-4, so the
    # 32 x 40 states can overflow 24 slots (they did with seed 1 once the kernels' draws changed);
    # a label >= 48, ~2e-8
    result = ddp_geweke_test(small_model(slice_covariances=slice_covariances), "ddp+ddpswap", SLICES, capacity=48,
                             num_chains=32, num_steps=40, num_forward=5000, seed=1, num_swaps=4)
    assert result.passed, result.report


@pytest.mark.slow  # ~30 s on two cores; the default run keeps test_geweke_ddp_with_swaps_small[True]
def test_geweke_ddp_with_swaps_on_finite_sticks():
    """Three labels only (a finite sequence of sticks ending with b_3 = 0): the kernels must
    never seat a point past the last stick, and stay exact."""
    result = ddp_geweke_test(small_model(sticks=([1.0, 1.0, 1.0], [2.0, 1.0, 0.0]), slice_covariances=False),
                             "ddp+ddpswap", SLICES,
                             num_chains=32, num_steps=40, num_forward=5000, seed=3, num_swaps=4, pairs="uniform")
    assert result.passed, result.report


@pytest.mark.slow
@pytest.mark.parametrize("kernel, options", [
    ("ddp", {}),
    ("ddp", {"num_aux": 1}),
    ("ddpswap", {"pairs": "uniform"}),
    ("ddpswap", {"pairs": "prior", "intervals": "all"}),
    ("ddp+ddpswap", {"intervals": "random"}),
])
def test_geweke_ddp_long(kernel, options):
    # per-slice covariances (the default) are vaguer on 6 points: chains reach higher labels
    result = ddp_geweke_test(small_model(), kernel, SLICES, num_chains=64, num_steps=150,
                             num_forward=20000, seed=2, capacity=48, **options)
    assert result.passed, result.report


@pytest.mark.slow
def test_geweke_rejects_a_kernel_for_other_sticks():
    """Power: a kernel built for sticks Beta(1, 0.3) instead of Beta(1, 2) fails."""
    result = ddp_geweke_test(small_model(), "ddp", SLICES, num_chains=64, num_steps=150, num_forward=20000,
                             seed=2, kernel_model=small_model(sticks=(1.0, 0.3)))
    assert not result.passed, result.report

