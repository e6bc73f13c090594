"""A DP mixture inside any NumPyro model: NUTS on the continuous sites, dpppl's partition kernels on the partition.

A NumPyro model holds one or more partition sites ([`dpppl.Partition`][dpppl.models.sites.Partition],
usually written by [`dpppl.dp_mixture`][dpppl.models.sites.dp_mixture]) and, over each, a
collapsed-mixture site ([`dpppl.CollapsedMixture`][dpppl.models.sites.CollapsedMixture]) whose
values y may depend on continuous sites theta (y = data - X beta, or latent random effects).
The joint density is

    p(theta, alpha, C, data) = p(theta) p(alpha) EPPF(C | alpha) prod_{c in C} p(y_c(theta))

times whatever else the model holds that does not involve C.

[`PartitionGibbs`][dpppl.run.partition_gibbs.PartitionGibbs] is NumPyro's block Gibbs
(`numpyro.infer.gibbs.Gibbs`, the machinery of `HMCGibbs`) with two blocks per step:

1. [`PartitionBlock`][dpppl.run.partition_gibbs.PartitionBlock] moves C given theta and alpha: it
   traces the model with the current values to find y and alpha, rebuilds the clusters'
   sufficient statistics from y (`segment_stats`, O(N D^2)), and runs `sweeps` steps of a
   dpppl partition kernel (any exact kernel the registry has for the site's prior and family;
   `"auto"`: [`dpppl.kernels.auto.choose`][dpppl.kernels.auto.choose]) whose target is
   p(C | y, alpha) ∝ EPPF(C | alpha) prod_c p(y_c); within the sweeps the kernel updates the
   statistics incrementally as it always does. Since theta and alpha enter p(C | rest) only
   through y and the EPPF, this is the full conditional of C, and the kernel leaves it invariant.
2. The inner kernel (NUTS by default, any NumPyro kernel with a model) moves every other latent
   site, alpha included, with the labels fixed: its potential is the model's log density with C
   conditioned, in which `CollapsedMixture.log_prob` is differentiable in y.

Each block leaves p(theta, alpha, C | data) invariant (it leaves its own conditional invariant
and does not touch the rest), so their composition does (Tierney 1994): the chain is exact when
the partition kernel is exact. The labels must enter the model only through the partition and
collapsed-mixture sites (the partition kernel sees no other term). The step-size and mass
adaptation of NUTS in warmup runs on its conditional given the current labels; after warmup
both are fixed.

Use it from NumPyro (`numpyro.infer.MCMC(dpppl.PartitionGibbs(NUTS(model)), ...)`, any
`chain_method`; `dpppl.run.numpyro_output.from_numpyro` makes the run InferenceData; it runs in
the precision of the NumPyro run, float32 unless the process is in 64-bit mode or the run is inside
`dpppl.config.x64()`) or from
[`dpppl.sample`][dpppl.sample] with the model function, which returns InferenceData
([`sample_model`][dpppl.run.partition_gibbs.sample_model]).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.handlers import seed, substitute, trace
from numpyro.infer import MCMC, NUTS
from numpyro.infer.gibbs import Gibbs, with_conditioning
from numpyro.infer.hmc import HMC
from numpyro.infer.hmc_gibbs import HMCGibbsState
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import log_density
from numpyro.util import is_prng_key

from dpppl.core import numerics_random as random
from dpppl.core.state import PartitionState
from dpppl.diagnostics.arviz_compat import PARTITION_GROUPS, to_arviz
from dpppl.diagnostics.summaries import label_summaries
from dpppl.errors import ArgumentError, KernelError
from dpppl.families.base import segment_stats
from dpppl.kernels.auto import AUTO
from dpppl.kernels.base import build, parse_kernel_name
from dpppl.models.mixture import BoundModel, DataDecl, Model
from dpppl.models.sites import canonical_in_jit, dp_sites, partition_site_names
from dpppl.run.interrupts import hold
from dpppl.run.nuts import init_in_one_program, one_program_init
from dpppl.run.output import (POINTWISE_BATCH, check_log_likelihood, check_log_likelihood_option,
                              conditional_log_predictive)
from dpppl.version import __version__

NUM_CLUSTERS, LARGEST_CLUSTER, ENTROPY = "_num_clusters", "_largest_cluster", "_entropy"
"""Suffixes of the label-invariant summaries `PartitionGibbs` shows NumPyro (`{values site}_num_clusters`, ...)."""

DEFAULT_MAX_CAPACITY = 128
"""Cluster slots of a partition site of N points when `capacity` is not given: min(N + 1, this).
NumPyro's loop cannot grow them (see `PartitionBlock`)."""


