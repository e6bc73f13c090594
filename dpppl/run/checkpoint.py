"""Checkpoints: a partition-kernel run saved to a file, continued by [`dpppl.resume`][dpppl.resume].

A checkpoint holds what the run was asked to do (`RunSpec`: the model, the data, the kernel
and its options, the seed, the lengths) and how far it got (`Progress`: the iteration `t`
reached, the chains' states and keys, the draws kept). Step `t` of chain `c` uses the key
`fold_in(chain_key[c], t)` and growing the capacity never changes a draw, so a run continued
from a checkpoint makes the draws the uninterrupted run would have made.

The file is one header line, `dpppl-checkpoint <format> <dpppl version> <sha256 of the rest>`,
then a pickle. It is written to a temporary file in the same directory and renamed over the old
one (`os.replace`), so an interruption while writing leaves the previous checkpoint whole. A
model parsed from text is kept as its text (and file name), any other model pickled; see
docs/checkpoints.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import re
from typing import Any, NamedTuple, Optional

import jax
import numpy as np

from dpppl.core.fingerprint import fingerprint
from dpppl.dsl.parser import parse
from dpppl.errors import ArgumentError
from dpppl.models.mixture import Model
from dpppl.version import __version__

FORMAT_VERSION = 1
"""The checkpoint format this dpppl writes and reads."""
DEFAULT_EVERY = 60.0
"""Seconds between two checkpoints of a run (one is also written at the end of warmup, at the
end of the run and on Ctrl-C)."""
_MAGIC = b"dpppl-checkpoint"
_HEADER = re.compile(rb"dpppl-checkpoint (\d+) (\S+) ([0-9a-f]{64})\n")


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
    pickled once, here, so a model, data or option that cannot be saved is an ArgumentError
    before anything is sampled."""

    def __init__(self, path, spec: RunSpec, every: float = DEFAULT_EVERY):
        self.path = os.fspath(path)
        check_output_path(self.path, "checkpoint")
        check_every(every)
        self.every = float(every)
        self._spec = _pickled_spec(spec)

    def save(self, progress: Progress) -> None:
        """Write `progress` atomically (a temporary file renamed over the checkpoint)."""
        host = Progress(int(progress.t), jax.tree.map(np.asarray, progress.states),
                        np.asarray(progress.chain_keys), progress.kept)
        body = pickle.dumps({"spec": self._spec, "progress": tuple(host)}, protocol=pickle.HIGHEST_PROTOCOL)
        header = b"%s %d %s %s\n" % (_MAGIC, FORMAT_VERSION, __version__.encode(),
                                     hashlib.sha256(body).hexdigest().encode())
        write_atomically(self.path, lambda temporary: _write_synced(temporary, header + body))


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


def _write_synced(path: str, content: bytes) -> None:
    with open(path, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())


def _pickled_spec(spec: RunSpec) -> bytes:
    """The run's description as bytes: a model parsed from text as that text (and its file
    name) when parsing it again gives the same model, any other model pickled."""
    model = spec.model
    as_text = model.source is not None and fingerprint(_parsed(model.source, model.path)) == fingerprint(model)
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    fields["model"] = {"source": model.source, "path": model.path} if as_text else model
    fields["data"] = jax.tree.map(lambda v: np.asarray(v) if isinstance(v, jax.Array) else v, spec.data)
    try:
        return pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise ArgumentError(f"this run cannot be saved in a checkpoint: {e} (the model, the data and the kernel "
                            "options must pickle; a model from a model file always does)") from None


def _parsed(source: str, path: str | None) -> Model:
    model = parse(source, source=path or "<string>")
    return dataclasses.replace(model, path=path)


def read_checkpoint(path) -> tuple[RunSpec, Progress, str]:
    """The run saved in `path`, its progress and the dpppl version that wrote it.

    ArgumentError for a missing file, a directory, a file that is not a dpppl checkpoint, a
    damaged one (its checksum does not match) or one in another format version."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ArgumentError(f"{path}: is a directory, not a checkpoint file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ArgumentError(f"{path}: no such checkpoint file") from None
    except OSError as e:
        raise ArgumentError(f"{path}: cannot read the checkpoint: {e.strerror or e}") from None
    header = _HEADER.match(raw[:200])
    if not raw.startswith(_MAGIC) or header is None:
        raise ArgumentError(f"{path}: not a dpppl checkpoint (one is written by dpppl.sample(..., checkpoint=PATH) "
                            "or `dpppl sample --checkpoint PATH`)")
    version, written_by, digest = int(header[1]), header[2].decode(), header[3].decode()
    if version != FORMAT_VERSION:
        raise ArgumentError(f"{path}: a checkpoint in format {version} (written by dpppl {written_by}); this dpppl "
                            f"({__version__}) reads format {FORMAT_VERSION}: continue it with dpppl {written_by}")
    body = raw[header.end():]
    if hashlib.sha256(body).hexdigest() != digest:
        raise ArgumentError(f"{path}: the checkpoint is damaged (its checksum does not match: the file was cut "
                            "short or changed after it was written)")
    try:
        content = pickle.loads(body)
        fields = pickle.loads(content["spec"])
        progress = Progress(*content["progress"])
    except Exception as e:  # noqa: BLE001  (a class the pickle names may have moved since it was written)
        raise ArgumentError(f"{path}: the checkpoint cannot be read by dpppl {__version__} (written by dpppl "
                            f"{written_by}): {type(e).__name__}: {e}") from None
    model = fields["model"]
    fields["model"] = _parsed(model["source"], model["path"]) if isinstance(model, dict) else model
    return RunSpec(**fields), progress, written_by


__all__ = ["DEFAULT_EVERY", "FORMAT_VERSION", "CheckpointFile", "Interrupted", "Progress", "RunSpec",
           "check_every", "check_output_path", "read_checkpoint", "write_atomically"]
