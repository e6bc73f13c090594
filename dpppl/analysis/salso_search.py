"""The SALSO search (Dahl, Johnson & Müller 2022): compiled passes over the points.

A *loss* here is N times a posterior expected loss of a partition c, up to a constant
that does not depend on c, kept in running tables so that the change when one point
joins each cluster costs one vectorised step:

* `"vi"`, the exact expected variation of information over S draws (weights w_s, the
  share of each draw): with the contingency counts n_{s,l,k} = |C_{s,l} ∩ c_k| and
  f(m) = m log m, N E[VI] = sum_k f(|c_k|) - 2 sum_s w_s sum_{l,k} f(n_{s,l,k}) + const.
  Point i joining cluster k changes it by g(|c_k|) - 2 sum_s w_s g(n_{s,l_si,k}), with
  g(m) = f(m + 1) - f(m) and l_si the cluster of i in draw s: one row of each draw's
  table, O(S K) per point for all K clusters, and a move updates S entries. The table
  holds (S, K_draws, K) counts (the JAX pass keeps g of them as a second table); the
  N x N co-clustering matrix is never formed.
* `"vi_lb"`, Wade & Ghahramani's (2018) lower bound from the similarity matrix p:
  N VI_LB = sum_k f(|c_k|) - 2 sum_i log W_{i,c_i} + const with W_{ik} = sum_{j in c_k}
  p_ij, kept as an (N, K) table; O(N) per point.

The search (Dahl et al. 2022, sec. 4), one run per initialisation: (1) *sequential
allocation* of the points in a random order, each to the existing or a new cluster that
minimises the loss of the points allocated so far; (2) *sweetening*: sweeps over the
points in random orders, each point moved to the cluster (or a new one) that minimises
the loss, staying put unless another cluster is better by more than 1e-9, until a sweep
moves no point (or `max_sweeps`); (3) *zealous updates*: the occupied clusters in a random
order, at most `max_zealous` of them (R's salso: 10), each dissolved and its points
reallocated sequentially in a random order; the result is kept only where the loss fell,
and a run that kept one is sweetened again. (An attempt is judged before sweetening, so
that it costs its cluster's points, not a sweep over all N.) Every step lowers the loss or
keeps it, so a run ends no worse than its first sweetening.

A pass over the points is one compiled call (`_visit`): for the exact VI a C++ loop
(`salso_native.cc`, through XLA's FFI; `DPPPL_NATIVE` and `dpppl.core.native` decide and
build it), else a JAX `fori_loop`, the same arithmetic summed in another order. Python
drives the passes; the `num_runs` runs, each with its own random orders (seeded by the
seed and the run's index, so results do not depend on scheduling), run on two threads.
Shapes are padded to size classes (at most 1/8 padding: 8..16 times a power of two) so
that one compiled program serves nearby sizes; padded points are never visited, padded
draws weigh 0. The cluster capacity K starts small (at most 16 slots: the cost of a
placement grows with it) and a run doubles it after any pass in which a placement found no
free slot for a new cluster, then sweeps again; sweetening ends only with a sweep that
moved nothing and had room, so the capacity never constrains the result. The passes compute
in float64 whatever the process's JAX precision (`jax.enable_x64` around tracing and calls).
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core import native as native_code

NATIVE_SOURCE = Path(__file__).with_name("salso_native.cc")
_TARGETS = {"dpppl_salso_visit_s16": "DppplSalsoVisitS16", "dpppl_salso_visit_s32": "DppplSalsoVisitS32"}
_TOL = 1e-9  # a move must lower N times the loss by more than this


def size_class(n: int, minimum: int = 8) -> int:
    """The smallest m >= max(n, minimum) of the form j 2^e with 8 <= j <= 16."""
    m = max(int(n), minimum)
    shift = max(m.bit_length() - 4, 0)
    return -(-m >> shift) << shift


def _xlogx(m):
    m = m.astype(jnp.float64)
    return jnp.where(m > 0, m * jnp.log(jnp.where(m > 0, m, 1.0)), 0.0)


class _State(NamedTuple):
    label: jax.Array   # (N,) cluster of each point, -1 while unallocated
    size: jax.Array    # (K,) points per cluster
    tables: tuple      # the loss's running tables
    full: jax.Array    # () whether some placement found no free slot for a new cluster


# ---------------------------------------------------------------------- the losses ---
class _VI:
    """Exact expected VI over weighted draws.

    data = (rows (N, S): row s K_draws + l_si of point i in each draw's table, w (S,),
    g (N + 2,): g(m)); tables = (counts, g(counts)), both (S K_draws, K).
    """

    @staticmethod
    def costs(data, tables, label, size, i):
        rows, w, g = data
        return g[size] - 2.0 * (w @ tables[1][rows[i]])

    @staticmethod
    def move(data, tables, i, k, sign):
        rows, _, g = data
        counts, gains = tables
        new = counts[rows[i], k] + sign
        return counts.at[rows[i], k].set(new), gains.at[rows[i], k].set(g[new])

    @staticmethod
    def total(data, tables, label, size):
        _, w, _ = data
        counts = tables[0].reshape(w.shape[0], -1, tables[0].shape[1])
        return _xlogx(size).sum() - 2.0 * jnp.einsum("s,slk->", w, _xlogx(counts))


class _VILowerBound:
    """Wade & Ghahramani's lower bound. data = (p (N, N), g (N + 2,)); tables = (W (N, K),)."""

    @staticmethod
    def costs(data, tables, label, size, i):
        p, g = data
        (within,) = tables
        placed = label >= 0
        own = jnp.where(placed, label, 0)
        current = jnp.where(placed, within[jnp.arange(label.shape[0]), own], 1.0)
        gain = jnp.where(placed, jnp.log(current + p[:, i]) - jnp.log(current), 0.0)
        shared = jax.ops.segment_sum(gain, own, num_segments=size.shape[0])
        return g[size] - 2.0 * (jnp.log(within[i] + p[i, i]) + shared)

    @staticmethod
    def move(data, tables, i, k, sign):
        p, _ = data
        return (tables[0].at[:, k].add(sign * p[:, i]),)

    @staticmethod
    def total(data, tables, label, size):
        placed = label >= 0
        own = tables[0][jnp.arange(label.shape[0]), jnp.where(placed, label, 0)]
        return _xlogx(size).sum() - 2.0 * jnp.sum(jnp.where(placed, jnp.log(jnp.where(placed, own, 1.0)), 0.0))