class PartitionBlockState(NamedTuple):
    """State of [`PartitionBlock`][dpppl.run.partition_gibbs.PartitionBlock].

    - **z** - `{labels site: canonical labels (N,)}`, the block's sites as the model sees them.
    - **partitions** - one dpppl [`PartitionState`][dpppl.core.state.PartitionState] per site
      (slot labels, statistics, alpha, the kernel's carried values).
    - **i** - iteration counter (the kernel's warmup step while `i < num_warmup`).
    - **overflow** - True once a move of any site found no empty cluster slot.
    - **rng_key** - key for the next step.
    """

    z: dict
    partitions: tuple
    i: jax.Array
    overflow: jax.Array
    rng_key: jax.Array


class PartitionGibbsState(HMCGibbsState):
    """State of [`PartitionGibbs`][dpppl.run.partition_gibbs.PartitionGibbs]: NumPyro's
    `HMCGibbsState` (`z`, `block_states`, `rng_key`, `hmc_state`) whose `z` also holds each
    partition site's label-invariant summaries (`{values site}_num_clusters`,
    `_largest_cluster`, `_entropy`), with two fields NumPyro's `extra_fields` can name:

    - **labels** - `{labels site: canonical labels (N,)}`, the partition block's sites
      (collected by default: `mcmc.get_extra_fields()["labels"]`);
    - **overflow** - True once a partition move found no free cluster slot (collected by default).
    """

    __slots__ = ()

    @property
    def labels(self) -> dict:
        return self.block_states[0].z

    @property
    def overflow(self) -> jax.Array:
        return self.block_states[0].overflow


@dataclasses.dataclass(frozen=True)
class _Site:
    """What the block keeps of one partition site (static)."""

    labels: str
    values: str
    num_points: int
    capacity: int
    flat: bool
    family: object
    kernel: object  # dpppl.kernels.base.Kernel


