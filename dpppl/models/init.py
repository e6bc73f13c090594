"""How chains start: the init strategies and the one capacity rule.

[`dpppl.sample`][dpppl.sample] and the NumPyro adapter both start chains here. An init strategy is a
callable `(target, keys, capacity) -> states` (one state per key, batched along axis 0);
the names `"sequential"`, `"single"`, `"prior"` and `"search"` (registered by
`dpppl.search`) stand for the built-in ones, and labels given as an array start every
chain from them. States are built by the target's own methods (seat, state from labels,
prior draw), compiled once per target structure and capacity (`dpppl.core.compiled.on_target`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core import numerics_random as random
from dpppl.core.compiled import on_target
from dpppl.core.protocols import InitStrategy, Target
from dpppl.core.state import PartitionState, grow
from dpppl.errors import ArgumentError, check_positive_int
from dpppl.families.base import cluster_log_marginals, segment_stats

_STRATEGIES: dict[str, InitStrategy] = {}


def register_init(name: str, strategy: InitStrategy) -> None:
    """Make `init=name` mean `strategy`."""
    _STRATEGIES[name] = strategy


def init_names() -> tuple[str, ...]:
    return tuple(_STRATEGIES)


def initial_slots(target: Target, labels_in_use: int, requested: int | None = None, *,
                  growable: bool = True) -> int:
    """The number of cluster slots a chain starts with.

    `requested` when given (at least the labels in use); otherwise room for twice the
    labels in use plus 8, at least 16 and at least the prior's own floor
    (`target.min_slots()`: a stick-breaking prior's labels lie past N + 1), rounded up to a
    `capacity_class`. A run that cannot grow its capacity (the NumPyro adapter, whose loop is
    NumPyro's) starts with four times the labels in use, at least 64, rounded up likewise. Never
    more than `target.max_slots()`.
    """
    if requested is not None:
        check_positive_int("capacity", requested, 2)
        want = int(requested)
    elif growable:
        want = capacity_class(max(16, 2 * labels_in_use + 8, target.min_slots()))
    else:
        want = capacity_class(max(64, 4 * labels_in_use, target.min_slots()))
    return int(max(min(want, target.max_slots()), labels_in_use))


def seated_slots(target: Target, requested: int | None = None) -> int:
    """The capacity a sequential seating (`sequential`) tries first: `initial_slots` for 8 labels in
    use, or `requested`; what a run's states have unless a chain's seating filled its slots."""
    return initial_slots(target, 8, requested)


def capacity_class(slots: int) -> int:
    """The smallest capacity of the ladder 16, 24, 32, 48, 64, 96, ... (2^k and 3 * 2^(k-1)) that
    holds `slots`: runs whose chains start with similar numbers of clusters start with the same
    capacity, so they share compiled programs (the capacity never changes the draws)."""
    power = 1 << max(int(slots) - 1, 1).bit_length()  # the power of two at or above slots
    return max(16, power * 3 // 4 if power * 3 // 4 >= slots else power)


def grown_slots(target: Target, capacity: int) -> int:
    """The capacity after a chain ran out of empty slots: doubled, at most `target.max_slots()`."""
    return int(min(2 * capacity, target.max_slots()))


def from_labels(labels) -> InitStrategy:
    """A strategy starting every chain from `labels`: shape (N,) or (num_chains, N)."""

    def strategy(target: Target, keys, capacity=None) -> PartitionState:
        rows = check_labels(target, labels, len(keys))
        cap = initial_slots(target, int(rows.max()) + 1, capacity)
        return states_from_labels(target, keys, rows, cap)

    return strategy


def check_labels(target: Target, labels, num_chains: int) -> np.ndarray:
    """Labels given by a user as (num_chains, N) non-negative integers the prior accepts;
    [`ArgumentError`][dpppl.errors.ArgumentError] naming the first bad label's position otherwise."""
    n = target.num_points
    arr = np.asarray(labels)
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
        raise ArgumentError(f"init labels must be integers, got dtype {arr.dtype}")
    if arr.ndim == 1:
        arr = np.broadcast_to(arr, (num_chains, arr.shape[0]))
    if arr.shape != (num_chains, n):
        raise ArgumentError(f"init labels must have shape ({n},) or ({num_chains}, {n}), got {np.shape(labels)}")
    if np.any(arr < 0):
        chain, point = np.argwhere(arr < 0)[0]
        where = f"point {point}" if np.ndim(labels) == 1 else f"chain {chain}, point {point}"
        raise ArgumentError(f"init labels must be non-negative integers (cluster numbers), got "
                            f"{arr[chain, point]:g} at {where} ({int(np.sum(np.asarray(labels) < 0))} negative in all)")
    return np.stack([target.prior.canonical(row.astype(np.int64)) for row in arr])


def states_from_labels(target: Target, keys, labels, capacity: int) -> PartitionState:
    build = on_target("states_from_labels", target, lambda t, keys, labels: jax.vmap(
        lambda k, lab: t.state_from_labels(k, lab, capacity))(keys, labels), capacity)
    return build(keys, jnp.asarray(labels, jnp.int32))


def sequential(target: Target, keys, capacity=None) -> PartitionState:
    """Every point seated in a random order by the prior's weights times the predictive
    (Liang et al. 2007, sec. 5.1); the capacity grows until no chain runs out of slots.
    A seating that filled every slot is grown once more (`grown_slots`, unless a capacity was
    asked for): the first chunk would otherwise overflow at once and compile again at that
    capacity, after running for nothing (capacity never changes the draws)."""
    cap = seated_slots(target, capacity)
    while True:
        seat = on_target("seat", target, lambda t, keys, cap=cap: jax.vmap(  # cap bound now: the loop changes it
            lambda k: t.seat(k, t.empty_state(cap)))(keys), cap, light=getattr(target, "native_seat", False))
        states = seat(keys)
        if not np.any(np.asarray(states.overflow)) or cap >= target.max_slots():
            break
        cap = grown_slots(target, cap)
    # a chain with no empty slot (counted on the host: an eager jnp reduction is a program to compile)
    filled = bool(np.any(np.sum(np.asarray(states.stats.n) > 0, axis=-1) >= cap))
    room = grown_slots(target, cap) if filled and capacity is None else cap
    return grow(states, room) if room > cap else states


def single(target: Target, keys, capacity=None) -> PartitionState:
    """Every point in one cluster."""
    return states_from_labels(target, keys, np.zeros((len(keys), target.num_points), np.int32),
                              initial_slots(target, 1, capacity))


def prior(target: Target, keys, capacity=None) -> PartitionState:
    """A partition drawn from the prior for each chain (the target's `draw_labels`; a
    labelled prior's rare draws past `max(N + 1, target.min_slots())` labels are put at
    the last of them)."""
    draw_slots = min(target.max_slots(), max(target.num_points + 1, target.min_slots()))
    draw = on_target("prior_labels", target, lambda t, keys: jax.vmap(lambda k: t.draw_labels(k, draw_slots))(keys),
                     draw_slots)
    k_draw, k_state = jax.vmap(random.split, out_axes=1)(keys)
    labels = np.stack([target.prior.canonical(row) for row in np.asarray(draw(k_draw))])
    return states_from_labels(target, k_state, labels, initial_slots(target, int(labels.max()) + 1, capacity))


REASSIGN_BLOCK = 4096
"""Points `reassigned` scores against every cluster at once (block x capacity predictive densities)."""


def reassigned(target: Target, stats) -> tuple[np.ndarray, object]:
    """Each point of `target` given to the cluster, of those with statistics `stats` (leaves with
    leading axes (chains, C); a conjugate family's), whose size times posterior predictive density
    at the point is highest (a hard assignment, `REASSIGN_BLOCK` points at a time): the labels
    (chains, N) int32 and the statistics of the target's points under them (leading axes (chains,
    C)). What `dpppl.run.distributed.merged_seating` does to each process's points against the
    clusters every process seated, so that points a process's seating put in a cluster spanning two
    groups go to the other processes' clusters of their own group before the clusters are merged."""
    slots = int(np.shape(stats.n)[-1])
    assign = on_target("reassigned", target, lambda t, stats: jax.vmap(lambda s: _reassigned(t, s))(stats), slots)
    labels, own = assign(jax.tree.map(jnp.asarray, stats))
    return np.asarray(labels), jax.tree.map(np.asarray, own)


def _reassigned(target: Target, stats):
    """`reassigned` for one chain's statistics `stats` (leading axis C)."""
    family, x = target.family, jnp.asarray(target.x)
    params = family.predictive_params(stats)
    log_size = jnp.where(stats.n > 0, jnp.log(jnp.where(stats.n > 0, stats.n, 1.0)), -jnp.inf)
    n, block = x.shape[0], min(REASSIGN_BLOCK, x.shape[0])
    blocks = -(-n // block)
    padded = jnp.pad(x, [(0, blocks * block - n)] + [(0, 0)] * (x.ndim - 1))
    best = jax.lax.map(lambda rows: jnp.argmax(jax.vmap(lambda point: log_size + family.log_predictive(params, point))(
        rows), axis=-1), padded.reshape((blocks, block) + x.shape[1:]))
    labels = best.reshape(-1)[:n].astype(jnp.int32)
    return labels, segment_stats(family, x, labels, stats.n.shape[0])


def merged_labels(target: Target, stats) -> np.ndarray:
    """The clusters of a greedy agglomerative pass over each chain's clusters, given their statistics
    `stats` (leaves with leading axes (chains, C), as a state holds them; empty slots have `n` 0): while
    merging some two clusters raises the collapsed log joint (the prior's EPPF at its initial alpha plus
    each cluster's log marginal, the family's closed form or numerical one: `BoundModel.lp` at the start's
    hyperparameters, without alpha's prior density, which no merge changes), the two whose merge raises it
    most are merged. Returns (chains, C) int32: the label each slot's points take, the merged clusters
    numbered 0, 1, ... in the order of their lowest slot (an empty slot's entry is that of the cluster it
    would join, unused). What `dpppl.run.distributed.start` uses to join the copies of one cluster that
    the processes' own seatings made: an initialisation, not an MCMC move. One compiled program per
    target structure and C; O(C^2) log marginals, then O(C) per merge."""
    slots = int(np.shape(stats.n)[-1])
    merge = on_target("merged_labels", target, lambda t, stats: jax.vmap(lambda s: _merged(t, s))(stats), slots)
    return np.asarray(merge(jax.tree.map(jnp.asarray, stats)))


def _merged(target: Target, stats) -> jax.Array:
    """`merged_labels` of one chain's statistics `stats` (leading axis C)."""
    family, prior = target.family, target.prior
    slots, n0 = stats.n.shape[0], stats.n
    alpha = jnp.asarray(prior.initial_alpha, n0.dtype)
    index = jnp.arange(slots)

    def log_marginals(s):  # log p(x_c) of each row, 0 for an empty one
        return jnp.where(s.n > 0, cluster_log_marginals(family, s), 0.0)

    def unions(s, a):  # the log marginal of row a's points with each row's
        return log_marginals(jax.tree.map(lambda v: v + v[a], s))

    def gains(n, own, joint):  # the change of the log joint of merging rows a < b, -inf for no pair
        eppf = jax.vmap(lambda a: jax.vmap(lambda b: prior.log_eppf_change(
            jnp.stack([n[a], n[b]]), jnp.stack([n[a] + n[b], jnp.zeros_like(n[b])]), n, alpha))(index))(index)
        pair = (index[:, None] < index[None, :]) & (n[:, None] > 0) & (n[None, :] > 0)
        return jnp.where(pair, eppf + joint - own[:, None] - own[None, :], -jnp.inf)

    def merge(carry):
        s, own, joint, joins, _ = carry
        a, b = jnp.divmod(jnp.argmax(carry[4]), slots)
        s = jax.tree.map(lambda v: v.at[a].add(v[b]).at[b].set(jnp.zeros_like(v[b])), s)
        own = own.at[a].set(joint[a, b]).at[b].set(0.0)
        row = unions(s, a)
        joint = joint.at[a].set(row).at[:, a].set(row)
        return s, own, joint, joins.at[b].set(a), gains(s.n, own, joint)

    own = log_marginals(stats)
    joint = jax.lax.map(lambda a: unions(stats, a), index)
    carry = (stats, own, joint, index, gains(n0, own, joint))
    joins = jax.lax.while_loop(lambda c: jnp.max(c[4]) > 0, merge, carry)[3]
    # each slot joins a lower one (a < b): its cluster is that of the slot it joined, resolved upwards
    root = jax.lax.fori_loop(0, slots, lambda i, r: r.at[i].set(r[joins[i]]), index)
    first = (root == index) & (n0 > 0)
    return (jnp.cumsum(first) - 1)[root].astype(jnp.int32)


register_init("sequential", sequential)
register_init("single", single)
register_init("prior", prior)


def resolve_init(init) -> tuple[InitStrategy, str]:
    """`init` (a registered name, a strategy callable or labels) as a strategy and the
    name the run records."""
    if isinstance(init, str):
        if init not in _STRATEGIES:
            raise ArgumentError(f"init must be one of {init_names()}, a callable or an array of labels, "
                                f"got {init!r}")
        return _STRATEGIES[init], init
    if callable(init):
        return init, next((name for name, known in _STRATEGIES.items() if known is init), "callable")
    return from_labels(init), "labels"


def initial_states(target: Target, init, keys, capacity: int | None = None) -> PartitionState:
    """The initial state of every chain (one per key, batched along axis 0)."""
    strategy, _ = resolve_init(init)
    return strategy(target, keys, capacity)


__all__ = ["capacity_class", "check_labels", "from_labels", "grown_slots", "init_names", "initial_slots",
           "initial_states", "merged_labels", "prior", "reassigned", "register_init", "resolve_init", "sequential",
           "single", "states_from_labels"]

