"""Posterior predictive checks (dpppl.analysis.ppc): replicated data per kept draw."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import arviz, group, to_arviz


def _run(z, x, **partition):
    """A run's InferenceData with given labels (chain, draw, N), data and slot records."""
    z = np.asarray(z, np.int32)
    return to_arviz({"posterior": {"num_clusters": np.zeros(z.shape[:2])},
                     "posterior_partition": {"z": z, **partition},
                     "observed_data": {"x": np.asarray(x, float)}},
                    coords={"point": np.arange(x.shape[0])}, dims={"z": ["point"], "x": ["point", "dim"]})


def test_conjugate_predictive_matches_the_student_t_of_each_cluster():
    """Given a fixed partition, x_rep_i of a NormalGamma cluster is Student-t with 2 a_n
    degrees of freedom, location mu_n and variance b_n (kappa_n + 1) / (kappa_n (a_n - 1))
    (Murphy 2007); the data sit far from the origin so that the shift back from the
    translated frame is tested too. Thresholds: 5 Monte Carlo standard errors."""
    x = np.array([9.0, 10.5, 11.0, 9.5, 10.2, 14.0, 15.5, 14.8])[:, None]
    z = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    mu0, kappa0, a0, b0 = 8.0, 0.5, 2.0, 1.0
    model = dpppl.DPMixture(1.0, dpppl.NormalGamma(mu0=mu0, kappa0=kappa0, a0=a0, b0=b0))
    s = 4000
    out = dpppl.posterior_predictive(_run(np.broadcast_to(z, (1, s, 8)), x), model, seed=3)
    rep = np.asarray(group(out, "posterior_predictive")["x"])
    assert rep.shape == (1, s, 8, 1) and rep.dtype == np.float64
    for c, i in [(0, 0), (1, 5)]:
        xc = x[z == c, 0]
        n = xc.size
        kn, an = kappa0 + n, a0 + n / 2
        mun = (kappa0 * mu0 + xc.sum()) / kn
        bn = b0 + 0.5 * (np.sum((xc - xc.mean()) ** 2) + kappa0 * n * (xc.mean() - mu0) ** 2 / kn)
        var = bn * (kn + 1) / (kn * (an - 1))
        draws = rep[0, :, i, 0]
        assert abs(draws.mean() - mun) < 5 * np.sqrt(var / s)
        centred = (draws - draws.mean()) ** 2
        assert abs(centred.mean() - var) < 5 * centred.std() / np.sqrt(s)


def test_counts_keep_their_totals_and_binary_data_stay_binary():
    rng = np.random.default_rng(0)
    counts = rng.multinomial(12, [0.2, 0.3, 0.5], size=10).astype(float)
    counts[3] = [0, 0, 7]
    z = np.broadcast_to(rng.integers(0, 3, 10), (2, 5, 10))
    out = dpppl.posterior_predictive(_run(z, counts), "models/multinomial.dp", num_draws=3)
    rep = np.asarray(group(out, "posterior_predictive")["x"])
    assert rep.shape == (2, 3, 10, 3) and rep.dtype.kind == "i"
    assert np.all(rep >= 0) and np.all(rep.sum(-1) == counts.sum(-1))
    assert list(group(out, "posterior_predictive")["draw"].values) == [0, 2, 4]
    binary = (rng.random((10, 4)) < 0.3).astype(float)
    rep = np.asarray(group(dpppl.posterior_predictive(_run(z, binary), "models/bernoulli.dp"),
                           "posterior_predictive")["x"])
    assert rep.shape == (2, 5, 10, 4) and set(np.unique(rep)) <= {0, 1}


def test_non_conjugate_runs_use_their_recorded_parameters():
    """NormalLogNormal: slot 0's recorded (mu, var) generate its points; slot 1, occupied
    but with no recorded parameters, falls back to the proposal and is counted."""
    x = np.array([[0.0], [0.1], [5.0], [5.2]])
    z = np.broadcast_to(np.array([0, 0, 1, 1]), (1, 50, 4))
    theta_mu = np.broadcast_to(np.array([[-30.0], [np.nan], [0.0]]), (1, 50, 3, 1))
    theta_var = np.broadcast_to(np.array([[1e-6], [np.nan], [1.0]]), (1, 50, 3, 1))
    out = dpppl.posterior_predictive(_run(z, x, theta_mu=theta_mu, theta_var=theta_var),
                                     "models/gaussian_lognormal.dp")
    rep = group(out, "posterior_predictive")
    values = np.asarray(rep["x"])
    assert np.allclose(values[0, :, :2], -30.0, atol=0.01)
    assert np.all(np.abs(values[0, :, 2:] - 5.1) < 10)
    assert rep.attrs["proposal_draws"] == 50