LOSSES = {"vi": _VI, "vi_lb": _VILowerBound}


# ---------------------------------------------------------------------- the search ---
def _place(loss, data, state, i, prefer):
    """Put unallocated point i where the loss is least; `prefer` (its old cluster, or -1)
    wins ties. One free slot stands for "a new cluster": `prefer`'s if it fell empty."""
    costs = loss.costs(data, state.tables, state.label, state.size, i)
    slots = jnp.arange(state.size.shape[0])
    empty = state.size == 0
    stay = prefer >= 0
    old = jnp.maximum(prefer, 0)
    new_slot = jnp.where(stay & empty[old], old, jnp.argmax(empty))
    costs = jnp.where(~empty | (slots == new_slot), costs, jnp.inf)
    best = jnp.argmin(costs)
    k = jnp.where(stay & (costs[old] <= costs[best] + _TOL), old, best).astype(jnp.int32)
    return _State(state.label.at[i].set(k), state.size.at[k].add(1), loss.move(data, state.tables, i, k, 1),
                  state.full | ~empty.any())


def _leave(loss, data, state, i):
    """Take point i out of its cluster (nothing if it is unallocated)."""
    old = state.label[i]
    k, sign = jnp.maximum(old, 0), jnp.where(old >= 0, -1, 0).astype(jnp.int32)
    return _State(state.label.at[i].set(-1), state.size.at[k].add(sign), loss.move(data, state.tables, i, k, sign),
                  state.full)


@functools.partial(jax.jit, static_argnames=("kind", "native"), donate_argnames=("state",))
def _visit(kind, data, state, order, m, native=False):
    """Visit the points order[:m] in turn: each leaves its cluster and is placed where the
    loss is least, staying put unless another cluster is strictly better; an unallocated
    point is allocated. Returns the state and how many points changed cluster. `native`:
    the same pass in C++ (`salso_native.cc`, the "vi" loss only)."""
    if native:
        rows, w, g = data
        out = (jax.ShapeDtypeStruct(state.label.shape, jnp.int32), jax.ShapeDtypeStruct(state.size.shape, jnp.int32),
               jax.ShapeDtypeStruct(state.tables[0].shape, state.tables[0].dtype), jax.ShapeDtypeStruct((), jnp.bool_),
               jax.ShapeDtypeStruct((), jnp.int32))
        target = f"dpppl_salso_visit_{'s16' if state.tables[0].dtype == jnp.int16 else 's32'}"
        call = jax.ffi.ffi_call(target, out, input_output_aliases={6: 0, 7: 1, 8: 2, 9: 3})
        label, size, counts, full, moved = call(
            rows, w, g, order, jnp.asarray(m, jnp.int32), jnp.asarray(_TOL, jnp.float64), state.label, state.size,
            state.tables[0], state.full)
        return _State(label, size, (counts,), full), moved
    loss = LOSSES[kind]

    def body(j, carry):
        s, moved = carry
        i = order[j]
        old = s.label[i]
        s = _place(loss, data, _leave(loss, data, s, i), i, old)
        return s, moved + (s.label[i] != old)

    return jax.lax.fori_loop(0, m, body, (state, jnp.array(0)))


def use_native(kind: str) -> bool:
    """Whether the pass runs in C++: the exact VI loss, `DPPPL_NATIVE` not off, the library built."""
    if kind != "vi" or native_code.wanted(None) is False:
        return False
    return native_code.load(NATIVE_SOURCE, _TARGETS, required=native_code.mode() == "on")


