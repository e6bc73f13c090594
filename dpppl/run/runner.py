"""The partition-kernel backend: chains run in chunks of steps compiled once per process.

A chunk is `n_iter` steps of every chain (vmapped; one chain runs unbatched) in one jitted `fori_loop` that
writes each step's record into a buffer of fixed length (`CHUNK_LENGTH`, fewer only when
memory asks), so a run of another length reuses the compiled chunk. Warmup and sampling
share one chunk: the phase is a traced argument, on which a kernel with a warmup step of its own
chooses its step (`lax.cond`). The bound model (data and
hyperparameters) is an argument of the chunk, which builds the kernel on it, so the chunk
function is kept per kernel, options, target *structure* (`dpppl.core.pytrees.structure_key`)
and capacity (`dpppl.core.compiled`): a second run, on the same data or on new data and
hyperparameters of the same shapes, traces and compiles nothing.
After each chunk the runner (1) grows the cluster capacity on the host and re-runs the
chunk from the same keys when a chain ran out of empty slots (growth never changes the
draws), (2) stops with an error if a log joint is not finite, (3) updates the progress
bar, (4) keeps the draws, so a run stopped with Ctrl-C returns what it has, and (5) saves
the run to its checkpoint file when one is due (`dpppl.run.checkpoint`). Step t of chain c
uses the key `fold_in(chain_key[c], t)` (or keys, `step_keys`): the same seed gives the same draws whatever the
chunking, and a run continued from a checkpoint (`continue_partition`) makes the draws of
the run that was not stopped.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
import warnings
from typing import Callable

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from dpppl.core import numerics_random as random
from dpppl.core.compiled import in_thread, persisted, prepare
from dpppl.core.fingerprint import fingerprint
from dpppl.core.pytrees import structure_key
from dpppl.core.protocols import Target
from dpppl.core.state import grow, is_point_field, num_clusters
from dpppl.errors import ArgumentError, KernelError
from dpppl.kernels.base import Kernel, build
from dpppl.models.init import grown_slots, initial_states, seated_slots
from dpppl.run.checkpoint import CheckpointFile, Interrupted, Progress
from dpppl.run.progress import RunProgress, chain_status
from dpppl.run.interrupts import hold

PADDED_FROM = 64
"""From this many points on, a kernel that takes masked points (`Kernel.masked_points`) runs on
the points padded to their class (`point_class`); fewer points run as they are."""
CHUNK_LENGTH = 256
"""Buffer length of a chunk: the most steps recorded per compiled call."""
CHUNK_SECONDS = 0.5           # target wall time of one chunk (progress-bar refresh)
CHUNK_BYTES = 32 * 2**20
"""Memory for one chunk's recorded labels: the buffer is zeroed and returned at every chunk, and at 10^5
points a chunk runs a few steps (`CHUNK_SECONDS`). `subcluster` at 10^5 points, 2 chains, 5 + 5
iterations, the run alone (the same call again), process CPU s: 256 MB (256 rows) 2.65 with a warmup
program that recorded no labels, 3.41 with one program for both phases; 32 MB (40 rows) 2.27 and 2.44.
The same draws."""


def built_kernel(spec: str, target: Target, options: dict) -> tuple[Kernel, tuple, Callable[[Target], Kernel]]:
    """The kernel `spec` with `options` for `target` (what the host reads of it: its name,
    exactness, record dimensions, which steps it has), the key its compiled functions are kept
    under (the spec, the options and the target's structure: no value of the data or the
    hyperparameters) and `make(target) -> Kernel`, with which a compiled function builds the
    kernel again on the target it takes as an argument, so that one program serves every
    target of that structure."""
    def make(bound: Target) -> Kernel:
        return build(spec, bound, **options)

    return make(target), ("kernel", spec, fingerprint(options), structure_key(target)), make


@functools.partial(jax.jit, static_argnums=1)
def _jitted_chain_keys(seed, num_chains: int):
    keys = jax.random.split(jax.random.key(seed), (2, num_chains))  # one hash, not three (`step_keys`)
    return keys[0], jax.random.key_data(keys[1])


def _chain_keys(seed, num_chains: int):
    """Each chain's key for its initial state, and the key data its steps fold `t` into: the two rows of
    `jax.random.split(jax.random.key(seed), (2, num_chains))`. With JAX's default keys (threefry,
    partitionable) computed on the host by `numerics_random.host_split`, the same numbers without a program to
    compile (or, in a process whose compilation cache holds it, to load: 0.15-0.2 s of the README's job
    either way); with another key implementation, one compiled program."""
    if jax.config.jax_default_prng_impl != "threefry2x32" or not jax.config.jax_threefry_partitionable:
        return _jitted_chain_keys(seed, num_chains)
    keys = random.host_split(int(seed), (2, num_chains))
    return jax.random.wrap_key_data(keys[0]), jnp.asarray(keys[1])


def step_keys(chain_key, t, count: int):
    """The key of step `t` of the chain whose key is `chain_key`: `fold_in(chain_key, t)`, or, for a
    kernel whose step takes `count` > 1 keys (`Kernel.keys_per_step`), the keys
    `fold_in(chain_key, t * count + i)`, i < count, drawn as one hash of the counters
    (`numerics_random.fold_in` of a 1-D array) where a fold-in and the hybrid's split were two. Distinct
    for every step below 2^32 / count (the fold-in's data is 32 bits)."""
    if count == 1:
        return random.fold_in(chain_key, t)
    first = jnp.asarray(t, jnp.uint32) * jnp.uint32(count)
    return random.fold_in(chain_key, first + jnp.arange(count, dtype=jnp.uint32))


def _record(kern: Kernel, state, info) -> dict:
    rec = {"num_clusters": num_clusters(state).astype(jnp.int32), "alpha": state.alpha,
           "lp": kern.log_joint(state), **kern.info_dict(info)}
    if kern.record is not None:
        rec.update(kern.record(state))
    rec["z"] = state.z
    if jax.process_count() > 1:  # the summaries of the labels come from the clusters' sizes (docs/distributed.md)
        rec["cluster_counts"] = state.stats.n.astype(jnp.int32)
    return rec


def _chunk_function(make, kern: Kernel, kernel_key, length: int, capacity: int):
    """The compiled chunk of the steps of the kernel `make(target)` builds (`kern` is that kernel on
    the host's target), called as `chunk(states, chain_keys, start, n_iter, warmup, target)`: the
    target (data and hyperparameters) is its last argument and `warmup` (a bool, traced) says the
    phase. One program serves both phases: a kernel with a warmup step of its own runs it or its
    step by `lax.cond` on `warmup` (both return the kernel's state and `info_type`), so its run
    compiles one chunk, not two (the shared scaffolding, the record and the log joint once; the
    switch to sampling compiles nothing); the labels a chunk records in warmup are dropped."""
    def per_chain(state, chain_key_data, start, n_iter, warmup, target):
        traced = make(target)
        if traced.warmup_step is None:
            step = traced.step
        else:
            def step(keys, state, x):
                return jax.lax.cond(warmup, traced.warmup, traced.step, keys, state, x)
        chain_key = jax.random.wrap_key_data(chain_key_data)

        def one(state, t):
            state, info = step(step_keys(chain_key, t, traced.keys_per_step), state, target.x)
            return state, _record(traced, state, info)

        # the step is traced once: its jaxpr gives the record's shapes and is the loop's body (tracing a
        # large step, such as subcluster's, costs seconds of Python; evaluating its jaxpr again, little)
        closed, shapes = jax.make_jaxpr(one, return_shape=True)(state, start)
        one_traced, out_tree = jax.extend.core.jaxpr_as_fun(closed), jax.tree.structure(shapes)
        # the record buffer split as the chunk returns it: the recorded labels stay on their points' devices
        buf = _on_every_process(jax.tree.map(lambda s: jnp.zeros((length,) + s.shape, s.dtype), shapes[1]))

        def body(t, carry):
            state, buf = carry
            state, rec = jax.tree.unflatten(out_tree, one_traced(*jax.tree.leaves((state, start + t))))
            return state, _on_every_process(jax.tree.map(lambda b, r: b.at[t].set(r), buf, rec))

        return jax.lax.fori_loop(0, n_iter, body, (state, buf))

    chains = jax.vmap(per_chain, in_axes=(0, 0, None, None, None, None))

    def chunk(states, chain_keys, start, n_iter, warmup, target):
        if chain_keys.shape[0] > 1:
            return _on_every_process(chains(states, chain_keys, start, n_iter, warmup, target))
        # one chain runs unbatched: under vmap every dynamic index of the per-point loops becomes
        # a gather or scatter with index arithmetic, which doubled the time of a W2 Gibbs sweep
        # (issue 18, benchmarks/bench_gibbs_sweep.py); the draws are those of the batched program
        out = per_chain(jax.tree.map(lambda a: a[0], states), chain_keys[0], start, n_iter, warmup, target)
        return _on_every_process(jax.tree.map(lambda a: a[None], out))

    return persisted(("chunk", kernel_key, length, capacity), chunk, kern.light_compile)  # LIGHT_OPTIONS


def _on_every_process(tree):
    """`tree` (the chains' states out of the kernel's init and out of each chunk, and a chunk's records)
    in one sharding on the devices of every process of a multi-process run: what is indexed by point
    (the labels, `is_point_field`, and the recorded labels `z`) split on its last axis, each process's
    devices holding its own points' (`dpppl.run.distributed`), everything else whole on every process,
    so that each host reads it (progress, checkpoints) without a collective of its own, and every chunk
    takes its states in one sharding (one compile)."""
    if jax.process_count() == 1:
        return tree
    mesh = Mesh(np.asarray(jax.devices()), ("points",))

    def place(where, leaf):
        by_point = is_point_field(where) or where[-1] == jax.tree_util.DictKey("z")
        spec = P(*([None] * (leaf.ndim - 1)), "points") if by_point else P()
        return jax.lax.with_sharding_constraint(leaf, NamedSharding(mesh, spec))

    return jax.tree_util.tree_map_with_path(place, tree)


def host_value(a) -> np.ndarray:
    """`a` on this process's host: as it is in one process; in a multi-process run a value whole on
    every process from one of its local copies, and one split on its last axis (the points'; see
    `_on_every_process`) as this process's part of it, its local shards put together."""
    if not isinstance(a, jax.Array) or a.is_fully_addressable or a.is_fully_replicated:
        return np.asarray(a)
    shards = sorted(a.addressable_shards, key=lambda s: s.index[-1].start or 0)
    parts, seen = [], set()
    for shard in shards:  # a shard replicated over several local devices is read once
        if shard.index[-1].start not in seen:
            seen.add(shard.index[-1].start)
            parts.append(np.asarray(shard.data))
    return np.concatenate(parts, axis=-1)


def _due_on_every_process(due: bool) -> bool:
    """Whether a checkpoint is due after this chunk: `due` (this process's clock), or in a multi-process
    run process 0's answer on every process, so that all save after the same chunks."""
    if jax.process_count() == 1:
        return due
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(due)))


