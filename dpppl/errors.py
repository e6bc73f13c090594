"""Exceptions raised by dpppl before any sampling starts, and the argument checks shared by
every layer."""

from __future__ import annotations

import numpy as np


class DPPPLError(Exception):
    """Base class of every error dpppl raises on purpose."""


class ModelError(DPPPLError, ValueError):
    """A model (file, text or Python builder) is malformed.

    When the model came from text, `line` and `column` are 1-based positions,
    `source` is the file name (or `"<string>"`) and the message carries a caret
    excerpt of the offending line.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 column: int | None = None, text: str | None = None):
        self.source, self.line, self.column = source, line, column
        self.bare_message = message
        if line is not None:
            where = f"{source or '<string>'}:{line}:{column or 1}: "
            excerpt = ""
            if text is not None:
                lines = text.splitlines()
                if 0 < line <= len(lines):
                    src_line = lines[line - 1]
                    excerpt = f"\n    {src_line}\n    {' ' * max((column or 1) - 1, 0)}^"
            message = where + message + excerpt
        super().__init__(message)


class DataError(DPPPLError, ValueError):
    """Data do not fit the model: wrong shape, dtype, NaN, negative counts, ..."""


class HyperparameterError(ModelError, DataError):
    """A hyperparameter outside its valid range: its mathematical range, or values that make
    the model's densities underflow to zero or overflow in the run's float dtype.

    Both a [`ModelError`][dpppl.errors.ModelError] (the model gave the value) and a
    [`DataError`][dpppl.errors.DataError] (an expression may have computed it from the data),
    so either `except` catches it. `owner` is the prior or family (`"CRP"`, `"Gamma"`,
    `"NormalInverseWishart"`) and `name` the hyperparameter (`"alpha"`, `"psi0"`); `at`
    gives the same error positioned in the model file.
    """

    def __init__(self, message: str, *, owner: str, name: str, **where):
        self.owner, self.name = owner, name
        super().__init__(message, **where)

    def at(self, source: str, line: int, column: int, text: str | None) -> "HyperparameterError":
        """This error at `line`, `column` of the model file `source` (whose text is `text`)."""
        return HyperparameterError(self.bare_message, owner=self.owner, name=self.name, source=source,
                                   line=line, column=column, text=text)


class KernelError(DPPPLError, ValueError):
    """An unknown kernel, or a kernel that does not apply to the model."""


class ArgumentError(DPPPLError, ValueError):
    """An argument of a run is out of range or unusable: a seed that is not an integer in
    range, a count below its minimum, `thinning` larger than `num_samples`, an output path in
    a directory that does not exist, a run file that is not netCDF."""


def check_bool(name: str, value, allow_none: bool = False) -> None:
    """Raise [`ArgumentError`][dpppl.errors.ArgumentError] unless `value` is True or False (or
    None when `allow_none`): a switch given as `"yes"`, `"no"` or 0 is refused rather than read
    by its truth value (`"no"` is true)."""
    if isinstance(value, (bool, np.bool_)) or (allow_none and value is None):
        return
    allowed = "True, False or None" if allow_none else "True or False"
    raise ArgumentError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")


def check_positive_int(name: str, value, minimum: int) -> None:
    """Raise [`ArgumentError`][dpppl.errors.ArgumentError] unless `value` is an int (not a bool) >= `minimum`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ArgumentError(f"{name} must be an integer >= {minimum}, got {value!r}")
