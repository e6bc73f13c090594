"""Label-invariant summaries of sampled partitions.

Cluster labels are arbitrary: relabelling the clusters of a draw gives the same
partition, so a label's trace, ESS or R-hat means nothing (label switching). These
summaries depend on the partition only, and are what `az.plot_trace`, `az.ess` and
`az.rhat` should be pointed at. For a partition of N points into clusters of sizes
n_1, ..., n_K:

* `num_clusters`: K;
* `largest_cluster`: max_k n_k;
* `cluster_sizes`: (n_(1) >= n_(2) >= ...), the sizes sorted in decreasing order,
  padded with zeros to the largest K of the draws;
* `entropy`: H = -sum_k (n_k / N) log(n_k / N) in nats, 0 for one cluster and log N
  for N singletons (the entropy of the cluster of a point picked at random).

They are computed on the host from recorded labels, so every kernel gets them.
"""

from __future__ import annotations

import numpy as np

from dpppl.errors import DataError


def as_label_array(z) -> np.ndarray:
    """`z` as an integer array with at least one axis (points last); DataError otherwise."""
    z = np.asarray(z)
    if z.ndim == 0 or z.shape[-1] == 0:
        raise DataError(f"labels must have a points axis with at least one point, got shape {z.shape}")
    if z.dtype.kind not in "iu":
        if z.dtype.kind == "f" and np.all(np.isfinite(z)) and np.all(z == np.round(z)):
            z = z.astype(np.int64)
        else:
            raise DataError(f"labels must be integers, got dtype {z.dtype}")
    return z


def compact_labels(z) -> tuple[np.ndarray, np.ndarray]:
    """Relabel every partition (row) of `z` to clusters 0..K-1, vectorised over rows.

    Parameters
    ----------
    z : array_like of int, shape (..., N)
        Labels; each row along the last axis is one partition (e.g. draws of a run).

    Returns
    -------
    labels : ndarray of int64, shape (..., N)
        The same partitions with labels 0..K_row - 1, in increasing order of the
        original labels (not of first appearance).
    counts : ndarray of int64, shape (..., K_max)
        Cluster sizes of each row in the new labelling, zero-padded to the largest K.
    """
    z = as_label_array(z)
    lead, n = z.shape[:-1], z.shape[-1]
    flat = z.reshape(-1, n).astype(np.int64)
    if flat.min() < 0 or flat.max() > 2 * n:  # arbitrary labels: bring them into range first
        flat = np.unique(flat, return_inverse=True)[1].reshape(flat.shape)
    rows, capacity = flat.shape[0], int(flat.max()) + 1
    offset = np.arange(rows)[:, None] * capacity
    slot_counts = np.bincount((flat + offset).ravel(), minlength=rows * capacity).reshape(rows, capacity)
    occupied = slot_counts > 0
    new_index = np.cumsum(occupied, axis=1) - 1                  # slot -> compact label
    labels = np.take_along_axis(new_index, flat, axis=1)
    k_max = int(occupied.sum(axis=1).max())
    counts = np.zeros((rows, k_max), np.int64)
    r, s = np.nonzero(occupied)
    counts[r, new_index[r, s]] = slot_counts[r, s]
    return labels.reshape(z.shape), counts.reshape(lead + (k_max,))


LABEL_INVARIANT = ("num_clusters", "largest_cluster", "entropy", "alpha")
"""The scalar label-invariant quantities of a run (`alpha` when it is sampled), in the
order summaries and plots show them."""


def label_summaries(z) -> dict[str, np.ndarray]:
    """The label-invariant summaries of partitions `z` (..., N) (see the module docstring).

    Returns
    -------
    dict
        `num_clusters` and `largest_cluster` (int32, shape (...)), `cluster_sizes`
        (int32, shape (..., K_max), decreasing, zero-padded) and `entropy` (float64,
        shape (...)).
    """
    return count_summaries(compact_labels(z)[1])


def count_summaries(counts) -> dict[str, np.ndarray]:
    """`label_summaries` from the partitions' cluster sizes `counts` (..., slots) instead of their
    labels: in any order, 0 for an empty slot (what a run over several processes records,
    docs/distributed.md: no process holds every label)."""
    counts = np.asarray(counts, np.int64)
    n = counts.sum(axis=-1, keepdims=True)
    share = counts / n
    entropy = -np.sum(np.where(counts > 0, share * np.log(np.where(counts > 0, share, 1.0)), 0.0), axis=-1)
    sizes = -np.sort(-counts, axis=-1)[..., :max(int(np.count_nonzero(counts, axis=-1).max(initial=0)), 1)]
    return {"num_clusters": np.count_nonzero(counts, axis=-1).astype(np.int32),
            "largest_cluster": sizes[..., 0].astype(np.int32),
            "cluster_sizes": sizes.astype(np.int32),
            "entropy": entropy}
