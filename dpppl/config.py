"""JAX settings dpppl changes on import, each with its opt-out, and the float64 context of its
own programs; see docs/configuration.md.

A setting the user already made (in the environment or in `jax.config`) is left as it was.
What was changed is logged once (logger `"dpppl"`, level INFO) and `describe`
lists every setting, its value, where the value came from and how to opt out.

64-bit mode is not changed for the process: dpppl's entry points (`dpppl.sample`, `resume`,
`log_joint`, `map_search`, `sample_prior`, `kernels.make`/`build`, the estimator) trace and run
their programs inside `x64` (`jax.enable_x64`), and the user's other code keeps
the precision it had.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import logging
import os

__all__ = ["COMPILER_OPTIONS", "X64", "Setting", "compiler_options", "compiler_options_source", "describe",
           "float_dtype", "in_x64", "set_compiler_options", "settings", "x64"]

_OFF = ("0", "false", "False", "FALSE", "no", "off", "")
_EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
_DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "dpppl", "xla")
_CACHE_MAX_BYTES = 2 * 2**30


@dataclasses.dataclass(frozen=True)
class Setting:
    """One JAX/XLA setting dpppl may change: its value now and where that value came from.

    `changed` is True when dpppl set it at import; `source` says who decided the value
    (`"dpppl default"`, `"user: ..."`, `"opt-out: ..."` or `"JAX default ..."`).
    """

    name: str
    value: object
    changed: bool
    source: str
    opt_out: str
    why: str


_SETTINGS: list[Setting] = []


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # noqa: BLE001  (private API moved: assume not started)
        return False


# XLA_FLAGS and async dispatch are read when JAX creates its CPU client (the first computation).
# DPPPL_CPU_THREADING: "safe" (default: async dispatch off), "strict" (also the Eigen flag),
# "default" (neither).
_threading = os.environ.get("DPPPL_CPU_THREADING", "safe").strip().lower()
_safe_cpu = _threading != "default"
_user_xla_flags = os.environ.get("XLA_FLAGS", "")

import jax  # noqa: E402  (after reading the user's XLA_FLAGS, before the CPU client exists)

_started = _backend_started()


def _eigen_setting() -> Setting:
    # Opt-in only (DPPPL_CPU_THREADING=strict): it single-threads every XLA CPU op of the
    # process and, being an environment variable, of its child processes; with async dispatch
    # off no run of benchmarks/bench_cpu_wedge.py hung without it.
    name, opt = "XLA_FLAGS " + _EIGEN_FLAG, "opt-in: DPPPL_CPU_THREADING=strict"
    why = "the older guard against the XLA CPU thread-pool wedge (docs/configuration.md#cpu-threading)"
    if _EIGEN_FLAG in _user_xla_flags:
        value = next((f.split("=", 1)[-1] for f in _user_xla_flags.split() if f.startswith(_EIGEN_FLAG)), "?")
        return Setting(name, value, False, "user: XLA_FLAGS", opt, why)
    if _threading != "strict":
        return Setting(name, "XLA default (true)", False, "XLA default", opt, why)
    if _started:
        return Setting(name, "XLA default (true)", False,
                       "XLA default: JAX had run before dpppl was imported, too late to change", opt, why)
    os.environ["XLA_FLAGS"] = (_user_xla_flags + f" {_EIGEN_FLAG}=false").strip()
    return Setting(name, "false", True, "DPPPL_CPU_THREADING=strict", opt, why)


def _async_setting() -> Setting:
    name, opt = "jax_cpu_enable_async_dispatch", "DPPPL_CPU_THREADING=default"
    why = "guards against the XLA CPU thread-pool wedge (docs/configuration.md#cpu-threading)"
    value = jax.config.values["jax_cpu_enable_async_dispatch"]
    if value is not True:  # JAX's default is True and no environment variable sets it
        return Setting(name, value, False, "user: jax.config", opt, why)
    if not _safe_cpu:
        return Setting(name, value, False, "opt-out: DPPPL_CPU_THREADING=default", opt, why)
    platforms = jax.config.values.get("jax_platforms") or ""
    if platforms and "cpu" not in [p.strip() for p in platforms.split(",")]:  # no CPU client: no wedge
        return Setting(name, value, False, f"JAX default: no CPU backend (jax_platforms={platforms!r})", opt, why)
    if _started:
        return Setting(name, value, False,
                       "JAX default: JAX had run before dpppl was imported, too late to change", opt, why)
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    return Setting(name, False, True, "dpppl default", opt, why)


def _cache_settings() -> list[Setting]:
    opt = "DPPPL_COMPILATION_CACHE=off (or =DIR for another directory)"
    why = "a second process with the same model and data shapes starts without compiling (10-40 s on CPU)"
    why_size = "bounds the cache dpppl turned on; least recently used entries go first"
    wanted = os.environ.get("DPPPL_COMPILATION_CACHE")
    current = jax.config.values["jax_compilation_cache_dir"]
    size = jax.config.values["jax_compilation_cache_max_size"]
    if current is not None:
        src = ("user: JAX_COMPILATION_CACHE_DIR" if os.environ.get("JAX_COMPILATION_CACHE_DIR")
               else "user: jax.config")
        return [Setting("jax_compilation_cache_dir", current, False, src, opt, why),
                Setting("jax_compilation_cache_max_size", size, False, "left to the user's cache", opt, why_size)]
    if wanted is not None and wanted.strip() in _OFF:
        return [Setting("jax_compilation_cache_dir", None, False, f"opt-out: DPPPL_COMPILATION_CACHE={wanted}",
                        opt, why),
                Setting("jax_compilation_cache_max_size", size, False, "cache off", opt, why_size)]
    directory = wanted or _DEFAULT_CACHE
    jax.config.update("jax_compilation_cache_dir", directory)
    out = [Setting("jax_compilation_cache_dir", directory, True,
                   "DPPPL_COMPILATION_CACHE" if wanted else "dpppl default", opt, why)]
    if size != -1 or os.environ.get("JAX_COMPILATION_CACHE_MAX_SIZE"):
        out.append(Setting("jax_compilation_cache_max_size", size, False, "user", opt, why_size))
    elif importlib.util.find_spec("filelock") is None:  # JAX needs filelock to enforce a limit
        out.append(Setting("jax_compilation_cache_max_size", size, False,
                           "JAX default (unbounded): the filelock package is not installed", opt, why_size))
    else:
        jax.config.update("jax_compilation_cache_max_size", _CACHE_MAX_BYTES)
        out.append(Setting("jax_compilation_cache_max_size", _CACHE_MAX_BYTES, True, "dpppl default", opt, why_size))
    name, why_min = "jax_persistent_cache_min_compile_time_secs", (
        "every compiled program of a dpppl run goes to the cache, the small ones too (key splits, seating), "
        "so a new process compiles nothing; the user's programs keep JAX's threshold")
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" in os.environ or jax.config.values[name] != 1.0:
        out.append(Setting(name, jax.config.values[name], False, "user", opt, why_min))
    elif _min_compile_time_state() is None:  # JAX moved its config states: the process-wide setting
        jax.config.update(name, 0.0)
        out.append(Setting(name, 0.0, True, "dpppl default", opt, why_min))
    else:
        _SCOPED["min_compile_time"] = 0.0
        out.append(Setting(name, 0.0, False, "dpppl default, inside dpppl's programs only (dpppl.config.x64)",
                           opt, why_min))
    return out


_SCOPED: dict = {}
"""Settings dpppl applies only inside `x64` (its own programs), by name."""


def _min_compile_time_state():
    """JAX's `persistent_cache_min_compile_time_secs` state (a context manager of the thread,
    read when a program is compiled), or None where JAX's private config module has moved."""
    try:
        from jax._src import config as jax_config
        return jax_config.persistent_cache_min_compile_time_secs
    except (ImportError, AttributeError):
        return None