def sample_partition(target: Target, spec: str, options: dict, *, num_warmup: int, num_samples: int,
                     num_chains: int, seed: int, init, capacity, thinning: int, progress_bar,
                     checkpoint: CheckpointFile | None = None, program: Target | None = None,
                     on_kept: Callable[[dict], None] | None = None, first_lowered: threading.Event | None = None,
                     **_):
    """Run `spec` on `target` from the chains' initial states; return (records, attrs,
    record_dims). With `checkpoint`, the run is saved there every `checkpoint.every` seconds,
    at the end of warmup, at the end and on Ctrl-C. Options of other backends (`truncation`)
    are ignored. `program`: the target the chunks run on, when not `target` or its points padded (a
    multi-process run's global points, `target` this process's own; `init` then starts them).
    `on_kept(records)`: called with each chunk's kept draws (chain, draw, ...) as the run keeps them
    (`dpppl.run.output.PointwiseParts.add`). `first_lowered`: set once the first chunk's program is traced
    and lowered (XLA compiles it next), or now when it is not compiled ahead."""
    program, (kern, kernel_key, make) = _program(spec, target, options, program)
    display = RunProgress(num_warmup + num_samples, 0, progress_bar, kern.name)
    try:
        first = _first_chunk(program, (kern, kernel_key, make), init, capacity, num_chains, num_warmup > 0,
                             first_lowered)
        if first is None and first_lowered is not None:
            first_lowered.set()
        init_keys, chain_keys = _chain_keys(seed, num_chains)
        with display.compiling(("init", kernel_key, init if isinstance(init, str) else id(init)), "the chains' start"):
            if program is not target and isinstance(init, str) and init == "sequential":  # seated padded: one program
                states = initial_states(program, init, init_keys, capacity)
            else:
                states = _padded_labels(initial_states(target, init, init_keys, capacity), program.num_points)
            if kern.init is not None:  # the kernel's carried values in state.extras
                init_fn = persisted(("kernel_init", kernel_key), lambda states, bound: _on_every_process(jax.vmap(
                    make(bound).init, in_axes=(0, None))(states, bound.x)))  # the chunks' one input sharding
                states = init_fn(states, program)
    except BaseException:
        display.close()
        raise
    start = Progress(0, states, chain_keys, ())
    return _run(target, program, spec, (kern, kernel_key, make), start, num_warmup, num_samples, thinning, display,
                checkpoint, first, on_kept)


