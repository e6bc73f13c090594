"""Compiled functions kept for the life of the process, and their programs kept on disk across processes.

`compiled(key, build)` returns the function `build()` made the first time `key` was
seen (typically a `jax.jit` of a vmapped step), so a second `dpppl.sample` of the same
model structure, kernel and options traces and compiles nothing: JAX's own cache then serves
every call with the same argument shapes. A bound model (the *target*) is an argument of the
programs, never a constant of them: `on_target(name, target, fn)` keys `jit(fn)` by the
target's structure (`dpppl.core.pytrees.structure_key`: its classes, static attributes and
the shapes and dtypes of its data and hyperparameters), so new data or hyperparameters of the
same shapes reuse the program.

A new process does not trace them again either: `persisted`
(what `on_target` and the runner's chunks use) exports each program it traces with `jax.export`
into the directory `exported/` of JAX's compilation cache (`dpppl.config`: `DPPPL_COMPILATION_CACHE`),
named by a SHA-256 of its key (the function's key, the arguments' tree and shapes, the versions of
JAX, jaxlib and dpppl, a digest of dpppl's source files, the platform, the JAX settings a trace
reads and the native FFI targets registered), and a later process with the same key deserializes
the program instead of tracing it; its compilation then comes from JAX's persistent cache. An
entry is a file this user's own processes wrote, read defensively all the same: it must be owned
by this user and writable by no one else, start with this format's header, hold the key it is
named by and a payload whose SHA-256 is the one recorded, and its program must take exactly the
arguments given; anything else (a damaged, foreign or stale file, a key that names an object of
this process only, arguments under a JAX transformation, a process with several devices, whose
programs may shard their work inside, the cache off)
traces as before. Nothing is unpickled: the payload is `jax.export`'s own serialization and the
header JSON.
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import hashlib
import importlib
import json
import logging
import os
import pathlib
import platform
import re
import tempfile
import threading
from typing import Any, Callable, Hashable

import jax
import numpy as np

from dpppl import config
from dpppl.core import native
from dpppl.core.fingerprint import persistable
from dpppl.core.pytrees import Static, structure_key
from dpppl.errors import ArgumentError
from dpppl.version import __version__

_COMPILED: dict[Hashable, Callable] = {}

EXPORT_DIRECTORY = "exported"
"""The directory of exported programs inside JAX's compilation cache directory."""
EXPORT_MAX_BYTES = 512 * 2**20
"""What the exported programs may take on disk; the least recently used go first past it."""
_HEADER = b"dpppl exported program, format 1\n"
_PACKAGE = pathlib.Path(__file__).resolve().parent.parent
_SOURCE_SUFFIXES = (".py", ".cc", ".cpp", ".h")
MAPS_FRACTION = 0.75
"""`make_room` frees the compiled programs once the process holds more than this fraction of the
memory maps Linux allows a process (`vm.max_map_count`)."""
_FREED_TO = [0]  # the maps the process held just after `make_room` last freed programs


def compiled(key: Hashable, build: Callable[[], Callable]) -> Callable:
    key = (key, jax.config.jax_enable_x64)  # a trace depends on the default precision
    fn = _COMPILED.get(key)
    if fn is None:
        make_room()
        fn = _COMPILED[key] = build()
    return fn


def make_room(fraction: float = MAPS_FRACTION) -> bool:
    """Before a new program is compiled: when the process holds more than `fraction` of the
    memory maps Linux allows it (`/proc/sys/vm/max_map_count`, 65,530 by default), forget every
    kept function (`clear`) and clear JAX's caches (`jax.clear_caches`), so that their compiled
    programs and the maps they hold go, and log a warning on the `"dpppl"` logger; after a freeing,
    only once the maps have also taken half the room it left (maps dpppl cannot free, past `fraction`,
    would otherwise have it free every program it compiles, again and again). Returns whether
    it did. XLA's CPU backend maps three regions per kernel of a program (code, constants, data:
    hundreds per chunk of steps) and keeps them while the program is kept; at the limit its next
    map fails and the process dies inside XLA (`LLVM ERROR: Unable to allocate section memory!`,
    SIGABRT, or SIGSEGV; docs/configuration.md#memory-maps). Programs forgotten are compiled again,
    or read from the compilation cache, when next called. Only the main thread frees them (not a
    thread compiling ahead, `prepare`); elsewhere, and where /proc cannot be read, nothing is done."""
    if threading.current_thread() is not threading.main_thread():
        return False
    held, limit = _memory_maps()
    if limit is None or held <= max(fraction * limit, (_FREED_TO[0] + limit) / 2):
        return False
    clear()
    jax.clear_caches()
    gc.collect()
    _FREED_TO[0] = _memory_maps()[0]
    logging.getLogger("dpppl").warning(
        "dpppl: this process held %d of the %d memory maps Linux allows it (vm.max_map_count), most of them "
        "compiled XLA programs; dpppl forgot its compiled programs and cleared JAX's caches (now %d maps), so "
        "that the next compilation does not crash the process. Programs are compiled again, or read from the "
        "compilation cache, when next used (docs/configuration.md#memory-maps)", held, limit, _FREED_TO[0])
    return True