def _x64_setting() -> Setting:
    """64-bit mode of dpppl's own programs (the `x64` context); the process's setting is not changed."""
    name, opt = "jax_enable_x64", "DPPPL_X64=0"
    why = ("float64: collapsed log joints sum thousands of log-gamma/log-det terms; dpppl's entry points run "
           "inside dpppl.config.x64(), the process's jax_enable_x64 is left as it was")
    value = jax.config.values["jax_enable_x64"]
    if os.environ.get("DPPPL_X64", "1").strip() in _OFF:  # dpppl's own setting wins for dpppl's programs
        return Setting(name, False, False, f"opt-out: DPPPL_X64={os.environ['DPPPL_X64']}", opt, why)
    if "JAX_ENABLE_X64" in os.environ or value:
        src = "user: JAX_ENABLE_X64" if "JAX_ENABLE_X64" in os.environ else "user: jax.config"
        return Setting(name, bool(value), False, src, opt, why)
    return Setting(name, True, False, "dpppl default (a context around dpppl's programs)", opt, why)


COMPILER_OPTIONS: dict = {"xla_backend_optimization_level": 1}
"""XLA's compile options for dpppl's own programs (`dpppl.core.compiled.persisted`: the chunks of
steps, the initial seating, states from labels, the pointwise log likelihood), unless
`DPPPL_XLA_OPTIONS` or `set_compiler_options` says otherwise: LLVM's optimization level 1 instead
of XLA's default 2 (docs/configuration.md#compiler-options, benchmarks/results/compile_options.md)."""

_OPTIONS_ENV = "DPPPL_XLA_OPTIONS"


