"""Numerical configuration.

dpppl runs in float64 by default: the collapsed log joint of a partition sums
thousands of log-gamma and log-determinant terms, and sufficient statistics are
updated incrementally millions of times, both of which lose digits in float32.
Set the environment variable ``DPPPL_X64=0`` before importing dpppl to keep JAX in
32-bit mode (faster on GPUs); every kernel then runs in float32.

On the CPU, XLA's multi-threaded Eigen pool can wedge: every pool thread waits for
work while the caller waits for a result that never comes (seen here with vmapped
kernels on a 2-core machine, the process idle at 0% CPU; reported for jaxlib's
CPU runtime in PyAutoLabs/PyAutoFit#1528 and #1530). dpppl therefore adds
``--xla_cpu_multi_thread_eigen=false`` to ``XLA_FLAGS`` unless the flag is already
set there or ``DPPPL_CPU_EIGEN_THREADS=1``. The partition kernels are sequential
scans, so they lose little; the flag takes effect only if dpppl is imported before
JAX first runs a computation, and it does not touch GPU or TPU execution.
"""

from __future__ import annotations

import os

_EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
if (_EIGEN_FLAG not in os.environ.get("XLA_FLAGS", "")
        and os.environ.get("DPPPL_CPU_EIGEN_THREADS", "0") in ("0", "false", "False", "no")):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_EIGEN_FLAG}=false").strip()

import jax  # noqa: E402  (after XLA_FLAGS)

X64 = os.environ.get("DPPPL_X64", "1") not in ("0", "false", "False", "no")
if X64:
    jax.config.update("jax_enable_x64", True)


def float_dtype():
    """The floating dtype every dpppl kernel computes in."""
    import jax.numpy as jnp

    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