class PartitionBlock(MCMCKernel):
    """The partition block of [`PartitionGibbs`][dpppl.run.partition_gibbs.PartitionGibbs]: a
    NumPyro Gibbs block (an `MCMCKernel` with `refresh` and `wrap_model`) owning the model's
    `Partition` sites.

    Parameters
    ----------
    model : callable
        The NumPyro model.
    kernel : str, default "auto"
        A dpppl partition kernel or hybrid (`"gibbs"`, `"gibbs+splitmerge"`, `"subcluster"`,
        ...), built for each site from its prior (alpha fixed: the inner kernel moves a sampled
        alpha) and resolved family; `"auto"` as [`dpppl.kernels.auto.choose`][dpppl.kernels.auto.choose]
        picks for the site's N and D.
    sweeps : int, default 1
        Partition-kernel steps per outer step.
    capacity : int, optional
        Cluster slots per site (default min(N + 1, `DEFAULT_MAX_CAPACITY`)). They cannot grow
        inside NumPyro's loop: a move that needs a new cluster when every slot is occupied is
        restricted to the existing clusters, which biases the chain, and `overflow` is set
        (`dpppl.sample` warns). `capacity=N + 1` rules it out.
    **options
        Options of the partition kernel.
    """

    sample_field = "z"

    def __init__(self, model, kernel: str = AUTO, *, sweeps: int = 1, capacity: int | None = None, **options):
        if kernel != AUTO:
            parse_kernel_name(kernel)  # unknown names fail here, before any tracing
        if isinstance(sweeps, bool) or not isinstance(sweeps, (int, np.integer)) or sweeps < 1:
            raise ArgumentError(f"sweeps must be an integer >= 1, got {sweeps!r}")
        if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer))
                                     or capacity < 2):
            raise ArgumentError(f"capacity must be an integer >= 2, got {capacity!r}")
        self._model = model
        self._spec = kernel
        self._sweeps = int(sweeps)
        self._capacity = capacity
        self._options = options
        self._sites: tuple[_Site, ...] = ()
        self._num_warmup = 0

    @property
    def model(self):
        return self._model

    @property
    def requested(self) -> str:
        """The partition kernel as requested (`"auto"` or a name)."""
        return self._spec

    @property
    def sweeps(self) -> int:
        return self._sweeps

    @property
    def sites(self) -> tuple:
        """`(labels site, values site, kernel spec, exact)` of each partition site (after `init`)."""
        return tuple((s.labels, s.values, s.kernel.name, s.kernel.exact) for s in self._sites)

    @property
    def exact(self) -> bool:
        """Whether every site's partition kernel leaves its conditional invariant (after `init`)."""
        return all(s.kernel.exact for s in self._sites)

    def _trace(self, labels: dict, model_args, model_kwargs):
        """The model's partition sites, traced with the block's labels and the siblings' values
        conditioned (`dpppl.models.sites.dp_sites`)."""
        kwargs = with_conditioning(model_kwargs, labels)
        return dp_sites(trace(seed(self._model, jax.random.key(0))).get_trace(*model_args, **kwargs), labels)

    def _site(self, found) -> _Site:
        partition, mixture = found.partition, found.mixture
        prior = partition.prior
        if prior.alpha_is_random:  # alpha is a site of the model, moved by the inner kernel
            prior = dataclasses.replace(prior, alpha=prior.initial_alpha)
        n = partition.num_points
        probe = np.zeros((n, mixture.dim), dtype=jnp.result_type(float))
        model = Model(prior=prior, component=mixture.family, data=DataDecl(kind=mixture.family.data_kind))
        try:
            kern = build(self._spec, BoundModel(model, probe, mixture.family, None, probe), **self._options)
        except KernelError as e:
            raise KernelError(f"partition site {found.labels!r}: {e}") from None
        capacity = min(n + 1, DEFAULT_MAX_CAPACITY if self._capacity is None else int(self._capacity))
        return _Site(found.labels, found.values, n, capacity, mixture.flat, mixture.family, kern)

    @staticmethod
    def _points(site: _Site, found):
        """The site's values as the family's (N, D) points."""
        value = jnp.asarray(found.value, jnp.result_type(float))
        return value[:, None] if site.flat else value

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """`init_params` holds the initial labels of every partition site (`Gibbs` passes
        the prototype trace's draws from the prior)."""
        self._num_warmup = num_warmup
        model_kwargs = {} if model_kwargs is None else model_kwargs
        found = self._trace(dict(init_params or {}), model_args, model_kwargs)
        self._sites = tuple(self._site(f) for f in found)
        partitions, z = [], {}
        overflow = jnp.zeros((), bool)
        for site, f in zip(self._sites, found):
            x = self._points(site, f)
            labels = canonical_in_jit(jnp.asarray(f.mixture.labels, jnp.int32), site.num_points)
            overflow = overflow | (jnp.max(labels) >= site.capacity)
            labels = jnp.minimum(labels, site.capacity - 1)
            state = PartitionState(labels, segment_stats(site.family, x, labels, site.capacity),
                                   jnp.asarray(f.partition.alpha, x.dtype), jnp.zeros((), bool))
            if site.kernel.init is not None:  # the kernel's carried values in state.extras
                state = site.kernel.init(state, x)
            partitions.append(state)
            z[site.labels] = labels
        return PartitionBlockState(z, tuple(partitions), jnp.zeros((), jnp.int32), overflow, rng_key)

    def sample(self, state, model_args, model_kwargs):
        """`sweeps` steps of each site's partition kernel on p(C | y, alpha), y and alpha read
        from the model traced at the current values; the statistics are rebuilt from y first."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        rng_key, key_sweeps = random.split(state.rng_key)
        found = self._trace(state.z, model_args, model_kwargs)
        warmup = state.i < self._num_warmup
        partitions, z, overflow = [], {}, state.overflow
        for j, (site, f, partition) in enumerate(zip(self._sites, found, state.partitions)):
            x = self._points(site, f)
            partition = partition._replace(stats=segment_stats(site.family, x, partition.z, site.capacity),
                                           alpha=jnp.asarray(f.partition.alpha, partition.alpha.dtype))
            kern, key_site = site.kernel, random.fold_in(key_sweeps, j)

            def sweep(t, p, kern=kern, key_site=key_site, x=x):
                key = random.fold_in(key_site, t)
                if kern.warmup_step is None:  # one step for warmup and sampling: no branch to compile twice
                    return kern.step(key, p, x)[0]
                return jax.lax.cond(warmup, lambda s: kern.warmup(key, s, x)[0], lambda s: kern.step(key, s, x)[0], p)

            partition = jax.lax.fori_loop(0, self._sweeps, sweep, partition)
            overflow = overflow | partition.overflow
            partitions.append(partition)
            z[site.labels] = canonical_in_jit(partition.z, site.capacity)
        return PartitionBlockState(z, tuple(partitions), state.i + 1, overflow, rng_key)

    def summaries(self, state: PartitionBlockState) -> dict:
        """The label-invariant summaries of each site's current partition (traceable):
        `{values site}_num_clusters`, `_largest_cluster` (int32) and `_entropy` (of the cluster
        shares, in nats), the names `summary_names` lists."""
        out = {}
        for site in self._sites:
            labels = state.z[site.labels]
            counts = jax.ops.segment_sum(jnp.ones(labels.shape, jnp.int32), labels, num_segments=site.num_points)
            share = counts.astype(jnp.result_type(float)) / site.num_points
            out[site.values + NUM_CLUSTERS] = jnp.sum(counts > 0).astype(jnp.int32)
            out[site.values + LARGEST_CLUSTER] = jnp.max(counts).astype(jnp.int32)
            out[site.values + ENTROPY] = -jnp.sum(jnp.where(counts > 0, share * jnp.log(jnp.where(counts > 0, share,
                                                                                                    1.0)), 0.0))
        return out

    @property
    def summary_names(self) -> tuple[str, ...]:
        """The names of `summaries` (after `init`)."""
        return tuple(site.values + suffix for site in self._sites
                     for suffix in (NUM_CLUSTERS, LARGEST_CLUSTER, ENTROPY))

    def refresh(self, state, model_args, model_kwargs):
        """Identity: `sample` reads the siblings' current values itself."""
        return state

    def wrap_model(self, wrapper):
        kernel = copy.copy(self)
        kernel._model = wrapper(self._model)
        kernel._sites = ()
        return kernel

    def get_constrain_fn(self, model_args, model_kwargs):
        """Identity: labels are constrained values."""
        return lambda z: z


