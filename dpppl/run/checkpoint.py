"""Checkpoints: a partition-kernel run saved to a file, continued by [`dpppl.resume`][dpppl.resume].

A checkpoint holds what the run was asked to do (`RunSpec`: the model, the data, the kernel
and its options, the seed, the lengths) and how far it got (`Progress`: the iteration `t`
reached, the chains' states and keys, the draws kept). Step `t` of chain `c` uses the key
`fold_in(chain_key[c], t)` and growing the capacity never changes a draw, so a run continued
from a checkpoint makes the draws the uninterrupted run would have made.

The file (format 2) is a zip archive in NumPy's `.npz` layout: `checkpoint.json` describes the
run and its progress as plain data (`dpppl.run.portable`), and every array is a `.npy` member
read with `allow_pickle=False`. Reading it runs no code the file names: a model from a model file
is kept as its text (parsed again by the model language, which evaluates no Python), a model
built in Python as a description of its constructors (a family, a prior, hyperparameters), and
a run whose model, data or options have no such description is refused when it starts. Format 1
(a header line and a pickle, dpppl 0.1 before this format) is refused, never unpickled.

A file is written to a temporary file in the same directory and renamed over the old one
(`os.replace`), so an interruption while writing leaves the previous checkpoint whole. While a
run saves to a path it holds an advisory lock on `<path>.lock`: a second run on the same path is
an error, not a silent loss. See docs/checkpoints.md.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import zipfile
from typing import Any, NamedTuple, Optional

import filelock
import jax
import numpy as np

from dpppl.core.fingerprint import fingerprint
from dpppl.core.state import is_point_field
from dpppl.dsl.parser import parse
from dpppl.errors import ArgumentError, ModelError
from dpppl.models.mixture import Model
from dpppl.run.portable import NotDescribable, Reader, UnreadableValue, Writer
from dpppl.version import __version__

FORMAT_VERSION = 2
"""The checkpoint format this dpppl writes and reads."""
DEFAULT_EVERY = 60.0
"""Seconds between two checkpoints of a run (one is also written at the end of warmup, at the
end of the run and on Ctrl-C)."""
_MAGIC = "dpppl-checkpoint"
_SHARD_MAGIC = "dpppl-checkpoint-part"
_PICKLED_FORMAT = b"dpppl-checkpoint"  # how format 1 files start
_CONTENTS = "checkpoint.json"


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What a run was asked to do: everything but its progress. `kernel` and `options` are
    what runs (with `kernel="auto"`, the chosen kernel: a resumed run runs the same one);
    `kernel_requested` is the kernel asked for and `kernel_reason` why `"auto"` chose
    `kernel` (None otherwise)."""

    model: Any
    data: Any
    kernel: str
    options: dict
    seed: int
    init: str
    num_warmup: int
    num_samples: int
    num_chains: int
    thinning: int
    kernel_requested: Optional[str] = None
    kernel_reason: Optional[str] = None


_SPEC_TYPES = {"kernel": (str,), "options": (dict,), "seed": (int,), "init": (str,), "num_warmup": (int,),
               "num_samples": (int,), "num_chains": (int,), "thinning": (int,),
               "kernel_requested": (str, type(None)), "kernel_reason": (str, type(None))}
"""The type of each field of a RunSpec but the model and the data, checked when a file is read."""


