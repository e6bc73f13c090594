"""Summaries of rows of data that stand for the rows when resolving hyperparameters.

A run over several processes (docs/distributed.md) keeps each point on its own process, so no
process holds the rows that a data-dependent hyperparameter (`mean(x)`, `cov(x) / 10`, `min(x)`,
...) is a function of. Every data function of the expression language
(`dpppl.core.expressions.FUNCTIONS`) is a function of five summaries of the rows: their count, sum,
scatter about their mean (sum (x - xbar)(x - xbar)^T), minimum and maximum, per column. Each
process summarises its own rows (`RowSummaries.of`), the processes' summaries are combined
(`RowSummaries.combined`: Chan, Golub & LeVeque's pairwise update of the scatter, so no sum of
squares about the origin loses digits), and the combined summaries are evaluated where the rows
would be: a `RowSummaries` answers `np.mean`, `np.var`, `np.std`, `np.min`, `np.max`, `np.sum` and
`np.cov` over the points' axis as the rows would (NumPy's `__array_function__` protocol), and
`squared_deviations` (sum_i (x_i - m)^2 per column) for the families' range checks.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpppl.errors import DataError


@dataclasses.dataclass(frozen=True)
class RowSummaries:
    """The summaries of N rows of D columns: `count` N, `total` (D,) their sum, `scatter` (D, D)
    sum (x - xbar)(x - xbar)^T about their mean xbar, `minimum` and `maximum` (D,), in float64.
    Stands for the (N, D) rows in the expressions of hyperparameters (module docstring)."""

    count: int
    total: np.ndarray
    scatter: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray

    @classmethod
    def of(cls, x) -> "RowSummaries":
        """The summaries of the rows `x` (N, D) (N may be 0: a count of 0, a zero sum and scatter,
        +inf and -inf as minimum and maximum)."""
        x = np.asarray(x, dtype=np.float64)
        n, d = x.shape
        if n == 0:
            return cls(0, np.zeros(d), np.zeros((d, d)), np.full(d, np.inf), np.full(d, -np.inf))
        centred = x - x.mean(axis=0)
        return cls(n, x.sum(axis=0), centred.T @ centred, x.min(axis=0), x.max(axis=0))

    @classmethod
    def combined(cls, parts) -> "RowSummaries":
        """The summaries of the rows of every part of `parts` (summaries of disjoint rows) put
        together: the scatters added with the between-part term n_a n_b / n (m_b - m_a)(m_b - m_a)^T
        (Chan, Golub & LeVeque 1979)."""
        parts = list(parts)
        out = parts[0]
        for part in parts[1:]:
            n = out.count + part.count
            if part.count == 0 or out.count == 0:
                scatter = out.scatter + part.scatter
            else:
                delta = part.total / part.count - out.total / out.count
                scatter = out.scatter + part.scatter + np.outer(delta, delta) * (out.count * part.count / n)
            out = cls(n, out.total + part.total, scatter, np.minimum(out.minimum, part.minimum),
                      np.maximum(out.maximum, part.maximum))
        return out

    def packed(self) -> np.ndarray:
        """The summaries as one float64 vector (1 + D + D^2 + 2 D numbers): what each process sends."""
        return np.concatenate([[self.count], self.total, self.scatter.ravel(), self.minimum, self.maximum])

    @classmethod
    def unpacked(cls, vector: np.ndarray, dim: int) -> "RowSummaries":
        """The inverse of `packed` for D = `dim` columns."""
        v = np.asarray(vector, dtype=np.float64)
        cut = np.cumsum([1, dim, dim * dim, dim])
        return cls(int(v[0]), v[cut[0]:cut[1]], v[cut[1]:cut[2]].reshape(dim, dim), v[cut[2]:cut[3]], v[cut[3]:])

    # ----- what the rows answer --------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.count, int(self.total.shape[0]))

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self):
        return np.dtype(np.float64)

    def mean(self, axis=None, dtype=None, out=None, **_):
        """The mean of the rows over the points' axis (`axis=0`, the only axis summarised)."""
        self._points_axis(axis, "mean")
        self._at_least(1, "mean")
        return self.total / self.count

    def var(self, ddof: int = 0):
        """The per-column variance of the rows with `ddof` degrees of freedom."""
        self._at_least(ddof + 1, "var")
        return np.diag(self.scatter) / (self.count - ddof)

    def cov(self, ddof: int = 1):
        """The (D, D) covariance of the rows with `ddof` degrees of freedom."""
        self._at_least(ddof + 1, "cov")
        return self.scatter / (self.count - ddof)

    def squared_deviations(self, m) -> np.ndarray:
        """sum_i (x_id - m_d)^2 per column d: the scatter's diagonal plus N (xbar - m)^2."""
        return np.diag(self.scatter) + self.count * (self.total / max(self.count, 1) - np.asarray(m)) ** 2

    def _at_least(self, rows: int, what: str) -> None:
        if self.count < rows:
            raise DataError(f"{what}() of the data needs at least {rows} points, got {self.count}")

    @staticmethod
    def _points_axis(axis, what: str) -> None:
        if axis != 0:
            raise DataError(f"{what}() of data held across processes is taken over the points (axis 0) only, "
                            f"got axis={axis}")

    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        raise DataError(f"'{ufunc.__name__}' of the data themselves is not known from the summaries of rows held "
                        "across processes: a run over several processes takes hyperparameters of mean, var, sd, "
                        "min, max, sum and cov of x (and N, D)")

    def __array_function__(self, func, types, args, kwargs):
        axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
        if func is np.cov:
            return self.cov(int(kwargs.get("ddof", 1)))
        answers = {np.mean: lambda: self.mean(axis), np.sum: lambda: self.total,
                   np.min: lambda: self.minimum, np.max: lambda: self.maximum,
                   np.var: lambda: self.var(int(kwargs.get("ddof", 0))),
                   np.std: lambda: np.sqrt(self.var(int(kwargs.get("ddof", 0))))}
        if func not in answers:
            raise DataError(f"{func.__name__}() of the data is not known from the summaries of rows held across "
                            "processes (count, sum, scatter, minimum, maximum): a run over several processes "
                            "takes hyperparameters of mean, var, sd, min, max, sum and cov of x")
        self._points_axis(axis, func.__name__)
        if func in (np.min, np.max):
            self._at_least(1, func.__name__)
        return answers[func]()


__all__ = ["RowSummaries"]
