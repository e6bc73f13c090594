"""Partition kernels: registry, construction, and the NumPyro adapter.

``available()`` lists kernel names; ``register(name, factory, exact=...)`` adds one;
``make(name, model, data)`` returns a ``numpyro.infer.mcmc.MCMCKernel``.
"""

from . import alpha, gibbs, perm, splitmerge, subcluster  # noqa: F401  (registers the built-in kernels)
from . import labelswap, sbgibbs  # noqa: F401  (stick-breaking kernels)
from . import ddp, ddpswap  # noqa: F401  (registers the DDP kernels)
from . import mallows  # noqa: F401  (registers mallows-slice and mallows-beta)
from .adapter import PartitionKernel, make
from .base import Kernel, available, build, check_applies, compose, entry, register
from .base import applies_to

__all__ = ["Kernel", "PartitionKernel", "available", "build", "check_applies", "compose", "entry",
           "make", "register", "applies_to"]