def _options_setting() -> Setting:
    name, opt = "XLA compile options of dpppl's programs", f"{_OPTIONS_ENV}=xla (XLA's defaults), or name=value,..."
    why = ("compiling is most of a first run's time: LLVM at level 1 compiles the kernels' programs in less CPU "
           "time than XLA's default level 2, and runs them as fast (docs/configuration.md#compiler-options)")
    text = os.environ.get(_OPTIONS_ENV)
    if text is None:
        return Setting(name, dict(COMPILER_OPTIONS), False, "dpppl default, on dpppl's own programs only", opt, why)
    return Setting(name, text, False, f"user: {_OPTIONS_ENV}", opt, why)


_SETTINGS += [_eigen_setting(), _async_setting(), *_cache_settings(), _x64_setting(), _options_setting()]
_compiler_options: tuple = (_SETTINGS[-1].source, _SETTINGS[-1].value)  # (who asked, what), the options setting's


def compiler_options():
    """The XLA compile options asked for dpppl's programs, as asked: `COMPILER_OPTIONS` (a dict) unless
    `DPPPL_XLA_OPTIONS` (its text: comma-separated `name=value` pairs, or `xla` for XLA's own defaults)
    or `set_compiler_options` chose others. `dpppl.core.compiled` reads and checks them when it
    compiles a program (an ArgumentError there, before any sampling, when they are malformed)."""
    return _compiler_options[1]


def set_compiler_options(options: dict | None = None) -> None:
    """Compile dpppl's programs compiled from now on with the XLA compile options `options`
    (names as in XLA's `DebugOptions`, e.g. `{"xla_backend_optimization_level": 2}`; `{}` for XLA's
    own defaults; None for dpppl's, `COMPILER_OPTIONS`). Programs already compiled in this process
    keep theirs; the persistent cache keeps one program per set of options. Options that are not a
    dict of `xla_...` names to bools, numbers or strings, or that XLA does not know, raise
    ArgumentError at the next compilation, before any sampling."""
    global _compiler_options
    _compiler_options = (("dpppl default", dict(COMPILER_OPTIONS)) if options is None
                         else ("dpppl.config.set_compiler_options", options))


def compiler_options_source() -> str:
    """Who asked for `compiler_options()`: `"dpppl default"`, `"user: DPPPL_XLA_OPTIONS"` or
    `"dpppl.config.set_compiler_options"`."""
    return _compiler_options[0]


#: True when dpppl's programs compute in float64: unless `DPPPL_X64=0`, or (without `DPPPL_X64`) the
#: user turned JAX's 64-bit mode off in the environment (`JAX_ENABLE_X64=0`) before importing dpppl.
X64 = bool(next(s.value for s in _SETTINGS if s.name == "jax_enable_x64"))


@contextlib.contextmanager
def x64():
    """Within it, JAX traces and runs in dpppl's precision (`jax.enable_x64(X64)`: 64-bit unless
    `DPPPL_X64=0`), whatever the process's `jax_enable_x64`, and programs compiled go to the
    persistent cache however fast they compiled (`jax_persistent_cache_min_compile_time_secs` 0,
    unless the user set it); both are restored on exit. Arrays made outside keep their dtype (a
    float32 array stays float32 inside)."""
    with contextlib.ExitStack() as scoped:
        scoped.enter_context(jax.enable_x64(X64))
        if "min_compile_time" in _SCOPED:
            scoped.enter_context(_min_compile_time_state()(_SCOPED["min_compile_time"]))
        yield


def in_x64(fn):
    """`fn` run inside `x64` (dpppl's entry points)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with x64():
            return fn(*args, **kwargs)

    return wrapper


def settings() -> list[Setting]:
    """Every setting dpppl may change, as decided when dpppl was imported."""
    return list(_SETTINGS)


def describe() -> str:
    """A table of every setting: value, whether dpppl changed it, why, and its opt-out.

    `print(dpppl.config.describe())`.
    """
    rows = [f"{s.name} = {s.value!r}\n    {'changed by dpppl' if s.changed else 'not changed'}"
            f" (source: {s.source})\n    why: {s.why}\n    opt-out: {s.opt_out}" for s in _SETTINGS]
    return "dpppl JAX settings (docs/configuration.md)\n" + "\n".join(rows)


def float_dtype():
    """The floating dtype JAX computes in here: float64 inside `x64` (dpppl's
    programs, unless `DPPPL_X64=0`) or where the process is in 64-bit mode, else float32 (the
    user's precision, e.g. `PartitionGibbs` in a user's float32 NumPyro run)."""
    import jax.numpy as jnp

    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


_changed = [s for s in _SETTINGS if s.changed]
if _changed:
    logging.getLogger("dpppl").info(
        "dpppl changed JAX settings on import: %s; see dpppl.config.describe() for opt-outs",
        ", ".join(f"{s.name}={s.value}" for s in _changed))