class Progress(NamedTuple):
    """How far a run got: iterations `t` done (warmup included), the chains' states after
    them, each chain's key data and the draws kept (a tuple of chunks, each a dict of
    arrays with leading axes (chain, draw))."""

    t: int
    states: Any
    chain_keys: Any
    kept: tuple


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run before it kept a draw. `checkpoint` is the file the run was saved
    in (None without one), `iteration` the iterations it had done."""

    def __init__(self, message: str, *, checkpoint: str | None, iteration: int):
        super().__init__(message)
        self.checkpoint, self.iteration = checkpoint, iteration


def check_output_path(path: str, option: str = "--out") -> None:
    """Raise ArgumentError unless `path` can be written: not a directory, in a directory that
    exists and is writable. Checked before anything is sampled."""
    if os.path.isdir(path):
        raise ArgumentError(f"{option} {path}: is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ArgumentError(f"{option} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ArgumentError(f"{option} {path}: the directory {parent} is not writable")


def check_every(checkpoint_every) -> None:
    """Raise ArgumentError unless `checkpoint_every` is a positive number of seconds."""
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, (int, float, np.integer, np.floating)) \
            or not checkpoint_every > 0:
        raise ArgumentError(f"checkpoint_every must be a positive number of seconds, got {checkpoint_every!r}")


class CheckpointFile:
    """The checkpoint file of one run: `save(progress)` writes it. The run's description is
    made once, here, so a model, data or option that cannot be saved is an ArgumentError
    before anything is sampled, and so is a path another run is saving to (an advisory lock on
    `<path>.lock`, held until `close`; the operating system drops it if the process dies). Use it
    as a context manager, or call `close`."""

    def __init__(self, path, spec: RunSpec, every: float = DEFAULT_EVERY, processes: int = 1):
        self.path = os.fspath(path)
        check_output_path(self.path, "checkpoint")
        check_every(every)
        self.every = float(every)
        self.processes = processes
        self._spec_arrays, self._spec = _described_spec(spec)
        self._lock = _locked(self.path)

    def save(self, progress: Progress) -> None:
        """Write `progress` atomically (a temporary file renamed over the checkpoint)."""
        writer = Writer(self._spec_arrays)
        contents = {"format": _MAGIC, "version": FORMAT_VERSION, "dpppl": __version__, "spec": self._spec,
                    "processes": self.processes,
                    "progress": {"t": int(progress.t),
                                 "states": writer.describe(jax.tree.map(np.asarray, progress.states), "states"),
                                 "chain_keys": writer.describe(np.asarray(progress.chain_keys), "chain_keys"),
                                 "kept": writer.describe(tuple(progress.kept), "kept")}}
        write_atomically(self.path, lambda temporary: _write_archive(temporary, contents, writer.arrays))

    def close(self) -> None:
        """Release the lock on the path (and remove the lock file)."""
        _unlocked(self._lock)

    def __enter__(self) -> "CheckpointFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _locked(path: str) -> filelock.FileLock:
    """The advisory lock on `<path>.lock`, acquired; ArgumentError when another run holds it."""
    lock = filelock.FileLock(f"{path}.lock", timeout=0, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise ArgumentError(f"checkpoint {path}: another run is saving to this file (it holds {path}.lock); give "
                            "this run another checkpoint path, or let that run finish") from None
    return lock


def _unlocked(lock: filelock.FileLock) -> None:
    """Release `lock` (and remove its lock file)."""
    if lock.is_locked:
        lock.release()
        try:
            os.remove(lock.lock_file)
        except OSError:
            pass


def shard_path(path: str, process: int) -> str:
    """The file in which process `process` of a multi-process run saves its points' part of the
    checkpoint `path`."""
    return f"{path}.process-{process}"


def split_points(progress: Progress, rows: slice, n: int) -> tuple[Progress, dict]:
    """`progress` of a multi-process run over `n` points cut in two: what every process holds alike
    (the per-point fields, `dpppl.core.state.POINT_FIELDS`, and the kept labels left with their padding past the `n`
    points only) and this process's part, the per-point fields' `rows` by path (`"kept.z"` for the
    kept labels)."""
    own, states = {}, jax.tree_util.tree_map_with_path(
        lambda where, leaf: leaf[..., n:] if is_point_field(where) else leaf, progress.states)
    for where, leaf in jax.tree_util.tree_leaves_with_path(progress.states):
        if is_point_field(where):
            own[jax.tree_util.keystr(where)] = np.asarray(leaf)[..., rows]
    kept = tuple({**chunk, "z": chunk["z"][..., n:]} for chunk in progress.kept)
    own.update({f"kept{j}.z": np.asarray(chunk["z"])[..., rows] for j, chunk in enumerate(progress.kept)})
    return progress._replace(states=states, kept=kept), own


def joined_points(progress: Progress, own: dict, join) -> Progress:
    """The inverse of `split_points`: `progress` (what every process holds alike) with each
    per-point field `join(part)` (every process's part, in process order) followed by its padding."""
    def whole(key, tail):
        return np.concatenate([join(own[key]), np.asarray(tail)], axis=-1)

    states = jax.tree_util.tree_map_with_path(
        lambda where, leaf: whole(jax.tree_util.keystr(where), leaf) if is_point_field(where) else leaf,
        progress.states)
    kept = tuple({**chunk, "z": whole(f"kept{j}.z", chunk["z"])} for j, chunk in enumerate(progress.kept))
    return progress._replace(states=states, kept=kept)


class ProcessCheckpointFile:
    """The checkpoint of one process of a run over several (`jax.distributed`): process 0 writes
    `path` (a `CheckpointFile` of the run, its data given as every process's row count and its
    per-point fields without the points), and every process writes its own rows and its points'
    part of the per-point fields to `shard_path(path, process)` (`save_shard`). Each file is
    written atomically and holds the iteration reached: `dpppl.resume` on every process reads both
    files and refuses a pair of different iterations. The lock on each process's file is held
    until `close`."""

    def __init__(self, path, spec: RunSpec, every: float, process: int, counts: np.ndarray, rows: slice):
        self.path, self.process, self.rows = os.fspath(path), process, rows
        self.every = float(every)
        self._own_rows, self._n = np.asarray(spec.data)[rows], int(np.sum(counts))
        self._shared = (CheckpointFile(path, dataclasses.replace(spec, data=np.asarray(counts, np.int64)), every,
                                       processes=len(counts)) if process == 0 else None)
        check_output_path(self.path, "checkpoint")
        check_every(every)
        self._shard = shard_path(self.path, process)
        self._lock = _locked(self._shard)

    def save(self, progress: Progress) -> None:
        shared, own = split_points(progress, self.rows, self._n)
        if self._shared is not None:
            self._shared.save(shared)
        writer = Writer()
        contents = {"format": _SHARD_MAGIC, "version": FORMAT_VERSION, "dpppl": __version__,
                    "process": self.process, "t": int(progress.t),
                    "rows": writer.describe(self._own_rows, "rows"), "points": writer.describe(own, "points")}
        write_atomically(self._shard, lambda temporary: _write_archive(temporary, contents, writer.arrays))

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()
        _unlocked(self._lock)

    def __enter__(self) -> "ProcessCheckpointFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_shard(path, process: int, t: int) -> tuple[np.ndarray, dict]:
    """Process `process`'s part of the multi-process checkpoint `path` (`ProcessCheckpointFile`):
    its rows and its points' part of the per-point fields. ArgumentError for a missing or damaged
    file, one of another process, and one saved at another iteration than `t` (the run's file's)."""
    where = shard_path(os.fspath(path), process)
    contents, arrays = _read_archive(where, _SHARD_MAGIC)
    if contents.get("version") != FORMAT_VERSION or contents.get("process") != process:
        raise ArgumentError(f"{where}: not the checkpoint part of process {process} in format {FORMAT_VERSION} "
                            f"(it says process {contents.get('process')!r}, format {contents.get('version')!r})")
    if contents.get("t") != t:
        raise ArgumentError(f"{where} was saved at iteration {contents.get('t')!r} and {os.fspath(path)} at "
                            f"iteration {t}: a process stopped between the two writes; no checkpoint of this run is "
                            "whole, start it again")
    reader = Reader(arrays)
    try:
        rows, points = reader.value(contents.get("rows"), "rows"), reader.value(contents.get("points"), "points")
    except (UnreadableValue, RecursionError) as e:
        raise ArgumentError(f"{where}: not a checkpoint part this dpppl reads: {e}") from None
    if not isinstance(rows, np.ndarray) or not isinstance(points, dict) \
            or not all(isinstance(v, np.ndarray) for v in points.values()):
        raise ArgumentError(f"{where}: not a checkpoint part this dpppl reads: its rows or points are not arrays")
    return rows, points


def write_atomically(path: str, write) -> None:
    """Call `write(temporary)` to write a temporary file beside `path`, then rename it to `path`
    (`os.replace`, atomic): an error or a Ctrl-C while writing leaves what `path` held before,
    and no temporary file."""
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _write_archive(path: str, contents: dict, arrays: dict) -> None:
    """The `.npz` layout: `checkpoint.json` and one `.npy` member per array (no pickles), synced
    to disk before it is renamed."""
    with open(path, "wb") as f:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            archive.writestr(_CONTENTS, json.dumps(contents))
            for name, arr in arrays.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asarray(arr), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())


