"""The draws of many independent split-merge chains match the enumerated posterior
(:mod:`dpppl.testing.exact`). Long runs are marked slow."""


import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import check_kernel_samples, exact_posterior
from tests.helpers.cases import CASES
from tests.helpers.splitmerge import METHODS


# ----- (d) exactness against the enumerated posterior -----------------------------------------

def check(kernel, name, *, seed=0, num_chains=100, burn=30, num_samples=330, **options):
    """Independent chains from prior draws; the first ``burn`` draws are dropped (one compile
    for the whole run instead of one for warmup and one for sampling)."""
    case = CASES[name]
    idata = dpppl.sample(case.model, case.x, kernel=kernel, num_chains=num_chains, num_warmup=0,
                         num_samples=num_samples, seed=seed, init="prior", progress_bar=False,
                         log_likelihood=False, **options)
    post = group(idata, "posterior")
    alpha = post["alpha"].values[:, burn:] if case.model.prior.alpha_is_random else None
    z = partition_group(idata)["z"].values[:, burn:]
    result = check_kernel_samples(exact_posterior(case.model, case.x), z, alpha=alpha)
    return result, group(idata, "sample_stats")


# The allocation pass runs natively where dpppl.models.native_seating covers the model (NIW and
# NormalKnownCov under CRP/Pitman-Yor): both paths, each forced, against enumeration; the JAX loop
# also runs by default on NormalGamma (not covered), and tests/kernels/test_splitmerge.py compares
# the two paths' proposals draw by draw.
@pytest.mark.parametrize("kernel, name, options", [
    pytest.param("splitmerge", "niw_2d_overlap", dict(native=True), marks=pytest.mark.slow),  # alpha ~ Gamma
    pytest.param("splitmerge", "niw_2d_overlap", dict(native=False), marks=pytest.mark.slow),
    ("splitmerge", "pitman_yor_normal_known", dict(method="restricted_gibbs", native=True)),  # Pitman-Yor
    pytest.param("splitmerge", "pitman_yor_normal_known", dict(method="restricted_gibbs", native=False),
                 marks=pytest.mark.slow),
    ("gibbs+splitmerge", "normal_known_1d_separated", dict(method="restricted_gibbs", num_restricted_scans=2)),
    ("gibbs+splitmerge", "normal_gamma_1d_overlap", dict(schedule="random", weights=[1, 2])),
])
def test_matches_enumerated_posterior(kernel, name, options):
    result, stats = check(kernel, name, **options)
    assert result.passed, result.report
    accept = stats["accept_prob" if "accept_prob" in stats else "splitmerge_accept_prob"].values
    assert np.all((accept >= 0) & (accept <= 1)) and 0.01 < accept.mean() < 0.99


SLOW_GRID = [(kernel, name, method) for name in sorted(CASES)
             for kernel in ("splitmerge", "gibbs+splitmerge") for method in METHODS]


@pytest.mark.slow
@pytest.mark.parametrize("kernel, name, method", SLOW_GRID)
def test_matches_enumerated_posterior_every_case(kernel, name, method):
    result, _ = check(kernel, name, method=method, seed=1, num_chains=128, burn=50, num_samples=1050)
    assert result.passed, result.report


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_random_schedule_matches_enumerated_posterior_every_case(name):
    result, _ = check("gibbs+splitmerge", name, seed=2, num_chains=128, burn=50, num_samples=1050,
                      schedule="random", weights=[1, 1])
    assert result.passed, result.report

