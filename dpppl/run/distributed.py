"""Runs over several processes joined by `jax.distributed` (docs/distributed.md).

In a program launched on P processes (any launcher JAX supports: `jax.distributed.initialize()`
detects SLURM, Open MPI and Kubernetes; two local processes take a coordinator address), every
process calls `dpppl.sample(model, x_local, ...)` with its own rows and the same arguments. The run
is then one run over the global data set, the rows of process 0, then those of process 1, ...:

- every point stays on its process: `own_rows` validates the process's rows and all-gathers only a
  small header (row counts, shapes) and the summaries of each process's rows (count, sum, scatter,
  minimum, maximum: `dpppl.core.summaries.RowSummaries`), from which the model is bound (`bound`):
  data-dependent hyperparameters (`mean(x)`, `cov(x) / 10`, ...) and the data's translation are the
  global data set's, and `kernel="auto"` and the sub-cluster kernel see the global N;
- the programs run on the global points as one global array (`program_of`:
  `jax.make_array_from_process_local_data` over `jax.devices()`, sharded on the points' axis), each
  process's rows padded to one size (`local_size`: whole blocks of the sub-cluster sampler on each
  device) on its own devices, the real rows said by every process's count (`BoundModel.num_valid`,
  `dpppl.core.points`); the sub-cluster kernel's mesh spans the devices of every process, so each
  device runs the label and statistics passes of its own points and the statistics are summed
  across devices and processes (`psum` over gloo on CPU, NCCL on GPUs); what is per cluster runs
  replicated, from the same keys, so every process holds the same clusters, while the labels stay
  split across the devices, each process reading its own (`dpppl.run.runner.host_value`);
- the chains start from labels each process gives its own points (`start`); with `init="sequential"`
  each process seats its own rows and the processes' clusters are then merged (`merged_seating`);
- a checkpoint is the run's file, written by process 0, and one part per process with its rows and
  its points' labels (`dpppl.run.checkpoint.ProcessCheckpointFile`); `resumed_run` reads the run's
  file and this process's part, `placed` puts its labels back on its devices;
- every process's InferenceData has the global run's `posterior` and `sample_stats` (the label
  summaries from the clusters' recorded sizes), identical on every process, and its own points in
  `posterior_partition`, `observed_data` and `log_likelihood` (each point's conditional predictive
  against every process's clusters: `pointwise_log_likelihood`; `gathered_log_likelihood` puts the
  processes' columns together), their `point` coordinate the points' indices in the global data set.

Only the sub-cluster sampler runs this way (`MULTI_PROCESS_KERNELS`): the collapsed Gibbs sweep and
the moves built on it seat points one after another, each seating conditioned on the ones before, so
they have no data-parallel form.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from dpppl.config import x64
from dpppl.core.compiled import on_target
from dpppl.core.state import is_point_field
from dpppl.core.summaries import RowSummaries
from dpppl.diagnostics.arviz_compat import group, has_group, with_groups
from dpppl.errors import ArgumentError, DataError, KernelError
from dpppl.families.base import segment_stats
from dpppl.kernels.auto import AUTO, MULTI_PROCESS_KERNELS
from dpppl.kernels.base import parse_kernel_name
from dpppl.kernels.subcluster.sampler import block_size_for
from dpppl.models.init import (capacity_class, initial_slots, initial_states, merged_labels, reassigned,
                               states_from_labels)
from dpppl.models.mixture import validate_data
from dpppl.run.checkpoint import Progress, RunSpec, joined_points, read_checkpoint, read_shard, shard_path
from dpppl.run.output import MIN_SLOTS, POINTWISE_BATCH, SLOT_CHUNK, conditional_log_predictive
from dpppl.run.runner import point_class


def initialize(where: str | None = None) -> None:
    """Join this process to a multi-process run: `jax.distributed.initialize`, with CPU collectives
    over gloo (what a psum across processes needs on CPU; GPUs use NCCL whatever this says). `where`
    None lets JAX detect the cluster (SLURM, Open MPI, Kubernetes, ...; `JAX_COORDINATOR_ADDRESS`);
    or `"ADDRESS:PORT,NUM_PROCESSES,PROCESS_ID"` (`"localhost:12345,2,0"`) for processes launched by
    hand. What `dpppl sample --distributed` calls before anything else touches JAX. A malformed
    `where` or a failed start raises [`ArgumentError`][dpppl.ArgumentError]."""
    arguments = {}
    if where is not None:
        parts = where.split(",")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            raise ArgumentError(f"--distributed {where!r}: expected ADDRESS:PORT,NUM_PROCESSES,PROCESS_ID such as "
                                "'localhost:12345,2,0', or nothing to detect the cluster (SLURM, Open MPI, ...)")
        arguments = dict(coordinator_address=parts[0], num_processes=int(parts[1]), process_id=int(parts[2]))
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(**arguments)
    except (RuntimeError, ValueError) as e:
        raise ArgumentError(f"--distributed: jax.distributed.initialize failed: {e}") from None


def process_count() -> int:
    """The number of processes of the run (1 unless `jax.distributed.initialize` joined several)."""
    return jax.process_count()


def check_kernel(kernel: str) -> None:
    """Raise [`KernelError`][dpppl.KernelError] unless `kernel` (a spec, `"auto"` included) can run over
    the `process_count()` processes of this run; nothing to check in a one-process run."""
    if process_count() == 1 or kernel == AUTO:
        return
    sequential = [name for name in parse_kernel_name(kernel) if name not in MULTI_PROCESS_KERNELS]
    if sequential:
        raise KernelError(
            f"kernel {kernel!r} cannot run over the {process_count()} processes of this jax.distributed run: "
            f"{', '.join(repr(n) for n in sequential)} {'is' if len(sequential) == 1 else 'are'} not data-parallel "
            f"(collapsed Gibbs and the moves built on it seat points one at a time, each seating conditioned on "
            f"all the others). The kernels that run multi-process: {', '.join(MULTI_PROCESS_KERNELS)} "
            f"(kernel='auto' picks it); docs/distributed.md")


STARTS = ("sequential", "single", "prior")
"""The `init` strategies a multi-process run takes (`start`)."""


def check_options(init) -> None:
    """Raise [`ArgumentError`][dpppl.ArgumentError] for what a multi-process run does not take: an
    `init` other than `STARTS` (initial labels given as an array, a strategy callable, `"search"`:
    each would need every process's rows)."""
    if process_count() == 1 or (isinstance(init, str) and init in STARTS):
        return
    what = "initial labels given as an array are" if not isinstance(init, str) and not callable(init) else \
        f"init={init!r} is"
    raise ArgumentError(f"init: {what} not taken by a run over {process_count()} processes (each process holds "
                        f"its own rows only); use init={STARTS[0]!r}, {STARTS[1]!r} or {STARTS[2]!r}")


class ProcessRows(NamedTuple):
    """This process's points in a multi-process run: `rows`, its own rows (validated, (N_p, D));
    `counts`, every process's number of rows (an int64 array, one per process); `size`, the rows
    every process holds in the run's global arrays (its own, then padding: `local_size`); and
    `summaries`, those of the global data set (`RowSummaries`, combined from every process's)."""

    rows: np.ndarray
    counts: np.ndarray
    size: int
    summaries: RowSummaries

    @property
    def start(self) -> int:
        """The index in the global data set of this process's first point."""
        return int(self.counts[:jax.process_index()].sum())

    @property
    def points(self) -> np.ndarray:
        """The indices of this process's points in the global data set (the `point` coordinate)."""
        return np.arange(self.start, self.start + len(self.rows))

    @property
    def total(self) -> int:
        """The number of points of the global data set."""
        return int(self.counts.sum())


def local_size(largest: int, devices: int, dim: int) -> int:
    """The rows each process holds in a multi-process run's global arrays, for `largest` rows on the
    process with most and `devices` devices per process: each device's share whole blocks of the
    sub-cluster sampler (`block_size_for` of that share, so that every device's blocks are rows of its
    own process), at least its share of `largest`, from its `point_class` (runs whose largest process
    holds a number of rows in the same class compile one program)."""
    share = point_class(max(-(-largest // devices), 1))
    while True:
        block = block_size_for(share, dim)
        whole = -(-share // block) * block
        if whole == share:
            return share * devices
        share = whole


def own_rows(model, data) -> ProcessRows:
    """This process's rows `data` of a multi-process run, validated against `model`, and what every
    process gave: its count and shape (one all-gather of a small header) and the summaries of its rows
    (one all-gather of 1 + D + D^2 + 2D numbers). Every process raises the same error when one gave rows
    that do not fit: [`ArgumentError`][dpppl.ArgumentError] when `data` is not an array (a data set name
    or a file would give every process the same rows), [`DataError`][dpppl.DataError] when the processes
    gave rows of different shapes or kinds, none, or values the model refuses (that process's message)."""
    if data is None or isinstance(data, (str, bytes, os.PathLike)):
        raise ArgumentError(f"in a run over {process_count()} processes data= must be this process's own rows as "
                            f"an array, got {data!r}: a data set name, a file or the model's own data would give "
                            "every process the same rows")
    rows = np.asarray(data)
    if rows.ndim == 0 or rows.dtype.kind not in "biuf":
        raise DataError(f"in a run over {process_count()} processes data= must be a numeric array of this "
                        f"process's rows, got {rows.dtype} of shape {rows.shape}")
    problem = None
    try:
        validated = validate_data(rows, model.data, model.component)
    except DataError as e:
        problem, validated = e, np.zeros((0, rows.shape[1] if rows.ndim == 2 else 1))
    header = np.zeros(9, np.int64)  # rows, ndim, up to 5 trailing sizes, float (1) or integer (0), refused (1)
    trailing = rows.shape[1:]
    if len(trailing) > 5:
        raise DataError(f"data of shape {rows.shape}: at most 5 dimensions after the points' axis")
    header[:2 + len(trailing)] = (rows.shape[0], rows.ndim, *trailing)
    header[7], header[8] = rows.dtype.kind == "f", problem is not None
    headers = np.asarray(multihost_utils.process_allgather(header))
    counts = headers[:, 0]
    if headers[:, 8].any():
        refused = [p for p, h in enumerate(headers) if h[8]]
        if problem is not None:
            raise problem
        raise DataError(f"process(es) {refused} of this {process_count()}-process run gave rows the model refuses "
                        "(their own error says why)")
    if len({tuple(h[1:8]) for h in headers}) > 1:
        shapes = "; ".join(f"process {p}: {tuple(int(v) for v in h[2:2 + h[1] - 1])} "
                           f"{'float' if h[7] else 'integer'}" for p, h in enumerate(headers))
        raise DataError(f"the processes of this run gave rows of different shapes or kinds after the points' axis "
                        f"({shapes}): every process must give rows of one data set")
    if counts.min() == 0:
        empty = [p for p, c in enumerate(counts) if c == 0]
        raise DataError(f"process(es) {empty} of this {process_count()}-process run gave no rows: every process "
                        "needs at least one")
    dim = validated.shape[1]
    parts = np.asarray(multihost_utils.process_allgather(RowSummaries.of(validated).packed()))
    summaries = RowSummaries.combined([RowSummaries.unpacked(part, dim) for part in parts])
    size = local_size(int(counts.max()), jax.local_device_count(), dim)
    return ProcessRows(validated, counts, size, summaries)


def bound(model, data):
    """The model bound to this process's rows `data` of a multi-process run, with the global data set's
    hyperparameters and shift (`Model.bind` with the summaries of every process's rows), and its
    `ProcessRows` (`own_rows`)."""
    own = own_rows(model, data)
    return model.bind(own.rows, own.summaries), own


def _mesh() -> Mesh:
    return Mesh(np.asarray(jax.devices()), ("points",))


def global_points(local: np.ndarray, own: ProcessRows, fill) -> jax.Array:
    """A global array of the run whose last axis is the points' in the global arrays' layout: this
    process's `local` (..., N_p) padded with `fill` to `own.size`, on its own devices; every process's
    part in process order (`jax.make_array_from_process_local_data`): nothing is sent."""
    local = np.asarray(local)
    widths = [(0, 0)] * (local.ndim - 1) + [(0, own.size - local.shape[-1])]
    padded = np.pad(local, widths, constant_values=fill)
    spec = P(*([None] * (local.ndim - 1)), "points")
    shape = local.shape[:-1] + (own.size * process_count(),)
    return jax.make_array_from_process_local_data(NamedSharding(_mesh(), spec), padded, shape)


def program_of(target, own: ProcessRows):
    """What the compiled programs of a multi-process run run on: `target` (this process's rows, bound
    by `bound`) with its points the global data set's as one global array sharded on the points' axis
    over every process's devices, each process's rows padded to `own.size` (`local_size`) on its own
    devices, and `num_valid` every process's row count (`dpppl.core.points`: the real rows are the
    first of each process's)."""
    x = np.zeros((own.size,) + target.x.shape[1:], target.x.dtype)
    x[:target.num_points] = target.x
    sharding = NamedSharding(_mesh(), P("points"))
    rows = jax.make_array_from_process_local_data(sharding, x, (own.size * process_count(),) + x.shape[1:])
    return dataclasses.replace(target, x=rows, observed_x=None, num_valid=np.asarray(own.counts, np.int32))


def start(init: str, target, own: ProcessRows, program):
    """The strategy (`dpppl.models.init`) that starts the chains of a multi-process run on its global
    points, each process labelling its own: `"single"`, one cluster; `"sequential"`, each process
    seats its own rows (sequential prediction against its rows seated before) and the processes'
    clusters are then merged by the collapsed log joint (`merged_seating`); `"prior"`, every process
    draws the same labels of the global data set's N points from the prior and keeps its own. The
    clusters' statistics are each process's sums of its own points, added across processes (one
    all-gather of the statistics of the slots); the chains' capacity is sized on `program`, alike on every
    process."""
    def strategy(_, keys, capacity=None):
        if init == "sequential":
            labels = merged_seating(target, keys)
        elif init == "prior":  # the draw of `dpppl.models.init.prior` on the N points: one process's labels
            prior, n = target.prior, own.total
            slots = min(prior.max_slots(n), max(n + 1, prior.min_slots(n)))
            draw = jax.jit(jax.vmap(lambda k: prior.draw_labels(k, n, slots, jnp.asarray(prior.initial_alpha,
                                                                                          target.x.dtype))))
            keys = jax.vmap(jax.random.split, out_axes=1)(keys)
            labels = np.stack([prior.canonical(row) for row in np.asarray(draw(keys[0]))])
            keys = keys[1]
            labels = labels[:, own.start:own.start + target.num_points]
        else:
            labels = np.zeros((len(keys), target.num_points), np.int32)
        in_use = int(np.max(multihost_utils.process_allgather(np.asarray(labels.max(initial=0) + 1, np.int64))))
        states = states_from_labels(target, keys, labels, initial_slots(program, in_use, capacity))
        stats = jax.tree.map(lambda s: np.sum(np.asarray(s), axis=0),
                             multihost_utils.process_allgather(jax.tree.map(np.asarray, states.stats)))
        return jax.tree.map(np.asarray, states)._replace(z=global_points(labels, own, -1), stats=stats)

    return strategy


REASSIGN_ROUNDS = 3
"""The rounds of `reassigned` in `merged_seating` at most: on the three blobs of
`tests/run/test_distributed.py` over two processes, one round left a blob in two clusters in 2 of 65
chains, three rounds in none of 193 (hard assignments: a cluster spanning two blobs shrinks each round)."""


def merged_seating(target, keys) -> np.ndarray:
    """This process's labels (chains, N_p) of `init="sequential"` in a multi-process run: each process
    seats its own rows (`dpppl.models.init.sequential`), so that a cluster spread over P processes is
    seated as up to P clusters, one per process. The statistics of every process's clusters are
    all-gathered (each chain's seated slots: capacity x the statistics' size per process); with a
    conjugate family each process gives each of its points to the best of all of them
    (`dpppl.models.init.reassigned`: size times predictive) and the statistics are all-gathered again
    and added, `REASSIGN_ROUNDS` times at most (fewer when the statistics stop changing), so that the
    points of a cluster one seating made across two groups join the other processes' clusters of their
    own (one round leaves the points of such a cluster farthest from the groups' centres in it); the
    clusters are then merged by
    `dpppl.models.init.merged_labels` (while merging two raises the collapsed log joint of the global
    data set, the pair that raises it most), which every process computes alike from the same
    statistics; process 0's result is the one every process uses (broadcast, so no rounding can part
    them). Its labels number the merged clusters 0, 1, ... in process order."""
    seated = initial_states(target, "sequential", keys)
    labels = np.asarray(seated.z)
    width = int(labels.max(initial=0)) + 1
    widths = np.asarray(multihost_utils.process_allgather(np.asarray(width, np.int64)))
    most, total = int(widths.max()), int(widths.sum())
    slots = capacity_class(total)

    def own_slots(leaf):  # this process's seated slots, padded to the widest process's
        leaf = np.asarray(leaf)[:, :width]
        return np.pad(leaf, [(0, 0), (0, most - width)] + [(0, 0)] * (leaf.ndim - 2))

    def in_process_order(parts):  # (P, chains, most, ...) -> (chains, slots, ...): every process's slots
        joined = np.concatenate([part[:, :w] for part, w in zip(np.asarray(parts), widths)], axis=1)
        return np.pad(joined, [(0, 0), (0, slots - total)] + [(0, 0)] * (joined.ndim - 2))

    stats = jax.tree.map(in_process_order, multihost_utils.process_allgather(jax.tree.map(own_slots, seated.stats)))
    labels = labels + int(widths[:jax.process_index()].sum())
    for _ in range(REASSIGN_ROUNDS if target.family.conjugate else 0):  # (a predictive is needed)
        labels, own = reassigned(target, stats)
        before, stats = stats, jax.tree.map(lambda s: np.sum(np.asarray(s), axis=0),
                                            multihost_utils.process_allgather(own))
        if all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(stats))):
            break  # a fixed point (the same on every process: they hold the same statistics)
    merged = np.asarray(multihost_utils.broadcast_one_to_all(merged_labels(target, stats)))
    return np.take_along_axis(merged, labels, axis=1)


def _draws_stats(target, z, *, capacity):
    """The clusters' statistics of this process's points `target.x` in each draw of a block, labels `z`
    (block, rows), on `capacity` slots (labels of `capacity`: padded rows, in no cluster)."""
    return jax.vmap(lambda labels: segment_stats(target.family, jnp.asarray(target.x), labels, capacity))(z)


def _draws_log_predictive(target, z, stats, num_clusters, alpha, hyper, *, capacity):
    """`conditional_log_predictive` of this process's points in each draw of a block, against the draw's
    clusters' statistics over every process's points `stats` (block, capacity, ...)."""
    most = jnp.max(num_clusters)  # one count for the block: a loop its draws share

    def one(labels, draw_stats, a, h):
        at = target.at_hyperparameters(h)
        return conditional_log_predictive(at.family, at.prior, jnp.asarray(at.x), labels, a, capacity,
                                          num_clusters=most, stats=draw_stats)

    return jax.vmap(one)(z, stats, alpha, hyper)


def pointwise_log_likelihood(target, z: np.ndarray, alpha: np.ndarray, hyper: dict) -> np.ndarray:
    """The pointwise log likelihood (chain, draw, N_p) of this process's points in a run over several
    processes: each point's conditional predictive log p(x_i | x_-i, z_-i, alpha, h)
    (`dpppl.run.output.conditional_log_predictive`) at every kept draw, against the draw's clusters
    over **every** process's points, so that the processes' columns put together in process order are what
    one process holding all the points writes for the same draws (up to the rounding of sums taken in
    another order). `target`: the model bound to this process's rows (`bound`); `z` (chain, draw, N_p)
    its points' labels, the run's label slots (the same clusters on every process); `alpha` (chain, draw)
    and the random hyperparameters of the base measure `hyper` ({name: (chain, draw)}), the global run's.

    Every process calls it with the same draws. One all-gather of each process's row count and largest
    label, one of which label slots each draw occupies on each process (draws x slots booleans): the
    draws' clusters are numbered 0..K-1 in the order of their slots on every process, as
    `dpppl.diagnostics.summaries.compact_labels` numbers them in one process. Then, by blocks of draws
    (the same blocks on every process), each process's sums of its points' statistics in each cluster
    (one compiled program), all-gathered and added (capacity x (1 + D + D^2) numbers per draw and
    process), and its points' predictive against them (another program); neither program holds a
    collective, and both are those of every process whose rows have the same `point_class`."""
    lead, n = z.shape[:-1], target.num_points
    labels = np.asarray(z).reshape(-1, n).astype(np.int64)
    draws = len(labels)
    header = np.asarray(multihost_utils.process_allgather(np.array([n, labels.max(initial=0) + 1], np.int64)))
    size, width = point_class(int(header[:, 0].max())), int(header[:, 1].max())
    local = np.zeros((draws, width), bool)
    local[np.arange(draws)[:, None], labels] = True
    occupied = np.asarray(multihost_utils.process_allgather(local)).any(axis=0)  # (draws, width): every process's
    numbers = np.cumsum(occupied, axis=1) - 1  # a slot's cluster among its draw's occupied slots, in slot order
    clusters = occupied.sum(axis=1).astype(np.int32)
    capacity = max(MIN_SLOTS, 1 << int(clusters.max()).bit_length())
    labels = np.pad(np.take_along_axis(numbers, labels, axis=1).astype(np.int32), [(0, 0), (0, size - n)],
                    constant_values=capacity)  # padded rows (zeros) in no cluster
    padded = target.padded(size) if size > n else target
    dim = target.x.shape[1]
    per_draw = size * (SLOT_CHUNK + dim * dim + 2) + capacity * (1 + dim + dim * dim)
    block = max(1, min(256, 1 << (draws - 1).bit_length(), POINTWISE_BATCH // per_draw))
    sums = on_target("process_cluster_stats", padded, functools.partial(_draws_stats, capacity=capacity), capacity)
    predictive = on_target("process_log_predictive", padded,
                           functools.partial(_draws_log_predictive, capacity=capacity), capacity)
    dtype = jax.dtypes.canonicalize_dtype(target.x.dtype)
    rows = -(-draws // block) * block  # the last block padded with copies of the first draw
    inputs = [labels, clusters] + [np.reshape(v, -1).astype(dtype) for v in [alpha, *hyper.values()]]
    inputs = [np.concatenate([v, np.broadcast_to(v[:1], (rows - draws,) + v.shape[1:])]) for v in inputs]
    out = np.empty((rows, size))
    for i in range(0, rows, block):  # NumPy arguments: one program per shape class
        part = [v[i:i + block] for v in inputs]
        stats = jax.tree.map(lambda s: np.sum(np.asarray(s), axis=0),
                             multihost_utils.process_allgather(jax.tree.map(np.asarray, sums(part[0]))))
        out[i:i + block] = np.asarray(predictive(part[0], stats, *part[1:3], dict(zip(hyper, part[3:]))))
    return out[:draws, :n].reshape(lead + (n,))


def gathered_log_likelihood(idata):
    """A copy of this process's InferenceData `idata` of a run over several processes whose
    `log_likelihood` group holds every process's points (chain, draw, N), in process order, their `point`
    coordinate the points' indices in the global data set: what `az.loo` and `az.compare` take on any
    process (the same on every one). Every process calls it: one all-gather of the processes' column
    counts, one of their columns (chains x draws x the most points a process holds, per process) and one
    of their points' indices, so each process then holds N columns, as a one-process run does.
    [`DataError`][dpppl.DataError] when `idata` has no `log_likelihood` group (every process's `idata`
    has the same groups)."""
    if not has_group(idata, "log_likelihood"):
        raise DataError("the InferenceData has no 'log_likelihood' group to gather across processes: sample with "
                        "log_likelihood=True (or 'auto' within its budget; docs/distributed.md)")
    values = group(idata, "log_likelihood")
    name = next(iter(values.data_vars))
    own, points = np.asarray(values[name]), np.asarray(values["point"])
    with x64():  # float64 columns and int64 indices crossing as they are
        counts = np.asarray(multihost_utils.process_allgather(np.asarray(own.shape[-1], np.int64)))
        width = [(0, 0)] * (own.ndim - 1) + [(0, int(counts.max()) - own.shape[-1])]
        columns, indices = multihost_utils.process_allgather((np.pad(own, width), np.pad(points, width[-1])))
    return with_groups(idata.copy(), {"log_likelihood": {
        name: np.concatenate([part[..., :c] for part, c in zip(np.asarray(columns), counts)], axis=-1)}},
        coords={"point": np.concatenate([part[:c] for part, c in zip(np.asarray(indices), counts)])},
        dims={name: ["point"]})


def placed(progress: Progress, own: ProcessRows) -> Progress:
    """`progress` of this process's points (a checkpoint's part) with its chain states' per-point fields
    global arrays (`global_points`; labels padded with -1, the others with 0), as a run's chunks take
    them; the kept draws stay this process's."""
    return progress._replace(states=jax.tree_util.tree_map_with_path(
        lambda where, leaf: global_points(leaf, own, -1 if where[-1].name == "z" else 0) if is_point_field(where)
        else leaf, progress.states))


def resumed_run(path, model_of=None) -> tuple[RunSpec, Progress, str, ProcessRows]:
    """What `dpppl.resume(path)` continues on this process of a multi-process run: the run's file
    `path` (written by process 0) and this process's part (`shard_path`), read by this process only:
    its rows, with the summaries of every process's (`own_rows`), and its points' part of the
    per-point state. Returns the run (its data this process's rows), its progress (its per-point
    fields this process's points), the dpppl version that wrote it and this process's `ProcessRows`.
    [`ArgumentError`][dpppl.ArgumentError] when the run had another number of processes or this
    process holds another number of rows than it held, and for the errors of `read_shard`."""
    spec, progress, written_by = read_checkpoint(path)
    counts, process = np.asarray(spec.data), jax.process_index()
    rows, points = read_shard(path, process, progress.t)
    if counts.ndim != 1 or counts.dtype.kind not in "iu" or len(rows) != counts[process]:
        raise ArgumentError(f"{shard_path(os.fspath(path), process)} holds {len(rows)} rows where the run "
                            f"{os.fspath(path)} says process {process} held {counts if counts.ndim else None}")
    own = own_rows(spec.model, rows)
    progress = joined_points(progress, points, lambda part: part)
    return dataclasses.replace(spec, data=own.rows), progress, written_by, own


__all__ = ["MULTI_PROCESS_KERNELS", "ProcessRows", "bound", "check_kernel", "check_options", "gathered_log_likelihood",
           "global_points", "initialize", "local_size", "merged_seating", "own_rows", "placed",
           "pointwise_log_likelihood", "process_count", "program_of", "resumed_run", "start"]
