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
"""

from __future__ import annotations

import os

_EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
_SAFE_CPU = os.environ.get("DPPPL_CPU_THREADING", "safe") != "default"
if _SAFE_CPU and _EIGEN_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_EIGEN_FLAG}=false").strip()

import jax  # noqa: E402  (after XLA_FLAGS)

if _SAFE_CPU and "JAX_CPU_ENABLE_ASYNC_DISPATCH" not in os.environ:
    jax.config.update("jax_cpu_enable_async_dispatch", False)

X64 = os.environ.get("DPPPL_X64", "1") not in ("0", "false", "False", "no")
if X64:
    jax.config.update("jax_enable_x64", True)


def float_dtype():
    """The floating dtype every dpppl kernel computes in."""
    import jax.numpy as jnp

    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
