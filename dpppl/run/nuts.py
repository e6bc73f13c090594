"""The NUTS backend: NumPyro's NUTS on the compiled truncated stick-breaking model.

The labels are summed out of the model, so NUTS moves the stick proportions, the
component parameters and alpha. To give every kernel the same label-invariant
summaries, each draw's partition is each point's most probable component (the
deterministic site `assignment`), and `lp` is what the target's own kernels record for
it (`Target.lp_of_draw`): the log joint of that partition for a mixture (the quantity the
partition kernels report), the log joint of those labels with the draw's time-coupled
parameters for a DDP (`dpppl.models.ddp_compile`), not NUTS's own potential.
NUTS runs in the target's frame (`Target.nuts_model`): on `target.x` with
`target.family` (real data translated by their mean, `dpppl.models.mixture.BoundModel`);
nothing it records is a location.

A chain's first state is built in one compiled program (`init_in_one_program`): NumPyro
builds it eagerly, one operation at a time (finding valid initial parameters, the potential
energy and its gradient), each operation another small program to compile on a cold start.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer import MCMC, NUTS
from numpyro.infer.hmc import HMC
from numpyro.util import identity, not_jax_tracer

from dpppl.core.protocols import Target
from dpppl.errors import KernelError
from dpppl.kernels.base import register
from dpppl.run.interrupts import hold


def one_program_init(kernel: HMC) -> bool:
    """Whether `init_in_one_program` may trace the init of (a composite whose inner kernel is)
    `kernel`: NumPyro's HMC or NUTS without the heuristic step size search, whose closure keeps
    the potential of the init's arguments for warmup (traced, they would leak from the program)."""
    return isinstance(kernel, HMC) and not kernel._find_heuristic_step_size


def init_in_one_program(init, hmc_state, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs=None,
                        programs: dict | None = None):
    """`init(rng_key, num_warmup, init_params, model_args, model_kwargs)` of a NumPyro kernel
    whose state holds an HMC state (`hmc_state(state)`), traced into one jitted program of the
    key and `init_params` instead of NumPyro's eager, one-operation-at-a-time init.

    The same computation: NumPyro's search for valid initial parameters (the init strategy's
    draw, redrawn up to 100 times while the potential energy or its gradient is not finite)
    runs as its `while_loop`, the branch NumPyro takes for a traced key, whose first iteration
    is the eager path's draw (floats may differ from the eager path's in the last bits, as XLA
    fuses operations). The model's array arguments are arguments of the program, so new data of
    the same shapes reuse it; its other arguments (Python numbers, strings, None: a number of
    groups, a flag) are constants, as the model may use them in Python control flow or as
    shapes. The error NumPyro
    gives when no valid parameters are found is raised from the program's validity flag. Only
    for kernels `one_program_init` accepts.

    `programs` (a dict the kernel keeps) holds the jitted programs of its earlier calls, by what they
    close over (`num_warmup`, the arguments' tree and their non-array leaves): NumPyro calls `init`
    once per chain (`chain_method="sequential"`), and each chain after the first then runs the first
    chain's program instead of tracing, lowering and (without a persistent cache) compiling it again.
    """
    model_kwargs = {} if model_kwargs is None else model_kwargs

    leaves, tree = jax.tree.flatten((model_args, model_kwargs))
    is_array = [isinstance(leaf, (np.ndarray, jax.Array)) for leaf in leaves]

    def program(rng_key, init_params, arrays):
        filled = iter(arrays)
        args, kwargs = jax.tree.unflatten(tree, [next(filled) if a else leaf for leaf, a in zip(leaves, is_array)])
        state = init(rng_key, num_warmup, init_params, args, kwargs)
        hmc = hmc_state(state)
        return state, jnp.isfinite(hmc.potential_energy) & jnp.all(jnp.isfinite(ravel_pytree(hmc.z_grad)[0]))

    arrays = [leaf for leaf, a in zip(leaves, is_array) if a]
    key = (num_warmup, tree, tuple(None if a else leaf for leaf, a in zip(leaves, is_array)))
    try:
        jitted = programs.get(key) if programs is not None else None
    except TypeError:  # a constant argument that cannot be a key: a program of this call only
        programs = jitted = None
    if jitted is None:
        jitted = jax.jit(program)
        if programs is not None:
            programs[key] = jitted
    state, valid = jitted(rng_key, init_params, arrays)
    if not_jax_tracer(valid) and not bool(valid):
        raise RuntimeError("Cannot find valid initial parameters. Please check your model again.")
    return state


