"""Agreement between two clusterings of the same points: ARI, NMI, VI, pairwise F-score.

All are invariant to relabelling and computed from the contingency table
n_kl = |{i : a_i = k, b_i = l}| with row sums a_k, column sums b_l and N points.

* Adjusted Rand index (Hubert & Arabie 1985): with pairs(m) = m (m - 1) / 2,
  ARI = (sum_kl pairs(n_kl) - E) / ((sum_k pairs(a_k) + sum_l pairs(b_l)) / 2 - E),
  E = sum_k pairs(a_k) sum_l pairs(b_l) / pairs(N). 1 for identical partitions, 0 in
  expectation under random labelling; may be negative.
* Normalised mutual information (Strehl & Ghosh 2002; "arithmetic" normalisation of
  scikit-learn): NMI = I(a; b) / ((H(a) + H(b)) / 2), in [0, 1].
* Variation of information (Meila 2007): VI = H(a) + H(b) - 2 I(a; b)
  = H(a | b) + H(b | a), a metric on partitions, in [0, log N] nats.
* Pairwise precision, recall and F-score against a reference: over pairs of points,
  precision = |pairs together in both| / |pairs together in the estimate|, recall =
  |pairs together in both| / |pairs together in the reference|, F = their harmonic mean.

Entropies use natural logarithms (nats).

References
----------
L. Hubert and P. Arabie, "Comparing partitions", J. Classification 2, 1985.
A. Strehl and J. Ghosh, "Cluster ensembles", JMLR 3, 2002.
M. Meila, "Comparing clusterings - an information based distance", J. Multivariate
Anal. 98, 2007.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dpppl.errors import DataError
from dpppl.diagnostics.summaries import as_label_array


def contingency(a, b) -> np.ndarray:
    """The contingency table n_kl (K_a, K_b) of two labellings of the same N points."""
    a, b = as_label_array(a), as_label_array(b)
    if a.ndim != 1 or a.shape != b.shape:
        raise DataError(f"two clusterings of the same points are needed, got shapes {a.shape} and {b.shape}")
    ia = np.unique(a, return_inverse=True)[1].ravel()
    ib = np.unique(b, return_inverse=True)[1].ravel()
    kb = int(ib.max()) + 1
    return np.bincount(ia * kb + ib, minlength=(int(ia.max()) + 1) * kb).reshape(-1, kb)


def _pairs(m):
    m = np.asarray(m, dtype=float)
    return m * (m - 1) / 2


def _entropy(counts) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-np.sum(p * np.log(p)))


def _mutual_information(table) -> float:
    n = table.sum()
    rows, cols = table.sum(axis=1), table.sum(axis=0)
    k, l = np.nonzero(table)
    nkl = table[k, l]
    return float(np.sum(nkl / n * (np.log(nkl * n) - np.log(rows[k] * cols[l]))))


def adjusted_rand_index(a, b) -> float:
    """Adjusted Rand index of two clusterings (1 when they are the same partition)."""
    table = contingency(a, b)
    together = _pairs(table).sum()
    rows, cols = _pairs(table.sum(axis=1)).sum(), _pairs(table.sum(axis=0)).sum()
    total = _pairs(table.sum())
    expected = rows * cols / total if total > 0 else 0.0
    top = (rows + cols) / 2 - expected
    if top == 0:  # both partitions trivial (one cluster, or all singletons) and equal
        return 1.0
    return float((together - expected) / top)


def normalized_mutual_information(a, b) -> float:
    """NMI = I(a; b) / ((H(a) + H(b)) / 2); 1 when both are the same single cluster."""
    table = contingency(a, b)
    h = (_entropy(table.sum(axis=1)) + _entropy(table.sum(axis=0))) / 2
    if h == 0:
        return 1.0
    return float(np.clip(_mutual_information(table) / h, 0.0, 1.0))


def variation_of_information(a, b) -> float:
    """VI(a, b) = H(a) + H(b) - 2 I(a; b) in nats (0 exactly when a and b are the same partition)."""
    table = contingency(a, b)
    vi = _entropy(table.sum(axis=1)) + _entropy(table.sum(axis=0)) - 2 * _mutual_information(table)
    return max(float(vi), 0.0)


class PairwiseScores(NamedTuple):
    """Pairwise precision, recall and F-score of an estimate against a reference."""

    precision: float
    recall: float
    f_score: float


def pairwise_scores(estimate, reference) -> PairwiseScores:
    """Pairwise precision, recall and F-score of `estimate` against `reference`.

    A score whose denominator counts no pair (all singletons) is 1 when the numerator
    is 0 too (nothing was claimed, nothing was missed).
    """
    table = contingency(estimate, reference)
    both = _pairs(table).sum()
    claimed, true = _pairs(table.sum(axis=1)).sum(), _pairs(table.sum(axis=0)).sum()
    precision = both / claimed if claimed > 0 else 1.0
    recall = both / true if true > 0 else 1.0
    f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return PairwiseScores(float(precision), float(recall), float(f))


def pairwise_f_score(estimate, reference) -> float:
    """The pairwise F-score of [`pairwise_scores`][dpppl.analysis.metrics.pairwise_scores]."""
    return pairwise_scores(estimate, reference).f_score


__all__ = ["adjusted_rand_index", "contingency", "normalized_mutual_information", "pairwise_f_score",
           "pairwise_scores", "PairwiseScores", "variation_of_information"]
