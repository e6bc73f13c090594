"""Co-clustering and point estimates of the clustering from posterior draws.

The posterior similarity (co-clustering) matrix is p_ij = P(z_i = z_j | x), estimated
by the share of draws in which points i and j share a cluster. A point estimate is one
partition c that summarises the posterior; with a loss L(c, C) it is the minimiser of
the posterior expected loss E[L(c, C) | x], estimated by the average over draws.

* `"best"`: the sampled partition of highest log joint log p(x, z) (`lp`).
* `"dahl"`: Dahl's (2006) least-squares clustering: the sampled partition minimising
  sum_ij (delta_ij(c) - p_ij)^2 with delta_ij(c) = 1[c_i = c_j] (eq. 2 there),
  equivalently Binder's loss with equal costs, restricted to the draws.
* `"vi"`: a partition minimising the posterior expected variation of information
  (Wade & Ghahramani 2018, sec. 4), found by the SALSO greedy search of Dahl, Johnson &
  Müller (2022) over *all* partitions, not only the sampled ones. With the contingency
  counts n_kl between c and a draw C, VI(c, C) = (1/N) [sum_k f(n_k.) + sum_l f(n_.l)
  - 2 sum_kl f(n_kl)] with f(m) = m log m (nats). Equivalently VI(c, C) = (1/N) sum_i
  [log |c_i| + log |C_i| - 2 log |c_i ∩ C_i|], with c_i the cluster of point i. The
  loss is either the exact expected VI over the draws (`loss="vi"`) or Wade &
  Ghahramani's "lower bound" (2018, sec. 4; `VI.lb` of their R package mcclust.ext,
  here in nats), which swaps expectation and logarithm and so needs only the similarity
  matrix (`loss="vi_lb"`):

      VI_LB(c) = (1/N) sum_i [ log |c_i| + log sum_j p_ij - 2 log sum_{j in c_i} p_ij ].

  By Jensen's inequality E log |c_i ∩ C_i| <= log sum_{j in c_i} p_ij, so VI_LB plus the
  constant (1/N) sum_i (E log |C_i| - log sum_j p_ij) <= 0 bounds E[VI] from below;
  VI_LB itself need not (the constant is swapped too, which does not move the minimiser
  of the bound).

The search (Dahl et al. 2022, sec. 4; `dpppl.analysis.salso_search`): each of
`num_runs` runs (1) *allocates* the points one at a time in a random order, each to the
existing or a new cluster that minimises the expected loss of the points allocated so
far; (2) *sweetens*: visits the points in random orders, moving each to the cluster (or a
new one) that minimises the expected loss, until a sweep changes nothing; (3) makes
*zealous updates*: in random order, dissolves up to `max_zealous` clusters, reallocates
each one's points sequentially and keeps the result only if the expected loss fell
(sweetening again after). The best partition over runs is returned. Each placement needs
the change of the loss when one point joins each cluster, which both losses give in
closed form from running tables: for the exact VI the per-draw contingency counts n_kl
(S x K_draws x K integers, O(S K) per placement, O(S) per move; the N x N similarity
matrix is never formed), for the lower bound sums of the similarity matrix (O(N)).

The similarity matrix itself is formed for at most `MAX_COCLUSTERING_POINTS` points
(5,000: 0.2 GiB); `coclustering`, `"dahl"` and `loss="vi_lb"` refuse more with a
DataError, while `method="vi"` with the exact loss works at any N.

References
----------
D. B. Dahl, "Model-based clustering for expression data via a Dirichlet process mixture
model", in Bayesian Inference for Gene Expression and Proteomics, 2006.
S. Wade and Z. Ghahramani, "Bayesian cluster analysis: point estimation and credible
balls", Bayesian Analysis 13(2), 2018.
D. B. Dahl, D. J. Johnson and P. Müller, "Search algorithms and loss functions for
Bayesian clustering", J. Comput. Graph. Statist. 31(4), 2022.
"""

from __future__ import annotations

import numpy as np

from dpppl.diagnostics.arviz_compat import group as get_group
from dpppl.diagnostics.arviz_compat import labels
from dpppl.errors import ArgumentError, DataError
from dpppl.core.state import canonical_labels
from dpppl.diagnostics.summaries import as_label_array, compact_labels
from dpppl.analysis.salso_search import search, size_class

