"""Compiled functions kept for the life of the process, keyed by what they were traced from.

`compiled(key, build)` returns the function `build()` made the first time `key` was
seen (typically a `jax.jit` of a vmapped step), so a second `dpppl.sample` of the same
model, data, kernel and options traces and compiles nothing: JAX's own cache then serves
every call with the same argument shapes. Keys hold fingerprints
([`dpppl.core.fingerprint`][dpppl.core.fingerprint]) of the target and the options. A new
process traces again and takes the compiled programs from JAX's persistent cache
(`dpppl.config`).
"""

from __future__ import annotations

from typing import Callable, Hashable

import jax

_COMPILED: dict[Hashable, Callable] = {}


def compiled(key: Hashable, build: Callable[[], Callable]) -> Callable:
    key = (key, jax.config.jax_enable_x64)  # a trace depends on the default precision
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = build()
    return fn


def clear() -> None:
    """Forget every kept function (their memory goes when nothing else holds them)."""
    _COMPILED.clear()


__all__ = ["clear", "compiled"]
