"""Families, priors and bound models as JAX pytrees: their numbers are leaves, the rest is structure.

A compiled program must depend on what a model *is* (the family's kind, the data's dimension,
a static option), never on its values, so that a new data set or new hyperparameters of the same
shapes reuse it. [`register_attributes`][dpppl.core.pytrees.register_attributes] makes a class a
pytree whose children are the instance attributes holding numbers (floats, arrays of any dtype,
other pytrees of numbers) and whose static part (`aux_data`, compared and hashed by
[`fingerprint`][dpppl.core.fingerprint.fingerprint]) is every other attribute (ints, bools,
strings, None, expressions, models). Passed to a jitted function, such an object arrives with its
numbers traced; its static part keys the program.

[`structure_key`][dpppl.core.pytrees.structure_key] is the compile key of a pytree argument: the
tree structure and each leaf's shape and dtype, no value.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

import jax
import numpy as np

from dpppl.core.fingerprint import fingerprint


class Static:
    """An attribute of a pytree's static part, compared and hashed by `key` (by default its
    fingerprint: values such as a model holding arrays are not hashable themselves)."""

    __slots__ = ("value", "_key")

    def __init__(self, value, key: Hashable = None):
        self.value = value
        self._key = fingerprint(value) if key is None else key

    def __eq__(self, other):
        return isinstance(other, Static) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"Static({self.value!r})"


_REGISTERED: set[type] = set()


def holds_numbers(value: Any) -> bool:
    """Whether `value` is a child of a registered pytree: a float, an array or NumPy scalar,
    an instance of a registered class, or a tuple, list or dict holding one."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (float, np.ndarray, np.generic, jax.Array)) or type(value) in _REGISTERED:
        return True
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return any(holds_numbers(v) for v in value)
    if isinstance(value, dict):
        return any(holds_numbers(v) for v in value.values())
    return False


def register_attributes(cls: type = None, *, static_keys: dict[str, Callable[[Any], Hashable]] | None = None):
    """Register `cls` as a pytree over its instance attributes (`vars(obj)`, fields and
    attributes set after construction alike): numbers are children, the rest static, and so are
    the attributes the class names in `static_attributes` (numbers that fix the shapes of what it
    computes, such as a degrees of freedom that sets how many normals a draw takes). A
    rebuilt instance is made without calling `__init__` (its children may be tracers), as JAX's
    own dataclass pytrees are. Subclasses must be registered too (pytrees go by exact type).

    `static_keys` maps a static attribute's name to the function giving what of it a compiled
    program depends on (by default all of it, by fingerprint): a bound model's unresolved model
    keys programs by its structure only, since its resolved hyperparameters are leaves. Used
    as a decorator, with or without `static_keys`."""
    if cls is None:
        return lambda cls: register_attributes(cls, static_keys=static_keys)
    structural = frozenset(getattr(cls, "static_attributes", ()))
    keys = static_keys or {}

    def flatten(obj):
        children, static = [], []
        for name, value in sorted(vars(obj).items()):
            if holds_numbers(value) and name not in structural:
                children.append((jax.tree_util.GetAttrKey(name), value))
            else:
                static.append((name, value))
        names = tuple(str(key.name) for key, _ in children)
        keyed = tuple((name, keys[name](value)) for name, value in static if name in keys)
        rest = tuple((name, value) for name, value in static if name not in keys)
        return children, (names, Static(tuple(static), (keyed, fingerprint(rest))))

    def unflatten(aux, children):
        names, static = aux
        obj = object.__new__(cls)
        for name, value in (*static.value, *zip(names, children)):
            object.__setattr__(obj, name, value)
        return obj

    jax.tree_util.register_pytree_with_keys(cls, flatten, unflatten)
    _REGISTERED.add(cls)
    return cls


def structure_key(tree: Any) -> Hashable:
    """What a compiled program taking `tree` as an argument depends on: its structure (classes
    and static parts) and the shape and dtype of each leaf."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((np.shape(leaf), jax.dtypes.result_type(leaf).name) for leaf in leaves)


__all__ = ["Static", "holds_numbers", "register_attributes", "structure_key"]
