"""Label-invariant summaries, co-clustering, point estimates, metrics, prior simulation,
plots and their CLI commands (dpppl.analysis)."""

import itertools

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from scipy import stats

import dpppl
from dpppl.analysis import metrics
from dpppl.analysis.partitions import (coclustering, dahl, expected_vi, least_squares_loss, point_estimate,
    salso, vi_lower_bound)
from dpppl.simulate import expected_num_clusters
from dpppl.diagnostics.summaries import compact_labels, label_summaries
from dpppl.cli import main
from dpppl.diagnostics.arviz_compat import group
from dpppl.testing import canonical, exact_posterior, sample_exact, set_partitions


def _random_partitions(rng, s, n, k):
    return rng.integers(0, k, size=(s, n))


# ------------------------------------------------------------------- summaries ---
def test_label_summaries_by_hand():
    z = np.array([[5, 5, 2, 9, 2, 5],      # sizes 3, 2, 1
                  [0, 0, 0, 0, 0, 0],      # one cluster
                  [3, 1, 4, 0, 5, 2]])     # singletons
    out = label_summaries(z)
    np.testing.assert_array_equal(out["num_clusters"], [3, 1, 6])
    np.testing.assert_array_equal(out["largest_cluster"], [3, 6, 1])
    np.testing.assert_array_equal(out["cluster_sizes"], [[3, 2, 1, 0, 0, 0], [6, 0, 0, 0, 0, 0], [1] * 6])
    p = np.array([3, 2, 1]) / 6
    np.testing.assert_allclose(out["entropy"], [-(p * np.log(p)).sum(), 0.0, np.log(6)])


def test_compact_labels_keeps_the_partition_for_any_labels():
    rng = np.random.default_rng(0)
    z = rng.integers(-50, 10**6, size=(2, 3, 9)) // 10**5      # negative and large labels
    labels, counts = compact_labels(z)
    assert labels.shape == z.shape and counts.shape[:2] == (2, 3)
    np.testing.assert_array_equal(canonical(labels), canonical(z))
    for row, c in zip(labels.reshape(-1, 9), counts.reshape(-1, counts.shape[-1])):
        np.testing.assert_array_equal(np.bincount(row, minlength=c.size), c)