def _first_chunk(program: Target, kernel: tuple, init, capacity, num_chains: int, warmup: bool,
                 lowered: threading.Event | None = None):
    """`(chunk, future)`: the chunk of a run's first iterations, being compiled in a thread of its own
    (`dpppl.core.compiled.in_thread`) while the chains' start is compiled and run on this
    one, for the states a sequential seating gives (`seated_slots`: the capacity unless a chain's
    seating filled its slots); None for another init, whose states are not known before it runs,
    and in a multi-process run. `lowered`: `prepare`'s, set once the chunk is lowered."""
    if not (isinstance(init, str) and init == "sequential") or jax.process_count() > 1:
        return None
    kern, kernel_key, make = kernel
    slots = seated_slots(program, capacity)
    fn = _chunk_function(make, kern, kernel_key, chunk_length(num_chains, program.num_points), slots)
    chain_keys = jax.ShapeDtypeStruct((num_chains, 2), np.uint32)  # the type of `_chain_keys`'s key data

    def states():
        empty = jax.vmap(lambda _: program.empty_state(slots))(jnp.arange(num_chains))
        return empty if kern.init is None else jax.vmap(kern.init, in_axes=(0, None))(empty, program.x)

    on_device = jax.device_put(program)  # the argument `_run` gives it: the same types (weak floats as they are)
    return fn, in_thread(lambda: prepare(fn, jax.eval_shape(states), chain_keys, np.int32(0), np.int32(1),
                                         np.bool_(warmup), on_device, lowered=lowered), "dpppl-chunk")


