"""Runs over several processes joined by `jax.distributed` (docs/distributed.md).

In a program launched on P processes (any launcher JAX supports: `jax.distributed.initialize()`
detects SLURM, Open MPI and Kubernetes; two local processes take a coordinator address), every
process calls `dpppl.sample(model, x_local, ...)` with its own rows and the same arguments. The run
is then one run over the global data set, the rows of process 0, then those of process 1, ...:

- `global_rows` gathers every process's row count and trailing shape (one all-gather of two small
  vectors) and then the rows themselves, each process's rows padded to the largest count so that
  the all-gather has one shape, the padding dropped after it; the model is bound to the global
  rows, so data-dependent hyperparameters (`mean(x)`, `cov(x)`) and the data's translation are the
  global data set's, and `kernel="auto"` and the sub-cluster kernel's blocks see the global N;
- the sub-cluster kernel's mesh spans the devices of every process (`jax.devices()`), so each
  device runs the label and statistics passes of its own range of points and the statistics are
  summed across devices and processes (`psum` over gloo on CPU, NCCL on GPUs); what is per cluster
  runs replicated, from the same keys, so every process holds the same clusters, while the labels stay
  split across the devices between steps;
- a checkpoint is the run's file, written by process 0, and one part per process with its rows and
  its points' labels (`dpppl.run.checkpoint.ProcessCheckpointFile`); `resumed_run` reads them back on
  every process and puts the global rows and labels together (`gathered_points`);
- `own_points` cuts the InferenceData every process builds to that process's points:
  `posterior` and `sample_stats` are the global run's, identical on every process, while
  `posterior_partition`, `log_likelihood` and `observed_data` hold its own rows, their `point`
  coordinate the rows' indices in the global data set.

Each process holds the global rows on its host (the all-gather) and its devices hold them as the
programs' argument; what is split across processes is the work over points. Only the sub-cluster
sampler runs this way (`MULTI_PROCESS_KERNELS`): the collapsed Gibbs sweep and the moves built on it
seat points one after another, each seating conditioned on the ones before, so they have no
data-parallel form.
"""

from __future__ import annotations

import dataclasses
import os
from typing import NamedTuple

import jax
import numpy as np
from jax.experimental import multihost_utils

from dpppl.errors import ArgumentError, DataError, KernelError
from dpppl.kernels.auto import AUTO, MULTI_PROCESS_KERNELS
from dpppl.kernels.base import parse_kernel_name
from dpppl.run.checkpoint import Progress, RunSpec, joined_points, read_checkpoint, read_shard, shard_path


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


def check_options(init) -> None:
    """Raise [`ArgumentError`][dpppl.ArgumentError] for what a multi-process run does not take:
    initial labels given as an array (each process's labels of its own rows are not gathered)."""
    if process_count() > 1 and not isinstance(init, str) and not callable(init):
        raise ArgumentError(f"init: initial labels given as an array are not taken by a run over {process_count()} "
                            "processes; use init='sequential', 'single', 'prior' or 'search'")


class ProcessRows(NamedTuple):
    """The global data set of a multi-process run as `global_rows` forms it: `whole`, the rows of
    every process in process order; `rows`, the slice of them that are this process's; `counts`,
    every process's number of rows (an int64 array, one per process)."""

    whole: np.ndarray
    rows: slice
    counts: np.ndarray