METHODS = ("vi", "dahl", "best")
LOSSES = ("vi", "vi_lb")
_BLOCK_ENTRIES = 2**24  # pairs (i, j) per block of draws in co-clustering and Dahl
#: The most points whose N x N co-clustering matrix dpppl forms (float64: 0.2 GiB at 5,000,
#: with as much again while counting); the exact-VI search never forms it.
MAX_COCLUSTERING_POINTS = 5000


# ------------------------------------------------------------------------- draws ---
def posterior_draws(source) -> np.ndarray:
    """Sampled partitions as an (S, N) integer array.

    `source` is InferenceData (the labels `z` of its `posterior_partition` group, or of
    `prior_partition` for a prior simulation; chains are pooled) or an array of labels of
    shape (S, N) or (chains, draws, N).
    """
    z = labels(source) if is_inference_data(source) else source
    z = as_label_array(z)
    if z.ndim == 1:
        raise DataError(f"posterior draws must have shape (draws, points) or (chains, draws, points), "
                        f"got one partition of shape {z.shape}")
    return z.reshape(-1, z.shape[-1])


def is_inference_data(source) -> bool:
    """Whether `source` is ArviZ InferenceData (0.x) or a DataTree (1.x)."""
    return hasattr(source, "groups") or hasattr(source, "children")


def run_variable(idata, name, group="posterior") -> np.ndarray:
    """Variable `name` of `group` as an array; DataError naming what is missing."""
    try:
        ds = get_group(idata, group)
    except (KeyError, AttributeError):
        raise DataError(f"the InferenceData has no '{group}' group") from None
    if name not in ds:
        raise DataError(f"the InferenceData has no '{name}' in its '{group}' group")
    return np.asarray(ds[name])