def continue_partition(target: Target, spec: str, options: dict, progress: Progress, *, num_warmup: int,
                       num_samples: int, thinning: int, progress_bar, checkpoint: CheckpointFile | None = None,
                       program: Target | None = None):
    """Continue `spec` on `target` from `progress` (a checkpoint's) to `num_warmup + num_samples`
    iterations; return what [`sample_partition`][dpppl.run.runner.sample_partition] returns.
    The draws are those of the run that was not stopped. `program` as `sample_partition` takes it
    (`progress` then on its points)."""
    program, kernel = _program(spec, target, options, program)
    display = RunProgress(num_warmup + num_samples, progress.t, progress_bar, kernel[0].name)
    progress = progress._replace(states=_padded_labels(progress.states, program.num_points))
    return _run(target, program, spec, kernel, progress, num_warmup, num_samples, thinning, display, checkpoint)


def check_states(target: Target, spec: str, options: dict, progress: Progress) -> None:
    """Raise ArgumentError unless `progress.states` are chain states of kernel `spec` on `target`: the
    same tree, and each array of the same dtype and rank as a state the kernel starts from
    (traced, not run), with the chains' axis first and the points' axis of the labels N long.
    A checkpoint's states are data from a file: this keeps one that does not fit from reaching
    a compiled program."""
    kern = built_kernel(spec, target, options)[0]

    def initial():
        state = target.empty_state(max(1, target.min_slots()))
        return state if kern.init is None else kern.init(state, jnp.asarray(target.x))

    expected = jax.eval_shape(initial)
    num_chains = progress.chain_keys.shape[0]
    given = progress.states
    problem = None
    if jax.tree.structure(given) != jax.tree.structure(expected):
        problem = "they hold other fields"
    else:
        for (where, leaf), want in zip(jax.tree_util.tree_leaves_with_path(given), jax.tree.leaves(expected)):
            leaf = np.asarray(leaf)
            if leaf.dtype != want.dtype or leaf.ndim != want.ndim + 1 or leaf.shape[0] != num_chains:
                problem = (f"{jax.tree_util.keystr(where)} is {leaf.dtype}{list(leaf.shape)} where "
                           f"{num_chains} chains of {want.dtype}{list(want.shape)} (up to the capacity) were expected")
                break
        else:
            if np.shape(given.z) != (num_chains, target.num_points):
                problem = (f"the labels have shape {np.shape(given.z)} for {num_chains} chains on "
                           f"{target.num_points} points")
    if problem is not None:
        raise ArgumentError(f"the checkpoint's chain states do not fit kernel {kern.name!r} on this model: {problem}")


