"""MAP search for DP mixtures: A* and beam search over clusterings of prefixes (Daumé 2007).

The points are put in a fixed order x_1..x_N. A search state is a clustering c0 of the first
N0 points; its children seat point N0 + 1 in one of the K0 clusters of c0 or in a new one
(Fig. 1). A max-queue holds states scored by g(c0), an estimate of the best log joint of any
completion c of c0,

    max_{c : c|N0 = c0} log p(c, x) = max_c [log p(c) + sum_k log H(x_{c=k})]     (eqs. 4, 5)

with H the family's marginal likelihood. The best state is removed and expanded; with a beam b
the queue is cut to its b best entries; the first complete clustering removed is returned, the
exact MAP when g is admissible (eq. 4) and the queue unbounded (A*). g is a prior part, the
exact maximum of the EPPF over completions (sec. 3.1, here in closed form, for Pitman-Yor too),
plus a data part: `"trivial"` (sec. 3.2, eq. 7), `"admissible"` (sec. 3.3, eqs. 8-11, bounded
family by family) or `"inadmissible"` (sec. 3.4, eq. 12). A greedy pass runs first
(`greedy_start`). The derivation of the prior bound, the per-family data bounds, the pruning
against the greedy pass and the implementation are in `docs/search.md` ("Design notes").
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import time
import warnings
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from dpppl.config import in_x64
from dpppl.dsl.parser import bind_data
from dpppl.errors import DataError, KernelError
from dpppl.families import (BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart,
                            NormalKnownCov)
from dpppl.families.base import add_point, take, with_locations
from dpppl.families.dirichlet_multinomial import log_multinomial_coef
from dpppl.families.gaussian import logdet_pd
from dpppl.core.state import canonical_labels, set_row
from dpppl.priors.stick_breaking import refuse_labelled

HEURISTICS = ("trivial", "admissible", "inadmissible")
ORDERS = ("marginal", "descending", "given", "random")


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What [`map_search`][dpppl.search.beam.map_search] found.

    Attributes
    ----------
    labels : ndarray of int32 (N,)
        Cluster of each point, in the data's order, numbered 0.. by first appearance.
    log_joint : float
        Collapsed log p(x, labels) (as [`dpppl.log_joint`][dpppl.log_joint]).
    num_clusters : int
    states_enqueued, states_dequeued : int
        Queue insertions and removals of the search (the greedy pass excluded).
    seconds : float
        Wall time of the whole call (compilation included).
    heuristic : str
    beam : int or None
    order : ndarray of int (N,)
        The order the points were presented in (indices into the data).
    greedy_log_joint : float or None
        Log joint of the greedy pass (None with `greedy_start=False`).
    proved_optimal : bool
        True when the result is the exact MAP: an admissible score, an unbounded queue
        and no `max_states` stop.
    stopped_early : bool
        True when `max_states` stopped the search (the result is then the greedy pass's).
    """

    labels: np.ndarray
    log_joint: float
    num_clusters: int
    states_enqueued: int
    states_dequeued: int
    seconds: float
    heuristic: str
    beam: Optional[int]
    order: np.ndarray
    greedy_log_joint: Optional[float]
    proved_optimal: bool
    stopped_early: bool


