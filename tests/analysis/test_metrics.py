"""Partition metrics (dpppl.analysis.metrics) against their definitions and scikit-learn."""

import itertools

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from scipy import stats

import dpppl
from dpppl.analysis import metrics
from tests.helpers.partitions import _random_partitions


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