def point_class(n: int) -> int:
    """The number of rows `n` points are padded to: the smallest m 2^k >= n with m in {4, 5, 6, 7}
    (64, 80, 96, 112, 128, 160, ...: classes at most 25% apart), so that 600 and 620 points
    run one compiled program."""
    k = max(int(n - 1).bit_length() - 3, 0)
    return next(m << k for m in (4, 5, 6, 7, 8) if m << k >= n)


def _program(spec: str, target: Target, options: dict, program: Target | None = None):
    """The target the compiled chunks run on and `built_kernel` on it: `program` when given, else
    `target` itself, or, for a kernel that takes masked points (`Kernel.masked_points`) on at least
    `PADDED_FROM` points, `target.padded(point_class(N))`, so one program serves every number of
    points of the class."""
    if program is not None:
        return program, built_kernel(spec, program, options)
    kernel = built_kernel(spec, target, options)
    n = target.num_points
    if not kernel[0].masked_points or n < PADDED_FROM or point_class(n) == n:
        return target, kernel
    program = target.padded(point_class(n))
    return program, built_kernel(spec, program, options)


def _padded_labels(states, size: int):
    """States whose labels (chains, N) are padded with -1 (no slot) to `size` points (the states
    as they are when they have `size` already)."""
    z = states.z
    if z.shape[-1] == size:
        return states
    return states._replace(z=np.pad(np.asarray(z), [(0, 0), (0, size - z.shape[-1])], constant_values=-1))


def _unpadded(progress: Progress, n: int) -> Progress:
    """`progress` with its states' labels cut to the n real points (what a checkpoint holds); in a
    multi-process run its states on this process's host (`host_value`), each per-point field cut to
    this process's n points."""
    if jax.process_count() > 1:
        return progress._replace(states=jax.tree_util.tree_map_with_path(
            lambda where, leaf: host_value(leaf)[..., :n] if is_point_field(where) else host_value(leaf),
            progress.states))
    return progress._replace(states=progress.states._replace(z=np.asarray(progress.states.z)[..., :n]))


