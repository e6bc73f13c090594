"""The partition state every partition kernel moves, and operations on it.

A partition of N points is held with a fixed cluster capacity C (static under `jit`):
labels `z` in `[0, C)` and per-slot sufficient statistics `stats` (leading axis
C) whose field `n` is the cluster size; empty slots hold exact zeros. A kernel that
needs a new cluster takes the first empty slot; when none is left it sets `overflow`
and the driver grows the capacity on the host (`grow`) and re-runs the chunk of
iterations from the same keys. Kernels therefore draw random numbers whose shapes do not
depend on C, so that growing the capacity never changes the draws.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


POINT_FIELDS = ("z", "sub_z")
"""The fields of a chain state indexed by point on their last axis (the labels, the sub-cluster
sampler's sub-labels): what a multi-device step keeps split on the points' axis and what each
process of a multi-process run saves of its own points."""


def is_point_field(path) -> bool:
    """Whether the leaf at `path` (a `jax.tree_util` key path into a chain state) is one of the
    `POINT_FIELDS`."""
    return isinstance(path[-1], jax.tree_util.GetAttrKey) and path[-1].name in POINT_FIELDS


class NoExtras(NamedTuple):
    """The extras of a kernel that carries nothing from one step to the next."""


class HybridExtras(NamedTuple):
    """The extras of a hybrid kernel (`dpppl.kernels.base.compose`) some of whose parts carry
    values: `parts[i]` is part i's extras (`NoExtras()` for a part that carries none), so each
    part reads and writes its own type."""

    parts: tuple


class PartitionState(NamedTuple):
    """State of a partition sampler.

    - **z** - int32 (N,) cluster slot of each point.
    - **stats** - family sufficient statistics per slot, leading axis C; `stats.n`
      are the cluster sizes, zero for empty slots.
    - **alpha** - current concentration (fixed, or resampled by the alpha move).
    - **overflow** - bool, set when a move needed an empty slot and found none.
    - **extras** - the values a kernel carries from one step to the next, a NamedTuple of
      that kernel's module (`NoExtras()` for most kernels; `PermExtras` holds the running
      mean of K the permutation sampler adapts in warmup, `SubclusterExtras` the sub-cluster
      labels and per-slot parameters; a hybrid's is a `HybridExtras` of its parts'). Values
      per slot (leading axis C, e.g. instantiated cluster parameters) are the extras' field
      `slots`, which `grow` pads with the statistics. The classes live at module level in
      dpppl modules, so a checkpoint names them (`dpppl.run.portable`).
    - **hyper** - the random hyperparameters of the base measure, a dict from each one's name in
      the model to its current value (a scalar); empty when the model has none. Kernels run at
      these values (`BoundModel.at_hyperparameters`) and the hyperparameter move
      (`dpppl.kernels.hyperparameters`) updates them.
    """

    z: jax.Array
    stats: Any
    alpha: jax.Array
    overflow: jax.Array
    extras: Any = NoExtras()
    hyper: Any = {}


def canonical_labels(labels: np.ndarray) -> np.ndarray:
    """Relabel to 0..K-1 in order of first appearance."""
    labels = np.asarray(labels)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse].astype(np.int32)


def grow(state: PartitionState, new_capacity: int) -> PartitionState:
    """Pad the per-slot statistics and the extras' per-slot values (`slots`) of one chain or a
    batch of chains with empty slots (zeros)."""
    axis = state.z.ndim - 1  # slots follow the batch (chain) axes of z

    def pad(s):
        widths = [(0, 0)] * s.ndim
        widths[axis] = (0, new_capacity - s.shape[axis])
        return jnp.pad(s, widths)

    def grown(extras):
        if isinstance(extras, HybridExtras):
            return HybridExtras(tuple(grown(part) for part in extras.parts))
        if "slots" in extras._fields:
            return extras._replace(slots=jax.tree.map(pad, extras.slots))
        return extras
    return state._replace(stats=jax.tree.map(pad, state.stats), overflow=jnp.zeros_like(state.overflow),
                          extras=grown(state.extras))


def capacity_of(state: PartitionState) -> int:
    return int(state.stats.n.shape[-1])


def cluster_sizes(state: PartitionState) -> jax.Array:
    return state.stats.n


def num_clusters(state: PartitionState) -> jax.Array:
    return jnp.sum(state.stats.n > 0, axis=-1)


def largest_cluster(state: PartitionState) -> jax.Array:
    return jnp.max(state.stats.n, axis=-1).astype(jnp.int32)


def set_row(stats, k, row):
    """Per-slot statistics with row `k` replaced by `row` (a tree of single rows)."""
    return jax.tree.map(lambda a, r: a.at[k].set(r), stats, row)