@in_x64
def map_search(model, data=None, heuristic: str = "inadmissible", beam: Optional[int] = 100,
               order="marginal", seed: int = 0, *, greedy_start: bool = True,
               max_states: Optional[int] = None) -> SearchResult:
    """Search for the MAP clustering of a conjugate DP / Pitman-Yor mixture (Daumé 2007).

    Parameters
    ----------
    model : Model, BoundModel or str
        A model (`dpppl.DPMixture(...)`, `dpppl.load(path)`), a model-file path, or a model
        bound to its data (`model.bind(x)`).
    data : array-like, str or path-like, optional
        The data, checked against the model's declaration; None: the bound model's, else those
        the model file names (as [`dpppl.sample`][dpppl.sample] takes them).
    heuristic : {"inadmissible", "admissible", "trivial"}
        The score of sec. 3.4 (eq. 12; fast, not a bound), sec. 3.3 (a bound, O(N^2) per
        state: small data only) or sec. 3.2 (eq. 7; a loose bound). See the module notes.
    beam : int or None, default 100
        Queue size b; None for an unbounded queue (A*: exact MAP with an admissible score).
    order : {"marginal", "descending", "given", "random"} or array of int
        Order of the points: increasing (`"marginal"`, sec. 3.4) or decreasing marginal
        likelihood log H(x_n), the data's order, a random permutation from `seed`, or a
        permutation of 0..N-1.
    seed : int
        Seed of `order="random"`.
    greedy_start : bool, default True
        Run a greedy pass (inadmissible score, beam 1) first; return the better result
        and prune states whose admissible score is below it.
    max_states : int, optional
        Stop after this many queue insertions and return the best clustering found so
        far (the greedy pass), with `stopped_early`; a warning says so.

    Returns
    -------
    SearchResult
    """
    tic = time.perf_counter()
    if heuristic not in HEURISTICS:
        raise KernelError(f"map_search: heuristic must be one of {HEURISTICS}, got {heuristic!r}")
    if beam is not None and (isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or beam < 1):
        raise KernelError(f"map_search: beam must be None (unbounded) or an integer >= 1, got {beam!r}")
    if max_states is not None and (isinstance(max_states, bool) or not isinstance(max_states, (int, np.integer))
                                   or max_states < 1):
        raise KernelError(f"map_search: max_states must be None or an integer >= 1, got {max_states!r}")
    _, bound = bind_data(model, data)
    refuse_labelled(bound.prior, "map_search")
    if heuristic != "inadmissible" and type(bound.family) not in _BOUNDS:
        raise KernelError(f"map_search: heuristic {heuristic!r} has no predictive bound for "
                          f"{bound.family.name}; use heuristic='inadmissible'")
    engine = _engine(bound, heuristic)
    perm = _ordering(bound, order, seed, engine)
    engine.load(bound, perm)

    try:
        incumbent = engine.greedy() if greedy_start else None
        found, enqueued, dequeued, stopped = engine.search(
            None if beam is None else int(beam), incumbent[1] if incumbent is not None else None, max_states)
    finally:
        engine.data = None   # cached engines keep their compiled functions, not the data
    candidates = [c for c in (found, incumbent) if c is not None]
    if not candidates:
        raise KernelError(f"map_search: max_states stopped the search after {enqueued} enqueued states, before "
                          "any clustering was complete; raise max_states or use greedy_start=True")
    if stopped:
        warnings.warn(f"map_search stopped after {enqueued} enqueued states (max_states); returning the greedy "
                      "pass's clustering", RuntimeWarning, stacklevel=2)
    labels_ordered, log_joint = max(candidates, key=lambda c: c[1])
    labels = np.empty(bound.num_points, np.int64)
    labels[perm] = labels_ordered
    labels = canonical_labels(labels)
    return SearchResult(
        labels=labels, log_joint=float(log_joint), num_clusters=int(labels.max()) + 1,
        states_enqueued=enqueued, states_dequeued=dequeued, seconds=time.perf_counter() - tic,
        heuristic=heuristic, beam=None if beam is None else int(beam), order=perm,
        greedy_log_joint=None if incumbent is None else float(incumbent[1]),
        proved_optimal=heuristic != "inadmissible" and beam is None and not stopped,
        stopped_early=stopped)


def _ordering(bound, order, seed, engine) -> np.ndarray:
    n = bound.num_points
    if isinstance(order, str):
        if order not in ORDERS:
            raise KernelError(f"map_search: order must be one of {ORDERS} or a permutation, got {order!r}")
        if order == "given":
            return np.arange(n)
        if order == "random":
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise KernelError(f"map_search: seed must be an integer >= 0, got {seed!r}")
            return np.random.default_rng(seed).permutation(n)
        log_h = np.asarray(engine._marginals(jnp.asarray(bound.x), _locations(bound.family)))
        return np.argsort(log_h if order == "marginal" else -log_h, kind="stable")
    perm = np.asarray(order)
    if perm.shape != (n,) or perm.dtype.kind not in "iu" or not np.array_equal(np.sort(perm), np.arange(n)):
        raise DataError(f"map_search: order must be a permutation of 0..{n - 1} (shape ({n},)), "
                        f"got an array of shape {perm.shape} and dtype {perm.dtype}")
    return perm.astype(np.int64)


