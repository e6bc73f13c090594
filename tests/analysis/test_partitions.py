"""Co-clustering, expected losses and point estimates (dpppl.analysis.partitions)."""

import itertools
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import dpppl
from dpppl.analysis import metrics
from dpppl.analysis.partitions import (coclustering, dahl, expected_vi, least_squares_loss, point_estimate,
                                       salso, vi_lower_bound)
from dpppl.diagnostics.arviz_compat import partition_group
from dpppl.testing import canonical, exact_posterior, sample_exact, set_partitions
from tests.helpers.partitions import _random_partitions


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
def test_point_estimates_reach_the_brute_force_optimum(case, monkeypatch):
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

    # SALSO search over all partitions: the global minimum of each loss, no worse than the best draw's
    exact_vi = np.array([expected_vi(p, draws) for p in parts])
    labels, loss = salso(draws, loss="vi", seed=case)
    assert loss == pytest.approx(exact_vi.min(), abs=1e-10)
    assert expected_vi(labels, draws) == pytest.approx(exact_vi.min(), abs=1e-10)
    assert loss <= min(expected_vi(d, draws) for d in np.unique(draws, axis=0)) + 1e-12
    np.testing.assert_array_equal(point_estimate(draws, "vi", seed=case), labels)
    # the JAX pass (where the C++ one cannot be built) reaches the same minimum
    monkeypatch.setenv("DPPPL_NATIVE", "0")
    assert salso(draws, loss="vi", seed=case)[1] == pytest.approx(exact_vi.min(), abs=1e-10)
    monkeypatch.delenv("DPPPL_NATIVE")
    bound = np.array([vi_lower_bound(p, psm) for p in parts])
    labels_lb, loss_lb = salso(draws, loss="vi_lb", seed=case)
    assert loss_lb == pytest.approx(bound.min(), abs=1e-10)
    assert vi_lower_bound(labels_lb, psm) == pytest.approx(bound.min(), abs=1e-10)


def test_vi_search_finds_a_partition_that_no_draw_is():
    draws = _pairs_of_four()
    values = np.array([expected_vi(p, draws) for p in set_partitions(4)])
    labels, loss = salso(draws, num_runs=4)
    np.testing.assert_array_equal(labels, [0, 1, 2, 3])
    assert loss == pytest.approx(0.5 * np.log(2)) and loss == pytest.approx(values.min())
    assert loss < min(expected_vi(d, draws) for d in draws) - 0.1


def _pairs_of_four():
    """The 6 draws of 4 points that each merge one pair: the expected-VI optimum is all
    singletons, which no draw is: VI(singletons, draw) = log 4 - H(2, 1, 1) = (1/2) log 2."""
    draws = []
    for i, j in itertools.combinations(range(4), 2):
        d = np.arange(4)
        d[j] = i
        draws.append(d)
    return np.array(draws)


def test_salso_grows_a_capacity_that_would_constrain_it():
    # two cluster slots cannot hold the optimum's four singletons: a run that finds them full
    # doubles its tables and sweeps again
    from dpppl.analysis.partitions import _vi_problem
    from dpppl.analysis.salso_search import search
    from dpppl.diagnostics.summaries import compact_labels

    draws = _pairs_of_four()
    data, tables, constant = _vi_problem(*compact_labels(draws))
    labels, value = search("vi", data, tuple(t[:, :2] for t in tables), 4, num_runs=4, max_sweeps=50,
                           max_zealous=10, seed=0)
    np.testing.assert_array_equal(canonical(labels[:4]), [0, 1, 2, 3])
    assert (value + constant) / 4 == pytest.approx(0.5 * np.log(2))


def test_salso_computes_in_float64_whatever_the_precision_setting():
    # the runs' threads enter float64 themselves: JAX's precision setting is per thread
    import jax

    setting = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        labels, loss = salso(_pairs_of_four(), num_runs=4)
    finally:
        jax.config.update("jax_enable_x64", setting)
    np.testing.assert_array_equal(labels, [0, 1, 2, 3])
    assert loss == pytest.approx(0.5 * np.log(2), rel=1e-14)


def test_salso_and_coclustering_refuse_what_they_cannot_do(monkeypatch):
    draws = _pairs_of_four()
    for name, value in (("num_runs", 0), ("max_sweeps", 2.5), ("max_zealous", -1)):
        with pytest.raises(dpppl.ArgumentError, match=f"^salso: {name} must be a (non-negative|positive) integer, "
                                                      f"got {value}$"):
            salso(draws, **{name: value})
    monkeypatch.setattr(sys.modules["dpppl.analysis.partitions"], "MAX_COCLUSTERING_POINTS", 3)
    message = (r"^the co-clustering matrix of 4 points would hold 4\^2 = 16 entries \(0.0 GiB\); dpppl forms it for "
               r"at most MAX_COCLUSTERING_POINTS = 3 points .*method='vi'\) with loss='vi', the default, needs no "
               r"such matrix$")
    for call in (lambda: coclustering(draws), lambda: point_estimate(draws, "dahl"),
                 lambda: salso(draws, loss="vi_lb")):
        with pytest.raises(dpppl.DataError, match=message):
            call()
    assert salso(draws, num_runs=4)[1] == pytest.approx(0.5 * np.log(2))  # the exact VI forms no such matrix


def test_best_is_the_draw_of_highest_log_joint(run):
    model, x, idata = run
    z = np.asarray(partition_group(idata)["z"]).reshape(-1, x.shape[0])
    unique = np.unique(np.stack([canonical(d) for d in z]), axis=0)
    log_joints = [dpppl.log_joint(model, x, d) for d in unique]
    best = point_estimate(idata, "best")
    assert dpppl.log_joint(model, x, best) == pytest.approx(max(log_joints))
    assert point_estimate(idata, "map").tolist() == best.tolist()
    with pytest.raises(dpppl.DataError):
        point_estimate(z, "best")
    with pytest.raises(dpppl.ArgumentError, match="^method must be one of"):
        point_estimate(idata, "median")


def test_point_estimate_of_two_clear_groups(run):
    _, x, idata = run
    truth = np.repeat([0, 1], 12)
    for method in ("vi", "best"):
        assert metrics.adjusted_rand_index(point_estimate(idata, method), truth) > 0.9
    # Dahl's least-squares draw minimises Binder's loss, which splits off points that are singletons
    # in part of the posterior (Wade & Ghahramani 2018; here most draws have 3-5 clusters):
    # it may over-split the two groups but never mixes them
    dahl_estimate = point_estimate(idata, "dahl")
    assert all(len(set(truth[dahl_estimate == c])) == 1 for c in np.unique(dahl_estimate))