def test_non_conjugate_run_without_parameters_is_refused():
    x = np.arange(4.0)[:, None]
    with pytest.raises(dpppl.DataError, match="recorded no cluster parameters"):
        dpppl.posterior_predictive(_run(np.zeros((1, 2, 4)), x), "models/gaussian_lognormal.dp")


def _ddp_run(z, **atoms):
    """A DDP run of examples/ddp.dp on 6 points at times 0, 0, 0, 5, 5, 5 (two slices)."""
    z = np.asarray(z, np.int32)
    return to_arviz({"posterior": {"num_clusters": np.zeros(z.shape[:2])}, "posterior_partition": {"z": z, **atoms},
                     "observed_data": {"x": np.zeros((6, 2)), "t": np.array([0.0, 0, 0, 5, 5, 5])}},
                    coords={"point": np.arange(6)},
                    dims={"z": ["point"], "x": ["point", "dim"], "t": ["point"], "atom_mu": ["slot", "slice", "dim"],
                          "atom_cov": ["slot", "cov_slice", "row", "col"]})


def test_ddp_replicates_each_point_from_its_label_s_atom_at_its_slice():
    """Label 1's mean moves from (10, 0) to (20, 0) between the slices, label 0 sits at (-5, -5):
    each replicate's mean and variance are its atom's at its slice (5 Monte Carlo standard errors)."""
    s = 2000
    z = np.broadcast_to([1, 0, 1, 1, 0, 1], (1, s, 6))
    mu = np.broadcast_to([[[-5.0, -5.0], [-5.0, -5.0]], [[10.0, 0.0], [20.0, 0.0]]], (1, s, 2, 2, 2))
    cov = np.broadcast_to(np.array([np.eye(2), 4 * np.eye(2)])[:, None], (1, s, 2, 1, 2, 2))  # shared per label
    out = dpppl.posterior_predictive(_ddp_run(z, atom_mu=mu, atom_cov=cov), "examples/ddp.dp", seed=2)
    rep = group(out, "posterior_predictive")["x"]
    assert rep.dims == ("chain", "draw", "point", "dim") and rep.shape == (1, s, 6, 2)
    for i, (mean, var) in enumerate([((10, 0), 4), ((-5, -5), 1), ((10, 0), 4), ((20, 0), 4), ((-5, -5), 1),
                                     ((20, 0), 4)]):
        draws = rep.values[0, :, i]
        assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * np.sqrt(var / s)), i
        assert np.all(np.abs(draws.var(axis=0) - var) < 5 * var * np.sqrt(2 / s)), i


def test_a_ddp_run_without_atoms_is_refused():
    with pytest.raises(dpppl.DataError, match="the DDP run recorded no atoms"):
        dpppl.posterior_predictive(_ddp_run(np.zeros((1, 2, 6))), "examples/ddp.dp")


RANKED = np.array([[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, -1, -1], [2, 0, 1, 3], [0, 2, 3, 1], [1, 0, 2, 3]], float)


def _ranking_run(z, sigma, theta, slot):
    """A rankings run's InferenceData: labels (chain, draw, 6), and the recorded parameters of
    its clusters as the Mallows kernels record them (sigma, theta and gm_cluster_slot in
    posterior_partition)."""
    z = np.asarray(z, np.int32)
    return to_arviz({"posterior": {"num_clusters": np.zeros(z.shape[:2])},
                     "posterior_partition": {"z": z, "sigma": np.asarray(sigma, np.int32), "theta": theta,
                                             "gm_cluster_slot": np.asarray(slot, np.int32)},
                     "observed_data": {"r": RANKED}},
                    coords={"point": np.arange(6)},
                    dims={"z": ["point"], "r": ["point", "dim"], "sigma": ["gm_cluster", "rank"],
                          "theta": ["gm_cluster", "stage"], "gm_cluster_slot": ["gm_cluster"]})


def test_replicated_rankings_come_from_each_point_s_recorded_cluster():
    """Points 0-2 sit in slot 3 (recorded first: sigma = 2 0 3 1, theta = 40, so every replicate
    is sigma, cut to the point's own length), points 3-5 in slot 0 (sigma the identity, theta_1 =
    0.7): the first item of a replicate is its stage-1 code s_1, whose mean under GM is
    sum_k k e^(-0.7 k) / sum_k e^(-0.7 k), k = 0..3 (threshold: 5 Monte Carlo standard errors)."""
    s = 3000
    z = np.broadcast_to([3, 3, 3, 0, 0, 0], (1, s, 6))
    sigma = np.broadcast_to([[2, 0, 3, 1], [0, 1, 2, 3]], (1, s, 2, 4))
    theta = np.broadcast_to([[40.0, 40.0, 40.0], [0.7, 0.7, 0.7]], (1, s, 2, 3))
    out = dpppl.posterior_predictive(_ranking_run(z, sigma, theta, np.broadcast_to([3, 0], (1, s, 2))),
                                     "models/rankings.dp", seed=1)
    rep = group(out, "posterior_predictive")["r"]
    assert rep.dims == ("chain", "draw", "point", "dim") and rep.shape == (1, s, 6, 4) and rep.dtype.kind == "i"
    values = rep.values[0]
    assert np.all(values[:, [0, 1]] == [2, 0, 3, 1]) and np.all(values[:, 2] == [2, 0, -1, -1])
    assert np.all(np.sort(values[:, 3:], axis=-1) == np.arange(4))  # full rankings stay permutations
    k = np.arange(4)
    expected = np.sum(k * np.exp(-0.7 * k)) / np.sum(np.exp(-0.7 * k))
    first = values[:, 3:, 0].ravel()
    assert abs(first.mean() - expected) < 5 * first.std() / np.sqrt(first.size)