def _described_spec(spec: RunSpec) -> tuple[dict, dict]:
    """The run's description as plain data and its arrays: a model parsed from text as that text
    (and its file name) when parsing it again gives the same model, any other model as the
    description of its constructors when reading that description gives the same model
    (ArgumentError otherwise, and for data or options without a description)."""
    writer = Writer()
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    model = fields.pop("model")
    try:
        if model.source is not None and fingerprint(_parsed(model.source, model.path)) == fingerprint(model):
            described_model = {"text": model.source, "path": model.path}
        else:
            described_model = {"description": writer.describe(model, "model")}
            again = Reader(writer.arrays).value(described_model["description"], "model")
            if fingerprint(again) != fingerprint(model):
                raise NotDescribable("model: its description does not rebuild it")
        described = {name: writer.describe(value, name) for name, value in fields.items()}
    except NotDescribable as e:
        raise ArgumentError(f"this run cannot be saved in a checkpoint: {e}. A checkpoint holds plain data only "
                            "(numbers, strings, arrays, dpppl's model constructors), never code; a model from a "
                            "model file always can be saved") from None
    return writer.arrays, {"model": described_model, **described}


def _parsed(source: str, path: str | None) -> Model:
    model = parse(source, source=path or "<string>")
    return dataclasses.replace(model, path=path)


