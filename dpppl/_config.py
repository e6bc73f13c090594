"""Numerical configuration.

dpppl runs in float64 by default: the collapsed log joint of a partition sums
thousands of log-gamma and log-determinant terms, and sufficient statistics are
updated incrementally millions of times, both of which lose digits in float32.
Set the environment variable ``DPPPL_X64=0`` before importing dpppl to keep JAX in
32-bit mode (faster on GPUs); every kernel then runs in float32.
"""

from __future__ import annotations

import os

import jax

X64 = os.environ.get("DPPPL_X64", "1") not in ("0", "false", "False", "no")
if X64:
    jax.config.update("jax_enable_x64", True)


def float_dtype():
    """The floating dtype every dpppl kernel computes in."""
    import jax.numpy as jnp

    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
