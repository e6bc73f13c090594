"""Stick-breaking priors on explicit labels and their kernels (Porteous, Ihler, Smyth &
Welling 2006): the labelled law and eq. (6) against independent computations, the
footnote-1 check, the model language and NumPyro compilation, and the kernels sbgibbs,
labelswap and labelpermute against the exact posterior over labelled assignments
(:mod:`dpppl.testing.labelled`), with and without the label moves."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from scipy import integrate, special, stats

import dpppl
from dpppl import kernels
from dpppl.diagnostics.arviz_compat import group
from dpppl.kernels.stick_breaking.labelswap import swap_log_ratio_pseudo_particles
from dpppl.priors import PitmanYor, StickBreaking
from dpppl.testing import exact_posterior, set_partitions
from dpppl.testing.labelled import check_labelled_samples, exact_labelled_posterior, stick_breaking_log_eppf

NKC = dpppl.NormalKnownCov(sigma2=0.3, mu0=0.0, tau2=4.0)
X4 = np.array([-2.0, -1.7, 0.1, 1.9])
FIG1_PRIOR = (5.0, 0.1)  # a_i = 5, b_i = 0.1 (sec. 4)
RNG = np.random.default_rng(0)


def _counts(parts, n):
    return (parts[:, :, None] == np.arange(n)).sum(axis=1)


# ---------------------------------------------------------------------------- the prior


@pytest.mark.parametrize("discount, alpha", [(0.0, 1.0), (0.0, 3.0), (0.1, 1.0)])
def test_labelled_law_summed_over_labellings_is_the_pitman_yor_eppf(discount, alpha):
    """StickBreaking(a = 1 - d, b = alpha + i d) summed over labellings = PY EPPF (Pitman 2006)."""
    counts = _counts(set_partitions(5), 5)
    log_w, _, bound = stick_breaking_log_eppf(StickBreaking.pitman_yor(discount, alpha), counts)
    want = jax.vmap(lambda c: PitmanYor(discount, alpha).log_eppf(c, alpha))(jnp.asarray(counts, float))
    assert bound < 1e-9
    np.testing.assert_allclose(log_w, want, atol=1e-9)
    # the paper's example (sec. 3.1): P(z_1 = z_2) = 1 / (1 + alpha) for a DP, summed over labels
    if discount == 0:
        pair = stick_breaking_log_eppf(StickBreaking(1.0, alpha), np.array([[2, 0]]))[0][0]
        assert np.exp(pair) == pytest.approx(1.0 / (1.0 + alpha), rel=1e-9)


def test_labelled_law_matches_integrals_over_the_sticks():
    """P(Z) = prod_i E[V_i^N_i (1 - V_i)^M_i], each expectation by quadrature (eqs. 8b, 8c)."""
    prior = StickBreaking(a=lambda i: 1.0 + 0.5 * i, b=lambda i: 2.0 / i)
    counts = np.array([2.0, 0.0, 3.0, 1.0, 0.0])
    a, b = prior.sticks(5)
    later = np.cumsum(counts[::-1])[::-1] - counts
    # the singular factor (1 - v)^(b - 1) (b < 1 here) is the quadrature weight (QAWS)
    quad = sum(np.log(integrate.quad(lambda v: v**(n + ai - 1) * (1 - v)**m / special.beta(ai, bi), 0, 1,
                                     weight="alg", wvar=(0.0, bi - 1.0), epsabs=0, epsrel=1e-12)[0])
               for n, m, ai, bi in zip(counts, later, a, b))
    assert float(prior.log_prob_labels(jnp.asarray(counts))) == pytest.approx(quad, rel=1e-9)


def test_expected_weights_are_the_prediction_rule_of_the_labelled_law():
    """Eq. (6): E[pi_i | Z] = P(Z + one point at i) / P(Z); with the rest past C they sum to 1."""
    prior = StickBreaking(*FIG1_PRIOR)
    counts = jnp.array([3.0, 0.0, 2.0, 0.0, 0.0, 0.0])
    log_w, log_rest = prior.log_expected_weights(counts)
    base = prior.log_prob_labels(counts)
    ratio = [float(prior.log_prob_labels(counts.at[k].add(1.0)) - base) for k in range(6)]
    np.testing.assert_allclose(log_w, ratio, atol=1e-12)
    assert float(jnp.exp(log_w).sum() + jnp.exp(log_rest)) == pytest.approx(1.0, abs=1e-12)


def test_pseudo_particles_give_eq_7():
    gamma = np.array([1.0, 0.5, 2.0])
    prior = StickBreaking.pseudo_particles(gamma)
    assert prior.num_sticks == 3
    counts = jnp.array([1.0, 3.0, 0.0, 0.0])
    log_w, log_rest = prior.log_expected_weights(counts)
    np.testing.assert_allclose(np.exp(log_w), np.r_[(gamma + counts[:3]) / (gamma.sum() + 4), 0.0], atol=1e-12)
    assert float(log_rest) == -np.inf
    assert float(prior.log_prob_labels(jnp.array([0.0, 0.0, 0.0, 1.0]))) == -np.inf  # past the last stick


def test_label_swap_ratio_closed_form_holds_for_eq_7_only():
    """The paper's closed-form swap acceptance equals the ratio of labelled laws for the
    pseudo-particle prior; for general (a_i, b_i), such as the Fig. 1 prior, it does not,
    and the kernels use the general ratio."""
    gamma = np.array([1.3, 0.4, 2.0, 0.7, 0.2])
    pp = StickBreaking.pseudo_particles(gamma)
    general = StickBreaking(*FIG1_PRIOR)
    wrong = []
    for _ in range(20):
        counts = RNG.integers(0, 5, size=5).astype(float)
        i, j = RNG.choice(5, size=2, replace=False)
        swapped = counts.copy()
        swapped[[i, j]] = counts[[j, i]]
        closed = float(swap_log_ratio_pseudo_particles(gamma[i], gamma[j], counts[i], counts[j]))
        exact = float(pp.log_prob_labels(jnp.asarray(swapped)) - pp.log_prob_labels(jnp.asarray(counts)))
        assert closed == pytest.approx(exact, abs=1e-10)
        a = general.sticks(5)[0]
        closed_general = float(swap_log_ratio_pseudo_particles(a[i], a[j], counts[i], counts[j]))
        exact_general = float(general.log_prob_labels(jnp.asarray(swapped))
                              - general.log_prob_labels(jnp.asarray(counts)))
        wrong.append(abs(closed_general - exact_general) > 1e-3)
    assert sum(wrong) >= 10


@pytest.mark.parametrize("a, b, message", [
    ([1.0, 2.0], [1.0, 1.0], "must end with b_2 = 0"),
    (1.0, lambda i: i**2.0, "do not sum to one"),
    (1.0, "i^1.5", "do not sum to one"),
    (1.0, -1.0, "b_i must be non-negative"),
    (0.0, 1.0, "a_i must be positive"),
    ([1.0, 2.0], [1.0, 2.0, 0.0], "different lengths"),
    (1.0, "theta + i", "may use the stick index 'i' and numbers only"),
])
def test_prior_errors(a, b, message):
    with pytest.raises(dpppl.ModelError, match=message):
        StickBreaking(a, b)


def test_priors_whose_weights_sum_to_one_pass_the_check():
    StickBreaking.pitman_yor(0.99, 1.0)               # log(1 + a_i/b_i) ~ harmonic: diverges
    StickBreaking(a=1.0, b=lambda i: 0.5 * i)           # b_i linear in i: diverges
    StickBreaking(a="0.5", b="2 + sqrt(i)")             # an expression of i
    assert StickBreaking(a=[1.0, 1.0], b=[1.0, 0.0]).num_sticks == 2
    assert StickBreaking(a=1.0, b="3 - i").num_sticks == 3  # the first b_i = 0 ends the sticks


# ---------------------------------------------------------------------------- model language, NumPyro


def test_model_language_stick_index_expressions_and_errors():
    text = """data x : real[N]
