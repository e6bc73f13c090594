"""Hashable fingerprints of models, families and options, for the cache of compiled steps.

Two objects with equal fingerprints trace to the same computation: dataclasses by their
class and fields, arrays by shape, dtype and a digest of their bytes, numbers and strings
by value. A callable (a user's stick function) is identified by the object itself, so it
keys only the in-process cache; `persistable` says whether a fingerprint may key a
cache on disk.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Hashable

import numpy as np


_KEPT: list = []


class _Identity(tuple):
    """A fingerprint part that holds only within this process (an object's identity)."""


def fingerprint(value: Any) -> Hashable:
    if isinstance(value, (str, bytes, bool, int, float, complex, type(None))):
        return (type(value).__name__, value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple((f.name, fingerprint(getattr(value, f.name))) for f in dataclasses.fields(value)
                       if f.compare)
        return (type(value).__module__, type(value).__qualname__, fields)
    if isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "__array__"):
        arr = np.asarray(value)
        if arr.dtype != object:
            return ("array", arr.shape, arr.dtype.str, hashlib.sha1(np.ascontiguousarray(arr).tobytes()).hexdigest())
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(fingerprint(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), fingerprint(v)) for k, v in value.items())))
    try:
        hash(value)
    except TypeError:
        _KEPT.append(value)  # alive as long as the process: its id is never reused by another object
        return _Identity(("id", type(value).__qualname__, id(value)))
    return _Identity(("object", value))  # compared by the object's own equality (identity for functions)


def persistable(key: Hashable) -> bool:
    """Whether `key` means the same in another process (holds no object identity)."""
    if isinstance(key, _Identity):
        return False
    if isinstance(key, tuple):
        return all(persistable(k) for k in key)
    return True


__all__ = ["fingerprint", "persistable"]
