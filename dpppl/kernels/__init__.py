"""Partition kernels: registry, construction, and the NumPyro adapter.

``available()`` lists kernel names; ``register(name, factory, exact=...)`` adds one;
``make(name, model, data)`` returns a ``numpyro.infer.mcmc.MCMCKernel``.
"""

from . import alpha, gibbs, perm, splitmerge  # noqa: F401  (registers the built-in kernels)
from . import mallows  # noqa: F401  (registers mallows-slice and mallows-beta)
from .adapter import PartitionKernel, make
from .base import Kernel, available, build, check_applies, compose, entry, register

__all__ = ["Kernel", "PartitionKernel", "available", "build", "check_applies", "compose", "entry",
           "make", "register"]