@pytest.fixture(scope="module")
def run():
    """A short fixed-alpha run on 24 points in two groups (lp is then log p(x, z))."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(-2.5, 0.7, (12, 2)), rng.normal(2.5, 0.7, (12, 2))])
    model = dpppl.DPMixture(0.7, dpppl.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0,
                                                            psi0=0.5 * np.eye(2)))
    idata = dpppl.sample(model, x, num_warmup=20, num_samples=150, num_chains=2, seed=1,
                         init="single", progress_bar=False)
    return model, x, idata


def test_every_run_has_the_label_invariant_summaries(run):
    _, x, idata = run
    post = group(idata, "posterior")
    z = np.asarray(post["z"])
    k = np.array([[np.unique(d).size for d in chain] for chain in z])
    np.testing.assert_array_equal(post["num_clusters"], k)
    sizes = np.asarray(post["cluster_sizes"])
    assert sizes.shape == z.shape[:2] + (k.max(),) and post["cluster_sizes"].dims[-1] == "cluster"
    assert np.all(sizes.sum(axis=-1) == x.shape[0]) and np.all(np.diff(sizes, axis=-1) <= 0)
    np.testing.assert_array_equal(sizes[..., 0], post["largest_cluster"])
    assert np.all((0 <= post["entropy"]) & (post["entropy"] <= np.log(x.shape[0]) + 1e-12))
    assert "lp" in group(idata, "sample_stats")


# --------------------------------------------------------------------- metrics ---
def test_metrics_identities():
    a = np.array([0, 0, 1, 1, 1, 2, 2, 3])
    relabelled = np.array([7, 7, 3, 3, 3, -1, -1, 0])
    assert metrics.adjusted_rand_index(a, relabelled) == pytest.approx(1.0)
    assert metrics.normalized_mutual_information(a, relabelled) == pytest.approx(1.0)
    assert metrics.variation_of_information(a, relabelled) == pytest.approx(0.0, abs=1e-12)
    assert metrics.pairwise_f_score(a, relabelled) == pytest.approx(1.0)
    n = a.size
    one, singletons = np.zeros(n, int), np.arange(n)
    # VI(one cluster, c) = H(c); VI(one cluster, singletons) = log n (Meila 2007, property 4)
    p = np.bincount(a) / n
    assert metrics.variation_of_information(one, a) == pytest.approx(-(p * np.log(p)).sum())
    assert metrics.variation_of_information(one, singletons) == pytest.approx(np.log(n))
    # pairs: estimate {0,1},{2,3,4},{5,6},{7} vs one cluster: 1 + 3 + 1 = 5 of 28 pairs
    scores = metrics.pairwise_scores(a, one)
    assert scores.precision == pytest.approx(1.0) and scores.recall == pytest.approx(5 / 28)
    assert scores.f_score == pytest.approx(2 * (5 / 28) / (1 + 5 / 28))
    with pytest.raises(dpppl.DataError):
        metrics.adjusted_rand_index(a, a[:-1])


def test_metrics_against_sklearn_and_definitions():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    draws = _random_partitions(rng, 60, 12, 4)
    for a, b in zip(draws[::2], draws[1::2]):
        assert metrics.adjusted_rand_index(a, b) == pytest.approx(sk.adjusted_rand_score(a, b), abs=1e-12)
        assert metrics.normalized_mutual_information(a, b) == pytest.approx(
            sk.normalized_mutual_info_score(a, b), abs=1e-12)
        # VI = H(a) + H(b) - 2 I(a; b) with sklearn's mutual information (nats)
        h = lambda c: stats.entropy(np.bincount(c))  # noqa: E731
        assert metrics.variation_of_information(a, b) == pytest.approx(
            h(a) + h(b) - 2 * sk.mutual_info_score(a, b), abs=1e-12)
        pairs = list(itertools.combinations(range(a.size), 2))
        same_a = np.array([a[i] == a[j] for i, j in pairs])
        same_b = np.array([b[i] == b[j] for i, j in pairs])
        tp = np.sum(same_a & same_b)
        precision, recall = tp / same_a.sum(), tp / same_b.sum()
        assert metrics.pairwise_f_score(a, b) == pytest.approx(2 * precision * recall / (precision + recall))


def test_variation_of_information_is_a_metric():
    rng = np.random.default_rng(2)
    parts = _random_partitions(rng, 30, 9, 4)
    vi = metrics.variation_of_information
    for a, b, c in zip(parts[::3], parts[1::3], parts[2::3]):
        assert vi(a, b) == pytest.approx(vi(b, a))
        assert vi(a, c) <= vi(a, b) + vi(b, c) + 1e-12


# ------------------------------------------------------- co-clustering, losses ---
def test_coclustering_matches_the_definition():
    rng = np.random.default_rng(3)
    draws = _random_partitions(rng, 50, 7, 3) * 11 - 4
    naive = np.mean([d[:, None] == d[None, :] for d in draws], axis=0)
    np.testing.assert_allclose(coclustering(draws), naive, atol=1e-14)
    np.testing.assert_allclose(coclustering(draws.reshape(5, 10, 7)), naive, atol=1e-14)


def test_expected_vi_and_least_squares_match_their_definitions():
    rng = np.random.default_rng(4)
    draws = _random_partitions(rng, 40, 6, 3)
    psm = coclustering(draws)
    for c in set_partitions(6)[::37]:
        assert expected_vi(c, draws) == pytest.approx(
            np.mean([metrics.variation_of_information(c, d) for d in draws]), abs=1e-12)
        assert least_squares_loss(c, psm) == pytest.approx(
            sum((float(c[i] == c[j]) - psm[i, j]) ** 2 for i in range(6) for j in range(6)))
        # mcclust.ext's VI.lb (log base 2) written out point by point
        lb = np.mean([np.log2(np.sum(c == c[i])) + np.log2(psm[i].sum()) - 2 * np.log2(psm[i, c == c[i]].sum())
                      for i in range(6)])
        assert vi_lower_bound(c, psm) == pytest.approx(lb * np.log(2))
        # Jensen: with the c-free term E log|C_i| in place of log sum_j p_ij it bounds E[VI]
        own_size = np.stack([(draws == draws[:, [i]]).sum(axis=1) for i in range(6)])
        shift = np.mean(np.log(own_size).mean(axis=1) - np.log(psm.sum(axis=1)))
        assert vi_lower_bound(c, psm) + shift <= expected_vi(c, draws) + 1e-12


def _cases():
    """Small posteriors with n = 5..7 points: clear groups, overlapping groups, PY."""
    rng = np.random.default_rng(5)
    known = dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=4.0)
    yield dpppl.DPMixture(1.0, known), np.concatenate([rng.normal(-2, 1, (3, 1)), rng.normal(2, 1, (4, 1))])
    yield dpppl.DPMixture(2.0, known), rng.normal(0, 1.5, (6, 1))
    yield (dpppl.PitmanYorMixture(0.4, 0.5, dpppl.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.2, nu0=4.0,
                                                                        psi0=np.eye(2))),
           rng.normal(0, 1.5, (5, 2)))


@pytest.mark.parametrize("case", range(3))
def test_point_estimates_reach_the_brute_force_optimum(case):
    model, x = list(_cases())[case]
    exact = exact_posterior(model, x)
    draws = sample_exact(exact, case, 400)
    parts = set_partitions(x.shape[0])
    psm = coclustering(draws)

    # Dahl: the best draw under the least-squares criterion
    best_draw, score = dahl(draws)
    losses = np.array([least_squares_loss(d, psm) for d in draws])
    assert score == pytest.approx(losses.min()) and least_squares_loss(best_draw, psm) == pytest.approx(losses.min())
    np.testing.assert_array_equal(point_estimate(draws, "dahl"), canonical(best_draw))

    # SALSO search over all partitions: the global minimum of each loss
    exact_vi = np.array([expected_vi(p, draws) for p in parts])
    labels, loss = salso(draws, loss="vi", seed=case)
    assert loss == pytest.approx(exact_vi.min(), abs=1e-10)
    assert expected_vi(labels, draws) == pytest.approx(exact_vi.min(), abs=1e-10)
    np.testing.assert_array_equal(point_estimate(draws, "vi", seed=case), labels)
    bound = np.array([vi_lower_bound(p, psm) for p in parts])
    labels_lb, loss_lb = salso(draws, loss="vi_lb", seed=case)
    assert loss_lb == pytest.approx(bound.min(), abs=1e-10)
    assert vi_lower_bound(labels_lb, psm) == pytest.approx(bound.min(), abs=1e-10)


def test_vi_search_finds_a_partition_that_no_draw_is():
    # every draw merges one pair of 4 points; the expected-VI optimum is all singletons,
    # which no draw is: VI(singletons, draw) = log 4 - H(2, 1, 1) = (1/2) log 2
    draws = []
    for i, j in itertools.combinations(range(4), 2):
        d = np.arange(4)
        d[j] = i
        draws.append(d)
    draws = np.array(draws)
    values = np.array([expected_vi(p, draws) for p in set_partitions(4)])
    labels, loss = salso(draws, num_runs=4)
    np.testing.assert_array_equal(labels, [0, 1, 2, 3])
    assert loss == pytest.approx(0.5 * np.log(2)) and loss == pytest.approx(values.min())
    assert loss < min(expected_vi(d, draws) for d in draws) - 0.1


def test_best_is_the_draw_of_highest_log_joint(run):
    model, x, idata = run
    z = np.asarray(group(idata, "posterior")["z"]).reshape(-1, x.shape[0])
    unique = np.unique(np.stack([canonical(d) for d in z]), axis=0)
    log_joints = [dpppl.log_joint(model, x, d) for d in unique]
    best = point_estimate(idata, "best")
    assert dpppl.log_joint(model, x, best) == pytest.approx(max(log_joints))
    assert point_estimate(idata, "map").tolist() == best.tolist()
    with pytest.raises(dpppl.DataError):
        point_estimate(z, "best")
    with pytest.raises(ValueError, match="method"):
        point_estimate(idata, "median")


def test_point_estimate_of_two_clear_groups(run):
    _, x, idata = run
    truth = np.repeat([0, 1], 12)
    for method in ("vi", "dahl", "best"):
        assert metrics.adjusted_rand_index(point_estimate(idata, method), truth) > 0.9


# ------------------------------------------------------------ prior simulation ---
def _z_score(values, expected):
    return abs(values.mean() - expected) / (values.std(ddof=1) / np.sqrt(values.size))


def _rising(a, n):
    return np.prod(a + np.arange(n))


@pytest.mark.parametrize("discount, alpha, n", [(0.0, 1.5, 40), (0.5, 1.0, 30), (0.25, -0.2, 25)])
def test_prior_number_of_clusters_matches_its_expectation(discount, alpha, n):
    model = dpppl.PitmanYorMixture(discount, alpha, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=1.0))
    if discount == 0:
        closed = sum(alpha / (alpha + i - 1) for i in range(1, n + 1))
    else:   # Pitman (2006), eq. 3.13
        closed = alpha / discount * (_rising(alpha + discount, n) / _rising(alpha, n) - 1)
    assert expected_num_clusters(model.prior, n) == pytest.approx(closed, rel=1e-10)
    k = np.asarray(group(dpppl.sample_prior(model, n, num_samples=3000, seed=7), "prior")["num_clusters"])
    assert _z_score(k.ravel(), closed) < 4.0   # |z| > 4 has probability 6e-5 for a correct sampler


def test_prior_partition_law_matches_the_eppf():
    prior = dpppl.PitmanYor(0.3, 0.8)
    model = dpppl.PitmanYorMixture(0.3, 0.8, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=1.0))
    parts = set_partitions(4)
    counts = np.stack([np.bincount(p, minlength=4) for p in parts]).astype(float)
    p_exact = np.exp([float(prior.log_eppf(c, 0.8)) for c in counts])
    assert p_exact.sum() == pytest.approx(1.0)
    assert float(p_exact @ (counts > 0).sum(1)) == pytest.approx(expected_num_clusters(prior, 4))
    z = np.asarray(group(dpppl.sample_prior(model, 4, num_samples=4000, seed=3), "prior")["z"])[0]
    observed = np.bincount(np.searchsorted(parts @ 4 ** np.arange(3, -1, -1),
                                           canonical(z) @ 4 ** np.arange(3, -1, -1)), minlength=len(parts))
    assert stats.chisquare(observed, p_exact * z.shape[0]).pvalue > 1e-4


def test_prior_with_random_alpha_and_simulated_data():
    model = dpppl.DPMixture(dpppl.Gamma(2.0, 1.0), dpppl.NormalKnownCov(sigma2=0.5, mu0=1.0, tau2=2.0))
    idata = dpppl.sample_prior(model, 20, num_samples=3000, seed=11, dim=2)
    prior, x = group(idata, "prior"), np.asarray(group(idata, "prior_predictive")["x"])
    assert x.shape == (1, 3000, 20, 2)
    assert _z_score(np.asarray(prior["alpha"]).ravel(), 2.0) < 4.0
    assert _z_score(np.asarray(prior["num_clusters"]).ravel(), expected_num_clusters(model.prior, 20)) < 4.0
    # each point is x = mu + e with mu ~ N(1, 2), e ~ N(0, 0.5): mean 1, variance 2.5
    first = x[0, :, 0, :].ravel()
    assert _z_score(first, 1.0) < 4.0
    assert abs(first.var() - 2.5) < 4 * 2.5 * np.sqrt(2 / first.size) * 1.5


def test_prior_needs_data_for_data_dependent_hyperparameters():
    model = dpppl.load("models/gaussian_niw.dp")
    assert "prior_predictive" not in dpppl.sample_prior(model, 5, num_samples=10).groups()
    with pytest.raises(dpppl.ModelError, match="depend on the data"):
        dpppl.sample_prior(model, 5, num_samples=10, dim=2)
    x, _ = dpppl.datasets.load("galaxies")
    idata = dpppl.sample_prior(model, 7, num_samples=10, data=x)
    assert np.asarray(group(idata, "prior_predictive")["x"]).shape == (1, 10, 7, 1)


# ----------------------------------------------------------------------- plots ---
def test_plot_functions_draw(run, tmp_path):
    import matplotlib.pyplot as plt

    _, _, idata = run
    ax = dpppl.plot_coclustering(idata)
    assert ax.images and ax.images[0].get_array().shape == (24, 24)
    ax = dpppl.plot_clusters(idata, estimate="dahl")
    assert len(ax.collections) == point_estimate(idata, "dahl").max() + 1
    ax = dpppl.plot_clusters(idata, data=np.asarray(group(idata, "observed_data")["x"])[:, 0])
    assert ax.patches
    ax = dpppl.plot_num_clusters(idata)
    assert ax.patches
    ax = dpppl.plot_log_joint({"a": idata, "b": idata})
    assert len(ax.lines) == 4
    prior = dpppl.sample_prior(dpppl.DPMixture(1.0, dpppl.NormalKnownCov(1.0, 0.0, 1.0)), 30, num_samples=200)
    axes = dpppl.plot_cluster_sizes(prior)
    assert len(axes) == 2
    plt.close("all")


def test_cli_summary_and_analysis_plots(tmp_path, capsys):
    out = tmp_path / "run.nc"
    assert main(["sample", "models/gaussian_known.dp", "--data", "faithful", "--warmup", "5", "--samples", "30",
                 "--chains", "2", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    for name in ("num_clusters", "largest_cluster", "entropy", "cluster_sizes[0]", "r_hat", "ess_bulk", "lp"):
        assert name in text
    for kind in ("coclustering", "clusters", "k", "lp"):
        fig = tmp_path / f"{kind}.png"
        extra = ["--compare", str(out)] if kind == "lp" else ["--estimate", "dahl"]
        assert main(["plot", str(out), "--kind", kind, "--out", str(fig)] + extra) == 0
        assert fig.stat().st_size > 1000