def _memory_maps() -> tuple[int, int | None]:
    """(memory maps this process holds, the most it may hold), or (0, None) where /proc cannot tell."""
    try:
        with open("/proc/self/maps", "rb") as f:
            held = f.read().count(b"\n")
        return held, _map_limit()
    except (OSError, ValueError):
        return 0, None


@functools.cache
def _map_limit() -> int:
    return int(pathlib.Path("/proc/sys/vm/max_map_count").read_text())


LIGHT_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
"""XLA compile options added to dpppl's default ones for a program marked light (`persisted(...,
light=True)`): XLA's elemental emitters, which compile a program in about half the CPU of its fusion
emitters. A program is marked light where that was measured not to slow it: where its run time is not
XLA's code (native calls and scalar arithmetic), or where XLA's code was measured to run as fast.
- The pointwise log likelihood (called a few times a run: Old Faithful 2.3-3.0 -> 1.4 CPU s, galaxies
  1.8 -> 1.0, the same eval time and values), and the `init="sequential"` seating of every model (run once
  per capacity tried: the same labels and statistics).
- The chunks of a kernel whose every move has `Kernel.light_compile`: the native Gibbs sweep and
  split-merge step, the alpha and hyperparameter moves (`gibbs+splitmerge` at 600 points 1.98 -> 0.98
  CPU s, 0.72 ms per step either way; galaxies 2.73 -> 1.18), the native `mallows-slice`, `ddp`,
  `ddpswap`, permutation, `sbgibbs` and label-move steps, and `subcluster` in up to 8 dimensions, measured
  to run as fast (first call at 10^4 points, 1 chain, 50 + 50 iterations: 25.3 -> 17.8 CPU s, the same
  call again 0.91 -> 0.92).
- The NUTS program (`dpppl.run.nuts`): compile 8.3 -> 6.2 CPU s, 500 + 500 iterations run in about the
  same time (one run each; benchmarks/results/compile_stop45_nuts.md).
Other chunks keep dpppl's options: XLA-emitted steps ran up to 1.46x slower with these
(benchmarks/results/compile_options_fusion.md). Options a user chose (`DPPPL_XLA_OPTIONS`,
`set_compiler_options`) are taken as they are."""


def persisted(key: Hashable, fn: Callable, light: bool = False) -> Callable:
    """`jax.jit(fn)` kept under `key` (as `compiled` keeps it) whose programs are also kept on
    disk, so that another process with the same `key` and arguments of the same tree, shapes and
    dtypes runs the program without tracing `fn` (module docstring). `key` must say everything
    `fn` closes over, as for `compiled`. Its programs compile with the XLA compile options
    `dpppl.config.compiler_options()` names when it is first made (part of what it is kept by),
    with `LIGHT_OPTIONS` added to dpppl's default ones when `light` (a program measured to run as fast with them)."""
    options = compiler_options()
    if light and config.compiler_options_source().startswith("dpppl default"):  # not options a user chose
        options = {**options, **LIGHT_OPTIONS}
    return compiled(("persisted", key, tuple(sorted(options.items()))), lambda: _Persisted(key, fn, options))