# ------------------------------------------------------------------ predictive bounds ---
# Each function bounds log H(x_n | S + T) for every point x_n (N, D), every cluster row S
# of ``stats`` (C rows) and every t in ``t`` (T,), over all sets T of t points inside
# ``box`` (the range of the points that may join): returns (N, C, T). They are used for
# t >= 1 only (t = 0 is the exact predictive).

def _box(family, x):
    """Per-coordinate (low, high) of the points `x` (M, D): what t of them can add."""
    if isinstance(family, DirichletMultinomial):
        return jnp.min(jnp.sum(x, axis=-1)), jnp.max(x, axis=0)  # shortest document, top counts
    return jnp.min(x, axis=0), jnp.max(x, axis=0)


def _bound_normal_known(family, x, stats, t, box):
    lo, hi = box
    t = t[None, None, :, None]
    m = stats.n[None, :, None, None] + t
    v = 1.0 / (1.0 / family.tau2 + m / family.sigma2)
    base = family.mu0 / family.tau2 + stats.s1[None, :, None, :] / family.sigma2
    mean = jnp.clip(x[:, None, None, :], v * (base + t * lo / family.sigma2), v * (base + t * hi / family.sigma2))
    var = v + family.sigma2
    return jnp.sum(-0.5 * jnp.log(2 * jnp.pi * var) - 0.5 * (x[:, None, None, :] - mean) ** 2 / var, axis=-1)


def _bound_beta_bernoulli(family, x, stats, t, box):
    lo, hi = box
    t = t[None, None, :, None]
    n = stats.n[None, :, None, None]
    s1 = stats.s1[None, :, None, :]
    total = jnp.log(family.a + family.b + n + t)
    log_one = jnp.log(family.a + s1 + t * hi) - total
    log_zero = jnp.log(family.b + n - s1 + t * (1.0 - lo)) - total
    return jnp.sum(jnp.where(x[:, None, None, :] > 0.5, log_one, log_zero), axis=-1)


def _bound_dirichlet_multinomial(family, x, stats, t, box):
    shortest, top = box
    t = t[None, None, :, None]
    conc = family.beta + stats.counts[None, :, None, :] + t * top      # largest Dirichlet parameters
    total = (jnp.sum(family.beta) + jnp.sum(stats.counts, axis=-1)[None, :, None]
             + t[..., 0] * shortest)                                   # smallest total
    xs = x[:, None, None, :]
    length = jnp.sum(x, axis=-1)[:, None, None]
    coef = log_multinomial_coef(x)[:, None, None]
    pooled = coef + gammaln(total) - gammaln(total + length) + jnp.sum(gammaln(conc + xs) - gammaln(conc), axis=-1)
    sup_likelihood = coef + jnp.sum(jnp.where(xs > 0, xs * jnp.log(jnp.where(xs > 0, xs, 1.0) / jnp.maximum(
        length[..., None], 1.0)), 0.0), axis=-1)                       # max over theta of Mult(x | theta)
    return jnp.minimum(pooled, sup_likelihood)


def _bound_normal_gamma(family, x, stats, t, box):
    lo, hi = box
    mun, kn, an, bn = family._posterior(stats)   # (C, D): b_n of the cluster only grows
    t = t[None, None, :, None]
    n = stats.n[None, :, None, None]
    kappa = family.kappa0 + n + t
    a = family.a0 + 0.5 * (n + t)
    shift = family.kappa0 * family.mu0 + stats.s1[None, :, None, :]
    loc = jnp.clip(x[:, None, None, :], (shift + t * lo) / kappa, (shift + t * hi) / kappa)
    delta2 = (x[:, None, None, :] - loc) ** 2
    nu = 2.0 * a
    scale2 = jnp.maximum(bn[None, :, None, :] * (kappa + 1) / (a * kappa), delta2)  # best scale >= the floor
    return jnp.sum(gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * jnp.log(nu * jnp.pi * scale2)
                   - 0.5 * (nu + 1) * jnp.log1p(delta2 / (nu * scale2)), axis=-1)