def _same_cluster_blocks(draws):
    """Yield boolean blocks (rows, N, N): delta_ij = 1[z_i = z_j] of chunks of draws."""
    s, n = draws.shape
    step = max(1, _BLOCK_ENTRIES // (n * n))
    for start in range(0, s, step):
        block = draws[start:start + step]
        yield block[:, :, None] == block[:, None, :]


def coclustering(source) -> np.ndarray:
    """Posterior similarity matrix p_ij = P(z_i = z_j | x), estimated from the draws.

    Parameters
    ----------
    source : InferenceData or array_like of int, shape (S, N) or (chains, draws, N)

    Returns
    -------
    ndarray (N, N)
        Symmetric, unit diagonal: the share of draws in which points i and j share a
        cluster. Cost O(S N^2), in blocks of draws; a DataError above
        `MAX_COCLUSTERING_POINTS` points.
    """
    draws = posterior_draws(source)
    n = draws.shape[1]
    if n > MAX_COCLUSTERING_POINTS:
        raise DataError(f"the co-clustering matrix of {n} points would hold {n}^2 = {n * n:,} entries "
                        f"({n * n * 8 / 2**30:.1f} GiB); dpppl forms it for at most MAX_COCLUSTERING_POINTS = "
                        f"{MAX_COCLUSTERING_POINTS} points (it is needed by method='dahl', loss='vi_lb' and "
                        "plot_coclustering); point_estimate(..., method='vi') with loss='vi', the default, needs "
                        "no such matrix")
    together = np.zeros((n, n), np.int64)
    for same in _same_cluster_blocks(draws):
        together += same.sum(axis=0)
    return together / draws.shape[0]


# ------------------------------------------------------------------------ losses ---
def _xlogx(m):
    m = np.asarray(m, dtype=float)
    return np.where(m > 0, m * np.log(np.where(m > 0, m, 1.0)), 0.0)


def expected_vi(estimate, draws) -> float:
    """Posterior expected variation of information E[VI(c, C)], the mean over draws.

    Parameters
    ----------
    estimate : array_like of int (N,)
    draws : InferenceData or labels (S, N) / (chains, draws, N)
    """
    c, _ = compact_labels(_one_partition(estimate))
    labels, counts = compact_labels(posterior_draws(draws))
    _check_points(c, labels)
    s, n = labels.shape
    k, kd = int(c.max()) + 1, counts.shape[1]
    codes = np.arange(s, dtype=np.int64)[:, None] * (k * kd) + c[None, :] * kd + labels
    # the n_kl of every draw: counted in a dense array where it is small, else by sorting
    cells = np.bincount(codes.ravel()) if s * k * kd <= 2**26 else np.unique(codes, return_counts=True)[1]
    joint = _xlogx(cells).sum() / s
    return float((_xlogx(np.bincount(c)).sum() + _xlogx(counts).sum() / s - 2 * joint) / n)


def vi_lower_bound(estimate, psm) -> float:
    """Wade & Ghahramani's (2018) "lower bound" VI_LB of the expected VI, from the
    similarity matrix `psm` (N, N), in nats (see the module docstring)."""
    c, _ = compact_labels(_one_partition(estimate))
    psm = np.asarray(psm, dtype=float)
    if psm.shape != (c.size, c.size):
        raise DataError(f"psm must have shape ({c.size}, {c.size}), got {psm.shape}")
    same = c[:, None] == c[None, :]
    size = same.sum(axis=1)
    return float(np.mean(np.log(size) + np.log(psm.sum(axis=1)) - 2 * np.log((psm * same).sum(axis=1))))


def least_squares_loss(estimate, psm) -> float:
    """Dahl's (2006) criterion sum_ij (delta_ij(c) - p_ij)^2 over all ordered pairs."""
    c, _ = compact_labels(_one_partition(estimate))
    psm = np.asarray(psm, dtype=float)
    return float(np.sum(((c[:, None] == c[None, :]) - psm) ** 2))


def _one_partition(labels) -> np.ndarray:
    labels = as_label_array(labels)
    if labels.ndim != 1:
        raise DataError(f"a clustering must be one label per point (shape (N,)), got shape {labels.shape}")
    return labels


def _check_points(c, draws):
    if draws.shape[1] != c.size:
        raise DataError(f"the clustering has {c.size} points but the draws have {draws.shape[1]}")


# ------------------------------------------------------------------------ search ---
def _vi_problem(labels, counts):
    """The exact expected VI's data and empty tables for `salso_search.search` (padded to size
    classes), and N E[VI] minus the search's value: the draws' own entropy terms."""
    s, n = labels.shape
    n_pad, s_pad, kd = size_class(n), size_class(s), size_class(counts.shape[1], 1)
    rows = np.zeros((n_pad, s_pad), np.int32)
    rows[:, :] = np.arange(s_pad, dtype=np.int32) * kd
    rows[:n, :s] += labels.T.astype(np.int32)
    weights = np.where(np.arange(s_pad) < s, 1.0 / s, 0.0)
    capacity = size_class(min(counts.shape[1] + 1, 16))  # the search doubles it when it runs out
    tables = (np.zeros((s_pad * kd, capacity), np.int32), np.zeros((s_pad * kd, capacity)))
    return (rows, weights, _gains(n_pad)), tables, _xlogx(counts).sum() / s


def _vi_lb_problem(psm):
    """The lower bound's data and empty tables for `salso_search.search`, and N VI_LB minus the
    search's value: sum_i log sum_j p_ij."""
    n = psm.shape[0]
    n_pad = size_class(n)
    padded = np.zeros((n_pad, n_pad))
    padded[:n, :n] = psm
    return (padded, _gains(n_pad)), (np.zeros((n_pad, size_class(min(n, 16)))),), float(np.log(psm.sum(axis=1)).sum())


def _gains(n):
    """g(m) = f(m + 1) - f(m), f(m) = m log m, for m = 0..n + 1."""
    return _xlogx(np.arange(1, n + 3)) - _xlogx(np.arange(n + 2))


def salso(draws=None, *, psm=None, loss="vi", num_runs=16, max_sweeps=50, max_zealous=10, max_draws=1000,
          seed=0):
    """A partition minimising a posterior expected loss by the SALSO greedy search.

    Sequential allocation, sweetening and zealous updates (Dahl, Johnson & Müller 2022;
    the module docstring and `dpppl.analysis.salso_search`), compiled once per size class.

    Parameters
    ----------
    draws : InferenceData or labels (S, N) / (chains, draws, N), optional
        Posterior draws; needed for `loss="vi"`.
    psm : ndarray (N, N), optional
        The similarity matrix for `loss="vi_lb"` (computed from `draws` if omitted, up
        to `MAX_COCLUSTERING_POINTS` points).
    loss : {"vi", "vi_lb"}
        Exact expected VI over the draws (from per-draw contingency tables, O(S N) memory,
        no N x N matrix), or Wade & Ghahramani's lower bound.
    num_runs : int
        Runs from independent random orders, on two threads; the best is kept (R's
        salso: 16).
    max_sweeps : int
        Cap on sweetening sweeps per pass.
    max_zealous : int
        Most zealous updates (clusters dissolved and reallocated) per run (R's salso: 10).
    max_draws : int or None
        For `loss="vi"`: at most this many draws, evenly spaced, enter the search and
        the reported loss (the cost is O(S K) per placement); None uses all.
    seed : int

    Returns
    -------
    labels : ndarray of int32 (N,)
        Clusters numbered 0, 1, ... in order of first appearance.
    loss : float
        Its expected loss (VI in nats, or the lower bound).
    """
    if loss not in LOSSES:
        raise ArgumentError(f"loss must be one of {LOSSES}, got {loss!r}")
    for name, value in (("num_runs", num_runs), ("max_sweeps", max_sweeps)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ArgumentError(f"salso: {name} must be a positive integer, got {value!r}")
    if isinstance(max_zealous, bool) or not isinstance(max_zealous, (int, np.integer)) or max_zealous < 0:
        raise ArgumentError(f"salso: max_zealous must be a non-negative integer, got {max_zealous!r}")
    if loss == "vi":
        if draws is None:
            raise ArgumentError("loss='vi' needs the posterior draws")
        labels = posterior_draws(draws)
        if max_draws is not None and labels.shape[0] > max_draws:
            labels = labels[np.linspace(0, labels.shape[0] - 1, max_draws).round().astype(int)]
        data, tables, constant = _vi_problem(*compact_labels(labels))
        n = labels.shape[1]
    else:
        psm = coclustering(draws) if psm is None else np.asarray(psm, dtype=float)
        if psm.ndim != 2 or psm.shape[0] != psm.shape[1]:
            raise DataError(f"psm must be a square matrix, got shape {psm.shape}")
        data, tables, constant = _vi_lb_problem(psm)
        n = psm.shape[0]
    best, value = search(loss, data, tables, n, num_runs=int(num_runs),
                         max_sweeps=int(max_sweeps), max_zealous=int(max_zealous), seed=seed)
    return canonical_labels(best[:n]), float((value + constant) / n)


# ---------------------------------------------------------------- point estimate ---
def point_estimate(source, method: str = "vi", *, loss: str = "vi", num_runs: int = 16,
                   max_draws: int | None = 1000, seed: int = 0) -> np.ndarray:
    """One clustering that summarises the posterior.

    Parameters
    ----------
    source : InferenceData, or labels (S, N) / (chains, draws, N)
        Posterior draws (`method="best"` needs InferenceData, for its `lp`).
    method : {"vi", "dahl", "best"}
        `"vi"`: minimise the expected variation of information by the SALSO search
        ([`salso`][dpppl.analysis.partitions.salso]); `"dahl"`: Dahl's least-squares draw; `"best"` (alias
        `"map"`): the draw of highest log joint. See the module docstring.
    loss : {"vi", "vi_lb"}
        For `method="vi"`: the exact expected VI over the draws or its lower bound.
    num_runs, max_draws, seed
        For `method="vi"`: search runs, the most draws the exact loss uses (evenly
        spaced), and the seed of the runs' random orders (see [`salso`][dpppl.analysis.partitions.salso]).

    Returns
    -------
    ndarray of int32 (N,)
        Cluster labels 0, 1, ... in order of first appearance.
    """
    if method == "map":
        method = "best"
    if method not in METHODS:
        raise ArgumentError(f"method must be one of {METHODS} (or 'map'), got {method!r}")
    if method == "vi":
        return salso(source, loss=loss, num_runs=num_runs, max_draws=max_draws, seed=seed)[0]
    if method == "best":
        if not is_inference_data(source):
            raise DataError("method='best' needs InferenceData (it reads sample_stats.lp)")
        lp = run_variable(source, "lp", group="sample_stats").reshape(-1)
        return canonical_labels(posterior_draws(source)[int(np.argmax(lp))])
    return canonical_labels(dahl(source)[0])


def dahl(source) -> tuple[np.ndarray, float]:
    """Dahl's (2006) least-squares clustering among the draws, and its criterion value.

    sum_ij (delta_ij - p_ij)^2 = sum_ij delta_ij (1 - 2 p_ij) + sum_ij p_ij^2, and the
    first sum is evaluated for every draw in blocks of draws, O(S N^2).
    """
    draws = posterior_draws(source)
    psm = coclustering(draws)
    weight = 1.0 - 2.0 * psm
    scores = np.concatenate([np.einsum("sij,ij->s", same, weight) for same in _same_cluster_blocks(draws)])
    scores = scores + np.sum(psm ** 2)
    best = int(np.argmin(scores))
    return draws[best], float(scores[best])


__all__ = ["coclustering", "dahl", "expected_vi", "least_squares_loss", "point_estimate",
           "posterior_draws", "salso", "vi_lower_bound"]