def read_checkpoint(path) -> tuple[RunSpec, Progress, str]:
    """The run saved in `path`, its progress and the dpppl version that wrote it. Nothing in the
    file is unpickled or run (see the module docstring).

    ArgumentError for a missing file, a directory, a file that is not a dpppl checkpoint, a
    damaged one (cut short, or its archive's checksums do not match), one in another format
    version (format 1, a pickle, is refused without being read) and one whose content is not a
    run this dpppl describes (a field missing or of the wrong type, a class that is not a dpppl
    model constructor)."""
    path = os.fspath(path)
    contents, arrays = _read_archive(path, _MAGIC)
    version, written_by = contents.get("version"), str(contents.get("dpppl"))
    if version != FORMAT_VERSION:
        raise ArgumentError(f"{path}: a checkpoint in format {version} (written by dpppl {written_by}); this dpppl "
                            f"({__version__}) reads format {FORMAT_VERSION}: continue it with dpppl {written_by}")
    processes = contents.get("processes", 1)
    if processes != jax.process_count():
        raise ArgumentError(f"{path}: the checkpoint of a run over {processes} process(es) (jax.distributed); this "
                            f"run has {jax.process_count()}: continue it with dpppl.resume on {processes} processes, "
                            "each holding the rows it held")
    try:
        spec, progress = _run_of(contents, Reader(arrays))
    except (UnreadableValue, RecursionError) as e:
        raise ArgumentError(f"{path}: the checkpoint does not describe a run dpppl {__version__} can continue "
                            f"(written by dpppl {written_by}): {e}") from None
    return spec, progress, written_by


