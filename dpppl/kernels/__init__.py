"""Partition kernels: registry, construction, and the NumPyro adapter.

`available()` lists kernel names; `register(name, factory, exact=...)` adds one;
`make(name, model, data)` returns a `numpyro.infer.mcmc.MCMCKernel`. `"auto"`
(`dpppl.kernels.auto`) stands for the kernel chosen by the model and its data size. Importing this
package registers the built-in kernels, one module per move, grouped by paper.
"""

from dpppl.kernels import alpha, discount, gibbs, hyperparameters, splitmerge  # noqa: F401  (registers the built-in kernels)
from dpppl.kernels.ddp import gibbs as ddp_gibbs, swap as ddp_swap  # noqa: F401
from dpppl.kernels.mallows import sampler as mallows_sampler  # noqa: F401
from dpppl.kernels.perm import sampler as perm_sampler  # noqa: F401
from dpppl.kernels.stick_breaking import labelswap, sbgibbs  # noqa: F401
from dpppl.kernels.subcluster import sampler as subcluster_sampler  # noqa: F401
from dpppl.kernels import auto  # noqa: F401  (registers kernel="auto", after the kernels it chooses among)
from dpppl.kernels.adapter import PartitionKernel, make
from dpppl.kernels.base import Kernel, applies_to, available, build, check_applies, compose, entry, register

__all__ = ["Kernel", "PartitionKernel", "available", "build", "check_applies", "compose", "entry",
           "make", "register", "applies_to"]