def compiler_options() -> dict:
    """The XLA compile options `dpppl.config.compiler_options()` asks for, as a dict of option names to
    values; ArgumentError, naming who asked, when they are not `xla_...` names with bool, number or
    string values (or, from `DPPPL_XLA_OPTIONS`, not comma-separated `name=value` pairs or `xla`)."""
    asked, where = config.compiler_options(), config.compiler_options_source()
    if isinstance(asked, str):  # DPPPL_XLA_OPTIONS
        options = {}
        if asked.strip().lower() not in ("", "xla"):
            for part in asked.split(","):
                name, eq, value = part.partition("=")
                if not eq or not name.strip() or not value.strip():
                    raise ArgumentError(f"DPPPL_XLA_OPTIONS={asked!r}: {part.strip()!r} is not name=value (for "
                                        "example xla_backend_optimization_level=2; 'xla' for XLA's own defaults)")
                options[name.strip()] = _option_value(value)
        asked = options
    if not isinstance(asked, dict):
        raise ArgumentError(f"{where}: compile options are a dict of option names to values, got "
                            f"{type(asked).__name__}")
    for name, value in asked.items():
        if not isinstance(name, str) or not name.startswith("xla_"):
            raise ArgumentError(f"{where}: {name!r} is not an XLA compile option (their names start with 'xla_')")
        if not isinstance(value, (bool, int, float, str)):
            raise ArgumentError(f"{where}: option {name} = {value!r} is a {type(value).__name__}, not a bool, "
                                "number or string")
    return dict(asked)


