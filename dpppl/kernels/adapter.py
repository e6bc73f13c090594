"""A thin adapter that makes any dpppl kernel a `numpyro.infer.mcmc.MCMCKernel`.

    mcmc = numpyro.infer.MCMC(dpppl.kernels.make("gibbs", model, x), num_warmup=200, num_samples=500)
    mcmc.run(jax.random.key(0), x)
    mcmc.get_samples()["num_clusters"]          # label-invariant values; mcmc.print_summary() shows them
    mcmc.get_extra_fields()["labels"]           # (draws, N) labels
    dpppl.run.numpyro_output.from_numpyro(mcmc)  # InferenceData as dpppl.sample returns

NumPyro's MCMC runs the whole chain inside one jitted loop, so the cluster capacity
cannot grow on the host as in [`dpppl.sample`][dpppl.sample]. Chains start as in [`dpppl.sample`][dpppl.sample]
(the same init strategies, `dpppl.models.init`); the capacity is fixed then, by the
same rule for a run that cannot grow (`initial_slots`: four times
the initial number of clusters, at least 64, at most N + 1). If a move needs a new cluster while every slot
is occupied the move
is restricted to the existing clusters, which biases the chain; the state's
`overflow` flag records it (`extra_fields=("overflow",)`). Use
`capacity=N + 1` to rule it out, or [`dpppl.sample`][dpppl.sample], which grows as needed. Under a
stick-breaking prior labels may lie past N + 1 (slot k is label k + 1): the default capacity
follows the prior's tail (`StickBreaking.initial_capacity`), and only [`dpppl.sample`][dpppl.sample]
rules overflow out.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from dpppl.core import numerics_random as random
from dpppl.core.state import PartitionState, largest_cluster, num_clusters
from dpppl.dsl.parser import bind_data
from dpppl.errors import DataError
from dpppl.kernels.base import build
from dpppl.models.init import check_labels, initial_slots, resolve_init


class AdapterState(NamedTuple):
    """State seen by NumPyro's MCMC.

    - **i** - iteration counter (warmup while `i < num_warmup`).
    - **z** - dict of the draw's label-invariant values: `num_clusters`, `largest_cluster`,
      `alpha` (what `mcmc.get_samples()` and `mcmc.print_summary()` show).
    - **partition** - the dpppl [`PartitionState`][dpppl.core.state.PartitionState].
    - **potential_energy** - minus the collapsed log joint (ArviZ shows `lp`).
    - **overflow** - True once a move found no empty slot (see the module docstring).
    - **rng_key** - key for the next step.

    `labels` (a property: the partition's slot labels (N,)) is collected by default:
    `mcmc.get_extra_fields()["labels"]`.
    """

    i: jax.Array
    z: dict
    partition: PartitionState
    potential_energy: jax.Array
    overflow: jax.Array
    rng_key: jax.Array

    @property
    def labels(self) -> jax.Array:
        return self.partition.z


class PartitionKernel(MCMCKernel):
    """NumPyro `MCMCKernel` around a dpppl partition kernel (see module docstring).

    Parameters
    ----------
    kernel : str
        Kernel name or hybrid (`"gibbs+splitmerge"`).
    model : dpppl Model, or a model bound to its data (`model.bind(x)`)
    data : array-like, optional
        Used to validate and to resolve data-dependent hyperparameters; `mcmc.run`
        may pass data of the same shape as its first argument (else these data are used).
        None: the bound model's, else those the model file names.
    init : {"sequential", "single", "prior"} or labels
    capacity : int, optional
    **options : kernel options.
    """

    sample_field = "z"

    def __init__(self, kernel, model, data=None, *, init="sequential", capacity=None, **options):
        _, self._bound = bind_data(model, data)
        self._kernel = build(kernel, self._bound, **options)
        self._init = init
        self._capacity = capacity
        self._num_warmup = 0
        # the chains' first states in one compiled program: run eagerly, each operation of the
        # log joint compiled on its own (about a hundred small programs on a cold start)
        self._first_states = jax.jit(self._first_states_of, static_argnums=3)

    @property
    def model(self):
        # ArviZ reads ``mcmc.sampler.model``; None tells it there is no NumPyro model to replay
        return None

    @property
    def exact(self) -> bool:
        return self._kernel.exact

    @property
    def target(self):
        """The model bound to its data (a dpppl Target) the kernel runs on."""
        return self._bound

    @property
    def kernel(self):
        """The dpppl kernel (`dpppl.kernels.base.Kernel`) it runs."""
        return self._kernel

    @property
    def default_fields(self):
        return ("z", "labels", "potential_energy")

    def _data(self, model_args):
        """The points of `mcmc.run(key, x)` in the bound model's frame (`BoundModel.translate`),
        or the bound data. `x` must have the bound data's shape (N, D), or (N,) when D is 1: the
        kernel's state is sized for them (DataError naming both shapes otherwise)."""
        if not model_args:
            return jnp.asarray(self._bound.x)
        x, bound = model_args[0], tuple(np.shape(self._bound.x))
        shape = tuple(jnp.shape(x))
        if shape == bound[:1] and bound[1:] == (1,):
            x = jnp.reshape(x, bound)
        elif shape != bound:
            raise DataError(f"data of mcmc.run have shape {shape}, but the kernel was made for data of shape {bound}"
                            f"{' (or (N,))' if bound[1:] == (1,) else ''}; make the kernel on these data: "
                            f"dpppl.kernels.make(kernel, model, x)")
        return jnp.asarray(self._bound.translate(x))

    def _wrap(self, i, partition, rng_key):
        draw = {"num_clusters": num_clusters(partition),
                "largest_cluster": largest_cluster(partition), "alpha": partition.alpha}
        return AdapterState(i, draw, partition, -self._kernel.log_joint(partition), partition.overflow, rng_key)

    def _first_state(self, partition, rng_key, x):
        """One chain's state before its first step: the kernel's carried values set (`Kernel.init`)."""
        if self._kernel.init is not None:
            partition = self._kernel.init(partition, x)
        return self._wrap(jnp.zeros((), jnp.int32), partition, rng_key)

    def _first_states_of(self, partitions, rng_keys, x, single: bool):
        """`_first_state` of each chain; a single chain's unbatched when `single` (one key given)."""
        states = jax.vmap(self._first_state, in_axes=(0, 0, None))(partitions, rng_keys, x)
        return jax.tree.map(lambda a: a[0], states) if single else states

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        self._data(model_args)  # data of another shape: an error before anything runs
        self._num_warmup = num_warmup
        single = is_prng_key(rng_key)
        bound = self._bound
        k_init, k_run = _split_keys(rng_key)
        init = self._init if init_params is None else init_params
        strategy, name = resolve_init(init)
        in_use = int(check_labels(bound, init, k_init.shape[0]).max()) + 1 if name == "labels" else 8
        capacity = initial_slots(bound, in_use, self._capacity, growable=False)
        return self._first_states(strategy(bound, k_init, capacity), k_run, jnp.asarray(bound.x), single)

    def sample(self, state, model_args, model_kwargs):
        x = self._data(model_args)

        def one(state):
            key, sub = random.split(state.rng_key)
            if self._kernel.warmup_step is None:  # one step for warmup and sampling: no branch to compile twice
                partition, _ = self._kernel.step(sub, state.partition, x)
            else:
                partition, _ = jax.lax.cond(state.i < self._num_warmup,
                                            lambda s: self._kernel.warmup(sub, s, x),
                                            lambda s: self._kernel.step(sub, s, x), state.partition)
            return self._wrap(state.i + 1, partition, key)

        return one(state) if is_prng_key(state.rng_key) else jax.vmap(one)(state)

    def get_diagnostics_str(self, state):
        return f"K={int(state.z['num_clusters'])} lp={-float(state.potential_energy):.1f}"


@jax.jit
def _split_keys(rng_key):
    """`(init keys, run keys)`, one pair per chain, of one key (one chain) or a batch of keys."""
    return jax.vmap(random.split, out_axes=1)(jnp.reshape(rng_key, (-1,)))


def make(kernel: str, model, data, **options) -> PartitionKernel:
    """A `numpyro.infer.mcmc.MCMCKernel` running `kernel` on `model` (see module docstring)."""
    return PartitionKernel(kernel, model, data, **options)