class _NUTS(NUTS):
    """NumPyro's NUTS, each chain's first state built by `init_in_one_program` and the draws'
    post-processing (the model replayed for its deterministic sites) one jitted program, which
    NumPyro's sampling loop otherwise runs eagerly on the first state to shape its buffers."""

    def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs=None):
        return init_in_one_program(super().init, identity, rng_key, num_warmup, init_params, model_args, model_kwargs,
                                   self.__dict__.setdefault("_init_programs", {}))

    def postprocess_fn(self, model_args, model_kwargs):
        return functools.partial(_postprocessed, self, model_args=model_args, model_kwargs=model_kwargs)


@functools.partial(jax.jit, static_argnums=0)
def _postprocessed(sampler: NUTS, z, model_args, model_kwargs):
    """NumPyro's post-processing of the draw `z` (the model replayed for its deterministic sites),
    one program of which the model's arguments are arguments, not constants."""
    return NUTS.postprocess_fn(sampler, model_args, model_kwargs)(z)


def conditioned_model(truncation: int):
    """The NumPyro model NUTS runs, as a function of its target: `model(target)` is the
    target's compiled model (`Target.nuts_model`) conditioned on its data. The target (data
    and resolved hyperparameters, a pytree) is the model's argument, passed to the compiled
    programs as such (`jit_model_args=True`) rather than folded into them as constants, so
    that other data of the same shapes lower the same programs (served by the persistent
    compilation cache)."""
    def model(target):
        compiled, args = target.nuts_model(truncation)
        return compiled(*args)

    return model


def sample_nuts(target: Target, spec: str, options: dict, *, num_warmup: int, num_samples: int,
                num_chains: int, seed: int, thinning: int, progress_bar: bool, truncation: int, **_):
    """Run NUTS; return (records, attrs, record_dims) as the partition backend does: each random
    hyperparameter of the base measure (a site of the compiled model under its name) is recorded
    under its name, in `posterior`, as the partition kernels' hyperparameter move records it.

    Thinning follows the rule of every backend: `num_samples` iterations after warmup, of
    which `num_samples // thinning` are kept (NumPyro's, every `thinning`-th)."""
    if options:
        raise KernelError(f"kernel 'nuts' takes no options, got {sorted(options)}")
    num_sticks = target.nuts_model(truncation)[0].truncation
    mcmc = MCMC(_NUTS(conditioned_model(truncation)), num_warmup=num_warmup, num_samples=num_samples,
                num_chains=num_chains, thinning=thinning, chain_method="sequential", progress_bar=progress_bar,
                jit_model_args=True)
    mcmc.run(jax.random.key(seed), target, extra_fields=("diverging", "accept_prob"))
    hold()  # the last iteration is done (dpppl.run.interrupts)
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    component = np.asarray(samples["assignment"])
    chains, draws, n = component.shape
    flat = np.stack([target.prior.canonical(row) for row in component.reshape(-1, n).astype(np.int64)])
    alpha = (np.asarray(samples["alpha"]).reshape(-1) if target.prior.alpha_is_random
             else np.full(flat.shape[0], target.prior.initial_alpha))

    lp = _draws_lp(flat, samples, target, num_sticks)
    shape = (chains, draws)
    records = {"z": flat.reshape(chains, draws, n), "alpha": alpha.reshape(shape),
               "lp": np.asarray(lp).reshape(shape), "diverging": np.asarray(extra["diverging"]),
               "acceptance_rate": np.asarray(extra["accept_prob"])}
    hyper = target.model.hyperpriors
    records.update({name: np.asarray(samples[name]) for name in hyper})
    return (records, dict(kernel="nuts", exact=0, truncation=truncation, interrupted=0, init="nuts"),
            {name: [] for name in hyper} or None)


@functools.partial(jax.jit, static_argnums=3)
def _draws_lp(flat, samples, target: Target, num_sticks: int):
    """Each draw's `lp` (`Target.lp_of_draw` of its partition `flat` (draws, N) and its sites
    `samples` (chains, draws, ...)), in one program of which the target is an argument."""
    sites = {k: jnp.reshape(v, (-1,) + v.shape[2:]) for k, v in samples.items()}
    return jax.lax.map(lambda args: target.lp_of_draw(args[0], args[1], num_sticks), (flat, sites))


register("nuts", None, exact=False, backend="nuts",
         description="NumPyro NUTS on the truncated stick-breaking model (labels summed out; DDP models "
                     "too); approximate")


__all__ = ["conditioned_model", "init_in_one_program", "one_program_init", "sample_nuts"]
