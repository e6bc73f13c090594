"""Models that carry their data: the source a data declaration names.

A data declaration may name where its data come from (docs/model-language.md)::

    data x : real[N] = dataset("galaxies")            # a bundled or synthetic data set
    data x : real[N, D] = file("points.csv")          # CSV/TSV/TXT, NPY or NPZ, in the model file's directory tree
    data x : real[N, 2] = dataset("w2", n = 1000, seed = 3)   # a data set's options, fixed numbers

The parser checks the statement (the function, a data set's name and options, a file's
extension) but reads nothing: a [`DataSource`][dpppl.dsl.data.DataSource] is loaded when
data are needed, by [`bind_data`][dpppl.dsl.parser.bind_data], which every entry point that
takes `(model, data)` uses: data passed explicitly win, then the data a bound model holds
(`model.bind(x)`), then the data the model file names. An error in the named data (a missing
file, a NaN, a shape that does not fit the declaration) is a
[`DataError`][dpppl.errors.DataError] that starts with the statement's `file:line`.

A model file reads only inside its own directory tree: `file()` takes a path relative to the
model file's directory that, with `..` and symbolic links resolved, stays inside it. An absolute
path, or one that leads out of the tree, is read only from a directory the user allows:
`dpppl.load(path, allow_paths=["/data"])`, `--allow-path /data` on the command line. The check is
made when the file is read (a link swapped after parsing is seen) and the file read is the one
checked. Data the user gives explicitly (`dpppl.sample(model, "points.csv")`, `--data`) are the
user's own choice and are not restricted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Optional

from dpppl.datasets.bundled import load as load_dataset
from dpppl.datasets.files import read_data, read_rankings
from dpppl.errors import DataError, HyperparameterError
from dpppl.models.mixture import DataDecl

SOURCES = {"dataset": 'dataset("name") for a data set by name (`dpppl datasets` lists them)',
           "file": 'file("path") for a CSV/TSV/TXT, NPY or NPZ file in the model file\'s directory tree'}
"""The functions a data declaration may name its data with."""


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Where a model file's data come from: `kind` is `"dataset"` (`target` a data set name,
    `options` its keyword options as `(name, value)` pairs) or `"file"` (`target` the file's
    absolute path, resolved against the model file's directory when parsed). `where`
    (`"models/galaxies.dp:20"`) and `statement` (the declaration's text) place errors. A file
    is read only inside `root`, the model file's directory (None for a path written absolute),
    or inside one of `allowed`, the directories the user allows (`allow_paths`). `where`,
    `statement`, `root` and `allowed` take no part in comparisons."""

    kind: str
    target: str
    options: tuple = ()
    where: str = dataclasses.field(default="", compare=False)
    statement: str = dataclasses.field(default="", compare=False)
    root: Optional[str] = dataclasses.field(default=None, compare=False)
    allowed: tuple[str, ...] = dataclasses.field(default=(), compare=False)

    def load(self, decl: DataDecl) -> Any:
        """Read the data, as given to `Model.bind`: a data set's points
        ([`dpppl.datasets.load`][dpppl.datasets.load]), a file's array
        ([`dpppl.datasets.read_data`][dpppl.datasets.read_data]; rankings with
        `read_rankings`, which also takes lines of item names) from the path `readable` checked.
        DataError naming the statement."""
        with self.located():
            if self.kind == "dataset":
                return load_dataset(self.target, **dict(self.options))[0]
            path = self.readable()
            return read_rankings(path) if decl.kind == "ranking" else read_data(path)

    def readable(self) -> str:
        """The file's real path (links and `..` resolved, now) when it lies inside `root` or an allowed
        directory; DataError saying how to allow it otherwise."""
        real = os.path.realpath(self.target)
        trees = [os.path.realpath(tree) for tree in ((self.root,) if self.root else ()) + self.allowed]
        if any(os.path.commonpath([real, tree]) == tree for tree in trees):
            return real
        allowed = f" or the allowed directories {', '.join(self.allowed)}" if self.allowed else ""
        why = (f"the absolute path {self.target} is outside the allowed directories {', '.join(self.allowed)}"
               if self.root is None and self.allowed else
               f"{self.target} is an absolute path" if self.root is None else
               f"{self.target if real == self.target else f'{self.target} leads to {real}, which'} is outside the "
               f"model file's directory {self.root}{allowed}")
        directory = os.path.dirname(real)
        raise DataError(f"{why}; a model file reads data only inside its own directory tree. To read this file, "
                        f"allow its directory: dpppl.load(path, allow_paths=[{directory!r}]) or, on the command "
                        f"line, --allow-path {directory}")

    @contextlib.contextmanager
    def located(self):
        """Re-raise a DataError raised inside (not a HyperparameterError, which is placed at its
        hyperparameter) with the statement's place and text in front."""
        try:
            yield
        except HyperparameterError:
            raise
        except DataError as error:
            raise DataError(f"{self.where}: the data named by '{self.statement}': {error}") from None


__all__ = ["DataSource", "SOURCES"]