def _run(target, program, spec, kernel, progress, num_warmup, num_samples, thinning, display: RunProgress,
         checkpoint, first=None, on_kept=None):
    """The chunks of `kernel` (built on `program`: `target`, or its points padded, `_program`) from
    `progress`; what a run records and saves is of `target`'s N points. `first`: `_first_chunk`'s,
    whose compilation the chunk waits for rather than tracing it a second time; `on_kept`:
    `sample_partition`'s."""
    kern, kernel_key, make = kernel
    total = num_warmup + num_samples
    chain_keys = progress.chain_keys
    num_chains, n = chain_keys.shape[0], target.num_points
    # the chunks' argument, moved to the device once (a multi-process run's points are already on theirs)
    on_device = program if jax.process_count() > 1 else jax.device_put(program)
    length = chunk_length(num_chains, program.num_points)
    per_iter, interrupted, saved_at = None, False, time.monotonic()
    sizing = program if jax.process_count() > 1 else target  # every process sizes the clusters alike
    limit = sizing.max_slots()
    try:
        while progress.t < total:
            t, states = progress.t, progress.states
            warmup = t < num_warmup
            phase_end = num_warmup if warmup else total
            n_iter = 1 if per_iter is None else int(np.clip(CHUNK_SECONDS / per_iter, 1, length))
            if jax.process_count() > 1:  # the processes' steps pair their collectives up: one length, not timed
                n_iter = length
            n_iter = min(n_iter, length, phase_end - t)
            while True:
                capacity = int(states.stats.n.shape[-1])
                fn = _chunk_function(make, kern, kernel_key, length, capacity)
                with display.compiling(fn, "the program"):
                    if first is not None and first[0] is fn:
                        concurrent.futures.wait([first[1]])
                    tic = time.perf_counter()
                    new_states, buf = fn(states, chain_keys, np.int32(t), np.int32(n_iter), np.bool_(warmup),
                                         on_device)
                    overflow = host_value(new_states.overflow)
                # sizes the next chunk (one that compiled is slow: the next then runs one step)
                per_iter = (time.perf_counter() - tic) / n_iter
                if not overflow.any():
                    break
                if capacity >= limit:
                    _check_label_limit(sizing, limit)
                    break
                states = grow(states, grown_slots(sizing, capacity))
            # warmup keeps no draws: only what the checks and the progress display read comes to the host
            host = {name: host_value(b)[:, :n_iter] for name, b in buf.items()
                    if not warmup or name in ("lp", "num_clusters")}
            if "z" in host:
                host["z"] = host["z"][..., :n]
            _check_finite(host["lp"], t, num_warmup, kern.name)
            chunk = ()
            if not warmup:
                offset = t - num_warmup
                keep = [j for j in range(n_iter) if (offset + j) % thinning == thinning - 1]
                chunk = (jax.tree.map(lambda h: h[:, keep], host),)
            # one assignment: a Ctrl-C leaves either the progress before this chunk or after it
            progress = Progress(t + n_iter, new_states, chain_keys, progress.kept + chunk)
            if chunk and on_kept is not None:
                on_kept(chunk[0])
            display.update(n_iter, chain_status(host["num_clusters"][:, -1], host["lp"][:, -1], warmup))
            if checkpoint is not None and (progress.t in (num_warmup, total) or _due_on_every_process(
                    time.monotonic() - saved_at >= checkpoint.every)):
                progress = _squashed(progress)
                _save(checkpoint, _unpadded(progress, n))
                saved_at = time.monotonic()
        hold()  # the last iteration is done: a Ctrl-C from here on is the driver's to report
    except KeyboardInterrupt:
        interrupted = True
        saved = checkpoint is not None and _save(checkpoint, _unpadded(progress, n))
        where = (f"; the run is saved in {checkpoint.path}: continue it with dpppl.resume({checkpoint.path!r})"
                 if saved else "")
        if not progress.kept:
            raise Interrupted(f"interrupted after {progress.t} of {total} iterations ({num_warmup} of warmup), "
                              f"before any draw was kept{where}", checkpoint=checkpoint.path if saved else None,
                              iteration=progress.t) from None
        warnings.warn(f"interrupted after {progress.t} iterations: returning the "
                      f"{sum(k['lp'].shape[1] for k in progress.kept)} draws kept so far{where}", RuntimeWarning,
                      stacklevel=4)
    finally:
        display.close()
    attrs = dict(kernel=spec, exact=kern.exact, interrupted=interrupted,
                 final_capacity=int(progress.states.stats.n.shape[-1]),
                 **({"kernel_note": kern.note} if kern.note else {}))
    return kept_records(progress.kept), attrs, kern.record_dims


