"""Compiled functions kept for the life of the process, keyed by what they were traced from.

`compiled(key, build)` returns the function `build()` made the first time `key` was
seen (typically a `jax.jit` of a vmapped step), so a second `dpppl.sample` of the same
model structure, kernel and options traces and compiles nothing: JAX's own cache then serves
every call with the same argument shapes. A bound model (the *target*) is an argument of the
programs, never a constant of them: `on_target(name, target, fn)` keys `jit(fn)` by the
target's structure (`dpppl.core.pytrees.structure_key`: its classes, static attributes and
the shapes and dtypes of its data and hyperparameters), so new data or hyperparameters of the
same shapes reuse the program. A new process traces again and takes the compiled programs from
JAX's persistent cache (`dpppl.config`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable

import jax

from dpppl.core.pytrees import structure_key

_COMPILED: dict[Hashable, Callable] = {}


def compiled(key: Hashable, build: Callable[[], Callable]) -> Callable:
    key = (key, jax.config.jax_enable_x64)  # a trace depends on the default precision
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = build()
    return fn


def on_target(name: str, target: Any, fn: Callable, *static: Hashable) -> Callable:
    """`jax.jit(fn)` applied to `target`: call the result with `fn`'s other arguments. Kept per
    `name`, `static` (what `fn` closes over: a capacity, a length) and the target's structure, so
    `fn` must read the target only through its argument, never from a closure."""
    jitted = compiled((name, structure_key(target), static), lambda: jax.jit(fn))
    return functools.partial(jitted, target)


def clear() -> None:
    """Forget every kept function (their memory goes when nothing else holds them)."""
    _COMPILED.clear()


__all__ = ["clear", "compiled", "on_target"]
