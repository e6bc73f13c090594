"""Per-slice stick-breaking priors of the dependent Dirichlet process (Porteous et al. 2006).

In every time slice t the mixture weights follow a stick-breaking construction
(sec. 3.1),

    pi_{t,i} = V_{t,i} prod_{j<i} (1 - V_{t,j}),     V_{t,i} ~ Beta(a_i, b_i),   i = 1, 2, ...

independently across slices, with the same (a_i, b_i) in every slice (sec. 5). DP(alpha)
is a_i = 1, b_i = alpha; Pitman-Yor(d, theta) is a_i = 1 - d, b_i = theta + i d. Labels
matter here: the weights are size-biased, so a labelled assignment Z_t has probability
(sticks integrated out, the finite form of eq. 5)

    P(Z_t) = prod_i B(a_i + N_{t,i}, b_i + M_{t,i}) / B(a_i, b_i),   M_{t,i} = sum_{j>i} N_{t,j},

and the prediction rule of the collapsed sticks is E[pi_{t,i} | Z_t] (eq. 6):

    E[pi_{t,i} | Z_t] = a*_i / (a*_i + b*_i) prod_{j<i} b*_j / (a*_j + b*_j),
    a*_i = a_i + N_{t,i},   b*_i = b_i + M_{t,i}.

The labels beyond a capacity C hold no points, so their total weight is the remaining
stick prod_{j<=C} b*_j / (a*_j + b*_j) (the lumping of sec. 3.2).

The stick parameters are pluggable: anything with attributes ``a`` and ``b`` (this
module's :class:`DDP`, or a stick-breaking prior object), or a pair ``(a, b)``; each a
positive number, a sequence (its last value is repeated for later sticks) or a callable
of the 1-based stick index i.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from ..errors import ModelError

_CHECK_STICKS = 64  # callables are checked on the first sticks when the prior is built


def _stick_values(name: str, value, count: int) -> np.ndarray:
    """Values of one stick parameter for sticks i = 1..count (see the module docstring)."""
    if callable(value):
        try:
            out = np.array([float(value(i)) for i in range(1, count + 1)])
        except Exception as exc:  # a user's callable
            raise ModelError(f"stick parameter {name}: calling it with a stick index failed: {exc}") from None
    elif np.ndim(value) == 0:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise ModelError(f"stick parameter {name} must be a number, a sequence or a callable of the "
                             f"stick index i (1-based), got {value!r}")
        out = np.full(count, float(value))
    else:
        seq = np.asarray(value, dtype=float).ravel()
        if seq.size == 0:
            raise ModelError(f"stick parameter {name} is an empty sequence")
        out = np.concatenate([seq, np.full(max(0, count - seq.size), seq[-1])])[:count]
    bad = ~(np.isfinite(out) & (out > 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ModelError(f"stick parameter {name} must be finite and > 0 for every stick; "
                         f"stick {i + 1} has {out[i]:g}")
    return out


def stick_arrays(sticks, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): the Beta parameters of sticks 1..capacity, float arrays of length ``capacity``."""
    if isinstance(sticks, tuple) and len(sticks) == 2:
        a, b = sticks
    elif hasattr(sticks, "a") and hasattr(sticks, "b"):
        a, b = sticks.a, sticks.b
    else:
        raise ModelError(f"sticks must be a pair (a, b) or a stick-breaking prior with fields a and b, "
                         f"got {sticks!r}")
    return _stick_values("a", a, capacity), _stick_values("b", b, capacity)


def prior_stick_weights(sticks, count: int) -> np.ndarray:
    """The prior expected weights E[pi_i] of sticks 1..count (eq. 6 with no data)."""
    a, b = stick_arrays(sticks, count)
    stay = b / (a + b)
    return a / (a + b) * np.concatenate([[1.0], np.cumprod(stay)[:-1]])


def log_stick_weights(counts, a, b):
    """log E[pi_{t,i} | Z_t] of eq. (6) for every label, and the log weight of all labels
    beyond the last one.

    ``counts`` (..., C) are the numbers of points N_{t,i} with each label; ``a``, ``b``
    (C,) the stick parameters. Returns ``(log_w (..., C), log_tail (...))``.
    """
    after = jnp.cumsum(counts[..., ::-1], axis=-1)[..., ::-1] - counts  # M_{t,i}
    a_star, b_star = a + counts, b + after
    log_total = jnp.log(a_star + b_star)
    log_stay = jnp.log(b_star) - log_total
    before = jnp.cumsum(log_stay, axis=-1) - log_stay  # sum over j < i
    return jnp.log(a_star) - log_total + before, jnp.sum(log_stay, axis=-1)


def log_labelled_partition(counts, a, b):
    """log P(Z_t) = sum_i log B(a_i + N_{t,i}, b_i + M_{t,i}) - log B(a_i, b_i) over the
    last axis of ``counts`` (..., C): the labelled assignment's probability with the
    sticks integrated out (labels beyond C hold no points and contribute nothing)."""
    after = jnp.cumsum(counts[..., ::-1], axis=-1)[..., ::-1] - counts
    return jnp.sum(_betaln(a + counts, b + after) - _betaln(a, b), axis=-1)


def _betaln(a, b):
    # log B(a, b) from gammaln: jax.scipy.special.betaln loses ~1e-8 absolute for a << b
    return gammaln(a) + gammaln(b) - gammaln(a + b)


@dataclasses.dataclass(frozen=True)
class DDP:
    """The partition prior of a dependent Dirichlet process mixture over time slices:
    in every slice, stick-breaking weights with sticks V_{t,i} ~ Beta(a_i, b_i).

    Parameters
    ----------
    a, b : float, sequence or callable of the stick index i (1-based), default 1.0
        The Beta parameters of the sticks; ``a = 1, b = alpha`` gives a DP(alpha) in every
        slice (the default is DP(1)). A sequence's last value is repeated.
    """

    a: Any = 1.0
    b: Any = 1.0

    name = "DDP"

    def __post_init__(self):
        stick_arrays(self, _CHECK_STICKS)

    @property
    def alpha_is_random(self) -> bool:
        return False

    @property
    def initial_alpha(self) -> float:
        return 0.0  # no concentration: the sticks are fixed by (a_i, b_i)

    def log_prior_alpha(self, alpha):
        return jnp.zeros(())

    @property
    def model_class(self) -> type:
        """The model class a ``z ~ DDP(...)`` line builds (:class:`dpppl.ddp.DDPModel`)."""
        from ..ddp import DDPModel

        return DDPModel

    def describe(self) -> str:
        return f"DDP(a={self.a}, b={self.b})"


__all__ = ["DDP", "stick_arrays", "prior_stick_weights", "log_stick_weights", "log_labelled_partition"]