def _option_value(text: str):
    """A compile option's value written in `DPPPL_XLA_OPTIONS`: a bool, an int, a float or a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def on_target(name: str, target: Any, fn: Callable, *static: Hashable, light: bool = False) -> Callable:
    """`jax.jit(fn)` applied to `target`: call the result with `fn`'s other arguments. Kept per
    `name`, `static` (what `fn` closes over: a capacity, a length) and the target's structure, so
    `fn` must read the target only through its argument, never from a closure; kept on disk
    too (`persisted`, with its `light`)."""
    return functools.partial(persisted((name, structure_key(target), static), fn, light), target)


def prepare(fn: Callable, *args, lowered: threading.Event | None = None) -> None:
    """Trace (or read from disk) and compile the program that `fn` (what `persisted` or `on_target`
    returns) runs on arguments of the types of `args` (arrays or `jax.ShapeDtypeStruct`s), so that a
    later call on arguments of those types runs it without compiling: what a thread does while the
    process does something else. `lowered` is set once the program is traced and lowered (the
    Python part of its preparation; XLA's compile, which follows, releases the interpreter), or
    when the preparation ends otherwise."""
    if isinstance(fn, functools.partial):  # `on_target`'s: the target first
        fn, args = fn.func, fn.args + args
    try:
        fn.prepare(*args, lowered=lowered)
    finally:
        if lowered is not None:
            lowered.set()


def in_thread(fn: Callable[[], Any], name: str) -> concurrent.futures.Future:
    """Run `fn()` in a thread of its own (named `name`) in dpppl's precision and cache rule
    (`dpppl.config.x64`: a thread starts with JAX's own settings), and return its future: how a
    program is compiled (`prepare`) while the process does something else."""
    def run():
        with config.x64():
            return fn()

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name)
    try:
        return pool.submit(run)
    finally:
        pool.shutdown(wait=False)


def clear() -> None:
    """Forget every kept function (their memory goes when nothing else holds them); the programs
    on disk stay."""
    _COMPILED.clear()


class _Persisted:
    """A jitted function whose programs are exported to, and read back from, the disk cache."""

    def __init__(self, key: Hashable, fn: Callable, options: dict):
        self.key, self.fn, self.options = key, fn, options
        self.jitted = jax.jit(fn, compiler_options=options or None)
        self.calls: dict[Hashable, Callable | None] = {}  # argument types -> flat caller (None: `jitted`)

    def __call__(self, *args):
        try:
            return self._call(*args)
        except jax.errors.JaxRuntimeError as e:
            if self.options and ("compile option" in str(e) or "While setting option" in str(e)):
                raise ArgumentError(f"XLA refused dpppl's compile options {self.options} (DPPPL_XLA_OPTIONS or "
                                    f"dpppl.config.set_compiler_options): {str(e).splitlines()[0]}") from None
            raise

    def _call(self, *args):
        leaves, in_tree = jax.tree.flatten(args)
        if any(isinstance(leaf, jax.core.Tracer) or _on_several_devices(leaf) for leaf in leaves):
            return self.jitted(*args)  # under a transformation, or sharded: JAX's own path
        call = self._found(in_tree, tuple(jax.typeof(leaf) for leaf in leaves))
        return self.jitted(*args) if call is None else call(leaves)

    def prepare(self, *args, lowered: threading.Event | None = None):
        """Compile the program for arguments of the types of `args` (`prepare`; `lowered` set between
        the lowering and XLA's compile)."""
        signal = lowered.set if lowered is not None else (lambda: None)
        leaves, in_tree = jax.tree.flatten(args)
        avals = tuple(jax.typeof(leaf) for leaf in leaves)
        if _types(in_tree, avals) in self.calls:
            return  # compiled by its first call or an earlier `prepare`
        call = self._found(in_tree, avals)
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals]
        if call is None:  # no disk cache: the program compiled here serves the calls (`jitted` would trace again)
            def flat(*leaves):  # traced on the leaves, as a call's arguments are (a pytree's static fields as given)
                return self.fn(*jax.tree.unflatten(in_tree, leaves))
            flat.__name__ = getattr(self.fn, "__name__", "flat")  # the program's name in JAX's logs and XLA's dumps
            program = jax.jit(flat, compiler_options=self.options or None).lower(*specs)
            signal()
            program = program.compile()
            self.calls[_types(in_tree, avals)] = lambda leaves: program(*leaves)
        else:
            program = call.lower(specs)
            signal()
            program.compile()

    def _found(self, in_tree, avals) -> Callable | None:
        """The flat caller of arguments `in_tree` of types `avals`, made once (`_caller`)."""
        types = _types(in_tree, avals)
        if types not in self.calls:
            make_room()  # a program is compiled next
            self.calls[types] = self._caller(in_tree, avals)
        return self.calls[types]

    def _caller(self, in_tree, avals) -> Callable | None:
        """The function of the flat arguments that runs the program, read from disk or traced
        and exported there; None when the disk cache does not apply (then `jitted` runs)."""
        path = _entry_path(self.key, in_tree, avals)
        if path is None:
            return None
        read = _read(path, avals)
        if read is not None:
            return _flat_caller(*read, self.options, self.name)
        out_trees = []

        def flat(*leaves):
            out = self.fn(*jax.tree.unflatten(in_tree, leaves))
            out_leaves, out_tree = jax.tree.flatten(out)
            out_trees.append(out_tree)
            return out_leaves

        flat.__name__ = self.name  # the program's name in JAX's logs and XLA's dumps (not "flat")

        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals]
        jitted = jax.jit(flat)
        try:
            jitted.trace(*specs)  # builds and loads the native code the program calls, if any
            checks = [jax.export.DisabledSafetyCheck.custom_call(name)
                      for targets in native.libraries().values() for name in targets]
            exported = jax.export.export(jitted, disabled_checks=checks)(*specs)  # the trace above, not again
        except Exception:  # noqa: BLE001  (what jax.export cannot take, jit can: trace as before)
            return None
        _write(path, exported, out_trees[-1])
        return _flat_caller(exported, out_trees[-1], self.options, self.name)

    @property
    def name(self) -> str:
        """What the program is, as JAX's logs and XLA's dumps name it: the first word of its key
        (`"chunk"`, `"seat"`, `"pointwise_log_predictive"`, ...), else the function's name."""
        if isinstance(self.key, tuple) and self.key and isinstance(self.key[0], str):
            return self.key[0]
        return getattr(self.fn, "__name__", "program")


def _types(in_tree, avals) -> tuple:
    """What `_Persisted` keeps a program by: the arguments' tree, shapes, dtypes and weak types."""
    return in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals)


def _on_several_devices(leaf) -> bool:
    return isinstance(leaf, jax.Array) and len(leaf.sharding.device_set) > 1


def _flat_caller(exported, out_tree, options: dict, name: str) -> Callable:
    # every argument on the default device, committed or not: one compilation, as `jax.jit(fn)` has;
    # the compile options are not part of the exported program (JAX's cache keys its code by them)
    device = jax.config.jax_default_device
    if not isinstance(device, jax.Device):  # unset, or a platform's name
        device = jax.devices(device)[0] if isinstance(device, str) else jax.devices()[0]
    def program(*leaves):
        return exported.call(*leaves)

    program.__name__ = name  # "call" in JAX's logs otherwise
    call = jax.jit(program, in_shardings=jax.sharding.SingleDeviceSharding(device),
                   compiler_options=options or None)

    def run(leaves):
        return jax.tree.unflatten(out_tree, call(*leaves))

    run.lower = lambda specs: call.lower(*specs)  # compiled ahead of the first call (`prepare`)
    return run


