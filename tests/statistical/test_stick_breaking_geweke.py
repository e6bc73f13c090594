"""Geweke joint-distribution tests of the stick-breaking kernels (slow)."""

import pytest

import dpppl


# ---------------------------------------------------------------------------- Geweke (slow)

GEWEKE_MODEL = dpppl.StickBreakingMixture(1.0, 1.0, component=dpppl.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["sbgibbs", "sbgibbs+labelswap+labelpermute"])
def test_geweke_joint_distribution(kernel):
    """12 points, beyond enumeration: forward draws of (labels, data) against successive
    kernel steps and data redraws; label-invariant statistics, the labelled log joint and
    the share of points at label 1."""
    from dpppl.testing.geweke import geweke_test

    result = geweke_test(GEWEKE_MODEL, kernel, 12, 1, num_chains=64, num_steps=100, num_forward=5000, seed=0)
    assert result.passed, result.report
    assert "label_1_share" in result.names


@pytest.mark.slow
def test_geweke_rejects_a_kernel_for_the_wrong_sticks():
    """Kernels built for b_i = 1.5 on data from b_i = 1 (measured: |t| = 17 for K)."""
    from dpppl.testing.geweke import geweke_test

    wrong = dpppl.StickBreakingMixture(1.0, 1.5, component=dpppl.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0))
    result = geweke_test(GEWEKE_MODEL, "sbgibbs+labelswap+labelpermute", 12, 1, num_chains=64, num_steps=100,
                         num_forward=5000, seed=1, kernel_model=wrong)
    assert not result.passed, result.report

