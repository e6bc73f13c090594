"""The sub-cluster sampler against the enumerated posterior (harness of dpppl.testing):
``variant="exact"`` reproduces it, so do the default options (the published sampler in warmup,
the exact variant for the kept draws), and the published variant's bias on a small problem is
detected (so its label of approximate is earned). These problems have a few points, below
``collapsed_below``, where the exact step is collapsed Gibbs with SAMS split-merge: the tests of
the sub-cluster moves pass ``collapsed_below=0`` (``SUBCLUSTER_MOVES``); the collapsed step alone
runs in tests/statistical/test_exactness.py's matrix, with defaults and its power check here."""

import dataclasses

import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import check_kernel_samples, exact_posterior
from tests.helpers.cases import CASES

SUBCLUSTER_MOVES = {"collapsed_below": 0}  # the sub-cluster moves, not the collapsed step of small data
# The power checks of the other moves turn the singleton births and deaths off: 32 exact moves per step
# mix these 5 points by themselves and hide a biased move beside them (with them on, the anchor pairs
# accepted with the published ratio pass the harness, seed 3)
NO_SINGLETONS = {"singleton_moves": 0}


def _harness(case_name, *, num_chains, num_samples, seed, burn_in=100, warmup=False, **options):
    """Run chains from prior draws and check the draws after ``burn_in`` against the
    enumerated posterior. Burn-in is cut here rather than by ``num_warmup``, which would
    compile the kernel a second time for the warmup phase, unless ``warmup``: then it is
    ``num_warmup`` (the warmup step of the options, the published variant by default)."""
    case = CASES[case_name]
    kept = 0 if warmup else burn_in
    idata = dpppl.sample(case.model, case.x, kernel="subcluster", num_warmup=burn_in if warmup else 0,
                         num_samples=kept + num_samples, num_chains=num_chains, seed=seed, init="prior",
                         progress_bar=False, log_likelihood=False, **options)
    post = group(idata, "posterior")
    alpha = post["alpha"].values[:, kept:] if case.model.prior.alpha_is_random else None
    z = partition_group(idata)["z"].values[:, kept:]
    return check_kernel_samples(exact_posterior(case.model, case.x), z, alpha=alpha)


@pytest.mark.slow  # ~30 s on two cores; the default run keeps the exact variant's enumeration test (test_exactness.py)
# and the super-cluster unit tests (tests/kernels/subcluster/test_superclusters.py)
def test_exact_variant_with_super_clusters_matches_enumeration():
    """Restricting each label to its cluster's super-cluster (Algorithm 1, redrawn every
    iteration) keeps the exact variant exact."""
    result = _harness("niw_2d_overlap", variant="exact", num_chains=64, num_samples=500, seed=3,
                      super_clusters=True, **SUBCLUSTER_MOVES)
    assert result.passed, result.report


@pytest.mark.slow  # two programs (warmup and kept steps) of 64 chains: about 100 s on two CPU cores
@pytest.mark.parametrize("options", [{}, SUBCLUSTER_MOVES], ids=["collapsed", "subcluster-moves"])
def test_default_options_match_enumeration(options):
    """`kernel="subcluster"` with no option: on these 5 points 100 warmup iterations and the kept
    draws of the collapsed step; with `collapsed_below=0`, 100 of the published sampler then the
    sub-cluster moves. Both reproduce the enumerated posterior (alpha random here)."""
    result = _harness("niw_2d_overlap", num_chains=64, num_samples=500, seed=5, warmup=True, **options)
    assert result.passed, result.report


