"""Every exact kernel against the exact posterior of small problems, enumerated over set
partitions (DESIGN.md section 6), and a deliberately biased kernel that must be rejected."""

import pytest

import dpppl
from dpppl import kernels
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import ExactCase, check_kernel_samples, exact_posterior, scale_concentration
from tests.helpers.cases import CASES
EXACT_KERNELS = [name for name in kernels.available() if name != "nuts" and kernels.entry(name).exact]
ALIASES = [name for name in EXACT_KERNELS if kernels.entry(name).alias]  # "perm": gibbs+splitmerge+perm-every
# Gibbs with each other move
HYBRIDS = [f"gibbs+{name}" for name in EXACT_KERNELS if name != "gibbs" and name not in ALIASES]
NUM_CHAINS, NUM_WARMUP, NUM_SAMPLES = 64, 100, 500
# By default the baseline kernel runs on one overlapping case of every family (and the
# Pitman-Yor case), the other exact kernels on the NIW and Pitman-Yor cases and the hybrids
# on the Pitman-Yor one (1-D, cheaper to compile); every pair runs with -m slow. This keeps the default
# run inside the CI budget: each case costs a compile and 64 x 600 steps.
DEFAULT_CASES = {"niw_2d_overlap", "pitman_yor_normal_known"}
DEFAULT_HYBRID_CASES = {"pitman_yor_normal_known"}
# Pairs whose very configuration another default test runs against enumeration, moved to -m slow
# for the 10-minute budget (docs/correctness.md lists what checks each by default):
# splitmerge on niw_2d_overlap and gibbs+splitmerge are in test_splitmerge_exactness.py, and
# gibbs on NormalKnownCov runs on normal_known_2d_overlap_n4 and pitman_yor_normal_known.
# gibbs+perm-move: "perm" (gibbs+splitmerge+perm-every) runs on that case by default, and each move alone.
# perm-every alone (the move every 16th step: 38 moves in these 600 steps) runs with every=2 in
# test_perm_exactness.py; gibbs+perm-every is in "perm" (gibbs+splitmerge+perm-every).
COVERED_ELSEWHERE = {("splitmerge", "niw_2d_overlap"), ("gibbs+splitmerge", "pitman_yor_normal_known"),
                     ("gibbs", "normal_known_1d_overlap"), ("gibbs+perm-move", "pitman_yor_normal_known"),
                     ("gibbs+perm-every", "pitman_yor_normal_known")}
SCHEDULED = {"perm-every"}


def _matrix():
    for kernel in EXACT_KERNELS + HYBRIDS:
        for name in sorted(CASES):
            # e.g. stick-breaking, Mallows kernels: their own test files
            if not kernels.applies_to(kernel, CASES[name].model) or kernel in SCHEDULED:
                continue
            if kernel == "gibbs":
                slow = name.endswith("_separated")
            else:
                slow = name not in (DEFAULT_HYBRID_CASES if kernel in HYBRIDS or kernel in ALIASES else DEFAULT_CASES)
            slow = slow or (kernel, name) in COVERED_ELSEWHERE
            yield pytest.param(kernel, name, marks=[pytest.mark.slow] if slow else [],
                               id=f"{kernel}-{name}")


@pytest.fixture(scope="module")
def exact():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = exact_posterior(CASES[name].model, CASES[name].x)
        return cache[name]
    return get


def _check(kernel, case, exact_post, seed, model=None, **options):
    """`NUM_CHAINS` chains from prior draws, the first `NUM_WARMUP` steps of each dropped. They
    are steps of the kernel under test, not of its warmup step (perm's adaptation, subcluster's
    published variant), so a kernel compiles one chunk program, not two; a kernel without a
    warmup step of its own makes the very draws it makes with `num_warmup=NUM_WARMUP`."""
    idata = dpppl.sample(model or case.model, case.x, kernel=kernel, num_warmup=0,
                         num_samples=NUM_WARMUP + NUM_SAMPLES, num_chains=NUM_CHAINS, seed=seed, init="prior",
                         progress_bar=False, log_likelihood=False, **options)
    post = group(idata, "posterior")
    alpha = post["alpha"].values[:, NUM_WARMUP:] if case.model.prior.alpha_is_random else None
    return check_kernel_samples(exact_post, partition_group(idata)["z"].values[:, NUM_WARMUP:], alpha=alpha)


@pytest.mark.parametrize("kernel, case_name", list(_matrix()))
def test_exact_kernel_matches_enumeration(kernel, case_name, exact):
    case = CASES[case_name]
    result = _check(kernel, case, exact(case_name), seed=sorted(CASES).index(case_name))
    assert result.passed, result.report


# gibbs runs its sweep natively where dpppl.models.native_seating covers the model (NIW and
# NormalKnownCov under CRP/Pitman-Yor; the matrix above then tests the native path): both paths,
# each forced, against enumeration, with a Pitman-Yor NIW case that no other test has
PITMAN_YOR_NIW = ExactCase("pitman_yor_niw", dpppl.PitmanYorMixture(0.3, 0.7, CASES["niw_2d_overlap"].model.component),
                           CASES["niw_2d_overlap"].x, "the 5 NIW points under Pitman-Yor(0.3, 0.7)")


@pytest.mark.parametrize("case_name, native", [
    ("pitman_yor_niw", True), ("niw_2d_overlap", False), ("pitman_yor_normal_known", False),
    pytest.param("pitman_yor_niw", False, marks=pytest.mark.slow),
    pytest.param("niw_2d_overlap", True, marks=pytest.mark.slow),
    pytest.param("niw_2d_separated", True, marks=pytest.mark.slow)])
def test_gibbs_native_and_jax_sweeps_match_enumeration(case_name, native):
    case = PITMAN_YOR_NIW if case_name == PITMAN_YOR_NIW.name else CASES[case_name]
    result = _check("gibbs", case, exact_posterior(case.model, case.x), seed=21, native=native)
    assert result.passed, result.report


def test_biased_gibbs_is_rejected(exact):
    """Gibbs run with alpha 25% too large (a wrong new-cluster weight) must fail."""
    case = CASES["niw_2d_separated"]
    biased = scale_concentration(case.model, 1.25)
    result = _check("gibbs", case, exact(case.name), seed=11, model=biased)
    assert not result.passed, result.report