def _bound_niw(family, x, stats, t, box):
    D = family.dim
    _, _, _, psin = family._posterior(stats)      # psi_n only grows (Loewner order)
    logdet = logdet_pd(psin)
    m = stats.n[:, None] + t[None, :]
    kappa = family.kappa0 + m
    df = family.nu0 + m - D + 1
    log_mode = (gammaln((df + D) / 2) - gammaln(df / 2) - 0.5 * D * jnp.log(df * jnp.pi)
                - 0.5 * (logdet[:, None] + D * jnp.log((kappa + 1) / (kappa * df))))
    return jnp.broadcast_to(log_mode[None], (x.shape[0],) + log_mode.shape)


_BOUNDS = {NormalKnownCov: _bound_normal_known, BetaBernoulli: _bound_beta_bernoulli,
           DirichletMultinomial: _bound_dirichlet_multinomial, NormalGamma: _bound_normal_gamma,
           NormalInverseWishart: _bound_niw}


def _best_predictive(family, x, stats, t_ok, box):
    """max over t of the bound on log H(x_n | row + t points), with t = 0 exact: (N, C).

    `t_ok` (N, T) marks the t allowed for each point (t = 0..T-1)."""
    exact = jax.vmap(lambda xi: family.log_predictive(family.predictive_params(stats), xi))(x)  # (N, C)
    t = jnp.arange(t_ok.shape[1], dtype=x.dtype)
    bounded = _BOUNDS[type(family)](family, x, stats, t, box)                                 # (N, C, T)
    bounded = jnp.where(t_ok[:, None, :] & (t > 0)[None, None, :], bounded, -jnp.inf)
    return jnp.maximum(exact, jnp.max(bounded, axis=-1))


# ------------------------------------------------------------------------------ engine ---
class _State:
    """A removed (materialised) search state: per-slot statistics and predictive
    parameters at capacity C, its number of clusters, and its labels as a linked list."""

    __slots__ = ("stats", "params", "num_clusters", "path")

    def __init__(self, stats, params, num_clusters, path):
        self.stats, self.params, self.num_clusters, self.path = stats, params, num_clusters, path


class _Ordered(NamedTuple):
    """The ordered data, passed to the jitted functions as arguments (not constants):
    points `x` (N, D), their marginals `log_h` = log H(x_n) (N,), `suffix` (N + 1,), the
    heuristic's data part for the points from n on (trivial, inadmissible), and `locations`,
    the family's location hyperparameters (`Family.locations`), which move with the data's
    frame (`translated`: the bound data are `x - mean(x)`)."""

    x: jax.Array
    log_h: jax.Array
    suffix: jax.Array
    locations: tuple


def _locations(family) -> tuple:
    """The values of `family`'s location hyperparameters (`Family.locations`)."""
    return tuple(jnp.asarray(getattr(family, name)) for name in family.locations)


def _engine(bound, heuristic) -> "_Engine":
    """An engine for `bound`'s configuration. Engines (and so their compiled functions) are
    cached by the static configuration: family and hyperparameters (the locations by shape
    only, as the data's frame moves them), heuristic, alpha, discount and N; the data and
    the locations are arguments."""
    family, prior = bound.family, bound.prior
    key = (type(family), tuple((f.name, np.shape(v), None if f.name in family.locations
                                else np.asarray(v, dtype=float).tobytes())
                               for f in dataclasses.fields(family) for v in [getattr(family, f.name)]),
           heuristic, float(prior.initial_alpha), float(prior.discount), bound.num_points)
    engine = _ENGINES.get(key)
    if engine is None:
        if len(_ENGINES) >= 64:
            _ENGINES.clear()
        engine = _ENGINES[key] = _Engine(family, heuristic, float(prior.initial_alpha), float(prior.discount),
                                         bound.num_points)
    return engine