@pytest.mark.slow
def test_collapsed_step_with_a_biased_alpha_is_rejected(monkeypatch):
    """Power check of the collapsed step of small data: its Gibbs sweep and split-merge proposals
    run with alpha 1.5 times too large (a wrong new-cluster weight), the draws must fail the harness
    that the collapsed step passes (tests/statistical/test_exactness.py, `subcluster-niw_2d_overlap`).
    (The sweep alone biased, even 20 times, is hidden: on 5 points the split-merge proposals that
    follow it redraw most of the partition.)"""
    from dpppl.kernels.subcluster import sampler

    def biased(build_move):
        def build(bound_model):
            kernel = build_move(bound_model)

            def step(rng_key, state, x):
                moved, info = kernel.step(rng_key, state._replace(alpha=1.5 * state.alpha), x)
                return moved._replace(alpha=state.alpha), info
            return dataclasses.replace(kernel, step=step)
        return build

    monkeypatch.setattr(sampler, "build_gibbs_kernel", biased(sampler.build_gibbs_kernel))
    monkeypatch.setattr(sampler, "build_splitmerge_kernel", biased(sampler.build_splitmerge_kernel))
    # launch_scans=7 (unused by the collapsed step): options of their own, so that the program is traced
    # again with the patch rather than served from a run of the same options
    result = _harness("niw_2d_overlap", variant="exact", num_chains=64, num_samples=500, seed=3, launch_scans=7)
    assert not result.passed, result.report


@pytest.mark.slow
def test_subset_sweeps_match_enumeration():
    """The sub-cluster moves with a collapsed Gibbs sweep over 2 of the 5 points, drawn uniformly
    each iteration (`subset_sweep=2`), reproduce the enumerated posterior."""
    result = _harness("niw_2d_overlap", variant="exact", num_chains=64, num_samples=500, seed=3, subset_sweep=2,
                      **SUBCLUSTER_MOVES)
    assert result.passed, result.report


@pytest.mark.slow
def test_subset_sweeps_with_a_biased_alpha_are_rejected(monkeypatch):
    """Power check of the subset sweeps: run with alpha 1.5 times too large (a wrong new-cluster
    weight) over 4 of the 5 points, the draws must fail the harness that the exact sweep passes
    (`test_subset_sweeps_match_enumeration`)."""
    from dpppl.kernels.subcluster import sampler

    seat = sampler.seat_points

    def biased(family, prior, x, shuffle, uniforms, state, **options):
        moved = seat(family, prior, x, shuffle, uniforms, state._replace(alpha=1.5 * state.alpha), **options)
        return moved._replace(alpha=state.alpha)

    monkeypatch.setattr(sampler, "seat_points", biased)
    # launch_scans=6: options of their own, so that the program is traced again with the patch
    result = _harness("niw_2d_overlap", variant="exact", num_chains=64, num_samples=500, seed=3, subset_sweep=4,
                      launch_scans=6, **SUBCLUSTER_MOVES, **NO_SINGLETONS)
    assert not result.passed, result.report


@pytest.mark.parametrize("case_name", [
    pytest.param("niw_2d_overlap", marks=pytest.mark.slow),
    pytest.param("normal_known_1d_overlap", marks=pytest.mark.slow),
    pytest.param("dirichlet_multinomial_overlap", marks=pytest.mark.slow),
    pytest.param("beta_bernoulli_overlap", marks=pytest.mark.slow),
    pytest.param("normal_gamma_1d_overlap", marks=pytest.mark.slow),
])
def test_exact_variant_matches_enumeration(case_name):
    result = _harness(case_name, variant="exact", num_chains=64, num_samples=500, seed=3, **SUBCLUSTER_MOVES)
    assert result.passed, result.report


@pytest.mark.slow
def test_published_variant_is_biased():
    """The published sampler is not exact on a 5-point problem (module docstring), and says so."""
    with pytest.warns(UserWarning, match="approximate"):
        result = _harness("niw_2d_overlap", variant="paper", num_chains=32, num_samples=300, seed=4)
    assert not result.passed, result.report



