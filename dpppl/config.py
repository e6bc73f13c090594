"""Numerical configuration.

dpppl runs in float64 by default: the collapsed log joint of a partition sums
thousands of log-gamma and log-determinant terms, and sufficient statistics are
updated incrementally millions of times, both of which lose digits in float32.
Set the environment variable ``DPPPL_X64=0`` before importing dpppl to keep JAX in
32-bit mode (faster on GPUs); every kernel then runs in float32.

On the CPU, XLA's multi-threaded Eigen pool can wedge: every pool thread waits for
work while the caller waits for a result that never comes (seen here with vmapped
kernels on a 2-core machine, the process idle at 0% CPU; reported for jaxlib's
CPU runtime in PyAutoLabs/PyAutoFit#1528 and #1530, and with CPU asynchronous
dispatch in jax-ml/jax#25861). dpppl therefore adds ``--xla_cpu_multi_thread_eigen=false``
to ``XLA_FLAGS`` and turns off ``jax_cpu_enable_async_dispatch`` (CPU computations run
inline in the calling thread), unless ``DPPPL_CPU_THREADING=default`` or the user set
either already. The partition kernels are sequential scans, so they lose little; the
settings take effect only if dpppl is imported before JAX first runs a computation,
and they do not touch GPU or TPU execution.

Compiled kernels are kept on disk (JAX's persistent compilation cache) in
``~/.cache/dpppl/xla``, at most 2 GB, least recently used first out: a kernel takes
10-40 s to compile on a CPU, and a second run of the same model on data of the same
shape then starts at once. Entries are keyed by the compiled program, the JAX version
and the device, so a stale entry is never used. ``DPPPL_COMPILATION_CACHE=DIR`` puts it
elsewhere, ``DPPPL_COMPILATION_CACHE=off`` turns it off, and a cache directory the user
configured in JAX is left alone.
"""

from __future__ import annotations

import importlib.util
import os

_EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
_SAFE_CPU = os.environ.get("DPPPL_CPU_THREADING", "safe") != "default"
if _SAFE_CPU and _EIGEN_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_EIGEN_FLAG}=false").strip()

import jax  # noqa: E402  (after XLA_FLAGS)

if _SAFE_CPU and "JAX_CPU_ENABLE_ASYNC_DISPATCH" not in os.environ:
    jax.config.update("jax_cpu_enable_async_dispatch", False)

_CACHE_DIR = os.environ.get("DPPPL_COMPILATION_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "dpppl", "xla"))
if _CACHE_DIR not in ("", "0", "off", "false") and jax.config.jax_compilation_cache_dir is None:
    jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)
    if jax.config.jax_compilation_cache_max_size == -1 and importlib.util.find_spec("filelock"):
        jax.config.update("jax_compilation_cache_max_size", 2 * 2**30)  # JAX needs filelock for it

X64 = os.environ.get("DPPPL_X64", "1") not in ("0", "false", "False", "no")
if X64:
    jax.config.update("jax_enable_x64", True)


def float_dtype():
    """The floating dtype every dpppl kernel computes in."""
    import jax.numpy as jnp

    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