def global_rows(data) -> ProcessRows:
    """The global data set of a multi-process run and the rows of it that are this process's.
    `data` are this process's rows, an array-like (N_p, ...) with the same trailing shape and dtype
    kind on every process; every process raises the same [`DataError`][dpppl.DataError] when they
    differ (what each process gave is gathered first), and [`ArgumentError`][dpppl.ArgumentError]
    when `data` is not an array (a data set name or a file would give every process the same rows)."""
    if data is None or isinstance(data, (str, bytes, os.PathLike)):
        raise ArgumentError(f"in a run over {process_count()} processes data= must be this process's own rows as "
                            f"an array, got {data!r}: a data set name, a file or the model's own data would give "
                            "every process the same rows")
    rows = np.asarray(data)
    if rows.ndim == 0 or rows.dtype.kind not in "biuf":
        raise DataError(f"in a run over {process_count()} processes data= must be a numeric array of this "
                        f"process's rows, got {rows.dtype} of shape {rows.shape}")
    header = np.zeros(8, np.int64)  # rows, ndim, up to 5 trailing sizes, float (1) or integer (0)
    trailing = rows.shape[1:]
    if len(trailing) > 5:
        raise DataError(f"data of shape {rows.shape}: at most 5 dimensions after the points' axis")
    header[:2 + len(trailing)] = (rows.shape[0], rows.ndim, *trailing)
    header[7] = rows.dtype.kind == "f"
    headers = np.asarray(multihost_utils.process_allgather(header))
    counts = headers[:, 0]
    if len({tuple(h[1:]) for h in headers}) > 1:
        shapes = "; ".join(f"process {p}: {tuple(int(v) for v in h[2:2 + h[1] - 1])} "
                           f"{'float' if h[7] else 'integer'}" for p, h in enumerate(headers))
        raise DataError(f"the processes of this run gave rows of different shapes or kinds after the points' axis "
                        f"({shapes}): every process must give rows of one data set")
    if counts.min() == 0:
        empty = [p for p, c in enumerate(counts) if c == 0]
        raise DataError(f"process(es) {empty} of this {process_count()}-process run gave no rows: every process "
                        "needs at least one")
    whole = gathered_points(rows.astype(np.float64 if headers[0, 7] else np.int64), counts, axis=0)
    start = int(counts[:jax.process_index()].sum())
    return ProcessRows(whole, slice(start, start + rows.shape[0]), counts)


def gathered_points(local: np.ndarray, counts: np.ndarray, axis: int) -> np.ndarray:
    """Every process's `local` array, whose `axis` indexes its own points (`counts[p]` of them on
    process p; the other axes alike on every process), joined along `axis` in process order: one
    all-gather, each process's part padded to the largest count and the padding cut after it."""
    local = np.asarray(local)
    widths = [(0, 0)] * local.ndim
    widths[axis] = (0, int(counts.max()) - local.shape[axis])
    parts = np.asarray(multihost_utils.process_allgather(np.pad(local, widths)))
    return np.concatenate([np.take(parts[p], np.arange(c), axis=axis) for p, c in enumerate(counts)], axis=axis)


def resumed_run(path) -> tuple[RunSpec, Progress, str, ProcessRows]:
    """What `dpppl.resume(path)` continues on this process of a multi-process run: the run's
    file `path` (written by process 0) and this process's part (`shard_path`) read, and the run's
    global rows and per-point state put together from every process's part (all-gathered, as
    `global_rows` forms the rows of a new run). Returns the run (its data the global rows), its
    progress, the dpppl version that wrote it and this process's `ProcessRows`.
    [`ArgumentError`][dpppl.ArgumentError] when the run had another number of processes or this
    process holds another number of rows than it held, and for the errors of `read_shard`."""
    spec, progress, written_by = read_checkpoint(path)
    counts, process = np.asarray(spec.data), jax.process_index()
    rows, own = read_shard(path, process, progress.t)
    if counts.ndim != 1 or counts.dtype.kind not in "iu" or len(rows) != counts[process]:
        raise ArgumentError(f"{shard_path(os.fspath(path), process)} holds {len(rows)} rows where the run "
                            f"{os.fspath(path)} says process {process} held {counts if counts.ndim else None}")
    gathered = global_rows(rows)
    progress = joined_points(progress, own, lambda part: gathered_points(part, counts, axis=-1))
    return dataclasses.replace(spec, data=gathered.whole), progress, written_by, gathered


def own_points(idata, rows: slice):
    """`idata` of the global run with every group indexed by point cut to `rows` (this process's
    points); the `point` coordinate keeps the global indices."""
    return idata.isel(point=rows)


__all__ = ["MULTI_PROCESS_KERNELS", "ProcessRows", "check_kernel", "check_options", "gathered_points", "global_rows",
           "initialize", "own_points", "process_count", "resumed_run"]