class _NotPortable(Exception):
    """A key or tree that does not mean the same in another process."""


def _entry_path(key: Hashable, in_tree, avals) -> pathlib.Path | None:
    """The file of the program of `key` on arguments `in_tree` of types `avals`; None when the
    compilation cache is off, the key holds something of this process only or the process has
    several devices (an exported program runs on one)."""
    directory = jax.config.jax_compilation_cache_dir
    if not directory or not persistable(key) or jax.device_count() > 1:
        return None  # with several devices a program may shard inside (the sub-cluster passes)
    try:
        described = _stable((key, in_tree, [(a.shape, str(a.dtype), a.weak_type) for a in avals], _environment()))
    except _NotPortable:
        return None
    digest = hashlib.sha256(json.dumps(described).encode()).hexdigest()
    return pathlib.Path(directory) / EXPORT_DIRECTORY / f"{digest}.jaxexport"


@functools.cache
def _source_digest() -> str:
    """A SHA-256 of dpppl's source files (a changed kernel must not run an old program)."""
    h = hashlib.sha256()
    for path in sorted(p for p in _PACKAGE.rglob("*") if p.suffix in _SOURCE_SUFFIXES):
        h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _environment() -> tuple:
    """What a traced program depends on beyond its key and arguments."""
    import jaxlib  # noqa: PLC0415  (jax has imported it)

    device = jax.devices()[0]
    flags = tuple((name, jax.config.values[name]) for name in (
        "jax_enable_x64", "jax_threefry_partitionable", "jax_default_matmul_precision", "jax_numpy_rank_promotion",
        "jax_numpy_dtype_promotion", "jax_default_prng_impl", "jax_enable_checks", "jax_debug_nans"))
    return (jax.__version__, jaxlib.__version__, __version__, _source_digest(), platform.machine(),
            device.platform, device.device_kind, flags, native.mode(), native.num_threads())


