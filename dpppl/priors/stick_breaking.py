"""Stick-breaking priors with arbitrary (a_i, b_i), in the labelled representation.

Porteous, Ihler, Smyth & Welling (2006), sec. 3: mixture weights

    pi_i = V_i prod_{j<i} (1 - V_j),    V_i ~ Beta(a_i, b_i) independently,  i = 1, 2, ...

(a_i = 1, b_i = alpha: the Dirichlet process; a_i = 1 - d, b_i = theta + i d: Pitman-Yor).
Labels are explicit: z_n = i means "point n sits at stick i", and the law of a labelled
assignment Z with the sticks integrated out (eqs. 5, 8b, 8c) is

    P(Z) = prod_i B(a_i + N_i, b_i + M_i) / B(a_i, b_i),    M_i = sum_{j>i} N_j,    (*)

with N_i the number of points at label i and B the Beta function; only the labels up to
the largest occupied one contribute. Its prediction rule (eq. 6) is

    P(z_{N+1} = i | Z) = E[pi_i | Z] = a*_i / (a*_i + b*_i) prod_{j<i} b*_j / (a*_j + b*_j),
    a*_i = a_i + N_i,  b*_i = b_i + M_i,

and every label past the largest occupied one K together has probability
prod_{j<=K} b*_j / (a*_j + b*_j) (the lumped tail of sec. 3.2). P(Z) changes when labels
are permuted (the prior weights are size-ordered in expectation), so a sampler over Z
must mix over labels (sec. 3.3); summed over the labellings of a partition, (*) gives
the partition's probability (for Pitman-Yor parameters, the Pitman-Yor EPPF).

The weights sum to one almost surely exactly when prod_i E[1 - V_i] = prod_i b_i /
(a_i + b_i) -> 0, i.e. sum_i log(1 + a_i / b_i) = infinity (footnote 1; Ishwaran & James
2001, Lemma 1: the remaining length R_L = prod_{i<=L} (1 - V_i) decreases, so E R_L -> 0
iff R_L -> 0 almost surely). A finite prior of L sticks ends with b_L = 0 (V_L = 1).

In code, slot k of a [`PartitionState`][dpppl.core.state.PartitionState] is stick k + 1: the
count vector `counts` (leading axis C) holds N_1..N_C.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax.scipy.special import gammaln

from dpppl.core.expressions import Expr, check_hyper, count_limit, parse_expression
from dpppl.core.numerics import sample_index
from dpppl.errors import DataError, HyperparameterError, ModelError

StickParameter = Union[float, Sequence[float], Callable[[np.ndarray], Any], str, Any]
"""A number, a finite sequence (a_1, ..., a_L), a vectorised callable of the 1-based
stick index array `i`, or an expression of `i` (text or a parsed expression)."""

CHECK_HORIZON = 2**16
"""Sticks evaluated when a prior is built, for the checks and the footnote-1 test."""

MAX_STICKS = 2**16
"""The most sticks (labels) a finite sequence may have: its arrays are that long."""

MAX_LABELS = 2**14
"""Labels past this (and past N + 1) are not sampled on an infinite prior: a chain that
draws one stops with an error ([`dpppl.sample`][dpppl.sample])."""

RUN_SWEEPS = 1000
"""Sweeps a chain's initial slots are sized for
([`initial_capacity`][dpppl.priors.stick_breaking.StickBreaking.initial_capacity])."""

TAIL_SWEEPS = 100
"""Sweeps over which a chain that opened a new label for every point would, in expectation, draw
one label past the last it can use, for a prior refused as too heavy-tailed
([`check_hyperparameters`][dpppl.priors.stick_breaking.StickBreaking.check_hyperparameters])."""

_TAIL_NEGLIGIBLE = 1e-12   # prod_{i<=H} E[1 - V_i] below this: the weights sum to one for any purpose
_DIVERGENT_EXPONENT = 1.02  # terms log(1 + a_i/b_i) ~ i^-p with p at most this: the sum diverges


def _kind(value) -> str:
    if isinstance(value, bool):
        raise ModelError(f"a stick parameter must be a number, a sequence, a callable of i or an "
                         f"expression of i, got {value!r}")
    if isinstance(value, numbers.Real):
        return "number"
    if isinstance(value, str) or _is_expr(value):
        return "expression"
    if callable(value):
        return "function"
    if isinstance(value, (Sequence, np.ndarray)):
        return "sequence"
    raise ModelError(f"a stick parameter must be a number, a sequence, a callable of i or an "
                     f"expression of i, got {value!r}")


def _is_expr(value) -> bool:
    return isinstance(value, Expr)


def _normalise(value, what: str, prior: str):
    """Numbers to float, sequences to tuples of floats, text to a parsed expression."""
    kind = _kind(value)
    if kind == "number":
        return float(value)
    if kind == "sequence":
        arr = np.asarray(value, dtype=float)
        if arr.ndim != 1 or arr.size == 0:
            raise ModelError(f"{prior}: {what} must be a non-empty 1-D sequence, got shape {arr.shape}")
        return tuple(float(v) for v in arr)
    if kind == "expression" and isinstance(value, str):
        value = parse_expression(value)
    if kind == "expression":
        unknown = sorted(value.names() - {"i"})
        if unknown:
            raise value.error(f"{prior}: {what} may use the stick index 'i' and numbers only, "
                              f"got the name '{unknown[0]}'")
    return value


def _evaluate(value, idx: np.ndarray, what: str, prior: str) -> np.ndarray:
    """Values of a normalised stick parameter at the 1-based indices `idx` (NaN past
    the end of a sequence)."""
    if isinstance(value, float):
        return np.full(idx.shape, value)
    if isinstance(value, tuple):
        seq = np.asarray(value)
        out = np.full(idx.shape, np.nan)
        inside = idx <= seq.size
        out[inside] = seq[idx[inside] - 1]
        return out
    if callable(value) and not _is_expr(value):
        try:
            out = np.asarray(value(idx), dtype=float)
        except Exception as exc:
            raise ModelError(f"{prior}: {what}(i) failed on the stick index array i = 1, 2, ... "
                             f"(callables must accept a numpy array of indices): {exc}") from None
    else:
        out = np.asarray(value.evaluate({"i": idx.astype(float)}), dtype=float)
    if out.ndim == 0:
        out = np.full(idx.shape, float(out))
    if out.shape != idx.shape:
        raise ModelError(f"{prior}: {what}(i) must give one value per stick, got shape {out.shape} "
                         f"for {idx.size} sticks")
    return out


def _show(value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(f"{v:g}" for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    if _is_expr(value):
        return str(value)
    return getattr(value, "__name__", repr(value))


@dataclasses.dataclass(frozen=True)
class StickBreaking:
    """Stick-breaking prior with V_i ~ Beta(a_i, b_i) on explicit labels (Porteous et al.
    2006, sec. 3).

    Parameters
    ----------
    a, b : number, sequence, callable of i, or expression of i
        The Beta parameters of stick i = 1, 2, ...: a number (the same for every stick), a
        finite sequence (then the prior has that many sticks and must end with b_L = 0),
        a vectorised callable of the numpy array of 1-based indices, or an expression of
        `i` such as `"theta + i * d"` (numbers substituted for names). The first
        stick with b_i = 0 is the last one (V_i = 1).
    check : bool, default True
        Check that the weights sum to one (footnote 1); see
        [`check_weights`][dpppl.priors.stick_breaking.StickBreaking.check_weights].

    Raises
    ------
    ModelError
        When a_i <= 0 or b_i < 0 for some stick, sequences of different lengths, a finite
        sequence that does not end with b_L = 0, or weights that do not sum to one.
    """

    a: StickParameter = 1.0
    b: StickParameter = 1.0
    check: bool = dataclasses.field(default=True, compare=False)
    num_sticks: Optional[int] = dataclasses.field(default=None, init=False)

    name = "StickBreaking"
    labelled = True
    """Labels matter: the kernels of exchangeable priors (gibbs, splitmerge, perm) refuse it."""
    alpha_is_random = False
    random_discount = None
    """No discount to sample (`PitmanYor.random_discount`'s protocol)."""
    initial_alpha = 0.0
    """There is no concentration; the state's `alpha` slot carries this placeholder."""

    def __post_init__(self):
        a = _normalise(self.a, "a", self.name)
        b = _normalise(self.b, "b", self.name)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        lengths = {len(v) for v in (a, b) if isinstance(v, tuple)}
        if len(lengths) > 1:
            raise ModelError(f"{self.name}: a and b are sequences of different lengths {sorted(lengths)}")
        horizon = lengths.pop() if lengths else CHECK_HORIZON
        idx = np.arange(1, horizon + 1)
        av = _evaluate(a, idx, "a", self.name)
        bv = _evaluate(b, idx, "b", self.name)
        bad = ~(np.isfinite(av) & (av > 0))
        zero = np.flatnonzero(bv == 0)
        last = int(zero[0]) + 1 if zero.size else None
        upto = last if last is not None else horizon
        if bad[:upto].any():
            i = int(np.flatnonzero(bad[:upto])[0])
            raise ModelError(f"{self.name}: a_i must be positive and finite; a_{i + 1} = {av[i]:g}")
        badb = ~(np.isfinite(bv) & (bv >= 0))
        if badb[:upto].any():
            i = int(np.flatnonzero(badb[:upto])[0])
            raise ModelError(f"{self.name}: b_i must be non-negative and finite; b_{i + 1} = {bv[i]:g}")
        if lengths or isinstance(a, tuple) or isinstance(b, tuple):
            if last is None:
                raise ModelError(
                    f"{self.name}: a finite sequence of {horizon} sticks must end with b_{horizon} = 0 "
                    f"(V_{horizon} = 1) so that the weights sum to one (Porteous et al. 2006, "
                    f"footnote 1); got b_{horizon} = {bv[-1]:g}, which leaves an expected "
                    f"{np.exp(np.sum(np.log(bv / (av + bv)))):.3g} of the stick unassigned")
        object.__setattr__(self, "num_sticks", last)
        object.__setattr__(self, "_table", (av[:upto], bv[:upto]))
        if self.check and last is None:
            self.check_weights()

    # ----------------------------------------------------------------- construction ---
    @classmethod
    def pitman_yor(cls, discount: float = 0.0, alpha: float = 1.0) -> "StickBreaking":
        """The Pitman-Yor process PY(d, alpha): a_i = 1 - d, b_i = alpha + i d (sec. 3.1)."""
        if not (isinstance(discount, numbers.Real) and 0 <= discount < 1):
            raise ModelError(f"{cls.name}: discount must be in [0, 1), got {discount!r}")
        if not (isinstance(alpha, numbers.Real) and alpha > -discount and (discount > 0 or alpha > 0)):
            raise ModelError(f"{cls.name}: alpha must be > -discount (and > 0 when discount is 0), got {alpha!r}")
        d, theta = float(discount), float(alpha)
        if d == 0:
            return cls(a=1.0, b=theta)
        return cls(a=1.0 - d, b=parse_expression(f"{theta!r} + i * {d!r}"))

    @classmethod
    def pseudo_particles(cls, gamma, num_sticks: Optional[int] = None) -> "StickBreaking":
        """The single-parameter prior of eq. (7): a_i = gamma_i, b_i = sum_{j>i} gamma_j.

        Then E[pi_i | Z] = (gamma_i + N_i) / (gamma + N), gamma = sum_i gamma_i: gamma_i
        pseudo-particles sit at label i a priori, and P(Z) is the Dirichlet-multinomial
        prod_i Gamma(gamma_i + N_i) / Gamma(gamma_i) * Gamma(gamma) / Gamma(gamma + N).

        Parameters
        ----------
        gamma : sequence, or number / callable / expression of i with `num_sticks`
            The pseudo-particle counts gamma_1..gamma_L (all positive). A number with
            `num_sticks = L` gives the symmetric finite Dirichlet prior of sec. 2
            (gamma_i = alpha / L). An infinite sequence of pseudo-particles is a
            `StickBreaking(a, b)` whose b_i is the tail sum in closed form (e.g.
            gamma_i = g (1 - r) r^(i-1): a = g (1 - r) r^(i-1), b = g r^i).
        num_sticks : int, optional
            L, required unless `gamma` is a sequence.
        """
        name = "PseudoParticles"
        g = _normalise(gamma, "gamma", name)
        if isinstance(g, tuple):
            if num_sticks is not None and num_sticks != len(g):
                raise ModelError(f"{name}: num_sticks={num_sticks} but gamma has {len(g)} entries")
            num_sticks = len(g)
        if isinstance(num_sticks, float) and num_sticks.is_integer():  # from the model language
            num_sticks = int(num_sticks)
        if isinstance(num_sticks, bool) or not isinstance(num_sticks, numbers.Integral) or num_sticks < 1:
            raise ModelError(f"{name}: num_sticks must be a positive integer (the number of labels) "
                             f"when gamma is not a sequence, got {num_sticks!r}")
        if num_sticks > MAX_STICKS:
            raise ModelError(f"{name}: num_sticks = {float(num_sticks):g} is more labels than a finite prior may have "
                             f"(at most {MAX_STICKS}); for an unbounded number of clusters use an infinite "
                             "sequence of sticks (StickBreaking, or a CRP)")
        gv = _evaluate(g, np.arange(1, int(num_sticks) + 1), "gamma", name)
        if not np.all(np.isfinite(gv) & (gv > 0)):
            i = int(np.flatnonzero(~(np.isfinite(gv) & (gv > 0)))[0])
            raise ModelError(f"{name}: gamma_i must be positive and finite; gamma_{i + 1} = {gv[i]:g}")
        check_hyper(name, "gamma", gv, count=True)
        check_hyper(name, "gamma", np.sum(gv), at_most=(count_limit(), "the total sum_i gamma_i, a pseudo-count, "
                                                        "must be below the count limit"))
        tail = np.concatenate([np.cumsum(gv[::-1])[::-1][1:], [0.0]])
        return cls(a=tuple(gv), b=tuple(tail))

    # ------------------------------------------------------------------ evaluation ---
    def sticks(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(a_1..a_n, b_1..b_n) as float64 numpy arrays. Past the last stick of a finite
        prior the entries are a = b = 1 (placeholders: those labels have weight zero)."""
        a_tab, b_tab = self._table
        if n <= a_tab.size:
            return a_tab[:n].copy(), b_tab[:n].copy()
        if self.num_sticks is not None:
            pad = np.ones(n - a_tab.size)
            return np.concatenate([a_tab, pad]), np.concatenate([b_tab, pad])
        idx = np.arange(a_tab.size + 1, n + 1)
        a_more = _evaluate(self.a, idx, "a", self.name)
        b_more = _evaluate(self.b, idx, "b", self.name)
        if not (np.all(np.isfinite(a_more) & (a_more > 0)) and np.all(np.isfinite(b_more) & (b_more > 0))):
            raise ModelError(f"{self.name}: a_i > 0 and b_i > 0 fail for some stick i in "
                             f"{a_tab.size + 1}..{n}")
        return np.concatenate([a_tab, a_more]), np.concatenate([b_tab, b_more])

    def _jnp_sticks(self, n: int, dtype):
        a, b = self.sticks(n)
        last = np.zeros(n, bool)
        beyond = np.zeros(n, bool)
        if self.num_sticks is not None and self.num_sticks <= n:
            last[self.num_sticks - 1] = True
            beyond[self.num_sticks:] = True
        return (jnp.asarray(a, dtype), jnp.asarray(b, dtype), jnp.asarray(last), jnp.asarray(beyond))

    def _log_beta(self, n: int) -> np.ndarray:
        """log B(a_i, b_i) of sticks 1..n (float64; the last stick of a finite prior, b_L = 0, with
        b = 1 as in `log_prob_labels`), computed on the host: a constant of a compiled program rather
        than code in it."""
        a, b = self.sticks(n)
        if self.num_sticks is not None and self.num_sticks <= n:
            b[self.num_sticks - 1] = 1.0
        return scipy.special.gammaln(a) + scipy.special.gammaln(b) - scipy.special.gammaln(a + b)

    def check_hyperparameters(self, n: int) -> None:
        """Raise [`HyperparameterError`][dpppl.errors.HyperparameterError] when the sticks make
        the labelled law of n points degenerate in the run's float dtype (`check_hyper`):

        - a_i and the b_i > 0 must be counts: normal numbers (log a*_i, log b*_i of eq. 6) below
          `count_limit()`, and so must a_i + b_i (gammaln(a_i + b_i + N_i + M_i) in (*) would
          lose the counts);
        - the tail must fit the labels a chain can use
          ([`max_labels`][dpppl.priors.stick_breaking.StickBreaking.max_labels], L): a label drawn
          from the prior lies past L with probability p = prod_{i<=L} b_i / (a_i + b_i), and a
          sweep draws a new label for at most each of the n points, so `TAIL_SWEEPS` n p must
          stay below one. Measured: a_i = 0.75, b_i = 1000 + i / 4 on 40 points (100 n p = 30)
          drew a label past L = 16384 within five sweeps; a_i = 1, b_i = 2 + i on 4 points
          (100 n p = 0.07) runs.
        """
        a, b = self._table
        check_hyper(self.name, "a", a, count=True)
        regular = b[:-1] if self.num_sticks is not None else b  # b_L = 0 ends a finite prior
        check_hyper(self.name, "b", regular, count=True)
        check_hyper(self.name, "b", a + b, at_most=(count_limit(), "a_i + b_i must be below the count limit, "
                                                    "where adding a point no longer changes it"))
        if self.num_sticks is not None:
            return
        labels = min(self.max_labels(n), a.size)
        log_past = float(np.sum(np.log(b[:labels] / (a[:labels] + b[:labels]))))
        if np.log(TAIL_SWEEPS * n) + log_past >= 0:
            raise HyperparameterError(
                f"{self.describe()}: the sticks' tail is too heavy for {n} points: a label drawn from the prior lies "
                f"past label {labels}, the last a chain can use, with probability {np.exp(log_past):.3g}: "
                f"{TAIL_SWEEPS} sweeps that draw a new label for every point would draw an expected "
                f"{TAIL_SWEEPS * n * np.exp(log_past):.3g} of them; make b_i / a_i smaller or give a finite sequence "
                "of sticks ending with b_L = 0",
                owner=self.name, name="b")

    def check_weights(self) -> None:
        """Raise [`ModelError`][dpppl.priors.stick_breaking.ModelError] when the weights cannot sum to one (footnote 1).

        They sum to one a.s. iff S = sum_i log(1 + a_i / b_i) diverges (module
        docstring). Numerically, over the first `CHECK_HORIZON` sticks: the check
        passes when prod_i b_i / (a_i + b_i) is already below 1e-12, or when the terms
        t_i = log(1 + a_i / b_i) decay no faster than i^-1.02 (fitted on the last two
        decades of i; harmonic decay, as for Pitman-Yor, diverges); otherwise the series
        converges and the expected unassigned length exp(-S) is reported.
        """
        a, b = self._table
        t = np.log1p(a / b)
        partial = float(np.sum(t))
        if partial > -np.log(_TAIL_NEGLIGIBLE):
            return
        i = np.arange(1, t.size + 1)
        window = i >= t.size // 100
        positive = window & (t > 0)
        if positive.sum() < 2:
            exponent = np.inf
        else:
            exponent = -float(np.polyfit(np.log(i[positive]), np.log(t[positive]), 1)[0])
        if exponent <= _DIVERGENT_EXPONENT:
            return
        tail = partial + float(t[-1] * t.size / max(exponent - 1.0, 1e-9))  # integral of c i^-p past H
        raise ModelError(
            f"{self.describe()}: the stick weights do not sum to one: sum_i log(1 + a_i/b_i) "
            f"converges (its terms decay like i^-{exponent:.2f}; {partial:.3g} over the first "
            f"{t.size} sticks), so an expected {np.exp(-tail):.3g} of the stick is never assigned "
            f"(Porteous et al. 2006, footnote 1; Ishwaran & James 2001). Make sum_i a_i/b_i "
            f"diverge (b_i / a_i growing at most like i), or give a finite sequence ending with b_L = 0")

    # ------------------------------------------------------------- the labelled law ---
    def log_prob_labels(self, counts) -> jnp.ndarray:
        """log P(Z) of a labelled assignment with the sticks integrated out, eq. (*) of
        the module docstring; `counts[..., k]` is N_{k+1}. -inf when a label past the
        last stick of a finite prior is occupied."""
        counts = jnp.asarray(counts)
        a, b, last, beyond = self._jnp_sticks(counts.shape[-1], counts.dtype)
        n_i = counts
        m_i = jnp.cumsum(counts[..., ::-1], axis=-1)[..., ::-1] - counts  # points at later labels
        safe_b = jnp.where(last, 1.0, b)
        # one log-gamma of the stacked arguments (one copy of its code in the program); the sticks' own
        # log B(a_i, b_i) from the host
        lg = gammaln(jnp.stack(jnp.broadcast_arrays(a + n_i, safe_b + m_i, a + safe_b + n_i + m_i)))
        regular = lg[0] + lg[1] - lg[2] - jnp.asarray(self._log_beta(counts.shape[-1]), counts.dtype)
        terminal = jnp.where(m_i > 0, -jnp.inf, 0.0)  # V_L = 1: nobody may sit past L
        terms = jnp.where(last, terminal, jnp.where(beyond, 0.0, regular))
        return jnp.sum(terms, axis=-1)

    def log_expected_weights(self, counts):
        """Eq. (6): `(log E[pi_i | Z] for i = 1..C, log of the stick left past C)`.

        With `counts` (C,) the counts N_1..N_C of Z (zeros give the prior weights,
        footnote 2). The remainder prod_{j<=C} b*_j / (a*_j + b*_j) is the probability
        that the next point takes a label past C; past the largest occupied label K,
        E[pi_i | Z] = a_i / (a_i + b_i) prod_{K<j<i} b_j / (a_j + b_j) times the lumped
        tail prod_{j<=K} b*_j / (a*_j + b*_j), so the first C entries hold the tail's
        split among labels K+1..C exactly.
        """
        counts = jnp.asarray(counts)
        a, b, _, beyond = self._jnp_sticks(counts.shape[-1], counts.dtype)
        return _expected_weights(jnp, a, b, beyond, counts)

    def log_prior_weights(self, n: int, dtype=jnp.float64):
        """Prior E[pi_i] for i = 1..n and the log mass past n (footnote 2): eq. (6) with no
        points (`log_expected_weights` of zero counts), evaluated on the host in float64 and
        returned as `dtype` arrays, so that in a compiled program they are constants, not code
        (they depend on the sticks and n only)."""
        a, b = self.sticks(n)
        beyond = np.arange(n) >= (self.num_sticks if self.num_sticks is not None else n)
        log_w, log_rest = _expected_weights(np, a, b, beyond, np.zeros(n))
        return jnp.asarray(log_w, dtype), jnp.asarray(log_rest, dtype)

    # ------------------------------------------------------------- the log joint ---
    def log_eppf(self, counts, alpha=None):
        """The prior term of the collapsed log joint (`dpppl.models.mixture.BoundModel.lp`, the
        `lp` that [`dpppl.sample`][dpppl.sample] records): for this prior it is
        [`log_prob_labels`][dpppl.priors.stick_breaking.StickBreaking.log_prob_labels], the probability of the
        *labelled* assignment with slot
        k = label k + 1, not an exchangeable partition probability. `alpha` is ignored."""
        return self.log_prob_labels(counts)

    def log_seat_weights(self, counts, alpha=None):
        """Sequential weights in the form the generic seating code uses: log E[pi_k | Z]
        for occupied slots (-inf for empty ones) and the log total of every empty label
        (eq. 6 and the lumped tail). Used to seat points for `init="sequential"`,
        which puts a new cluster at the first empty label."""
        log_w, log_rest = self.log_expected_weights(counts)
        occupied = counts > 0
        existing = jnp.where(occupied, log_w, -jnp.inf)
        empty = jnp.where(occupied, -jnp.inf, log_w)
        return existing, _logsumexp_with(empty, log_rest)

    def max_labels(self, n: int) -> int:
        """Most labels (state slots) a sampler may use: the number of sticks of a finite
        prior, else max(n + 1, `MAX_LABELS`)."""
        return self.num_sticks if self.num_sticks is not None else max(n + 1, MAX_LABELS)

    def labels_needed(self, n: int, tail: float) -> int:
        """The first L such that n points drawn from the prior need a label past L with
        probability below `tail` (n prod_{i<=L} b_i / (a_i + b_i) < tail, a union bound),
        searched over the first `CHECK_HORIZON` sticks."""
        a, b = self._table
        with np.errstate(divide="ignore"):  # b_L = 0 ends a finite prior
            log_rest = np.cumsum(np.log(b / (a + b)))
        below = np.flatnonzero(np.log(n) + log_rest < np.log(tail))
        return int(below[0]) + 1 if below.size else int(a.size)

    def initial_capacity(self, n: int) -> int:
        """Slots a sampler starts with: the labels `RUN_SWEEPS` sweeps of n points would need if each
        drew every label afresh from the prior
        ([`labels_needed`][dpppl.priors.stick_breaking.StickBreaking.labels_needed] for `RUN_SWEEPS` n
        draws at 1%), at least 16 and at most max(8 n, 256) (and
        [`max_labels`][dpppl.priors.stick_breaking.StickBreaking.max_labels]). A new label is drawn from
        the tail past the largest occupied one, so a run's labels spread that far under a heavy-tailed
        prior (on the 300 points of `benchmarks/bench_stick_breaking.py`, PY(0.25, 1): label 1,178 within
        1,500 sweeps; this gives 1,841 slots); the sweeps' and label moves' costs follow the largest
        occupied label, not the slots, so room is cheap while each growth is a recompilation. The driver
        grows it when a chain needs more."""
        return int(min(max(self.labels_needed(RUN_SWEEPS * n, 0.01), 16), max(8 * n, 256), self.max_labels(n)))

    def log_prior_alpha(self, alpha):
        return jnp.zeros(())

    # --------------------------------------------- the partition-prior protocol ---
    moves = ()
    """No move is appended: the sticks are integrated out and there is no concentration."""

    def canonical(self, labels) -> np.ndarray:
        """Labels are explicit (label k is stick k + 1): kept as given, checked to be
        non-negative integers."""
        labels = np.asarray(labels)
        if labels.size and (labels.dtype.kind not in "iu" or labels.min() < 0):
            raise DataError("labels of a stick-breaking prior must be non-negative integers "
                            "(label k is stick k + 1)")
        return labels.astype(np.int32)

    def max_slots(self, n: int) -> int:
        """[`max_labels`][dpppl.priors.stick_breaking.StickBreaking.max_labels]: labels may lie past n + 1."""
        return max(int(self.max_labels(n)), 2)

    def min_slots(self, n: int) -> int:
        """[`initial_capacity`][dpppl.priors.stick_breaking.StickBreaking.initial_capacity], so that growing (a
        recompilation) is rare."""
        return self.initial_capacity(n)

    def describe(self) -> str:
        return f"{self.name}(a={_show(self.a)}, b={_show(self.b)})"

    # -------------------------------------------------------------------- sampling ---
    def draw_labels(self, key, n: int, capacity: int, alpha=None):
        """Labels (n,) in [0, capacity) drawn from the labelled prior by the prediction
        rule (eq. 6), traceable; `alpha` is unused (there is no concentration) but fixes
        the dtype. A draw past `capacity` (probability at most n times the prior mass
        past it; see [`labels_needed`][dpppl.priors.stick_breaking.StickBreaking.labels_needed]) is put at the last
        slot."""
        dtype = jnp.asarray(0.0 if alpha is None else alpha).dtype

        def seat(counts, u):
            log_w, log_rest = self.log_expected_weights(counts)
            k = jnp.minimum(sample_index(jnp.concatenate([log_w, log_rest[None]]), u), capacity - 1)
            return counts.at[k].add(1.0), k

        uniforms = jax.random.uniform(key, (n,), dtype=dtype)
        _, z = jax.lax.scan(seat, jnp.zeros((capacity,), dtype), uniforms)
        return z.astype(jnp.int32)


def refuse_labelled(prior, what: str) -> None:
    """Raise [`ModelError`][dpppl.priors.stick_breaking.ModelError] when `what` (a function built on exchangeable
    seating
    weights) is given a prior on explicit labels."""
    if prior.labelled:
        raise ModelError(f"{what} supports exchangeable partition priors (CRP, Pitman-Yor); "
                         f"{prior.describe()} is a prior on explicit labels, which it does not support")


def _expected_weights(xp, a, b, beyond, counts):
    """`StickBreaking.log_expected_weights` (eq. 6) from the sticks `a`, `b` (C,), the mask of the
    slots past a finite prior's last stick `beyond` and the counts (..., C), with the array module
    `xp` (`jax.numpy` in a program, `numpy` on the host)."""
    a_star = a + counts
    b_star = b + xp.cumsum(counts[..., ::-1], axis=-1)[..., ::-1] - counts
    total = xp.log(a_star + b_star)
    log_stop = xp.log(a_star) - total
    log_go = xp.where(b_star > 0, xp.log(xp.where(b_star > 0, b_star, 1.0)), -xp.inf) - total
    log_go = xp.where(beyond, -xp.inf, log_go)
    before = xp.cumsum(log_go, axis=-1)  # sum over j < i: shifted by one stick
    before = xp.concatenate([xp.zeros_like(before[..., :1]), before[..., :-1]], axis=-1)
    log_w = xp.where(beyond, -xp.inf, log_stop + before)
    return log_w, xp.sum(log_go, axis=-1)


def _logsumexp_with(log_values, log_extra):
    """log(sum(exp(log_values)) + exp(log_extra)), -inf safe."""
    top = jnp.maximum(jnp.max(log_values), log_extra)
    safe = jnp.where(jnp.isfinite(top), top, 0.0)
    total = jnp.sum(jnp.exp(log_values - safe)) + jnp.exp(log_extra - safe)
    return jnp.where(jnp.isfinite(top), safe + jnp.log(total), -jnp.inf)


__all__ = ["StickBreaking", "StickParameter", "CHECK_HORIZON", "MAX_LABELS", "MAX_STICKS", "refuse_labelled"]