def test_a_draw_with_an_unrecorded_cluster_is_refused_before_drawing():
    z = np.array([[[3, 3, 3, 0, 0, 1]]])
    run = _ranking_run(z, [[[[2, 0, 3, 1], [0, 1, 2, 3]]]], np.ones((1, 1, 2, 3)), [[[3, 0]]])
    with pytest.raises(dpppl.DataError, match="draw 0 of chain 0 has more clusters than the 2 whose parameters "
                                              "the run recorded; sample with a larger record_clusters="):
        dpppl.posterior_predictive(run, "models/rankings.dp")


def test_a_run_of_a_python_model_needs_the_model():
    with pytest.raises(dpppl.ArgumentError, match="pass model="):
        dpppl.posterior_predictive(_run(np.zeros((1, 2, 4)), np.zeros((4, 1))))


def test_arviz_plot_ppc_draws_a_sampled_run():
    x = np.concatenate([np.linspace(-3, -2, 10), np.linspace(2, 3, 10)])[:, None]
    idata = dpppl.sample("models/gaussian_known.dp", x, kernel="gibbs", num_samples=20, num_warmup=10,
                         num_chains=1, progress_bar=False)
    idata = dpppl.posterior_predictive(idata, num_draws=10)
    ax = np.ravel(arviz().plot_ppc(idata, num_pp_samples=10))[0]
    assert len(ax.lines) >= 11
    again = dpppl.posterior_predictive(idata, num_draws=5)
    assert group(again, "posterior_predictive").sizes["draw"] == 5


def test_dp_errors_replicate_the_bimodal_residuals_of_the_data():
    """A regression whose errors are a DP mixture (two modes at -2 and +2): replicated y of each
    draw minus the draw's x beta (the replicated errors) against y minus x beta (the realised
    errors); the posterior predictive p-values of their 10/25/50/75/90% quantiles all lie in
    (0.05, 0.95). The prior's predictive (the base measure's N(0, 4.25) errors) puts the 25% and
    75% quantiles at -/+1.4 against -/+2: p-values near 1 and 0."""
    from tests.run.test_partition_gibbs import X, Y, regression

    idata = dpppl.sample(regression, model_args=(X, Y), kernel="gibbs", num_warmup=30, num_samples=40,
                         thinning=2, seed=3, progress_bar=False, sweeps=2)
    out = dpppl.posterior_predictive(idata)  # the model function and its arguments from the run
    rep = np.asarray(group(out, "posterior_predictive")["resid"])[0]
    beta = np.asarray(group(idata, "posterior")["beta"])[0][:, None]
    x, y = np.asarray(X), np.asarray(Y)
    q = [0.1, 0.25, 0.5, 0.75, 0.9]
    p = np.mean(np.quantile(rep - beta * x, q, axis=1) >= np.quantile(y - beta * x, q, axis=1), axis=1)
    assert np.all((p > 0.05) & (p < 0.95)), p
    new_x = np.linspace(-1.0, 1.0, 30)  # new covariates, another number of points
    new = dpppl.posterior_predictive(idata, model_args=(new_x, np.zeros(30)), num_draws=10)
    values = np.asarray(group(new, "posterior_predictive")["resid"])
    assert values.shape == (1, 10, 30) and np.all(np.isfinite(values))
    with pytest.raises(dpppl.ArgumentError, match="the new arguments give y=None; site .resid. observes it"):
        dpppl.posterior_predictive(idata, model_args=(new_x, None))


def test_a_model_function_that_cannot_be_imported_must_be_given():
    run = _run(np.zeros((1, 2, 4)), np.zeros((4, 1)))
    group(run, "posterior").attrs.update(inner_kernel="NUTS", model_function="tests:<locals>.model")
    with pytest.raises(dpppl.ArgumentError, match="model function 'tests:<locals>.model' cannot be imported"):
        dpppl.posterior_predictive(run)