@pytest.mark.slow
def test_anchor_pair_moves_with_the_published_ratio_are_rejected(monkeypatch):
    """Power check of the exact variant's restricted-Gibbs splits and merges: accepted with the
    published ratio (eq. 21's H for a split and 1 / H for a merge, without the final scan's
    probability q), the draws must fail the harness that the exact ratio passes
    (`test_exact_variant_matches_enumeration`)."""
    import jax.numpy as jnp

    from dpppl.kernels.subcluster import sampler

    def published(gain, log_q, is_split):
        return jnp.where(is_split, gain, -gain)

    monkeypatch.setattr(sampler, "_split_merge_log_ratio", published)
    # launch_scans=2: options of their own, so that the program is traced again with the patched
    # ratio rather than taken from the run of the same options earlier in the session
    result = _harness("niw_2d_overlap", variant="exact", num_chains=64, num_samples=500, seed=3, launch_scans=2,
                      **SUBCLUSTER_MOVES, **NO_SINGLETONS)
    assert not result.passed, result.report


@pytest.mark.slow
@pytest.mark.parametrize("case_name", ["niw_2d_overlap", "dirichlet_multinomial_overlap"])
def test_auxiliary_pairs_alone_match_enumeration(case_name):
    """Every anchor pair takes the auxiliary-variable split-merge (`auxiliary_every=1`: no
    restricted-Gibbs pair), whose merge ratio needs no scan to reproduce the current split."""
    result = _harness(case_name, variant="exact", num_chains=64, num_samples=500, seed=3, auxiliary_every=1,
                      **SUBCLUSTER_MOVES)
    assert result.passed, result.report


@pytest.mark.slow
def test_auxiliary_pairs_without_the_weight_proposal_in_q_are_rejected(monkeypatch):
    """Power check of the auxiliary pairs' ratio: without the terms of the side weight's law and
    of its merge proposal (log Z - log G, a slip of log B(N_A + 1, N_B + 1) or so per move), the
    draws must fail the harness that the exact ratio passes
    (`test_auxiliary_pairs_alone_match_enumeration`)."""
    from dpppl.kernels.subcluster import sampler

    exact = sampler._auxiliary_log_q
    monkeypatch.setattr(sampler, "_auxiliary_log_q", lambda evidences, beta, log_f_sum, log_weight_norm,
                        log_mixture_sum: exact(evidences, beta, log_f_sum, 0.0, log_mixture_sum))
    # launch_scans=1: options of their own, so that the program is traced again with the patch
    result = _harness("niw_2d_overlap", variant="exact", num_chains=64, num_samples=500, seed=3, auxiliary_every=1,
                      launch_scans=1, **SUBCLUSTER_MOVES, **NO_SINGLETONS)
    assert not result.passed, result.report


@pytest.mark.slow
@pytest.mark.parametrize("case_name", ["niw_2d_overlap", "dirichlet_multinomial_overlap"])
def test_singleton_moves_match_enumeration(case_name):
    """The singleton births and deaths (`dpppl.kernels.subcluster.singletons`) beside only the
    anchored sweep and the random split / merge (`split_merge_pairs=0`), so that they make most of
    the moves, reproduce the enumerated posterior with no warmup."""
    result = _harness(case_name, variant="exact", num_chains=64, num_samples=500, seed=3, split_merge_pairs=0,
                      **SUBCLUSTER_MOVES)
    assert result.passed, result.report


@pytest.mark.slow
def test_singleton_moves_without_the_pick_probabilities_are_rejected(monkeypatch):
    """Power check of the singleton moves' ratio: without the probabilities of picking the point
    and the singleton (log N - log S', the reverse proposal's term), the draws must fail the harness
    that the exact ratio passes (`test_singleton_moves_match_enumeration`)."""
    from dpppl.kernels.subcluster import singletons

    exact = singletons.birth_death_log_ratio
    monkeypatch.setattr(singletons, "birth_death_log_ratio",
                        lambda is_birth, log_new, log_z, log_n, log_singletons: exact(is_birth, log_new, log_z, 0.0,
                                                                                     0.0))
    # launch_scans=5: options of their own, so that the program is traced again with the patch
    result = _harness("niw_2d_overlap", variant="exact", num_chains=64, num_samples=500, seed=3, split_merge_pairs=0,
                      launch_scans=5, **SUBCLUSTER_MOVES)
    assert not result.passed, result.report
