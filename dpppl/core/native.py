"""Native CPU functions called from inside jitted code through XLA's FFI.

A C++ source shipped in the package is compiled on first use with the machine's C++
compiler (`$CXX`, else `g++`/`c++`) against the headers of the installed jaxlib
(`jax.ffi.include_dir()`), into a per-user cache directory keyed by a hash of the source (and of
the local headers it includes), the compiler command and the jax/jaxlib versions, so each machine compiles each version
once (seconds); the library is loaded and its handlers registered as XLA FFI targets for
the CPU platform. When there is no compiler, or the build or load fails, `load` warns once
and returns None, and the caller runs its JAX path.

`DPPPL_NATIVE` chooses: `auto` (default: native on the CPU backend when it builds), `0`/`off`
(never), `1`/`on` (always on CPU; a failed build is an error). `DPPPL_NATIVE_CACHE` moves the
cache (default `$XDG_CACHE_HOME/dpppl/native`, else `~/.cache/dpppl/native`).
`DPPPL_NATIVE_THREADS` bounds the threads a native call may run chains on (default: the
CPUs this process may use). `DPPPL_NATIVE_CFLAGS` adds compiler flags (split as a shell
would) after dpppl's own, e.g. `-fsanitize=address -fno-omit-frame-pointer -g` for a
sanitized build (run Python with the sanitizer's runtime in `LD_PRELOAD`); the flags are part
of the cache key, so such a build never replaces or is loaded in place of a normal one.

A library in the cache is loaded only when it is what this process built: beside each
library `<name>.so` the build records the sha256 of its bytes in `<name>.so.sha256`, and before
loading the library's bytes are hashed again; a library whose hash differs is rebuilt (with a
warning), one with no recorded hash (a cache from before) rebuilt silently. A library or hash
file that is not owned by this user, or that others (group or world) may write, is never loaded:
`load` warns and the JAX path runs (an error when native code is required).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import jax

from dpppl.errors import KernelError

_FLAGS = ("-O2", "-fno-math-errno", "-std=c++17", "-shared", "-fPIC", "-w")
_LOADED: dict[str, object] = {}  # source path -> the loaded library, or the reason it is not
_LIBRARIES: dict[str, dict[str, str]] = {}  # source path -> the FFI targets it registered (name -> symbol)
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def mode() -> str:
    """`"auto"`, `"on"` or `"off"`, from `DPPPL_NATIVE`."""
    value = os.environ.get("DPPPL_NATIVE", "auto").strip().lower()
    if value in _ON:
        return "on"
    if value in _OFF:
        return "off"
    if value != "auto":
        raise KernelError(f"DPPPL_NATIVE must be auto, on (1) or off (0), got {value!r}")
    return "auto"


def wanted(requested: bool | None) -> bool | None:
    """Whether a caller should take its native path: `requested` (a kernel option) when
    given, else `DPPPL_NATIVE`. True: required (a failure is an error); None: when it
    builds; False: never. Off the CPU backend: False, and a request of True is an error."""
    choice = {"on": True, "off": False, "auto": None}[mode()] if requested is None else requested
    if jax.default_backend() != "cpu":
        if choice:
            raise KernelError(f"the native path runs on CPU only, and JAX's default backend is "
                              f"{jax.default_backend()!r} (the JAX path runs there)")
        return False
    return choice


def num_threads() -> int:
    """Threads a native call may run independent chains on."""
    limit = os.environ.get("DPPPL_NATIVE_THREADS")
    if limit:
        return max(1, int(limit))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cache_dir() -> Path:
    if os.environ.get("DPPPL_NATIVE_CACHE"):
        return Path(os.environ["DPPPL_NATIVE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dpppl" / "native"


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _flags() -> tuple[str, ...]:
    """The compiler flags of a build: `_FLAGS`, then those of `DPPPL_NATIVE_CFLAGS`."""
    extra = os.environ.get("DPPPL_NATIVE_CFLAGS", "")
    try:
        return _FLAGS + tuple(shlex.split(extra))
    except ValueError as err:
        raise RuntimeError(f"DPPPL_NATIVE_CFLAGS={extra!r} cannot be split into flags: {err}") from None


def _build(source: Path) -> Path:
    """The shared library of `source`, compiled into the cache unless already there."""
    import jaxlib

    cxx = _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++)")
    flags = _flags()
    include = jax.ffi.include_dir()
    text = _source_bytes(source)
    key = hashlib.sha256(b"\0".join([text, cxx.encode(), " ".join(flags).encode(), jax.__version__.encode(),
                                     jaxlib.__version__.encode(), sys.platform.encode()])).hexdigest()[:20]
    directory = cache_dir()
    library = directory / f"{source.stem}-{key}.so"
    if _cached(library):
        return library
    directory.mkdir(parents=True, exist_ok=True)
    with _build_lock(library):  # processes starting at once (test workers, a multi-process run) build it once
        if library.exists() and _verify(library) is None:  # another process built it while this one waited
            return library
        _compile(cxx, flags, include, source, library)
    return library


def _cached(library: Path) -> bool:
    """Whether `library` is in the cache with the hash written beside it (a mismatch is warned of: it is
    rebuilt)."""
    if not library.exists():
        return False
    mismatch = _verify(library)
    if mismatch:
        warnings.warn(f"dpppl: the cached native library {library} {mismatch}; rebuilding it", RuntimeWarning,
                      stacklevel=5)
    return mismatch is None


@contextlib.contextmanager
def _build_lock(library: Path):
    """An exclusive lock on `library`'s lock file while it is built (POSIX `flock`; where there is
    none, no lock: processes building at once then each compile, and the renames below keep every
    library in place whole)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(library.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(cxx: str, flags: tuple, include: str, source: Path, library: Path) -> None:
    """`source` compiled into `library`."""
    directory = library.parent
    # compile to private names and rename, the hash first: processes building at once never
    # load a partial file, and a library in place always has its hash beside it
    fd, partial = tempfile.mkstemp(suffix=".so", dir=directory)
    os.close(fd)
    fd, partial_hash = tempfile.mkstemp(suffix=".sha256", dir=directory)
    os.close(fd)
    try:
        done = subprocess.run([cxx, *flags, f"-I{include}", str(source), "-o", partial],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(cxx).name} {' '.join(flags)} failed on {source.name}:\n{done.stderr[-2000:]}")
        Path(partial_hash).write_text(_sha256(Path(partial)) + "\n")
        os.replace(partial_hash, _hash_file(library))
        os.replace(partial, library)
    finally:
        for path in (partial, partial_hash):
            if os.path.exists(path):
                os.remove(path)


def _source_bytes(source: Path) -> bytes:
    """The bytes of `source` and of the local headers it includes (`#include "path"`, relative to the
    file that includes it), and of those they include in turn, each once: what a library is keyed by,
    so editing a header rebuilds every library that includes it, directly or not."""
    seen: list[Path] = []
    pending = [source]
    while pending:
        path = pending.pop(0).resolve()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        includes = re.findall(rb'^\s*#\s*include\s+"([^"]+)"', path.read_bytes(), re.M)
        pending += [path.parent / h.decode() for h in includes]
    return b"\0".join(path.read_bytes() for path in seen)


def _hash_file(library: Path) -> Path:
    """Where the sha256 of `library` is recorded: `<library>.sha256`."""
    return library.with_name(library.name + ".sha256")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verify(library: Path) -> str | None:
    """None when the cached `library` may be loaded; else why it must be rebuilt (`""` when it
    has no recorded hash, a cache from before hashes were recorded). A library or hash file not
    owned by this user or writable by others raises RuntimeError: it is never loaded, nor
    replaced by this process."""
    recorded = _hash_file(library)
    for path in (library, recorded):
        if path.exists():
            _check_private(path)
    if not recorded.exists():
        return ""
    want = recorded.read_text().strip()
    got = _sha256(library)
    if got != want:
        return f"has sha256 {got[:16]}..., not the {want[:16]}... recorded in {recorded.name} when it was built"
    return None


def _check_private(path: Path) -> None:
    """RuntimeError unless `path` is owned by this user and not writable by its group or others."""
    info = path.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise RuntimeError(f"{path} is owned by uid {info.st_uid}, not by this user (uid {os.getuid()}): not "
                           "loaded (remove it, or set DPPPL_NATIVE_CACHE to a directory of your own)")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RuntimeError(f"{path} is writable by others (mode {stat.filemode(info.st_mode)}): not loaded "
                           "(remove it, or set DPPPL_NATIVE_CACHE to a directory of your own)")


def load(source: Path, targets: dict[str, str], required: bool):
    """Build and load `source` and register its FFI handlers (`targets`: XLA target name ->
    exported handler symbol) for the CPU platform, once per process. Returns True, or False
    after one warning when it cannot (an error instead when `required`)."""
    key = str(source)
    if key not in _LOADED:
        try:
            lib = ctypes.CDLL(str(_build(source)))
            for target, symbol in targets.items():
                jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
            _LOADED[key] = lib
            _LIBRARIES[key] = dict(targets)
        except Exception as err:  # noqa: BLE001  (any failure means: use the JAX path)
            _LOADED[key] = f"{type(err).__name__}: {err}"
            if not required:
                warnings.warn(f"dpppl: the native CPU code {source.name} could not be built or loaded, so the JAX "
                              f"path runs instead (slower on CPU; DPPPL_NATIVE=0 silences this): {_LOADED[key]}",
                              RuntimeWarning, stacklevel=3)
    loaded = not isinstance(_LOADED[key], str)
    if required and not loaded:
        raise KernelError(f"the native CPU code {source.name} was requested (native=True or DPPPL_NATIVE=1) but "
                          f"could not be built or loaded: {_LOADED[key]}")
    return loaded


def libraries() -> dict[str, dict[str, str]]:
    """The native sources this process built, loaded and registered, each with its FFI targets
    (XLA target name -> handler symbol), as `load` took them."""
    return {source: dict(targets) for source, targets in _LIBRARIES.items()}


def failed() -> bool:
    """Whether a native source could not be built or loaded in this process."""
    return any(isinstance(value, str) for value in _LOADED.values())