def _read_archive(path: str, magic: str) -> tuple[dict, dict]:
    """The `checkpoint.json` contents and the arrays of the archive `path`, whose contents say
    `format: magic`. Nothing is unpickled; ArgumentError for a missing file, a directory, a
    format 1 file (a pickle, refused unread), a file that is not such an archive and a damaged one."""
    if os.path.isdir(path):
        raise ArgumentError(f"{path}: is a directory, not a checkpoint file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ArgumentError(f"{path}: no such checkpoint file") from None
    except OSError as e:
        raise ArgumentError(f"{path}: cannot read the checkpoint: {e.strerror or e}") from None
    if raw.startswith(_PICKLED_FORMAT):
        written_by = raw[:200].split(b"\n", 1)[0].split(b" ")[2:3]
        by = f" by dpppl {written_by[0].decode(errors='replace')}" if written_by else ""
        raise ArgumentError(f"{path}: a checkpoint in format 1 (written{by}), a Python pickle; this dpppl "
                            f"({__version__}) never reads pickles, since reading one can run any code it holds. "
                            "Start the run again (the draws of a new run with the same seed are the same), or, "
                            "only if you trust the file, continue it with the dpppl that wrote it")
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        raise _not_a_checkpoint(path) if not raw.startswith(b"PK") else _damaged(path)
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
            if _CONTENTS not in archive.files:
                raise _not_a_checkpoint(path)
            contents = json.loads(archive[_CONTENTS])
            arrays = {name: archive[name] for name in archive.files if name != _CONTENTS}
    except ArgumentError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise _damaged(path, e) from None
    except ValueError as e:  # an object array: allow_pickle=False refuses to read it
        raise ArgumentError(f"{path}: not a checkpoint this dpppl reads: {e}") from None
    if not isinstance(contents, dict) or contents.get("format") != magic:
        raise _not_a_checkpoint(path)
    return contents, arrays


def _run_of(contents: dict, reader: Reader) -> tuple[RunSpec, Progress]:
    """The RunSpec and Progress that `contents` describes; UnreadableValue for anything missing or
    of the wrong type."""
    spec, progress = contents.get("spec"), contents.get("progress")
    if not isinstance(spec, dict) or not isinstance(progress, dict):
        raise UnreadableValue("no run description and progress")
    fields = {}
    for name in (f.name for f in dataclasses.fields(RunSpec)):
        if name not in spec:
            raise UnreadableValue(f"the run description has no {name!r}")
        if name != "model":
            fields[name] = reader.value(spec[name], name)
    for name, types in _SPEC_TYPES.items():
        if not isinstance(fields[name], types) or isinstance(fields[name], bool):
            raise UnreadableValue(f"{name} is a {type(fields[name]).__name__}, not a {types[0].__name__}")
    model = spec["model"]
    if isinstance(model, dict) and isinstance(model.get("text"), str) \
            and isinstance(model.get("path"), (str, type(None))):
        try:
            fields["model"] = _parsed(model["text"], model["path"])
        except ModelError as e:
            raise UnreadableValue(f"the model's text: {e}") from None
    elif isinstance(model, dict) and "description" in model:
        fields["model"] = reader.value(model["description"], "model")
        if not isinstance(fields["model"], Model):
            raise UnreadableValue(f"the model is a {type(fields['model']).__name__}, not a dpppl model")
    else:
        raise UnreadableValue("the model is neither a model file's text nor a model's description")
    missing = [name for name in Progress._fields if name not in progress]
    if missing:
        raise UnreadableValue(f"the progress has no {missing[0]!r}")
    t, states = progress["t"], reader.value(progress["states"], "states")
    chain_keys, kept = reader.value(progress["chain_keys"], "chain_keys"), reader.value(progress["kept"], "kept")
    if not isinstance(t, int) or isinstance(t, bool) or t < 0:
        raise UnreadableValue(f"the iteration reached is {t!r}, not a count")
    if not (isinstance(chain_keys, np.ndarray) and chain_keys.dtype == np.uint32 and chain_keys.ndim == 2):
        raise UnreadableValue("the chains' keys are not an array of uint32 key data")
    if not (isinstance(kept, tuple) and all(isinstance(chunk, dict) for chunk in kept)):
        raise UnreadableValue("the kept draws are not chunks of named arrays")
    return RunSpec(**fields), Progress(t, states, chain_keys, kept)


def _not_a_checkpoint(path: str) -> ArgumentError:
    return ArgumentError(f"{path}: not a dpppl checkpoint (one is written by dpppl.sample(..., checkpoint=PATH) "
                         "or `dpppl sample --checkpoint PATH`)")


def _damaged(path: str, error: Exception | None = None) -> ArgumentError:
    detail = f" ({error})" if error is not None else ""
    return ArgumentError(f"{path}: the checkpoint is damaged (the file was cut short or changed after it was "
                         f"written){detail}")


__all__ = ["DEFAULT_EVERY", "FORMAT_VERSION", "CheckpointFile", "Interrupted", "ProcessCheckpointFile",
           "Progress", "RunSpec", "check_every", "check_output_path", "joined_points", "read_checkpoint", "read_shard",
           "shard_path", "split_points", "write_atomically"]
