"""Plain data: values written as JSON beside named arrays, and read back without running code.

A checkpoint (`dpppl.run.checkpoint`) must be readable by someone who did not write it without
giving the file a way to run code, which rules out pickle (a pickle names any callable and calls
it). This module writes a value as a JSON tree whose arrays are kept apart (numeric dtypes only,
for `numpy.load(..., allow_pickle=False)`), and reads it back with a fixed vocabulary:

| value                                    | JSON                                                    |
|------------------------------------------|---------------------------------------------------------|
| None, bool, int, float, str              | itself (floats may be NaN or infinite)                  |
| list                                     | a JSON list                                             |
| tuple                                    | `{"tuple": [...]}`                                      |
| dict with str keys                       | `{"dict": {...}}`                                       |
| numeric array (NumPy or JAX)             | `{"array": "a3"}`: the 4th array of the file            |
| NumPy scalar (`np.float32(1.5)`)         | `{"scalar": "a4"}`: a 0-d array of the file             |
| NamedTuple class of a dpppl module       | `{"namedtuple": "module:Name", "fields": {...}}`        |
| model constructor (`DESCRIBABLE`)        | `{"dataclass": "module:Name", "fields": {...}}`         |
| model-language expression                | `{"expression": "cov(x) / 10"}`                         |

Reading checks every tag against that vocabulary: a class is looked up only in modules of the
`dpppl` package and must be a NamedTuple class (built with its fields, which runs no code of the
file's choosing) or one of the model constructors (a family, a prior, a data declaration, a
model: dpppl's own validation runs on the fields, as when a user calls it). Anything else, and any
malformed tree, raises [`UnreadableValue`][dpppl.run.portable.UnreadableValue]. A value that has
no such description (a user's function as a stick-breaking parameter, an object array) raises
[`NotDescribable`][dpppl.run.portable.NotDescribable] when written.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any

import numpy as np

from dpppl.core.expressions import Expr, parse_expression
from dpppl.families.base import Family
from dpppl.models.ddp import DDPModel
from dpppl.models.mixture import DataDecl, Model
from dpppl.models.rankings import Rankings
from dpppl.priors.crp import CRP, Gamma, PitmanYor
from dpppl.priors.ddp import DDP
from dpppl.priors.hyperpriors import Hyperprior
from dpppl.priors.stick_breaking import StickBreaking


class NotDescribable(TypeError):
    """A value with no plain-data description (see the module docstring); the message says which
    part, by its path (`model.prior.a`)."""


class UnreadableValue(ValueError):
    """A JSON tree that is not a description this module writes."""


def describable_classes() -> dict[str, type]:
    """The constructors a description may name, by `module:qualname`: the model classes, the
    partition priors, the concentration prior, the priors of random hyperparameters, the data
    declaration, rankings and every component family (subclasses of `Family`, found when asked, so
    a family added later is included)."""
    classes = [Model, DDPModel, DataDecl, CRP, PitmanYor, Gamma, Hyperprior, StickBreaking, DDP, Rankings]
    pending = [Family]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if dataclasses.is_dataclass(cls):
            classes.append(cls)
    return {_name(cls): cls for cls in classes}


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_MODULE = re.compile(r"dpppl(\.[A-Za-z_][A-Za-z0-9_]*)*")


class Writer:
    """Describes values as JSON trees, collecting their arrays (`arrays`, named `a0`, `a1`, ...,
    numbered on from those of `arrays` when given)."""

    def __init__(self, arrays: dict[str, np.ndarray] | None = None):
        self.arrays: dict[str, np.ndarray] = dict(arrays or {})
        self._classes = describable_classes()

    def describe(self, value: Any, path: str = "value") -> Any:
        """The JSON tree of `value`; NotDescribable naming `path` for a part that has none."""
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)) and type(value) in (int, float):
            return value
        if isinstance(value, Expr):
            return {"expression": value.render()}
        if isinstance(value, tuple) and _named_tuple_fields(type(value)) is not None:
            cls = type(value)
            if not cls.__module__.startswith("dpppl"):
                raise NotDescribable(f"{path}: a {cls.__qualname__} (only dpppl's own named tuples are saved)")
            return {"namedtuple": _name(cls), "fields": {f: self.describe(v, f"{path}.{f}")
                                                         for f, v in zip(_named_tuple_fields(cls), value)}}
        if isinstance(value, tuple):
            return {"tuple": [self.describe(v, f"{path}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.describe(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            bad = [k for k in value if not isinstance(k, str)]
            if bad:
                raise NotDescribable(f"{path}: a dict key that is not a string ({bad[0]!r})")
            return {"dict": {k: self.describe(v, f"{path}.{k}") for k, v in value.items()}}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value, path)
        if isinstance(value, np.generic):
            return {"scalar": self._array(value, path)}
        if callable(value):
            raise NotDescribable(f"{path}: a function ({_qualname(value)})")
        return {"array": self._array(value, path)}  # an array, or anything NumPy makes a numeric array of

    def _dataclass(self, value, path: str) -> dict:
        cls = type(value)
        if _name(cls) not in self._classes:
            raise NotDescribable(f"{path}: a {cls.__qualname__} (not a dpppl model constructor)")
        fields = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue  # derived by the constructor
            try:
                fields[f.name] = self.describe(getattr(value, f.name), f"{path}.{f.name}")
            except NotDescribable:
                if f.compare:
                    raise
                # a field outside the model's law (where the model file put each hyperparameter): left out
        return {"dataclass": _name(cls), "fields": fields}

    def _array(self, value, path: str) -> str:
        try:
            arr = np.asarray(value)
        except Exception as e:  # noqa: BLE001  (a JAX key array, an object that refuses conversion)
            raise NotDescribable(f"{path}: a {type(value).__qualname__} that is not a numeric array ({e})") from None
        if arr.dtype.kind not in "biufc":
            what = f"a {type(value).__qualname__}" if not isinstance(value, np.ndarray) else \
                f"an array of dtype {arr.dtype}"
            raise NotDescribable(f"{path}: {what} (only numbers, strings, numeric arrays and dpppl's model "
                                 "constructors are saved)")
        name = f"a{len(self.arrays)}"
        self.arrays[name] = arr
        return name


class Reader:
    """Reads the JSON trees `Writer` writes, with the arrays of the same file."""

    def __init__(self, arrays):
        self._arrays = arrays
        self._classes = describable_classes()

    def value(self, tree: Any, path: str = "value") -> Any:
        """The value `tree` describes; UnreadableValue naming `path` for anything else."""
        if tree is None or isinstance(tree, (bool, int, float, str)):
            return tree
        if isinstance(tree, list):
            return [self.value(v, f"{path}[{i}]") for i, v in enumerate(tree)]
        if not isinstance(tree, dict) or len(tree) not in (1, 2):
            raise UnreadableValue(f"{path}: not a value description")
        if len(tree) == 1:
            (tag, content), = tree.items()
            if tag == "tuple" and isinstance(content, list):
                return tuple(self.value(v, f"{path}[{i}]") for i, v in enumerate(content))
            if tag == "dict" and isinstance(content, dict):
                return {k: self.value(v, f"{path}.{k}") for k, v in content.items()}
            if tag == "array" and isinstance(content, str):
                return self._array(content, path)
            if tag == "scalar" and isinstance(content, str):
                scalar = self._array(content, path)
                if scalar.ndim:
                    raise UnreadableValue(f"{path}: a scalar of shape {scalar.shape}")
                return scalar[()]
            if tag == "expression" and isinstance(content, str):
                return parse_expression(content)
            raise UnreadableValue(f"{path}: unknown description {tag!r}")
        fields = tree.get("fields")
        if not isinstance(fields, dict):
            raise UnreadableValue(f"{path}: a class description without its fields")
        values = {k: self.value(v, f"{path}.{k}") for k, v in fields.items()}
        if "dataclass" in tree:
            cls = self._classes.get(tree["dataclass"])
            if cls is None:
                raise UnreadableValue(f"{path}: {tree['dataclass']!r} is not a dpppl model constructor")
            try:
                return cls(**values)
            except (TypeError, ValueError) as e:  # a field missing or out of range: dpppl's own checks
                raise UnreadableValue(f"{path}: {cls.__qualname__}: {e}") from None
        if "namedtuple" in tree:
            cls = _named_tuple_class(tree["namedtuple"], path)
            if set(values) != set(_named_tuple_fields(cls)):
                raise UnreadableValue(f"{path}: the fields of {cls.__qualname__} are {', '.join(cls._fields)}, "
                                      f"the file gives {', '.join(values) or 'none'}")
            return cls(**values)
        raise UnreadableValue(f"{path}: not a value description")

    def _array(self, name: str, path: str) -> np.ndarray:
        if name not in self._arrays:
            raise UnreadableValue(f"{path}: the array {name!r} is missing")
        return self._arrays[name]


def _named_tuple_fields(cls: type) -> tuple | None:
    """The fields of a named tuple class (its own or inherited), None for any other class."""
    return next((base.__dict__["_fields"] for base in cls.__mro__ if "_fields" in base.__dict__), None)


def _qualname(fn) -> str:
    try:
        return fn.__qualname__
    except AttributeError:  # a callable object
        return type(fn).__qualname__


def _named_tuple_class(name, path: str) -> type:
    """The NamedTuple class `module:qualname` of a dpppl module, found without running anything
    but the import of that dpppl module."""
    module_name, _, qualname = name.partition(":") if isinstance(name, str) else ("", "", "")
    if not _MODULE.fullmatch(module_name) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", qualname):
        raise UnreadableValue(f"{path}: {name!r} is not a class of dpppl")
    try:
        cls = getattr(importlib.import_module(module_name), qualname)
    except (ImportError, AttributeError):
        raise UnreadableValue(f"{path}: this dpppl has no {name!r}") from None
    if not (isinstance(cls, type) and issubclass(cls, tuple) and _named_tuple_fields(cls) is not None):
        raise UnreadableValue(f"{path}: {name!r} is not a named tuple of dpppl")
    return cls


__all__ = ["NotDescribable", "Reader", "UnreadableValue", "Writer", "describable_classes"]