d = 0.5
theta = 2
z ~ StickBreaking(a = 1 - d, b = theta + i * d)
mu[k] ~ Normal(mu0 = 0, tau2 = 4)
x[j] ~ Normal(mu[z[j]], sigma2 = 0.3)
"""
    model = dpppl.parse(text)
    a, b = model.prior.sticks(4)
    np.testing.assert_allclose(a, 0.5)
    np.testing.assert_allclose(b, 2 + 0.5 * np.arange(1, 5))
    finite = dpppl.parse(text.replace("StickBreaking(a = 1 - d, b = theta + i * d)",
                                      "PseudoParticles(gamma = [1, 0.5, 2])"))
    assert finite.prior.num_sticks == 3
    with pytest.raises(dpppl.ModelError, match="'x' is the data"):
        dpppl.parse(text.replace("theta + i * d", "theta + mean(x)"))
    with pytest.raises(dpppl.ModelError, match="'i' is the stick index"):
        dpppl.parse(text.replace("d = 0.5", "d = 0.5\ni = 3"))
    with pytest.raises(dpppl.ModelError, match="do not sum to one"):
        dpppl.parse(text.replace("theta + i * d", "theta + i^2"))


def test_compiled_numpyro_model_has_beta_a_i_b_i_sticks():
    model = dpppl.StickBreakingMixture(a=lambda i: 1.0 + 0.0 * i, b="2 + i", component=NKC)
    fn = model.bind(X4).numpyro_model(6)
    v = np.array([0.3, 0.5, 0.2, 0.7, 0.1])
    trace = numpyro.handlers.trace(numpyro.handlers.substitute(numpyro.handlers.seed(fn, 0), {"v": v})).get_trace(X4[:, None])
    want = stats.beta.logpdf(v, 1.0, 2.0 + np.arange(1, 6)).sum()
    assert float(trace["v"]["fn"].log_prob(jnp.asarray(v))) == pytest.approx(want, rel=1e-10)
    finite = dpppl.PseudoParticleMixture([1.0, 0.5, 2.0], NKC).bind(X4).numpyro_model(20)
    assert finite.truncation == 3  # V_3 = 1: three sticks are the exact model


# ---------------------------------------------------------------------------- kernels


def test_kernels_refuse_the_wrong_prior():
    sb = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    dp = dpppl.DPMixture(1.0, NKC)
    for name in ("gibbs", "splitmerge", "perm", "gibbs+splitmerge"):
        with pytest.raises(dpppl.KernelError, match="does not apply"):
            kernels.check_applies(name, sb)
    for name in ("sbgibbs", "labelswap", "labelpermute"):
        with pytest.raises(dpppl.KernelError, match="stick-breaking prior"):
            kernels.check_applies(name, dp)
    with pytest.raises(dpppl.KernelError, match="swap_prob"):
        dpppl.sample(sb, X4, kernel="sbgibbs+labelswap", swap_prob=1.5)


def test_log_joint_is_labelled():
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    z = np.array([0, 0, 1, 1])
    swapped = 1 - z
    lj, ljs = dpppl.log_joint(model, X4, z), dpppl.log_joint(model, X4, swapped)
    prior = model.prior
    diff = float(prior.log_prob_labels(jnp.array([2.0, 2.0])) - prior.log_prob_labels(jnp.array([2.0, 2.0])))
    assert diff == 0.0 and lj == pytest.approx(ljs)  # equal sizes: swapping changes nothing
    lj3 = dpppl.log_joint(model, X4, np.array([0, 1, 1, 1]))
    lj3s = dpppl.log_joint(model, X4, np.array([1, 0, 0, 0]))
    want = float(prior.log_prob_labels(jnp.array([1.0, 3.0])) - prior.log_prob_labels(jnp.array([3.0, 1.0])))
    assert lj3 - lj3s == pytest.approx(want, abs=1e-10) and abs(want) > 0.1


NUM_CHAINS, NUM_DRAWS, BURN = 40, 450, 50


@pytest.fixture(scope="module")
def fig1_exact():
    return exact_labelled_posterior(dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC), X4, max_label=4)


def _run(model, kernel, seed, init="single", **options):
    idata = dpppl.sample(model, X4, kernel=kernel, num_warmup=0, num_samples=NUM_DRAWS + BURN,
                         num_chains=NUM_CHAINS, seed=seed, init=init, progress_bar=False, **options)
    return group(idata, "posterior")["z"].values[:, BURN:]


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

    return load_script(Path(__file__).resolve().parents[1] / "examples" / "porteous_fig1.py")


def test_fig1_centre_point_is_biased_without_label_moves_and_half_with_them(tmp_path):
    """sec. 4: a_i = 5, b_i = 0.1, symmetric data, left cluster started at label 1. The exact
    association of the centre with either side is 0.5 (symmetry); per-chain estimates give a
    Student-t test. Without the moves the chains stay at one labelling and favour label 1's
    side (about 0.6 with 10 points a side); with them they match 0.5."""
    summary = _fig1_module().main(["--quick", "--out", str(tmp_path), "--chains", "6", "--component", "known"])
    assert (tmp_path / "porteous_fig1.png").stat().st_size > 1000

    def t_stat(res):
        diff = np.asarray(res["left_per_chain"]) - np.asarray(res["right_per_chain"])
        return diff.mean() / (diff.std(ddof=1) / np.sqrt(diff.size))

    threshold = stats.t.isf(1e-3 / 4, 5)  # two-sided 1e-3 per kernel
    without, with_moves = summary["without label moves"], summary["with label moves"]
    assert t_stat(without) > threshold and without["left"] > 0.55, without
    assert abs(t_stat(with_moves)) < threshold, with_moves


@pytest.mark.slow
def test_closed_form_swap_acceptance_on_a_general_prior_is_rejected(fig1_exact):
    """Power: label moves whose acceptance uses the eq. (7) closed form on the Fig. 1 prior
    (a_i = 5, b_i = 0.1), i.e. prod_i Gamma(a_i + N_i) / Gamma(a_i) in place of the labelled
    law, must fail the check that the correct moves pass (measured: t = 176, threshold 17)."""
    import dataclasses

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


@pytest.mark.slow  # a NIW compilation; the CLI path itself is covered by tests/test_cli.py
def test_cli_samples_the_stick_breaking_model_file(tmp_path, capsys):
    from pathlib import Path

    from dpppl.cli import main

    data = tmp_path / "points.csv"
    pts = np.r_[np.random.default_rng(0).normal(-2, 0.5, (6, 2)), np.random.default_rng(1).normal(2, 0.5, (6, 2))]
    np.savetxt(data, pts, delimiter=",")
    model = Path(__file__).resolve().parents[1] / "models" / "stick_breaking.dp"
    assert main(["sample", str(model), "--data", str(data), "--kernel", "sbgibbs+labelswap+labelpermute",
                 "--option", "permute_prob=0.5", "--warmup", "0", "--samples", "4", "--no-progress"]) == 0
    assert "sbgibbs+labelswap+labelpermute (exact)" in capsys.readouterr().out


def test_functions_built_on_exchangeable_seating_refuse_stick_breaking_priors():
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    for call in (lambda: dpppl.map_search(model, X4), lambda: dpppl.sample_prior(model, 4)):
        with pytest.raises(dpppl.ModelError, match="prior on explicit labels"):
            call()


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


def test_draws_do_not_depend_on_the_number_of_slots():
    """The kernels' random numbers do not depend on the capacity C, so a chain that needs a
    label past C is re-run by the driver with more slots and makes the same draws (what
    keeps sampling on the unbounded label space exact)."""
    from dpppl.models.mixture import state_from_labels

    x = np.array([-2.0, -1.8, -1.5, 0.1, 1.7, 2.0])[:, None]
    bound = dpppl.StickBreakingMixture(1.0, 1.0, component=NKC).bind(x)
    kern = kernels.build("sbgibbs+labelswap+labelpermute", bound)
    step = jax.jit(kern.step)
    small, big = (state_from_labels(bound.family, x, np.zeros(6, int), c, 0.0) for c in (10, 40))
    compared = 0
    for t in range(40):
        key = jax.random.key(t)
        small, big = step(key, small, jnp.asarray(x))[0], step(key, big, jnp.asarray(x))[0]
        if bool(small.overflow):
            break
        np.testing.assert_array_equal(small.z, big.z)
        compared += 1
    assert compared >= 5 and int(big.z.max()) >= 2  # labels past the first two were visited
