"""File readers: [`read_data`][dpppl.datasets.files.read_data] reads a data array from a `.csv`/`.tsv`/`.txt`,
`.npy` or `.npz` file, or loads a data set by name (what the command line's `--data`
takes); `read_rankings` reads rankings, as item indices or as lines of item names.
"""

from __future__ import annotations

import codecs
import csv
import math
import os
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from dpppl.datasets.bundled import _did_you_mean, available, load
from dpppl.errors import DataError
from dpppl.models.rankings import Rankings, rankings

__all__ = ["read_data", "read_rankings"]

_TEXT_SUFFIXES = (".csv", ".tsv", ".txt")


def read_data(path_or_name: str | os.PathLike) -> np.ndarray:
    """Read a data array from a file, or load a named data set.

    Parameters
    ----------
    path_or_name : str or path-like
        An existing file, read by its extension (case-insensitive):

        - `.csv`, `.tsv`, `.txt`: delimited text, one point per line, read by Python's
          `csv` module. The delimiter is the first of comma, semicolon and tab that
          splits the first non-blank line into several fields, else runs of spaces and
          tabs. A field in double quotes may hold the delimiter (`"1,5",2` is two
          fields, the first of which is then not a number). The first line is a header
          when none of its cells is a number. Blank lines and lines starting with `#`
          are skipped; a UTF-8 byte-order mark is dropped (UTF-16 with its mark is read
          too). Returns float64 of shape (N, D).
        - `.npy`: the array as stored.
        - `.npz`: its single array, else the array named `x`, else `data`.

        Values must be finite (no NaN or infinity).

        Otherwise a name from [`available`][dpppl.datasets.files.available] (a bare word with no extension), whose
        points [`load`][dpppl.datasets.files.load] returns with default options.

    Returns
    -------
    numpy.ndarray
        The numeric array: (N, D) from text files, as stored from NumPy files.

    Raises
    ------
    dpppl.errors.DataError
        For a missing file, a directory, an unknown extension, an unknown name (with the
        closest names), a cell that is not a finite number, rows of
        different lengths, a file with no data rows, an `.npz` with several arrays and
        none named `x` or `data` (listing its keys), an unreadable or non-numeric
        NumPy array.

        Errors about a value say where it is as every data error does: `row r, column c`
        count from 0 (the index `x[r, c]` of the array), and a text file's errors start
        with the file and its line (from 1, as an editor shows it), e.g.
        `points.csv, line 3: non-finite value (nan) at row 1, column 0 (a)`.
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
    names = available()
    if text.lower() not in names:
        raise DataError(f"no file and no data set named {text!r}{_did_you_mean(text)}. "
                        f"Data sets: {', '.join(names)}")
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
    bad = ~np.isfinite(arr)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = ", ".join(f"{axis} {i}" for axis, i in zip(("row", "column"), index)) if arr.ndim <= 2 \
            else f"index {index}"
        raise DataError(f"{path}: non-finite value ({arr[index]}) at {where} ({int(bad.sum())} in all)")
    return arr


def _read_text(path: Path) -> np.ndarray:
    header: Optional[list[str]] = None
    first_line = 0
    rows: list[list[float]] = []
    for number, cells in _records(path):
        if not first_line:
            first_line = number
            if not any(_is_number(c) for c in cells):
                header = cells
                continue
        width = len(header) if header is not None else (len(rows[0]) if rows else len(cells))
        if len(cells) != width:
            raise DataError(f"{path}, line {number}: row {len(rows)} has {len(cells)} values, but line "
                            f"{first_line} has {width}")
        try:
            values = [float(c) for c in cells]
        except ValueError:
            col = next(j for j, c in enumerate(cells) if not _is_number(c))
            what = repr(cells[col]) if cells[col] else "an empty cell"
            raise DataError(f"{path}, line {number}: {what} at {_cell(len(rows), col, header)} is not a "
                            "number") from None
        bad = [j for j, v in enumerate(values) if not math.isfinite(v)]
        if bad:
            raise DataError(f"{path}, line {number}: non-finite value ({cells[bad[0]]}) at "
                            f"{_cell(len(rows), bad[0], header)}")
        rows.append(values)
    if not rows:
        raise DataError(f"{path}: no data rows")
    return np.array(rows, dtype=float)


def _records(path: Path, delimiter: Optional[str] = None) -> Iterator[tuple[int, list[str]]]:
    """The rows of a delimited text file as `(line, cells)`, read by Python's `csv` module: `line` is where the
    row starts (from 1), `cells` its fields with surrounding whitespace removed. Blank lines and lines
    starting with `#` are skipped. A field in double quotes may hold the delimiter, a quote written twice
    (`""`) and line breaks. The delimiter is `delimiter`, or the first of comma, semicolon and tab that
    splits the first row into several fields, else runs of spaces and tabs. UTF-8 (a byte-order mark is
    dropped) or UTF-16 with its byte-order mark. DataError for other encodings and malformed quoting."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-16" if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else "utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not a UTF-8 text file ({e.reason} at byte {e.start})") from None
    kept = [(number, line) for number, line in enumerate(text.splitlines(keepends=True), start=1)
            if line.strip() and not line.lstrip().startswith("#")]
    if not kept:
        return
    if delimiter is None:
        delimiter = next((d for d in (",", ";", "\t") if len(_split(kept[0][1], d)) > 1), " ")
    lines = [line.strip().replace("\t", " ") if delimiter == " " else line for _, line in kept]
    reader = csv.reader(lines, delimiter=delimiter, skipinitialspace=True, strict=True)
    consumed = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise DataError(f"{path}, line {kept[min(reader.line_num, len(kept)) - 1][0]}: cannot read the "
                            f"row (check its double quotes): {e}") from None
        yield kept[consumed][0], [c.strip() for c in cells]
        consumed = reader.line_num


def _split(line: str, delimiter: str) -> list[str]:
    """The fields of one line split at `delimiter` outside double quotes (what `_records` reads it as)."""
    try:
        return next(csv.reader([line], delimiter=delimiter, skipinitialspace=True), [])
    except csv.Error:
        return [line]


def _cell(row: int, col: int, header: Optional[list[str]]) -> str:
    """Where a cell is, as every data error says it: row and column from 0, and the column's name."""
    name = f" ({header[col]})" if header is not None and header[col] else ""
    return f"row {row}, column {col}{name}"


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def read_rankings(path) -> Rankings:
    """Read rankings from a file (what `dpppl sample --data` does for ranking models).

    `.npy`/`.npz` and numeric text files are read by [`dpppl.datasets.read_data`][dpppl.datasets.read_data]
    (item indices padded with -1). Other text files hold one ranking per line, items (names)
    separated by commas, most preferred first; blank cells and lines, and lines starting
    with `#`, are skipped; a name in double quotes may hold a comma; the items are the sorted set of
    names seen. A missing file is a DataError (as from `read_data`).
    """
    try:
        return rankings(read_data(path))
    except DataError as numeric_error:
        if not str(path).lower().endswith(_TEXT_SUFFIXES) or not Path(path).is_file():
            raise
        rows = [[c for c in cells if c] for _, cells in _records(Path(path), delimiter=",")]
        if not rows:
            raise numeric_error
        return rankings(rows)
