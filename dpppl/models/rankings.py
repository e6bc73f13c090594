"""Top-t ranking data: reading, checking and the padded array layout.

A data set of N top-t rankings of n items is held as an (N, n) array of item indices
0..n-1: row i lists pi_i(1), ..., pi_i(t_i), most preferred first, then -1 in the
remaining n - t_i positions (t_i >= 1 may differ between rows). Like every dpppl data set
it is stored as float64 (the indices are exact). [`rankings`][dpppl.models.rankings.rankings] builds it from

- an integer (or integral float) array in that layout, or
- a list of lists of item indices (ints) or item names (strings), of any lengths, with
  `items=` naming the n items in index order (default for names: the sorted set of
  names seen; for indices: `range(n_items)`).

Bad rows (an empty ranking, a repeated item, an unknown item or index, t > n, an entry
after the -1 padding) raise [`DataError`][dpppl.errors.DataError] naming the row.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from dpppl.errors import DataError
from dpppl.families.generalized_mallows import check_ranking_array


@dataclasses.dataclass(frozen=True)
class Rankings:
    """Top-t rankings in the padded layout, with the item names.

    Attributes
    ----------
    x : ndarray (N, n) float
        Item indices, -1 after position t_i.
    items : tuple of str
        Name of each item index.
    """

    x: np.ndarray
    items: tuple

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def lengths(self) -> np.ndarray:
        """t_i of every ranking."""
        return (self.x >= 0).sum(axis=1)

    def names(self, row) -> list:
        """The item names of one padded row (an index sequence; -1 entries dropped)."""
        return [self.items[int(i)] for i in np.asarray(row) if i >= 0]

    def __len__(self) -> int:
        return self.x.shape[0]

    def __array__(self, dtype=None, copy=None):
        return self.x if dtype is None else self.x.astype(dtype)


def _is_name(v) -> bool:
    return isinstance(v, str)


def rankings(data, items: Optional[Sequence] = None, n_items: Optional[int] = None,
             name: str = "x") -> Rankings:
    """Read top-t rankings (see the module docstring) into a [`Rankings`][dpppl.models.rankings.Rankings].

    Parameters
    ----------
    data : array (N, n) or sequence of sequences of item indices or names, or Rankings
    items : sequence of str, optional
        The item names in index order (their number is n).
    n_items : int, optional
        n when neither `items` nor the array width gives it (lists of indices).
    name : str
        The data's name, for error messages.
    """
    if isinstance(data, Rankings):
        if items is not None and tuple(items) != data.items:
            raise DataError(f"data '{name}': items= differs from the items of the Rankings given")
        return _checked(data.x, data.items, name)
    if items is not None:
        items = tuple(str(v) for v in items)
        if len(set(items)) != len(items):
            raise DataError(f"data '{name}': items= lists an item twice")
        if n_items is not None and n_items != len(items):
            raise DataError(f"data '{name}': {len(items)} items named but n_items = {n_items}")
    if isinstance(data, np.ndarray) and data.dtype != object:
        arr = data
    else:
        try:
            rows = list(data)
        except TypeError:  # a number, None, ...
            raise DataError(f"data '{name}': rankings must be a sequence of rankings (sequences of items) or a "
                            f"2-D array, got {type(data).__name__}") from None
        if any(isinstance(v, (str, bytes)) or np.ndim(v) == 0 for v in rows):
            raise DataError(f"data '{name}': each ranking must be a sequence of items")
        rows = [list(np.asarray(r).tolist()) if isinstance(r, np.ndarray) else list(r) for r in rows]
        if any(_is_name(v) for r in rows for v in r):
            if items is None:
                items = tuple(sorted({str(v) for r in rows for v in r}))
            index = {v: k for k, v in enumerate(items)}
            out = []
            for i, r in enumerate(rows):
                unknown = [v for v in r if str(v) not in index]
                if unknown:
                    raise DataError(f"data '{name}': ranking {i} has an unknown item {unknown[0]!r} "
                                    f"(items: {', '.join(items[:8])}{', ...' if len(items) > 8 else ''})")
                out.append([index[str(v)] for v in r])
            rows = out
        width = max([len(r) for r in rows] + [0])
        n = len(items) if items is not None else (n_items if n_items is not None else width)
        if n == 0 or not rows:
            raise DataError(f"data '{name}' is empty (0 rankings)")
        for i, r in enumerate(rows):
            if len(r) > n:
                raise DataError(f"data '{name}': ranking {i} lists {len(r)} items but there are only {n}")
        arr = np.full((len(rows), n), -1.0)
        for i, r in enumerate(rows):
            try:
                arr[i, : len(r)] = np.asarray(r, dtype=float)
            except (TypeError, ValueError):
                raise DataError(f"data '{name}': ranking {i} holds a value that is not an item "
                                f"index or name: {r!r}") from None
    arr = np.asarray(arr)
    if arr.ndim != 2:
        raise DataError(f"data '{name}': rankings must be a 2-D array (rankings x positions), "
                        f"got shape {arr.shape}")
    n = len(items) if items is not None else (n_items if n_items is not None else arr.shape[1])
    if arr.shape[1] > n:
        raise DataError(f"data '{name}': {arr.shape[1]} columns but only {n} items")
    if arr.shape[1] < n:
        arr = np.concatenate([arr, np.full((arr.shape[0], n - arr.shape[1]), -1.0)], axis=1)
    if items is None:
        items = tuple(str(k) for k in range(n))
    return _checked(arr, items, name)


def _checked(arr, items, name) -> Rankings:
    return Rankings(check_ranking_array(arr, len(items), name), tuple(items))


__all__ = ["Rankings", "rankings"]