_ENGINES: dict = {}


class _Engine:
    """Scores, the greedy pass and the queue search for one static configuration;
    `load` sets the ordered data. Every step on the device is one jitted program (data,
    locations and the states' arrays are arguments; capacities are shapes), so a cached
    engine compiles nothing for new data of the same configuration."""

    def __init__(self, family, heuristic, alpha, discount, n):
        self.family, self.heuristic = family, heuristic
        self.alpha, self.discount, self.n = alpha, discount, n
        self._marginals = jax.jit(self._marginals_fn)
        self._load = jax.jit(self._load_fn)
        self._empty = jax.jit(self._empty_fn, static_argnums=1)
        self._grow = jax.jit(self._grow_fn)
        self._advance = jax.jit(self._advance_fn)
        self._greedy = jax.jit(self._greedy_fn, static_argnums=1)

    def load(self, bound, perm):
        """Set the data: `bound`'s points in order `perm`."""
        self.data = self._load(jnp.asarray(bound.x[perm]), _locations(bound.family))

    def _marginals_fn(self, x, locations):
        """log H(x_n) of each point (N,)."""
        family = with_locations(self.family, locations)
        return family.log_marginal(family.point_stats(x))

    def _load_fn(self, x, locations):
        log_h = self._marginals_fn(x, locations)
        if self.heuristic == "inadmissible":
            per_point = log_h
        elif self.heuristic == "trivial":
            per_point = self._ceilings(with_locations(self.family, locations), x)
        else:
            per_point = jnp.zeros_like(log_h)                                    # scored per state
        suffix = jnp.concatenate([jnp.cumsum(per_point[::-1])[::-1], jnp.zeros(1, x.dtype)])
        return _Ordered(x, log_h, suffix, locations)

    # ----- scores ---------------------------------------------------------------------
    def _future_prior(self, num_clusters, largest, depth):
        """max over completions of the log prior of the remaining points (module notes)."""
        a, d, n = self.alpha, self.discount, self.n
        rest = n - depth
        if d == 0.0:
            all_new = rest * jnp.log(a)
        else:
            all_new = rest * jnp.log(d) + gammaln(a / d + num_clusters + rest) - gammaln(a / d + num_clusters)
        all_largest = gammaln(largest - d + rest) - gammaln(largest - d)
        return jnp.maximum(all_new, all_largest) - (gammaln(a + n) - gammaln(a + depth))

    def _children(self, data, stats, params, depth, log_prior, log_data):
        """Exact terms of every child of a state with `depth` points seated: the child
        seating point `depth` in slot j (an occupied slot, or the first empty one).

        Returns (valid, child log prior, child data log likelihood, child score without
        the heuristic's data part), each (C,)."""
        counts = stats.n
        occupied = counts > 0.5
        k = jnp.sum(occupied)
        slot = jnp.arange(counts.shape[0])
        new = slot == k
        valid = occupied | new
        y = data.x[jnp.minimum(depth, self.n - 1)]
        seat = jnp.where(new, jnp.log(self.alpha + k * self.discount),
                         jnp.log(jnp.where(occupied, counts, 1.0) - self.discount))
        child_prior = log_prior + seat - jnp.log(self.alpha + depth)
        child_data = log_data + with_locations(self.family, data.locations).log_predictive(params, y)
        largest = jnp.maximum(jnp.max(counts), counts + 1.0)
        future = self._future_prior(k + new, largest, depth + 1)
        return valid, child_prior, child_data, child_prior + future + child_data

    def _seat(self, data, stats, params, slot, depth):
        """Add point `depth - 1` to `slot`; refresh that slot's predictive parameters."""
        family = with_locations(self.family, data.locations)
        stats = add_point(stats, slot, family.point_stats(data.x[depth - 1]))
        return stats, set_row(params, slot, family.predictive_params(take(stats, slot)))

    def _admissible(self, data, stats, depth):
        """Sec. 3.3 data bound of the unclustered points for every child (C,)."""
        family, n, x = with_locations(self.family, data.locations), self.n, data.x
        child_depth = depth + 1
        pos = jnp.arange(n)
        t = jnp.arange(n)
        t_ok = (pos[:, None] >= child_depth) & (t[None, :] <= pos[:, None] - child_depth)
        # range of the unclustered points (clustered rows replaced by the last point, which never is)
        box = _box(family, jnp.where(pos[:, None] >= child_depth, x, x[-1]))
        point = family.point_stats(x[jnp.minimum(depth, n - 1)])
        with_point = jax.tree.map(lambda s, p: s + p, stats, point)
        occupied = stats.n > 0.5
        parent = jnp.where(occupied[None, :], _best_predictive(family, x, stats, t_ok, box), -jnp.inf)
        joined = _best_predictive(family, x, with_point, t_ok, box)                        # (N, C)
        empty = _best_predictive(family, x, family.empty_stats((1,)), t_ok, box)[:, 0]
        slots = jnp.arange(parent.shape[1])[None, :]
        top = jnp.argmax(parent, axis=1)[:, None]
        first = jnp.max(parent, axis=1, keepdims=True)
        second = jnp.max(jnp.where(slots == top, -jnp.inf, parent), axis=1, keepdims=True)
        others = jnp.where(slots == top, second, first)            # best occupied cluster other than j
        best = jnp.maximum(jnp.maximum(others, joined), empty[:, None])
        return jnp.sum(jnp.where(pos[:, None] >= child_depth, best, 0.0), axis=0)

    def _ceilings(self, family, x):
        """State-free bound on any predictive of each point given <= N - 1 of the data
        (0 for the discrete families, whose predictives are probabilities)."""
        n = self.n
        if isinstance(family, (BetaBernoulli, DirichletMultinomial)):
            return jnp.zeros(n, x.dtype)
        box = _box(family, x)
        t_ok = jnp.ones((1, n), bool)
        one = lambda xi: _best_predictive(family, xi[None], family.empty_stats((1,)), t_ok, box)[0, 0]  # noqa: E731
        return jax.lax.map(one, x, batch_size=max(1, 2**20 // (n * family.dim)))

    def _advance_fn(self, data, stats, params, slot_depth, prior_data):
        """Materialise a state (point `depth - 1` joins `slot` of its parent's
        statistics) and score its children. The scalars come packed in two arrays
        (`(slot, depth)`, `(log prior, data log likelihood)`): one transfer each."""
        slot, depth = slot_depth[0], slot_depth[1]
        log_prior, log_data = prior_data[0], prior_data[1]
        stats, params = self._seat(data, stats, params, slot, depth)
        valid, child_prior, child_data, partial = self._children(data, stats, params, depth, log_prior, log_data)
        if self.heuristic == "admissible":
            heuristic = self._admissible(data, stats, depth)
        else:
            heuristic = data.suffix[depth + 1]
        score = jnp.where(valid, partial + heuristic, -jnp.inf)
        return stats, params, jnp.stack([score, child_prior, child_data])

    # ----- greedy pass ------------------------------------------------------------------
    def _greedy_fn(self, data, capacity):
        def body(depth, carry):
            stats, params, labels, log_prior, log_data, overflow = carry
            valid, child_prior, child_data, partial = self._children(data, stats, params, depth, log_prior,
                                                                     log_data)
            j = jnp.argmax(jnp.where(valid, partial, -jnp.inf))
            stats, params = self._seat(data, stats, params, j, depth + 1)
            full = jnp.all(stats.n > 0.5)
            return (stats, params, labels.at[depth].set(j.astype(jnp.int32)), child_prior[j], child_data[j],
                    overflow | full)

        stats, params = self._seat(data, *self._empty_fn(data, capacity), 0, 1)
        init = (stats, params, jnp.zeros(self.n, jnp.int32), jnp.zeros((), data.x.dtype), data.log_h[0],
                jnp.all(stats.n > 0.5))
        _, _, labels, log_prior, log_data, overflow = jax.lax.fori_loop(1, self.n, body, init)
        return labels, log_prior + log_data, overflow

    def _empty_fn(self, data, capacity):
        """Statistics and predictive parameters of `capacity` empty slots."""
        family = with_locations(self.family, data.locations)
        stats = family.empty_stats((capacity,))
        return stats, family.predictive_params(stats)

    def greedy(self):
        """Beam-1 search with the inadmissible score, as one jitted loop: (labels, log joint)."""
        capacity = min(self.n + 1, 16)
        while True:
            labels, log_joint, overflow = self._greedy(self.data, capacity)
            if not bool(overflow) or capacity == self.n + 1:
                return np.asarray(labels), float(log_joint)
            capacity = min(2 * capacity, self.n + 1)

    # ----- queue search -----------------------------------------------------------------
    def _grow_fn(self, data, stats, params):
        """The slots of a state doubled (at most N + 1), the new ones empty."""
        capacity = stats.n.shape[0]
        more = self._empty_fn(data, min(self.n + 1, 2 * capacity) - capacity)
        cat = lambda a, b: jnp.concatenate([a, b], axis=0)  # noqa: E731
        return jax.tree.map(cat, (stats, params), more)

    def search(self, beam, incumbent, max_states):
        """Fig. 1. Returns ((labels, log joint) or None, enqueued, dequeued, stopped).

        An unbounded queue is a heap; a beam is a list sorted by increasing score (best
        last) into which a child is inserted only when it would survive the cut to the
        `beam` best entries, which is the cut of Fig. 1 done without the losers."""
        tie = itertools.count()
        root = _State(*self._empty(self.data, min(self.n + 1, 16)), 0, None)
        # entry: (key, tie, parent state, slot, depth, log prior, data log lik, clusters) with
        # key = -score and tie increasing in a heap; key = score and tie decreasing in a beam
        sign = 1.0 if beam is not None else -1.0
        queue = [(0.0, 0, root, 0, 1, 0.0, float(self.data.log_h[0]), 1)]
        floor = -np.inf
        if incumbent is not None and self.heuristic != "inadmissible":
            floor = incumbent - 1e-9 * max(1.0, abs(incumbent))   # admissible: prune below the greedy pass
        enqueued, dequeued = 1, 0
        while queue:
            _, _, parent, slot, depth, log_prior, log_data, k = queue.pop() if beam else heapq.heappop(queue)
            dequeued += 1
            path = (slot, parent.path)
            if depth == self.n:
                labels = np.empty(self.n, np.int64)
                for i in range(self.n - 1, -1, -1):
                    labels[i], path = path
                return (labels, log_prior + log_data), enqueued, dequeued, False
            if k >= int(parent.stats.n.shape[0]):
                parent = _State(*self._grow(self.data, parent.stats, parent.params), parent.num_clusters, parent.path)
            stats, params, children = self._advance(self.data, parent.stats, parent.params,
                                                    np.array((slot, depth), np.int32),
                                                    np.array((log_prior, log_data)))
            state = _State(stats, params, k, path)
            scores, priors, datas = np.asarray(children)[:, :k + 1].tolist()
            for rank, j in enumerate(sorted(range(k + 1), key=scores.__getitem__, reverse=True)):
                score = scores[j]
                if score <= floor or (beam and len(queue) - bisect.bisect_left(queue, (score,)) + rank >= beam):
                    break    # this child and every worse one would be pruned or cut
                entry = (sign * score, -sign * next(tie), state, j, depth + 1, priors[j], datas[j], k + (j == k))
                if beam:
                    bisect.insort(queue, entry)
                else:
                    heapq.heappush(queue, entry)
                enqueued += 1
            if beam and len(queue) > beam:
                del queue[:len(queue) - beam]
            if max_states is not None and enqueued >= max_states:
                return None, enqueued, dequeued, True
        return None, enqueued, dequeued, False