def chunk_length(num_chains: int, num_points: int) -> int:
    """The buffer length of a run's chunks: `CHUNK_LENGTH` steps, fewer when the recorded labels
    of every chain would pass `CHUNK_BYTES`."""
    return int(np.clip(CHUNK_BYTES // max(1, num_chains * (4 * num_points + 64)), 1, CHUNK_LENGTH))


def kept_records(kept: tuple) -> dict:
    """The chunks of kept draws as one dict of arrays (chain, draw, ...)."""
    return {k: _concatenate_padded([c[k] for c in kept]) for k in kept[0]}


def _squashed(progress: Progress) -> Progress:
    """`progress` with its kept draws in one chunk (what a checkpoint writes)."""
    return progress._replace(kept=(kept_records(progress.kept),) if progress.kept else ())


def _save(checkpoint: CheckpointFile, progress: Progress) -> bool:
    """Write the checkpoint; a file system error is a warning (the run is worth more than one
    checkpoint)."""
    try:
        checkpoint.save(progress)
    except OSError as e:
        warnings.warn(f"could not write the checkpoint {checkpoint.path}: {e}", RuntimeWarning, stacklevel=5)
        return False
    return True


def _concatenate_padded(chunks):
    """Concatenate chunks of draws (chain, draw, ...) along draws; per-slot arrays of chunks
    run before the capacity grew are padded (NaN, or 0 for integers) to the widest."""
    widest = tuple(max(c.shape[j] for c in chunks) for j in range(2, chunks[0].ndim))
    fill = np.nan if np.issubdtype(chunks[0].dtype, np.floating) else 0
    padded = [np.pad(c, [(0, 0), (0, 0)] + [(0, w - s) for w, s in zip(widest, c.shape[2:])],
                     constant_values=fill) for c in chunks]
    return np.concatenate(padded, axis=1)


def _check_finite(lp, t, num_warmup, name):
    """Stop a run whose log joint became NaN or infinite: the state is numerically
    degenerate and every later draw would be meaningless."""
    bad = ~np.isfinite(lp)
    if not bad.any():
        return
    chain, j = (int(i) for i in np.argwhere(bad)[0])
    it = t + j
    phase = f"warmup iteration {it}" if it < num_warmup else f"iteration {it} (draw {it - num_warmup} after warmup)"
    raise KernelError(f"the log joint became {lp[chain, j]} at {phase} of chain {chain} under kernel '{name}': "
                      "the model is numerically degenerate (a hyperparameter so small or large that "
                      "densities underflow or overflow, or data far from the prior's scale); no draw is returned")


def _check_label_limit(target, limit):
    raise KernelError(f"a move drew a label past {limit}, the most slots dpppl gives a "
                      f"{target.prior.describe()} prior on {target.num_points} points; its tail is too heavy to "
                      f"sample on explicit labels: use a finite sequence of sticks (ending with b_L = 0)")


__all__ = ["CHUNK_LENGTH", "PADDED_FROM", "built_kernel", "check_states", "chunk_length", "continue_partition",
           "host_value", "kept_records", "point_class", "sample_partition"]
