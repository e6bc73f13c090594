"""Association (co-clustering) matrices across runs: the convergence check of Porteous et
al. (2006, sec. 6, Fig. 5).

The association matrix of one draw has entry (i, j) equal to 1 when points i and j share a
label; it is invariant to relabelling, so it measures the clustering while the labels
themselves switch. Averaged over a run's draws it estimates P(z_i = z_j | x)
([`dpppl.coclustering`][dpppl.coclustering]). Runs from different starting points that mix well agree
on it; the element-wise variance of the mean association matrices across runs is
therefore small for a sampler that mixes and large for one stuck in different local
modes in different runs (the paper's Fig. 5 histogram).
"""

from __future__ import annotations

import numpy as np

from dpppl.analysis.partitions import coclustering
from dpppl.errors import ArgumentError


def association_variance(runs) -> np.ndarray:
    """Element-wise variance across runs of the mean association matrices.

    Parameters
    ----------
    runs : sequence of InferenceData or label arrays (S, N) / (chains, draws, N)
        At least two runs on the same points.

    Returns
    -------
    ndarray (N, N)
        Var_r[P_r(z_i = z_j)] with P_r the co-clustering matrix of run r (population
        variance, ddof 0, as a spread of the runs' estimates). The paper histograms
        the entries above the diagonal.
    """
    mats = [coclustering(run) for run in runs]
    if len(mats) < 2:
        raise ArgumentError(f"association_variance needs at least two runs, got {len(mats)}")
    if len({m.shape for m in mats}) != 1:
        raise ArgumentError(f"the runs cover different numbers of points: {sorted({m.shape[0] for m in mats})}")
    return np.var(np.stack(mats), axis=0)


def upper_entries(matrix) -> np.ndarray:
    """The entries above the diagonal of a square matrix (one per pair of points)."""
    matrix = np.asarray(matrix)
    return matrix[np.triu_indices(matrix.shape[0], k=1)]


__all__ = ["association_variance", "upper_entries"]