@functools.partial(jax.jit, donate_argnames=("state",))
def _dissolve(state, k):
    """Cluster k emptied: its points unallocated, its column of every table zero (only
    its points contributed to it)."""
    return _State(jnp.where(state.label == k, -1, state.label), state.size.at[k].set(0),
                  tuple(t.at[:, k].set(0) for t in state.tables), state.full)


@functools.partial(jax.jit, static_argnames=("kind",))
def _total(kind, data, state):
    return LOSSES[kind].total(data, state.tables, state.label, state.size)


class _Problem(NamedTuple):
    kind: str
    native: bool       # the pass in C++
    data: tuple        # the loss's data (device arrays)
    tables: tuple      # its empty tables at the current capacity (NumPy)
    n: int             # real points; the rest of the padded length is never visited
    max_sweeps: int
    max_zealous: int


def _order(rng, points, length):
    order = np.zeros(length, np.int32)
    order[:points.size] = rng.permutation(points)
    return jnp.asarray(order), points.size


def _roomy(state):
    """`state` with twice the cluster capacity where a placement found no free slot (empty
    columns appended; `full` cleared), else `state`."""
    capacity = state.size.shape[0]
    if not bool(state.full) or capacity >= state.label.shape[0]:
        return state
    return _State(state.label, jnp.pad(state.size, (0, capacity)),
                  tuple(jnp.pad(t, ((0, 0), (0, capacity))) for t in state.tables), jnp.array(False))


def _pass(problem, state, rng, points):
    """One `_visit` of `points` in a random order, then more capacity if it ran out;
    (state, how many points moved, whether the capacity grew)."""
    state, moved = _visit(problem.kind, problem.data, state, *_order(rng, points, state.label.shape[0]),
                          problem.native)
    grown = _roomy(state)
    return grown, int(moved), grown is not state


def _sweeten(problem, state, rng):
    """Sweeps until one moves no point with a free slot at hand (or `max_sweeps`)."""
    for _ in range(problem.max_sweeps):
        state, moved, grew = _pass(problem, state, rng, np.arange(problem.n))
        if moved == 0 and not grew:
            break
    return state


def _run(problem, seed):
    """One SALSO run (module docstring): labels (padded length) and N times the loss up
    to the loss's constant."""
    rng = np.random.default_rng(seed)
    n_pad = problem.data[0].shape[0]
    state = _State(jnp.full(n_pad, -1, jnp.int32), jnp.zeros(problem.tables[0].shape[1], jnp.int32),
                   tuple(jnp.asarray(t) for t in problem.tables), jnp.array(False))
    state = _sweeten(problem, _pass(problem, state, rng, np.arange(problem.n))[0], rng)
    value, improved = float(_total(problem.kind, problem.data, state)), False
    occupied = np.nonzero(np.asarray(state.size))[0]
    for k in rng.permutation(occupied)[:problem.max_zealous]:
        label = np.array(state.label)
        if not np.any(label == k):
            continue
        saved = jax.tree.map(jnp.copy, state)
        trial, _, grew = _pass(problem, _dissolve(state, int(k)), rng, np.nonzero(label == k)[0])
        trial_value = float(_total(problem.kind, problem.data, trial))
        if trial_value < value - _TOL:
            state, value, improved = trial, trial_value, True
        else:  # the state before the attempt, with the room the attempt needed
            state = _roomy(saved._replace(full=jnp.array(True))) if grew else saved
    if improved:
        state = _sweeten(problem, state, rng)
        value = float(_total(problem.kind, problem.data, state))
    return np.asarray(state.label), value


def _run_x64(problem, seed):
    """`_run` in float64 on a worker thread (JAX's precision setting is per thread)."""
    with jax.enable_x64(True):
        return _run(problem, seed)


def search(kind, data, tables, n, *, num_runs, max_sweeps, max_zealous, seed, threads=2, native=None):
    """Run SALSO `num_runs` times, on up to `threads` threads; the best run's labels
    (padded length) and N times its loss up to the loss's constant.

    `data` and `tables` are the loss's (see `_VI`, `_VILowerBound`) as NumPy arrays,
    `tables` empty at the initial capacity (a run doubles it whenever a placement finds no
    free slot, and sweetens again); `n` the number of real points.
    """
    with jax.enable_x64(True):
        data = tuple(jnp.asarray(a) for a in data)
        cpp = use_native(kind) if native is None else native
        if cpp:  # counts only, in 16 bits where they fit: the memory a placement reads bounds its speed
            tables = (tables[0].astype(np.int16 if data[0].shape[0] < 2**15 else np.int32),)
        problem = _Problem(kind, cpp, data, tables, n, max_sweeps, max_zealous)
        with ThreadPoolExecutor(max(1, min(threads, num_runs))) as pool:
            results = list(pool.map(lambda r: _run_x64(problem, (seed, r)), range(num_runs)))
    return min(results, key=lambda r: r[1])
