"""Stick-breaking kernels sbgibbs, labelswap and labelpermute against the exact posterior
over labelled assignments (:mod:`dpppl.testing.labelled`), with and without the label
moves, and the Fig. 1 bias (Porteous et al. 2006, sec. 4)."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpppl
from dpppl.diagnostics.arviz_compat import partition_group
from dpppl.priors import StickBreaking
from dpppl.testing import exact_posterior
from dpppl.testing.labelled import check_labelled_samples, exact_labelled_posterior
from tests.helpers.stick_breaking import FIG1_PRIOR, NKC, X4


NUM_CHAINS, NUM_DRAWS, BURN = 40, 450, 50


@pytest.fixture(scope="module")
def fig1_exact():
    return exact_labelled_posterior(dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC), X4, max_label=4)


def _run(model, kernel, seed, init="single", **options):
    idata = dpppl.sample(model, X4, kernel=kernel, num_warmup=0, num_samples=NUM_DRAWS + BURN,
                         num_chains=NUM_CHAINS, seed=seed, init=init, progress_bar=False,
                         log_likelihood=False, **options)
    return partition_group(idata)["z"].values[:, BURN:]


@pytest.mark.parametrize("kernel", ["sbgibbs", "sbgibbs+labelswap+labelpermute"])
def test_kernel_matches_the_exact_labelled_posterior(kernel, fig1_exact):
    """Labelled law (labels 1..4 and the rest), partition law, P(K = k) and co-clustering."""
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    result = check_labelled_samples(fig1_exact, _run(model, kernel, seed=3))
    assert result.passed, result.report


def test_label_moves_alone_leave_the_labelled_law_invariant(fig1_exact):
    """Chains started from exact draws and moved by labelswap and labelpermute only (which
    never change the partition) keep the exact labelled law: this tests the acceptance
    ratio directly."""
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    rng = np.random.default_rng(5)
    p = np.append(fig1_exact.prob, fig1_exact.tail_prob)
    start = fig1_exact.assignments[rng.choice(p.size - 1, size=NUM_CHAINS, p=p[:-1] / p[:-1].sum())]
    result = check_labelled_samples(fig1_exact, _run(model, "labelswap+labelpermute", seed=4, init=start))
    assert result.passed, result.report


def test_sampled_partition_law_of_a_dp_written_as_sticks_is_the_crp_posterior():
    """The exact labelled posterior of StickBreaking(1, alpha), labels summed out, is the
    CRP posterior (an exact-vs-exact check of the harness)."""
    sb = exact_labelled_posterior(dpppl.StickBreakingMixture(1.0, 1.5, component=NKC), X4, max_label=3)
    crp = exact_posterior(dpppl.DPMixture(1.5, NKC), X4)
    np.testing.assert_allclose(sb.partitions.prob, crp.prob, atol=1e-10)
    assert sb.prob.sum() + sb.tail_prob == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------- Fig. 1 (sec. 4)


def _fig1_module():
    from pathlib import Path

    from dpppl.testing.scripts import load_script

    return load_script(Path(__file__).resolve().parents[2] / "examples" / "porteous_fig1.py")


def test_fig1_centre_point_is_biased_without_label_moves_and_half_with_them(tmp_path):
    """sec. 4: a_i = 5, b_i = 0.1, symmetric data, left cluster started at label 1. The exact
    association of the centre with either side is 0.5 (symmetry); per-chain estimates give a
    Student-t test. Without the moves the chains stay at one labelling and favour label 1's
    side (about 0.6 with 10 points a side); with them they match 0.5."""
    # seed 1: the power check is near its threshold at this size. With the draws of the one (N, 2) sweep draw
    # and the runner's keys (CHANGELOG), seeds 0-3 give t = 4.8, 11.1, 15.0, 9.2 without the moves (seed 0: one
    # chain of six at 0.517) and |t| <= 1.3 with them; the draws before gave 16.7, 12.3, 9.4, 10.6 and <= 1.9
    summary = _fig1_module().main(["--quick", "--out", str(tmp_path), "--chains", "6", "--component", "known",
                                   "--seed", "1"])
    assert (tmp_path / "porteous_fig1.png").stat().st_size > 1000

    def t_stat(res):
        diff = np.asarray(res["left_per_chain"]) - np.asarray(res["right_per_chain"])
        return diff.mean() / (diff.std(ddof=1) / np.sqrt(diff.size))

    threshold = stats.t.isf(1e-3 / 4, 5)  # two-sided 1e-3 per kernel
    without, with_moves = summary["without label moves"], summary["with label moves"]
    assert t_stat(without) > threshold and without["left"] > 0.55, without
    assert abs(t_stat(with_moves)) < threshold, with_moves


@pytest.mark.slow
def test_closed_form_swap_acceptance_on_a_general_prior_is_rejected(fig1_exact, monkeypatch):
    """Power: label moves whose acceptance uses the eq. (7) closed form on the Fig. 1 prior
    (a_i = 5, b_i = 0.1), i.e. prod_i Gamma(a_i + N_i) / Gamma(a_i) in place of the labelled
    law, must fail the check that the correct moves pass (measured: t = 176, threshold 17). The
    moves run in JAX (DPPPL_NATIVE=0): the native acceptance computes the labelled law from the
    sticks a_i, b_i, not from the `log_prob_labels` this test replaces."""
    import dataclasses

    monkeypatch.setenv("DPPPL_NATIVE", "0")

    from jax.scipy.special import gammaln

    class ClosedForm(StickBreaking):
        def log_prob_labels(self, counts):
            a = jnp.asarray(self.sticks(counts.shape[-1])[0], counts.dtype)
            return jnp.sum(gammaln(a + counts) - gammaln(a), axis=-1)

    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    wrong = dataclasses.replace(model, prior=ClosedForm(*FIG1_PRIOR))
    rng = np.random.default_rng(5)
    start = fig1_exact.assignments[rng.choice(fig1_exact.prob.size, size=NUM_CHAINS,
                                              p=fig1_exact.prob / fig1_exact.prob.sum())]
    result = check_labelled_samples(fig1_exact, _run(wrong, "labelswap", seed=4, init=start))
    assert not result.passed, result.report


@pytest.mark.slow
def test_kernel_matches_the_exact_posterior_of_a_finite_pseudo_particle_prior():
    """Three labels (eq. 7, gamma = (1, 0.5, 2), V_3 = 1): the label space is finite and
    listed whole (no tail cell), which tests the last-stick conventions of the kernels."""
    model = dpppl.PseudoParticleMixture([1.0, 0.5, 2.0], NKC)
    exact = exact_labelled_posterior(model, X4, max_label=3)
    assert exact.tail_prob < 1e-12
    result = check_labelled_samples(exact, _run(model, "sbgibbs+labelswap+labelpermute", seed=6))
    assert result.passed, result.report
    assert result.label_marginals.shape == (4, 3)

