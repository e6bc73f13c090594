"""Geweke joint-distribution tests for every exact kernel, including the alpha updates.

Enumeration (tests/statistical/test_exactness.py) stops at eight points; these tests run the
kernels on simulated data sets of twelve points, where the data are redrawn between
kernel steps (:mod:`dpppl.testing.geweke`). Every kernel registered as exact is
picked up. Models cover every family, alpha fixed, alpha ~ Gamma (Escobar & West
update) and Pitman-Yor with alpha ~ Gamma (slice update on log alpha). Deliberately
wrong kernels (a wrong new-cluster weight, a wrong alpha update, a wrong likelihood)
must be rejected, which shows the test's power at this budget.
"""

import pytest

import dpppl
from dpppl import families as fam
from dpppl import kernels
from dpppl.testing import scale_concentration
from dpppl.testing.geweke import geweke_test

NUM_POINTS = 12
NIW = fam.NormalInverseWishart(mu0=[0.0, 0.0], kappa0=0.1, nu0=8.0, psi0=[[2.0, 0.0], [0.0, 2.0]])
NKC = fam.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0)
# name -> (model, dim, num_trials)
MODELS = {
    "niw_gamma_alpha": (dpppl.DPMixture(dpppl.Gamma(2.0, 2.0), NIW), 2, None),
    "normal_known_fixed_alpha": (dpppl.DPMixture(1.0, NKC), 1, None),
    "normal_gamma_gamma_alpha": (dpppl.DPMixture(dpppl.Gamma(2.0, 1.0),
                                                 fam.NormalGamma(mu0=0.0, kappa0=0.2, a0=3.0, b0=1.0)), 2, None),
    "dirichlet_multinomial_gamma_alpha": (dpppl.DPMixture(dpppl.Gamma(1.0, 1.0),
                                                          fam.DirichletMultinomial(beta=0.5)), 4, 8),
    "beta_bernoulli_fixed_alpha": (dpppl.DPMixture(0.7, fam.BetaBernoulli(a=0.5, b=0.5)), 6, None),
    "pitman_yor_gamma_alpha": (dpppl.PitmanYorMixture(0.3, dpppl.Gamma(2.0, 1.0), NKC), 1, None),
    "pitman_yor_niw_gamma_alpha": (dpppl.PitmanYorMixture(0.3, dpppl.Gamma(2.0, 1.0), NIW), 2, None),
}
EXACT_KERNELS = [name for name in kernels.available() if name != "nuts" and kernels.entry(name).exact]
HYBRIDS = [f"gibbs+{name}" for name in EXACT_KERNELS if name != "gibbs"]  # Gibbs with each other move
# By default the baseline gibbs runs on Pitman-Yor with alpha ~ Gamma (the slice update of
# alpha), with the power checks below, so the default run fits the CI budget; every kernel x
# model pair runs with -m slow (issue 21). Each exact kernel is enumerated by default
# (test_exactness), the Escobar & West update of a DP's alpha through alpha's enumerated
# posterior there (niw_2d_overlap has alpha ~ Gamma), and each family's predictive too.
DEFAULT_MODELS = {"gibbs": {"pitman_yor_gamma_alpha"}}
DEFAULT_OTHER_MODELS = set()


def _matrix():
    for kernel in EXACT_KERNELS + HYBRIDS:
        for name in MODELS:
            # e.g. stick-breaking, Mallows kernels: their own test files
            if not kernels.applies_to(kernel, MODELS[name][0]):
                continue
            slow = name not in DEFAULT_MODELS.get(kernel, DEFAULT_OTHER_MODELS)
            yield pytest.param(kernel, name, marks=[pytest.mark.slow] if slow else [],
                               id=f"{kernel}-{name}")


def _run(kernel, name, seed, **kwargs):
    model, dim, num_trials = MODELS[name]
    return geweke_test(model, kernel, NUM_POINTS, dim, num_trials=num_trials, seed=seed, **kwargs)


@pytest.mark.parametrize("kernel, name", list(_matrix()))
def test_exact_kernel_leaves_the_joint_invariant(kernel, name):
    result = _run(kernel, name, seed=list(MODELS).index(name))
    assert result.passed, result.report


# gibbs runs its NIW sweeps natively (dpppl.models.native_seating) unless told not to: the
# matrix above tests the native path on the NIW models (Pitman-Yor with -m slow), this the JAX
# loop (with -m slow: 40-60 s each; the JAX loop is tested against enumeration by default)
@pytest.mark.slow
@pytest.mark.parametrize("name", ["niw_gamma_alpha", "pitman_yor_niw_gamma_alpha"])
def test_gibbs_jax_sweep_leaves_the_joint_invariant(name):
    result = _run("gibbs", name, seed=list(MODELS).index(name), native=False)
    assert result.passed, result.report


# the power at the default budget is shown on a wrong new-cluster weight and a wrong slice
# update of alpha; a wrong Escobar & West update runs with -m slow
@pytest.mark.parametrize("name, factor", [("normal_known_fixed_alpha", 1.3),  # new-cluster weight
                                          pytest.param("niw_gamma_alpha", 1.3,  # Escobar & West update
                                                       marks=pytest.mark.slow),
                                          ("pitman_yor_gamma_alpha", 1.3)])   # slice update
def test_wrong_concentration_is_rejected(name, factor):
    model = MODELS[name][0]
    result = _run("gibbs", name, seed=7, kernel_model=scale_concentration(model, factor))
    assert not result.passed, result.report


def test_wrong_likelihood_is_rejected():
    """Gibbs whose predictive uses a component variance 50% too large."""
    wrong = dpppl.DPMixture(1.0, fam.NormalKnownCov(sigma2=0.375, mu0=0.0, tau2=4.0))
    result = _run("gibbs", "normal_known_fixed_alpha", seed=8, kernel_model=wrong)
    assert not result.passed, result.report
    assert abs(result.t[list(result.names).index("num_clusters")]) > result.threshold


def test_result_fields_and_hyperparameters_must_not_depend_on_data():
    result = _run("gibbs", "normal_known_fixed_alpha", seed=3, num_chains=16, num_steps=20,
                  num_forward=500)
    assert "alpha" not in result.names and len(result.t) == len(result.names)
    assert result.threshold > 3 and result.report.count("\n") == len(result.names)
    data_driven = dpppl.DPMixture(1.0, fam.NormalInverseWishart())
    with pytest.raises(ValueError, match="depend on the data"):
        geweke_test(data_driven, "gibbs", NUM_POINTS, 2)
