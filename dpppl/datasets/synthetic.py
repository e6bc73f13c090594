"""Seeded synthetic data: [`gaussian_mixture`][dpppl.datasets.synthetic.gaussian_mixture] (the benchmark workloads
W1-W3),
[`moving_blobs`][dpppl.datasets.synthetic.moving_blobs] (time-indexed blobs for DDP models) and
[`mallows_mixture`][dpppl.datasets.synthetic.mallows_mixture]
(the top-t rankings of Meilă & Chen 2010, Fig. 6). The same arguments give the same draws.
"""

from __future__ import annotations

from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.config import in_x64
from dpppl.errors import DataError
from dpppl.families.generalized_mallows import GeneralizedMallows
from dpppl.families.mallows_draws import sigma_adjacent_swaps, sigma_mh
from dpppl.models.rankings import rankings

__all__ = ["gaussian_mixture", "mallows_mixture", "moving_blobs"]


def gaussian_mixture(n: int, dim: int, num_clusters: int, *, mean_scale: float,
                     covariance: str = "identity", weights: Optional[Sequence[float]] = None,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draw points from a finite Gaussian mixture with a seeded NumPy `Generator`.

    Cluster means are drawn `mu_k ~ N(0, mean_scale * I)`. Cluster `k` receives
    `n * w_k` points rounded by the largest-remainder rule (ties to the lower index),
    so the counts sum to `n` and are the same for every seed; a cluster whose share
    rounds to zero is empty. The labels are then shuffled, so the points come in random
    order.

    Parameters
    ----------
    n : int
        Number of points, at least 1.
    dim : int
        Dimension of each point, at least 1.
    num_clusters : int
        Number of mixture components, at least 1.
    mean_scale : float
        Variance of each coordinate of a cluster mean (the prior covariance of the means
        is `mean_scale * I`), at least 0. `mean_scale=2` gives `N(0, 2 I)`.
    covariance : {"identity", "random"}
        `"identity"`: every cluster has covariance `I`. `"random"`: cluster `k`
        has covariance `Q_k diag(s_k)^2 Q_k^T` with `Q_k` a uniformly random rotation
        and standard deviations `s_k` along its axes uniform on `[0.25, 1]`.
    weights : sequence of float, optional
        Mixture weights, `num_clusters` non-negative values (normalised here); equal
        weights by default.
    seed : int
        Seed of `numpy.random.default_rng`; the same arguments give the same
        draws.

    Returns
    -------
    x : numpy.ndarray of float64, shape (n, dim)
        The points.
    labels : numpy.ndarray of int64, shape (n,)
        The component of each point, in `0 .. num_clusters - 1`.

    Raises
    ------
    dpppl.errors.DataError
        For a size below 1, a negative or non-finite `mean_scale`, an unknown
        `covariance`, or weights of the wrong length, negative, or summing to 0.
    """
    for arg, value in (("n", n), ("dim", dim), ("num_clusters", num_clusters)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise DataError(f"gaussian_mixture: {arg} must be an integer >= 1, got {value!r}")
    if not np.isfinite(mean_scale) or mean_scale < 0:
        raise DataError(f"gaussian_mixture: mean_scale must be finite and >= 0, got {mean_scale!r}")
    if covariance not in ("identity", "random"):
        raise DataError(
            f"gaussian_mixture: covariance must be 'identity' or 'random', got {covariance!r}")
    if weights is None:
        w = np.full(num_clusters, 1.0 / num_clusters)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != (num_clusters,):
            raise DataError(
                f"gaussian_mixture: weights must have {num_clusters} values, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise DataError("gaussian_mixture: weights must be finite, non-negative and not all 0")
        w = w / w.sum()

    exact = n * w
    counts = np.floor(exact).astype(np.int64)
    short = n - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1

    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, np.sqrt(mean_scale), size=(num_clusters, dim))
    if covariance == "random":
        rotations = np.empty((num_clusters, dim, dim))
        for k in range(num_clusters):
            q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
            rotations[k] = q * np.sign(np.diag(r))
        axis_sd = rng.uniform(0.25, 1.0, size=(num_clusters, dim))
        factors = rotations * axis_sd[:, None, :]  # Q_k diag(s_k): factors @ factors.T = cov
    labels = rng.permutation(np.repeat(np.arange(num_clusters, dtype=np.int64), counts))
    noise = rng.standard_normal((n, dim))
    if covariance == "identity":
        return means[labels] + noise, labels
    x = means[labels]
    for k in range(num_clusters):
        members = labels == k
        x[members] += noise[members] @ factors[k].T
    return x, labels

def moving_blobs(num_slices: int = 10, num_clusters: int = 4, points_per_blob: int = 25, *,
                 speed: float = 0.03, spread: float = 0.02, seed: int = 0):
    """Seeded Gaussian blobs drifting in the unit square over time slices (for DDP models).

    Blob k starts at a uniform point of [0.2, 0.8]^2 and moves by a velocity drawn from
    N(0, speed^2 I) per slice; in every slice t = 0..num_slices-1 it emits
    `points_per_blob` points N(centre_k(t), spread^2 I).

    Returns
    -------
    x : ndarray (N, 3)
        Coordinates in the first two columns, the slice t (a float) in the last: the
        one-array form of time-indexed data (`dpppl.models.ddp`).
    labels : ndarray (N,) of int64
        The blob of every point.
    """
    for name, value in (("num_slices", num_slices), ("num_clusters", num_clusters),
                        ("points_per_blob", points_per_blob)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise DataError(f"moving_blobs: {name} must be an integer >= 1, got {value!r}")
    rng = np.random.default_rng(seed)
    start = rng.uniform(0.2, 0.8, (num_clusters, 2))
    velocity = rng.normal(0.0, speed, (num_clusters, 2))
    t = np.repeat(np.arange(num_slices), num_clusters * points_per_blob)
    labels = np.tile(np.repeat(np.arange(num_clusters), points_per_blob), num_slices)
    centre = start[labels] + velocity[labels] * t[:, None]
    x = centre + spread * rng.normal(size=centre.shape)
    return np.column_stack([x, t.astype(float)]), labels.astype(np.int64)


FIG6_DATASETS = {1: (20, 10, "constant"), 2: (20, 19, "constant"), 3: (20, 10, "decreasing"),
                 4: (20, 19, "decreasing")}
"""Meilă & Chen (2010, sec. 6): data set -> (n, t, theta*): theta*_i = 1 (constant) or
1.5 - (i - 1) 0.1 for t = 10, 1.5 - (i - 1) 0.05 for t = 19 (decreasing)."""


@in_x64
def mallows_mixture(dataset: int = 1, *, num_clusters: int = 10, per_cluster: int = 500,
                    center_theta: float = 0.7, center_sample: int = 100, seed: int = 0):
    """Top-t rankings from a mixture of Generalized Mallows models: the synthetic data of
    Meilă & Chen (2010, sec. 6, Fig. 6).

    `num_clusters` clusters of `per_cluster` rankings (default 10 x 500, N = 5000) of n = 20
    items, all of length t (10 or 19), with dispersions theta* of `FIG6_DATASETS`.
    Centres, as the paper describes them: "each sigma* is drawn from the conjugate posterior
    of sigma, conditioned on 100 permutations drawn randomly from a GM with theta = 0.7". The
    text does not say around which permutation that GM is centred; here each cluster uses
    its own uniformly random one, sigma_0k: `center_sample` full permutations are drawn from
    GM(sigma_0k, `center_theta`) and sigma*_k from p(sigma | theta = `center_theta`, those
    permutations) by 50 exact Metropolis-Hastings rounds (`dpppl.families.mallows_draws.sigma_mh`
    and adjacent swaps) started at sigma_0k. (Centring every cluster's GM at one common
    permutation instead makes the centres so close that even the Bayes classifier with the
    true parameters is at VI 0.3 from the truth, against the paper's 1e-3.)

    Returns
    -------
    rankings : dpppl.Rankings
        Items named `"0"`..`"19"`; rows in random order.
    labels : ndarray of int64 (N,)
        The true cluster of each ranking.
    centers : ndarray (num_clusters, n)
        sigma*_k as the item at each rank.
    theta : ndarray (n - 1,)
        theta* (the same for every cluster).
    """
    if dataset not in FIG6_DATASETS:
        raise DataError(f"mallows_mixture: dataset must be one of {sorted(FIG6_DATASETS)}, got {dataset!r}")
    n, t, kind = FIG6_DATASETS[dataset]
    step = 0.1 if t == 10 else 0.05
    theta = np.ones(n - 1) if kind == "constant" else np.maximum(1.5 - np.arange(n - 1) * step, 0.05)
    theta[t:] = 1.0  # stages past t are never used
    fam = GeneralizedMallows(n).resolve(np.zeros((1, n)))
    k_start, k_sample, k_mh, k_points = jax.random.split(jax.random.key(seed), 4)
    start = jax.vmap(lambda k: jax.random.permutation(k, n).astype(jnp.int32))(jax.random.split(k_start, num_clusters))
    ref = {"pos": start, "theta": jnp.full((num_clusters, n - 1), float(center_theta))}
    sample = fam.sample_points(k_sample, ref, jnp.repeat(jnp.arange(num_clusters), center_sample))
    R = fam.point_stats(sample).R.reshape((num_clusters, center_sample, n - 1, n, n)).sum(axis=1)
    W = float(center_theta) * R.sum(axis=1)                                   # (K, n, n)

    def center(key, pos, w):
        def body(i, pos):
            k1, k2 = jax.random.split(jax.random.fold_in(key, i))
            return sigma_adjacent_swaps(k2, sigma_mh(k1, pos, w)[0], w)
        return jax.lax.fori_loop(0, 50, body, pos)

    pos = jax.jit(jax.vmap(center))(jax.random.split(k_mh, num_clusters), start, W)
    centers = np.asarray(jnp.argsort(pos, axis=1)).astype(int)
    labels = np.repeat(np.arange(num_clusters), per_cluster)
    labels = labels[np.random.default_rng(seed).permutation(labels.size)]
    params = {"pos": pos, "theta": jnp.broadcast_to(jnp.asarray(theta), (num_clusters, n - 1))}
    x = np.asarray(fam.sample_points(k_points, params, jnp.asarray(labels), lengths=t))
    return rankings(x), labels.astype(np.int64), centers, theta
