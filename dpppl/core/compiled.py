"""Compiled functions kept for the life of the process, and traces kept on disk.

`compiled(key, build)` returns the function `build()` made the first time `key` was
seen (typically a `jax.jit` of a vmapped step), so a second `dpppl.sample` of the same
model, data, kernel and options traces and compiles nothing: JAX's own cache then serves
every call with the same argument shapes. Keys hold fingerprints
(`dpppl.core.fingerprint`) of the target and the options.

`Exported` goes further for the functions that cost most to trace (a chunk of
kernel steps): it exports the trace (`jax.export`) and keeps it beside JAX's persistent
compilation cache, so a new process loads it and compiles from that cache without running
the kernel's Python again. The disk key holds the function's key, the argument shapes, the
JAX version, the precision, the platform and a digest of dpppl's own source, so an entry is
never used by other code. Every call runs the exported function, whether it was just
exported or loaded, so draws do not depend on what was cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Callable, Hashable

import jax
import numpy as np

from dpppl.core.fingerprint import persistable

_COMPILED: dict[Hashable, Callable] = {}
_PACKAGE = pathlib.Path(__file__).resolve().parents[1]


def compiled(key: Hashable, build: Callable[[], Callable]) -> Callable:
    key = (key, jax.config.jax_enable_x64)  # a trace depends on the default precision
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = build()
    return fn


def clear() -> None:
    """Forget every kept function (their memory goes when nothing else holds them)."""
    _COMPILED.clear()


_SOURCE_DIGEST: list[str] = []


def source_digest() -> str:
    """A digest of dpppl's source files (computed once per process)."""
    if not _SOURCE_DIGEST:
        digest = hashlib.sha256()
        for path in sorted(_PACKAGE.rglob("*")):
            if path.suffix in (".py", ".lark"):
                digest.update(str(path.relative_to(_PACKAGE)).encode() + path.read_bytes())
        _SOURCE_DIGEST.append(digest.hexdigest())
    return _SOURCE_DIGEST[0]


def _trace_dir() -> pathlib.Path | None:
    cache = jax.config.jax_compilation_cache_dir
    return None if not cache else pathlib.Path(cache) / "dpppl-traces"


class Exported:
    """`fn(*args) -> (tree, dict of arrays)` run as one exported trace per argument structure.

    `fn`'s first result is a tree whose structure `structure(*args)` gives without tracing
    `fn` (a state); its second result is a flat dict of arrays (records, possibly empty).
    When the function cannot be exported (an operation `jax.export` does not serialise),
    it runs as `jax.jit(fn)` and nothing is kept on disk.
    """

    def __init__(self, key: Hashable, fn: Callable, structure: Callable):
        self._key, self._fn, self._structure, self._by_structure = key, fn, structure, {}

    def __call__(self, *args):
        leaves, in_tree = jax.tree.flatten(args)
        state_tree = self._structure(*args)
        avals = tuple((np.shape(leaf), str(np.result_type(leaf))) for leaf in leaves)
        entry = self._by_structure.get((in_tree, avals))
        if entry is None:
            entry = self._by_structure[(in_tree, avals)] = self._prepare(leaves, in_tree, avals)
        call, names = entry
        if names is None:  # not exportable: the plain jit
            return call(*args)
        outs = call(*leaves)
        split = state_tree.num_leaves
        return jax.tree.unflatten(state_tree, outs[:split]), dict(zip(names, outs[split:]))

    def _prepare(self, leaves, in_tree, avals):
        path = None
        directory = _trace_dir()
        if directory is not None and persistable(self._key):
            ident = repr((self._key, str(in_tree), avals, jax.__version__, jax.config.jax_enable_x64,
                          jax.default_backend(), source_digest()))
            path = directory / (hashlib.sha256(ident.encode()).hexdigest() + ".bin")
            loaded = _load(path)
            if loaded is not None:
                exported, names = loaded
                return jax.jit(exported.call), names
        names: list[str] = []

        def flat(*flat_leaves):
            state, records = self._fn(*jax.tree.unflatten(in_tree, flat_leaves))
            names[:] = sorted(records)
            return tuple(jax.tree.leaves(state)) + tuple(records[k] for k in names)

        try:
            exported = jax.export.export(jax.jit(flat))(*[jax.ShapeDtypeStruct(s, d) for s, d in avals])
        except Exception:  # noqa: BLE001  (an operation export cannot serialise: run the plain jit)
            return jax.jit(self._fn), None
        if path is not None:
            _save(path, exported, names)
        return jax.jit(exported.call), list(names)


def _load(path: pathlib.Path):
    try:
        header, body = path.read_bytes().split(b"\n", 1)
        return jax.export.deserialize(bytearray(body)), json.loads(header)
    except (OSError, ValueError, ImportError):
        return None
    except Exception:  # noqa: BLE001  (a corrupt or foreign entry is traced again)
        return None


def _save(path: pathlib.Path, exported, names) -> None:
    try:
        body = exported.serialize()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(json.dumps(list(names)).encode() + b"\n" + bytes(body))
        os.replace(tmp, path)
    except (OSError, ImportError):
        pass  # an unwritable cache, or no flatbuffers: the trace is kept in memory only


__all__ = ["Exported", "clear", "compiled", "source_digest"]