def _stable(value) -> Any:
    """`value` (a key: tuples, numbers, strings, types, dtypes, `Static`s and tree definitions)
    as JSON data that means the same in any process; `_NotPortable` otherwise."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    if isinstance(value, (tuple, list)):
        return [type(value).__name__, [_stable(v) for v in value]]
    if isinstance(value, np.dtype):
        return ["dtype", value.str]
    if isinstance(value, type):
        if "<locals>" in value.__qualname__:
            raise _NotPortable(value)
        return ["type", f"{value.__module__}:{value.__qualname__}"]
    if isinstance(value, Static):
        return ["static", _stable(value._key)]
    if isinstance(value, jax.tree_util.PyTreeDef):
        node = value.node_data()
        if node is None:
            return "*"
        return ["node", _stable(node[0]), _stable(node[1]), [_stable(c) for c in value.children()]]
    raise _NotPortable(value)


def _encode_tree(tree) -> Any:
    """The output tree definition `tree` as JSON data: tuples, lists, dicts with string keys,
    None and NamedTuples defined at the top level of dpppl modules; `_NotPortable` otherwise."""
    node = tree.node_data()
    if node is None:
        return "*"
    cls, aux = node
    children = [_encode_tree(c) for c in tree.children()]
    if cls in (tuple, list) or cls is type(None):
        return [cls.__name__, children]
    if cls is dict and all(isinstance(k, str) for k in aux):
        return ["dict", list(aux), children]
    if _dpppl_namedtuple(cls) and aux is None:
        return ["namedtuple", f"{cls.__module__}:{cls.__qualname__}", children]
    raise _NotPortable(cls)


def _decode_tree(encoded) -> Any:
    """An example tree (leaves 0) of the definition `_encode_tree` wrote; ValueError for anything else."""
    if encoded == "*":
        return 0
    kind, *rest = encoded
    children = [_decode_tree(c) for c in rest[-1]]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "NoneType" and not children:
        return None
    if kind == "dict" and len(rest[0]) == len(children):
        return dict(zip(rest[0], children))
    if kind == "namedtuple":
        module, _, name = rest[0].partition(":")
        if module == "dpppl" or module.startswith("dpppl."):
            cls = getattr(importlib.import_module(module), name, None)
            if _dpppl_namedtuple(cls) and len(cls._fields) == len(children):
                return cls(*children)
    raise ValueError(f"not a tree definition: {kind!r}")


def _dpppl_namedtuple(cls) -> bool:
    return (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")
            and (cls.__module__ == "dpppl" or cls.__module__.startswith("dpppl.")) and "." not in cls.__qualname__)


def _write(path: pathlib.Path, exported, out_tree) -> None:
    """Write the entry (header line, JSON line, payload) atomically; nothing when the output
    tree is not portable or the directory cannot be written (the next process traces again)."""
    try:
        if native.failed():  # a program traced where native code would not load: not for a process where it does
            return
        payload = bytes(exported.serialize())
        meta = {"key": path.stem, "out_tree": _encode_tree(out_tree), "sha256": hashlib.sha256(payload).hexdigest(),
                "size": len(payload), "native": _native_used(exported)}
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(_HEADER + json.dumps(meta).encode() + b"\n" + payload)
        os.replace(tmp, path)
        _prune(path.parent)
    except Exception:  # noqa: BLE001  (no serializer, a tree of this process only, a full disk: not kept)
        return


def _native_used(exported) -> list:
    """[source, its FFI targets] of each native library whose targets the program calls (a process
    reading the program loads them first)."""
    module = bytes(exported.mlir_module_serialized)  # MLIR bytecode keeps symbol names as plain strings
    return [[source, targets] for source, targets in native.libraries().items()
            if any(re.search(rb"\b" + re.escape(name.encode()) + rb"\b", module) for name in targets)]


def _loads(source: str, targets: dict) -> bool:
    """Load the native source of dpppl's package named by an entry (False for any other file)."""
    path = pathlib.Path(source)
    return path.resolve().is_relative_to(_PACKAGE) and path.is_file() and native.load(path, targets, required=False)


def _read(path: pathlib.Path, avals) -> tuple | None:
    """(the exported program, its output tree) of the entry at `path`, or None unless it is
    this user's own, whole, of the key it is named by and takes arguments of types `avals`."""
    try:
        info = path.stat()
        if (hasattr(os, "getuid") and info.st_uid != os.getuid()) or info.st_mode & 0o022:
            return None
        data = path.read_bytes()
        if not data.startswith(_HEADER):
            return None
        line, _, payload = data[len(_HEADER):].partition(b"\n")
        meta = json.loads(line)
        if (meta.get("key") != path.stem or meta.get("size") != len(payload)
                or meta.get("sha256") != hashlib.sha256(payload).hexdigest()):
            return None
        if not all(_loads(source, targets) for source, targets in meta["native"]):
            return None
        exported = jax.export.deserialize(bytearray(payload))
        out_tree = jax.tree.structure(_decode_tree(meta["out_tree"]))
        takes = tuple((a.shape, a.dtype) for a in exported.in_avals)  # weak types are in the key, not kept
        if (takes != tuple((a.shape, a.dtype) for a in avals) or out_tree.num_leaves != len(
                exported.out_avals) or exported.nr_devices != 1 or jax.default_backend() not in exported.platforms):
            return None
        os.utime(path)  # recently used (`_prune`)
    except Exception:  # noqa: BLE001  (a file that does not read as an entry is not one: trace)
        return None
    return exported, out_tree


def _prune(directory: pathlib.Path) -> None:
    """Remove the least recently used entries while they take more than `EXPORT_MAX_BYTES`."""
    entries = sorted(((p.stat().st_mtime, p.stat().st_size, p) for p in directory.glob("*.jaxexport")),
                     key=lambda e: e[0])
    total = sum(size for _, size, _ in entries)
    for _, size, path in entries[:-1]:
        if total <= EXPORT_MAX_BYTES:
            break
        path.unlink(missing_ok=True)
        total -= size


__all__ = ["EXPORT_DIRECTORY", "EXPORT_MAX_BYTES", "MAPS_FRACTION", "LIGHT_OPTIONS", "clear", "compiled", "make_room",
           "on_target", "persisted", "prepare"]