class PartitionGibbs(Gibbs):
    """NUTS (or any NumPyro kernel) on the continuous sites, a dpppl partition kernel on each
    partition site (see the module docstring for why the composition is exact).

    Parameters
    ----------
    inner_kernel : numpyro MCMCKernel built on the model
        E.g. `NUTS(model)`; it moves every latent site but the partitions (alpha too).
    partition_kernel : str, default "auto"
        A dpppl partition kernel or hybrid for the partition sites (see
        [`PartitionBlock`][dpppl.run.partition_gibbs.PartitionBlock]).
    sweeps : int, default 1
        Partition-kernel steps per outer step.
    capacity : int, optional
        Cluster slots per partition site (see `PartitionBlock`).
    **partition_options
        Options of the partition kernel (e.g. `num_proposals` of split-merge).

    Notes
    -----
    The state is a [`PartitionGibbsState`][dpppl.run.partition_gibbs.PartitionGibbsState]:
    NumPyro's `HMCGibbsState` whose `z` holds every site (labels as canonical integer vectors)
    and each partition site's summaries. What NumPyro shows (`mcmc.get_samples()`,
    `mcmc.print_summary()`) is every continuous and deterministic site and the summaries
    `{values site}_num_clusters`, `_largest_cluster`, `_entropy`; the labels are the state's
    `labels` field, collected by default with `overflow` (and, for HMC or NUTS,
    `hmc_state.diverging` and `hmc_state.accept_prob`): `mcmc.get_extra_fields()["labels"]`
    (`{labels site: (draws, N)}`), or the InferenceData of
    [`from_numpyro`][dpppl.run.numpyro_output.from_numpyro]. `chain_method="vectorized"`
    runs the chains' steps vmapped in one program.
    """

    _state_cls = PartitionGibbsState

    def __init__(self, inner_kernel, partition_kernel: str = AUTO, *, sweeps: int = 1, capacity: int | None = None,
                 **partition_options):
        if not isinstance(inner_kernel, MCMCKernel):
            raise ArgumentError(f"inner_kernel must be a NumPyro MCMCKernel such as NUTS(model), got {inner_kernel!r}")
        block = PartitionBlock(inner_kernel.model, partition_kernel, sweeps=sweeps, capacity=capacity,
                               **partition_options)
        super().__init__([(block, partition_site_names), (inner_kernel, None)])
        self.partition_block, self.inner_kernel = self._kernels

    @property
    def exact(self) -> bool:
        """Whether the partition kernels are exact (after `init`; the inner kernel is taken to be,
        as NUTS and HMC are)."""
        return self.partition_block.exact

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """NumPyro's `Gibbs.init`; traced into one compiled program when the inner kernel is
        HMC or NUTS (`dpppl.run.nuts.init_in_one_program`): eagerly, tracing the model, building
        the partition states and NumPyro's search for initial parameters run one operation at a time."""
        if not is_prng_key(rng_key):  # chain_method="vectorized": one key per chain
            return jax.vmap(lambda key, params: self.init(key, num_warmup, params, model_args, model_kwargs))(
                rng_key, init_params)
        if not one_program_init(self.inner_kernel):
            return self._with_summaries(super().init(rng_key, num_warmup, init_params, model_args, model_kwargs))
        return init_in_one_program(self._gibbs_init, _hmc_state, rng_key, num_warmup, init_params, model_args,
                                   model_kwargs, self.__dict__.setdefault("_init_programs", {}))

    def _gibbs_init(self, *args):
        return self._with_summaries(super().init(*args))

    def _with_summaries(self, state: PartitionGibbsState) -> PartitionGibbsState:
        return state._replace(z={**state.z, **self.partition_block.summaries(state.block_states[0])})

    def sample(self, state, model_args, model_kwargs):
        """One step of each block (NumPyro's `Gibbs.sample`), vmapped over the chains of
        `chain_method="vectorized"`."""
        if not is_prng_key(state.rng_key):
            return jax.vmap(lambda s: self.sample(s, model_args, model_kwargs))(state)
        return self._with_summaries(super().sample(state, model_args, model_kwargs))

    @property
    def default_fields(self) -> tuple[str, ...]:
        hmc = ("hmc_state.diverging", "hmc_state.accept_prob") if isinstance(self.inner_kernel, HMC) else ()
        return ("z", "labels", "overflow") + hmc

    def postprocess_fn(self, model_args, model_kwargs):
        """NumPyro's (each site constrained, the model replayed for its deterministic sites)
        without the partition sites' labels and with their summaries, one jitted program:
        NumPyro's sampling loop runs it eagerly on the first state to shape its buffers."""
        gibbs = super().postprocess_fn(model_args, model_kwargs)
        labels = {s[0] for s in self.partition_block.sites}
        summaries = self.partition_block.summary_names

        def postprocess(z):
            return {**{k: v for k, v in gibbs(z).items() if k not in labels}, **{k: z[k] for k in summaries}}

        return jax.jit(postprocess)


    def refresh(self, state, model_args, model_kwargs):
        """Every block re-evaluated against the current values (e.g. after the data in
        `model_args` changed): the inner kernel recomputes its potential energy and gradient."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        constrained = self.get_constrain_fn(model_args, model_kwargs)(state.z)
        blocks = []
        for kernel, names, block_state in zip(self._kernels, self._sites, state.block_states):
            siblings = {k: v for k, v in constrained.items() if k not in names}
            blocks.append(kernel.refresh(block_state, model_args, with_conditioning(model_kwargs, siblings)))
        return state._replace(block_states=tuple(blocks))


def _hmc_state(state: HMCGibbsState):
    return state.hmc_state


def sample_model(fn, model_args: tuple = (), model_kwargs: dict | None = None, kernel: str = AUTO, *,
                 num_warmup: int, num_samples: int, num_chains: int, seed: int, thinning: int, progress_bar: bool,
                 inner_kernel=None, sweeps: int = 1, capacity: int | None = None, log_likelihood="auto",
                 **partition_options):
    """[`dpppl.sample`][dpppl.sample] of a NumPyro model function `fn` holding partition sites:
    [`PartitionGibbs`][dpppl.run.partition_gibbs.PartitionGibbs] of `inner_kernel` (default
    `NUTS(fn)`) and the partition kernel `kernel`, run by NumPyro's MCMC (chains one after the
    other). Returns InferenceData:

    - `posterior`: every continuous latent and deterministic site (alpha of `dp_mixture` as
      `{name}_alpha`), each partition site's label-invariant summaries `num_clusters`,
      `largest_cluster`, `entropy` (prefixed `{values site}_` when the model has several), and
      `lp`, the model's log joint density at the draw (`numpyro.infer.util.log_density`);
    - `posterior_partition`: the labels `z` (chain, draw, point) and `cluster_sizes` (prefixed
      likewise);
    - `sample_stats`: `lp`, the inner kernel's `diverging` and `acceptance_rate` (NUTS, HMC),
      and `overflow` (a partition move found no free cluster slot: see `PartitionBlock`);
    - `log_likelihood` (`log_likelihood`: as [`dpppl.sample`][dpppl.sample] says): for each observed
      collapsed-mixture site, the conditional predictive log p(y_i | y_-i, z_-i, alpha) of its values at
      the draw (`dpppl.run.output.conditional_log_predictive`), for each other observed site its
      pointwise log density given the draw (as `numpyro.infer.util.log_likelihood`), (chain, draw, point);
    - `observed_data`: each observed site's data (`observed_data`: the model argument a site observes
      shifted by the parameters, such as y of `obs=y - X @ beta`, else the site's value);
      `constant_data`: the model's array arguments by parameter name; attrs: `kernel` (the partition
      kernel of each site), `inner_kernel`, `sweeps`, `exact`, `model_function` (`module:qualname`),
      `model_arguments` (the other arguments, JSON), `observed_arguments` (site: argument), versions.
      [`dpppl.posterior_predictive`][dpppl.posterior_predictive] rebuilds the call from them.
    """
    check_log_likelihood_option(log_likelihood)
    model_kwargs = dict(model_kwargs or {})
    inner = NUTS(fn) if inner_kernel is None else inner_kernel
    if not isinstance(inner, MCMCKernel) or inner.model is not fn:
        raise ArgumentError(f"inner_kernel must be a NumPyro kernel built on the model function itself, such as "
                            f"NUTS(fn) or HMC(fn, ...), got {inner!r}")
    composed = PartitionGibbs(inner, kernel, sweeps=sweeps, capacity=capacity, **partition_options)
    mcmc = MCMC(composed, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains, thinning=thinning,
                chain_method="sequential", progress_bar=progress_bar)
    mcmc.run(jax.random.key(seed), *model_args, **model_kwargs)
    hold()  # the last iteration is done (dpppl.run.interrupts)
    return inference_data(mcmc, seed=seed, log_likelihood=log_likelihood)


def draws_with_labels(mcmc) -> tuple[dict, dict]:
    """`(samples, fields)` of a NumPyro MCMC run of `PartitionGibbs`, by chain as numpy arrays:
    `samples` every latent and deterministic site, the labels included (the state's `labels`
    field) and the summaries NumPyro is shown left out; `fields` the other extra fields."""
    composed = mcmc.sampler
    fields = mcmc.get_extra_fields(group_by_chain=True)
    summaries = set(composed.partition_block.summary_names)
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items() if k not in summaries}
    samples.update({k: np.asarray(v) for k, v in fields["labels"].items()})
    return samples, {k: np.asarray(v) for k, v in fields.items() if k != "labels"}


def inference_data(mcmc, *, seed: int | None = None, log_likelihood="auto"):
    """The InferenceData of [`sample_model`][dpppl.run.partition_gibbs.sample_model] (see there)
    from a finished NumPyro MCMC run of `PartitionGibbs`: its model replayed at its arguments
    (`mcmc.run`'s) for `lp`, the observed sites and the pointwise `log_likelihood` (`log_likelihood`
    as [`dpppl.sample`][dpppl.sample] takes it); `seed` is recorded when given."""
    composed, fn = mcmc.sampler, mcmc.sampler.model
    model_args, model_kwargs = mcmc._args, dict(mcmc._kwargs)  # what mcmc.run was given (ArviZ reads them too)
    inner, kernel, hmc = composed.inner_kernel, composed.partition_block.requested, isinstance(composed.inner_kernel,
                                                                                                 HMC)
    sweeps, num_warmup, thinning = composed.partition_block.sweeps, mcmc.num_warmup, mcmc.thinning
    samples, fields = draws_with_labels(mcmc)
    sites = composed.partition_block.sites
    chains, draws = next(iter(samples.values())).shape[:2]
    flat = {k: jnp.asarray(v.reshape((chains * draws,) + v.shape[2:])) for k, v in samples.items()}
    lp = np.asarray(jax.lax.map(lambda params: log_density(fn, model_args, model_kwargs, params)[0], flat))
    lp = lp.reshape(chains, draws)
    posterior, partition, dims = {}, {}, {}
    label_sites = {s[0] for s in sites}
    posterior.update({k: v for k, v in samples.items() if k not in label_sites})
    for labels, values, _, _ in sites:
        prefix = "" if len(sites) == 1 else f"{values}_"
        summaries = label_summaries(samples[labels])
        partition[prefix + "z"] = samples[labels].astype(np.int32)
        partition[prefix + "cluster_sizes"] = summaries.pop("cluster_sizes")
        posterior.update({prefix + k: v for k, v in summaries.items()})
        dims[prefix + "z"] = [prefix + "point"]
        dims[prefix + "cluster_sizes"] = [prefix + "cluster"]
    posterior["lp"] = lp
    sample_stats = {"lp": lp, "overflow": fields["overflow"]}
    if hmc:
        sample_stats.update(diverging=fields["hmc_state.diverging"], acceptance_rate=fields["hmc_state.accept_prob"])
    if sample_stats["overflow"].any():
        warnings.warn(f"a partition move found every one of its cluster slots occupied in "
                      f"{int(sample_stats['overflow'][:, -1].sum())} chain(s): the draws are biased; give "
                      "capacity=N + 1", RuntimeWarning, stacklevel=3)
    observed, shifted = observed_data(fn, model_args, model_kwargs)
    constant, scalars = model_inputs(fn, model_args, model_kwargs)
    attrs = dict(kernel="; ".join(f"{labels}: {spec}" for labels, _, spec, _ in sites), kernel_requested=kernel,
                 inner_kernel=type(inner).__name__, sweeps=sweeps, exact=composed.exact, seed=seed,
                 num_warmup=num_warmup, thinning=thinning,
                 model=fn.__qualname__ if inspect.isfunction(fn) else repr(fn),
                 model_function=model_function_name(fn),
                 model_arguments=json.dumps(scalars), observed_arguments=json.dumps(shifted),
                 dpppl_version=__version__, jax_version=jax.__version__, numpyro_version=numpyro.__version__)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    groups = {"posterior": posterior, PARTITION_GROUPS["posterior"]: partition, "sample_stats": sample_stats,
              "observed_data": observed, "constant_data": constant}
    n_values = chains * draws * sum(samples[labels].shape[-1] for labels, _, _, _ in sites)
    if check_log_likelihood(log_likelihood, None, n_values):
        groups["log_likelihood"] = {k: v.reshape((chains, draws) + v.shape[1:])
                                    for k, v in site_log_likelihood(fn, model_args, model_kwargs, flat,
                                                                    tuple(label_sites)).items()}
    return to_arviz(groups, dims=dims, attrs=attrs)


def model_function_name(fn) -> str:
    """`module:qualname` of a model function (what `posterior_predictive` imports it by); `repr` of
    another callable, which cannot be imported back."""
    return f"{fn.__module__}:{fn.__qualname__}" if inspect.isfunction(fn) else repr(fn)


def model_arguments(fn, model_args, model_kwargs) -> dict:
    """The model's arguments by parameter name (`inspect.signature(fn).bind`); {} when it cannot
    be bound."""
    try:
        return dict(inspect.signature(fn).bind(*model_args, **model_kwargs).arguments)
    except (TypeError, ValueError):
        return {}


def call_arguments(fn, arguments: dict) -> tuple[tuple, dict]:
    """`(args, kwargs)` calling `fn` with `arguments` by parameter name."""
    bound = inspect.BoundArguments(inspect.signature(fn), dict(arguments))
    return bound.args, bound.kwargs


def _is_array(value) -> bool:
    return isinstance(value, (np.ndarray, jax.Array)) and np.asarray(value).dtype.kind in "biuf"


def model_inputs(fn, model_args, model_kwargs) -> tuple[dict, dict]:
    """`(arrays, others)`: the model's array arguments (the `constant_data` group) and its other
    arguments that JSON writes (numbers, strings, None; the `model_arguments` attribute), by name."""
    arrays, others = {}, {}
    for name, value in model_arguments(fn, model_args, model_kwargs).items():
        if _is_array(value):
            arrays[name] = np.asarray(value)
        elif value is None or isinstance(value, (bool, int, float, str, np.integer, np.floating)):
            others[name] = value.item() if isinstance(value, (np.integer, np.floating)) else value
    return arrays, others


def _observed_values(fn, model_args, model_kwargs, key) -> dict:
    tr = trace(seed(fn, key)).get_trace(*model_args, **model_kwargs)
    return {name: site["value"] for name, site in tr.items() if site["type"] == "sample" and site["is_observed"]}


def observed_data(fn, model_args, model_kwargs) -> tuple[dict, dict]:
    """`(observed_data, shifted)`: each observed site's data, and `{site: argument}` for the sites
    that observe a model argument shifted by the parameters (the site's value changes by exactly
    delta when that argument does: `obs=y - X @ beta` observes y), whose data are that argument.
    Another observed site holds its value when it does not depend on the latent sites (two seeds
    give the same value), and is left out otherwise (its data are not any one argument)."""
    arguments = model_arguments(fn, model_args, model_kwargs)
    base = jax.jit(lambda: _observed_values(fn, model_args, model_kwargs, jax.random.key(0)))()
    shapes = {np.shape(v) for v in base.values()}
    candidates = [name for name, value in arguments.items() if _is_array(value) and np.shape(value) in shapes
                  and np.asarray(value).dtype.kind == "f"]

    def moved():  # one program: the values with each candidate moved by delta, and at another seed
        out = []
        for name in candidates:
            value = jnp.asarray(arguments[name])
            delta = 0.5 + 0.25 * jnp.cos(jnp.arange(value.size, dtype=value.dtype)).reshape(value.shape)
            args, kwargs = call_arguments(fn, dict(arguments, **{name: value + delta}))
            out.append((delta, _observed_values(fn, args, kwargs, jax.random.key(0))))
        return out, _observed_values(fn, model_args, model_kwargs, jax.random.key(1))

    trials, reseeded = jax.jit(moved)()
    observed, shifted = {}, {}
    for site, value in base.items():
        value = np.asarray(value)
        for name, (delta, after) in zip(candidates, trials):
            change = np.asarray(after[site], float) - value
            if change.shape == np.shape(delta) and np.allclose(change, delta, rtol=1e-6, atol=1e-9 * (
                    1.0 + np.max(np.abs(value)))):
                observed[site], shifted[site] = np.asarray(arguments[name]), name
                break
        else:
            if np.array_equal(np.asarray(reseeded[site]), value):
                observed[site] = value
    return observed, shifted


def dp_draw_trace(fn, model_args, model_kwargs, params):
    """The model traced at one draw's values `params` (continuous sites and labels, substituted):
    `(trace, dp_sites)`, traceable."""
    tr = trace(substitute(seed(fn, jax.random.key(0)), data=params)).get_trace(*model_args, **model_kwargs)
    return tr, dp_sites(tr)


def site_log_likelihood(fn, model_args, model_kwargs, flat: dict, labels: tuple) -> dict:
    """The pointwise log likelihood of every observed site at the draws `flat` ({site: (S, ...)}):
    for a collapsed-mixture site the conditional predictive of its values at the draw
    (`conditional_log_predictive`, the draw's labels and alpha), for another observed site its
    log density given the draw (`site["fn"].log_prob`, as `numpyro.infer.util.log_likelihood`, when
    it is per point); (S, N) each, one compiled program. `labels` names
    the partition sites (canonical labels: cluster slots up to the next power of two above the
    largest label)."""
    def one(params):
        tr, found = dp_draw_trace(fn, model_args, model_kwargs, params)
        out = {}
        for f in found:
            if tr[f.values]["is_observed"]:
                z = jnp.asarray(params[f.labels], jnp.int32)
                x = jnp.asarray(f.mixture.points(f.value), jnp.result_type(float))
                out[f.values] = conditional_log_predictive(f.mixture.family, f.partition.prior, x, z,
                                                           f.partition.alpha, capacities[f.labels])
        for name, site in tr.items():  # the other observed sites: their log density given the draw
            if site["type"] == "sample" and site["is_observed"] and name not in out:
                value = site["fn"].log_prob(site["value"])
                if jnp.ndim(value) >= 1:
                    out[name] = value
        return out

    capacities = {name: 1 << (int(np.max(flat[name])) + 1).bit_length() for name in labels}
    size = max([flat[k].shape[-1] * (capacities[k] + 2) for k in labels] or [1])
    batch = int(max(1, min(len(next(iter(flat.values()))), POINTWISE_BATCH // size)))
    out = jax.jit(lambda p: jax.lax.map(one, p, batch_size=batch))(flat)
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


__all__ = ["DEFAULT_MAX_CAPACITY", "PartitionBlock", "PartitionBlockState", "PartitionGibbs", "PartitionGibbsState",
           "call_arguments", "dp_draw_trace", "draws_with_labels", "inference_data", "model_arguments", "model_inputs",
           "observed_data", "sample_model", "site_log_likelihood"]
