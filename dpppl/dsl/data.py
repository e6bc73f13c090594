"""Models that carry their data: the source a data declaration names.

A data declaration may name where its data come from (docs/model-language.md)::

    data x : real[N] = dataset("galaxies")            # a bundled or synthetic data set
    data x : real[N, D] = file("points.csv")          # CSV/TSV/TXT, NPY or NPZ, relative to the model file
    data x : real[N, 2] = dataset("w2", n = 1000, seed = 3)   # a data set's options, fixed numbers

The parser checks the statement (the function, a data set's name and options, a file's
extension) but reads nothing: a [`DataSource`][dpppl.dsl.data.DataSource] is loaded when
data are needed, by [`bind_data`][dpppl.dsl.parser.bind_data], which every entry point that
takes `(model, data)` uses: data passed explicitly win, then the data a bound model holds
(`model.bind(x)`), then the data the model file names. An error in the named data (a missing
file, a NaN, a shape that does not fit the declaration) is a
[`DataError`][dpppl.errors.DataError] that starts with the statement's `file:line`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from dpppl.datasets.bundled import load as load_dataset
from dpppl.datasets.files import read_data, read_rankings
from dpppl.errors import DataError, HyperparameterError
from dpppl.models.mixture import DataDecl

SOURCES = {"dataset": 'dataset("name") for a data set by name (`dpppl datasets` lists them)',
           "file": 'file("path") for a CSV/TSV/TXT, NPY or NPZ file, relative to the model file'}
"""The functions a data declaration may name its data with."""


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Where a model file's data come from: `kind` is `"dataset"` (`target` a data set name,
    `options` its keyword options as `(name, value)` pairs) or `"file"` (`target` the file's
    absolute path, resolved against the model file's directory when parsed). `where`
    (`"models/galaxies.dp:20"`) and `statement` (the declaration's text) place errors; they
    take no part in comparisons."""

    kind: str
    target: str
    options: tuple = ()
    where: str = dataclasses.field(default="", compare=False)
    statement: str = dataclasses.field(default="", compare=False)

    def load(self, decl: DataDecl) -> Any:
        """Read the data, as given to `Model.bind`: a data set's points
        ([`dpppl.datasets.load`][dpppl.datasets.load]), a file's array
        ([`dpppl.datasets.read_data`][dpppl.datasets.read_data]; rankings with
        `read_rankings`, which also takes lines of item names). DataError naming the statement."""
        with self.located():
            if self.kind == "dataset":
                return load_dataset(self.target, **dict(self.options))[0]
            if decl.kind == "ranking":
                return read_rankings(self.target)
            return read_data(self.target)

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
