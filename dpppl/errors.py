"""Exceptions raised by dpppl before any sampling starts."""

from __future__ import annotations


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


class KernelError(DPPPLError, ValueError):
    """An unknown kernel, or a kernel that does not apply to the model."""


class ArgumentError(DPPPLError, ValueError):
    """An argument of a run is out of range or unusable: a seed that is not an integer in
    range, a count below its minimum, `thinning` larger than `num_samples`, an output path in
    a directory that does not exist, a run file that is not netCDF."""
