"""Chains of the exact configurations of the permutation move (kernel="perm-move", the move on a
schedule "perm-every", and kernel="perm", the paper's sampler "gibbs+splitmerge+perm-every", with the
move's options) match the
enumerated posterior (the default configurations of both names are covered by
tests/statistical/test_exactness.py; long runs are marked slow), and the projection kernel's
bias is detected."""


import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import check_kernel_samples, exact_posterior
from tests.helpers.cases import CASES


# --------------------------------------------------------------------------- (g) ---
def run_check(kernel, name, seed, num_chains=64, burn=100, num_samples=500, **options):
    """Chains from prior draws, the first `burn` steps dropped: steps of the sampling kernel with
    `k_ref` fixed at each chain's initial K (exact for any fixed `k_ref`), so one chunk program
    compiles rather than a warmup one too (perm's adaptation of `k_ref` is tested in
    tests/kernels/perm)."""
    case = CASES[name]
    idata = dpppl.sample(case.model, case.x, kernel=kernel, num_warmup=0, num_samples=burn + num_samples,
                         num_chains=num_chains, seed=seed, init="prior", progress_bar=False,
                         log_likelihood=False, **options)
    post = group(idata, "posterior")
    alpha = post["alpha"].values[:, burn:] if case.model.prior.alpha_is_random else None
    return check_kernel_samples(exact_posterior(case.model, case.x), partition_group(idata)["z"].values[:, burn:],
                                alpha=alpha)


EXACT_CONFIGS = [
    pytest.param("perm-move", "niw_2d_overlap", dict(dp="exact"), id="exact-dp"),
    pytest.param("perm-move", "normal_known_2d_overlap_n4", dict(permutation="markov", warmup_permutation=None),
                 id="markov-scan"),
    pytest.param("perm-move", "normal_gamma_1d_overlap", dict(beam_epsilon=0.05, beam_width=2, warmup_permutation=None),
                 id="narrow-beam"),
    pytest.param("perm-move", "pitman_yor_normal_known", dict(dp="exact", permutation="markov"),
                 id="pitman-yor-exact-markov", marks=pytest.mark.slow),
    pytest.param("perm", "dirichlet_multinomial_overlap", dict(beam_epsilon=1e-3, beam_width=3),
                 id="perm-paper-beam", marks=pytest.mark.slow),
    pytest.param("perm-move", "beta_bernoulli_overlap", dict(), id="default-beta-bernoulli", marks=pytest.mark.slow),
    pytest.param("perm-every", "niw_2d_overlap", dict(every=2), id="every-2"),
]


@pytest.mark.parametrize("kernel, name, options", EXACT_CONFIGS)
def test_exact_configurations_match_enumeration(kernel, name, options):
    result = run_check(kernel, name, seed=3, **options)
    assert result.passed, result.report


@pytest.mark.slow
def test_projection_kernel_is_detectably_biased():
    """Random projections as the sampling-phase permutation law are hill-climbing, not
    a sampler: the check rejects them on overlapping data (power of the harness)."""
    with pytest.warns(UserWarning):
        result = run_check("perm-move", "normal_known_1d_overlap", seed=4, permutation="projection")
    assert not result.passed, result.report

