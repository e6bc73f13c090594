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

A run is one compiled program (`run_chains`): every chain's init, warmup, sampling, the kept
draws' sites, labels and `lp`, of which the target is an argument, so that a new data set of
the same shapes runs it again without compiling. NumPyro's own `MCMC` compiles its init, its
sampling loop once per chain (sequential chains rebuild the loop's body, which defeats JAX's
cache) and the post-processing as programs of their own (docs/kernels/nuts.md).

`init_in_one_program` traces a NumPyro kernel's init into one program, for
`dpppl.PartitionGibbs` around NumPyro's HMC or NUTS, whose init NumPyro otherwise builds
eagerly, one operation (one small program to compile) at a time.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from jax.flatten_util import ravel_pytree
from numpyro.infer import NUTS
from numpyro.infer.hmc import HMC
from numpyro.infer.util import ParamInfo, initialize_model
from numpyro.util import not_jax_tracer

from dpppl.core import numerics_random as random
from dpppl.core.compiled import on_target, prepare
from dpppl.core.protocols import Target
from dpppl.core.pytrees import structure_key
from dpppl.errors import KernelError, ModelError
from dpppl.kernels.base import register
from dpppl.models.sites import canonical_in_jit
from dpppl.run.interrupts import hold
from dpppl.run.progress import RunProgress


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


def conditioned_model(truncation: int):
    """The NumPyro model NUTS runs, as a function of its target: `model(target)` is the
    target's compiled model (`Target.nuts_model`) conditioned on its data. The target (data
    and resolved hyperparameters, a pytree) is the model's argument, an argument of the
    compiled program (`run_chains`) rather than constants folded into it, so that other data
    of the same shapes run the same program.

    NumPyro's argument validation is off while the model runs: every distribution it builds checks its
    arguments' constraints under `jax.ensure_compile_time_eval`, which inside this trace checks nothing
    (the arguments are traced) but runs the constraints' constant parts (the triangular masks of
    `InverseWishart`'s `lower_cholesky`, ...) eagerly, about 40 small programs compiled at the first call
    (~1.2 CPU s). The draws do not change."""
    def model(target):
        compiled, args = target.nuts_model(truncation)
        with numpyro.validation_enabled(False):
            return compiled(*args)

    return model


def initial_params(rng_key, model, model_args: tuple) -> ParamInfo:
    """NumPyro's valid initial parameters for `NUTS(model)` with its default `init_to_uniform`
    (radius 2), as `HMC.init(rng_key, ...)` finds them for a traced key: the second key of
    `split(rng_key)`, then NumPyro's search (`find_valid_initial_params`), a `while_loop` that draws
    each latent site's unconstrained value Uniform(-2, 2) (sites in the model's order, a key split
    after each) until the potential energy and its gradient are finite, at most 100 times. Returns
    `ParamInfo(z, potential_energy, z_grad)`, which `HMC.init` takes as given: the same draws.

    Without NumPyro's prototype: `initialize_model` also draws a first set of values from
    `init_to_uniform` through a seeded trace of the model (a key split and a uniform per site, each
    site's transform and its inverse) only to start the loop's carry, which the loop's first
    iteration overwrites but the compiler cannot drop: ~2,000 instructions of the NUTS program, most
    of them Threefry hashes. Here the carry starts at zeros; `initialize_model` runs only for the
    sites' shapes and the potential function (its values are dead code)."""
    _, key = jax.random.split(rng_key)
    info = initialize_model(key, model, dynamic_args=True, model_args=model_args)
    potential = info.potential_fn(*model_args)
    shapes = info.param_info.z
    names = [name for name, site in info.model_trace.items()
             if site["type"] == "sample" and not site["is_observed"] and not site["fn"].support.is_discrete]

    def draw(state):  # NumPyro's body_fn, its branch for init_to_uniform with a prototype
        i, key, _, _ = state
        key, subkey = jax.random.split(key)
        params = {}
        for name in names:
            params[name] = jax.random.uniform(subkey, jnp.shape(shapes[name]), minval=-2.0, maxval=2.0)
            key, subkey = jax.random.split(key)
        energy, grad = jax.value_and_grad(potential)(params)
        return i + 1, key, (params, energy, grad), jnp.isfinite(energy) & jnp.all(jnp.isfinite(ravel_pytree(grad)[0]))

    zeros = jax.tree.map(lambda v: jnp.zeros(jnp.shape(v), jnp.result_type(v)), shapes)
    _, _, found, _ = jax.lax.while_loop(lambda state: (state[0] < 100) & ~state[3], draw,
                                        (0, key, (zeros, 0.0, zeros), False))
    return ParamInfo(*found)


def chain_keys(seed: int, num_chains: int) -> np.ndarray:
    """The chains' key data (num_chains, 2), those NumPyro's `MCMC.run(jax.random.key(seed), ...)` gives
    its chains: the seed's key itself for one chain, else its split into `num_chains`. With JAX's default
    keys (threefry, partitionable) computed on the host (`numerics_random.host_split`; the key of `seed` is
    (seed >> 32, seed mod 2^32)), without the three small programs JAX would compile for them."""
    if jax.config.jax_default_prng_impl != "threefry2x32" or not jax.config.jax_threefry_partitionable:
        key = jax.random.key(seed)
        return np.asarray(jax.random.key_data(key[None] if num_chains == 1 else jax.random.split(key, num_chains)))
    if num_chains == 1:
        return np.array([[(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF]], np.uint32)
    return random.host_split(int(seed), (num_chains,))


_SHOWN: list = [None]
"""The `RunProgress` of the NUTS run in progress, which the compiled program's progress callback
advances (the program is shared by every run of its shapes, so it cannot hold a run's own bar)."""


def _advance(done, chain, warmup):
    """Host side of the program's progress callback: `done` more iterations of chain `chain`."""
    display = _SHOWN[0]
    if display is not None:
        display.update(int(done), f"chain {int(chain) + 1}" + (" (warmup)" if bool(warmup) else ""))


def progress_every(num_iterations: int) -> int:
    """Iterations between two updates of the bar from inside the program: about 100 updates a chain."""
    return max(1, num_iterations // 100)


def run_chains(target: Target, keys, *, truncation: int, num_warmup: int, num_samples: int, thinning: int,
               progress: bool):
    """Every chain of a NUTS run, one after the other (`lax.map` over `keys`, the chains' key data,
    NumPyro's `chain_method="sequential"`), traceable into one program of which the target (data and
    resolved hyperparameters) is an argument (`sample_nuts` compiles it with `on_target`: dpppl's
    compile options with `LIGHT_OPTIONS`, kept on disk across processes, as the partition kernels'
    programs are).

    Each chain is what NumPyro's `MCMC(NUTS(model), ...)` runs for its key: NUTS's `init` (the
    search for valid initial parameters as NumPyro's `while_loop`, `initial_params`), then `num_warmup + num_samples`
    NUTS transitions in one loop (one copy of the transition in the program), the step size and
    mass matrix adapted during warmup, of which the kept draws are the states NumPyro's
    `fori_collect` keeps (after the first `num_warmup + num_samples % thinning` iterations, the last
    of every `thinning`), their records computed on those iterations only (`lax.cond`). NumPyro
    compiles the init, its sampling loop once for each chain and the post-processing as programs
    of their own; here the sites of each kept draw (the model replayed, NumPyro's
    post-processing), its labels (`assignment`, renumbered by first appearance for an
    exchangeable prior, as `prior.canonical` does) and its `lp` (`Target.lp_of_draw`) are part
    of the same program.

    Returns (valid (chains,): whether the chain's initial potential energy and gradient are finite,
    records): `z` (chains, draws, N) labels, `lp`, `diverging`, `acceptance_rate`, `alpha` when it
    is random and each random hyperparameter (chains, draws). With `progress`, the program advances
    the run's bar (`_SHOWN`) every `progress_every` iterations.
    """
    model = conditioned_model(truncation)
    prior = target.prior
    total = num_warmup + num_samples
    every = progress_every(total)

    num_sticks = model_truncation(target, truncation)

    def chain(inputs):
        index, key = inputs
        kernel = NUTS(model)
        state = kernel.init(key, num_warmup, initial_params(key, model, (target,)), (target,), {})
        valid = jnp.isfinite(state.potential_energy) & jnp.all(jnp.isfinite(ravel_pytree(state.z_grad)[0]))
        constrained = kernel.postprocess_fn((target,), {})

        def record(state):
            sites = constrained(state.z)
            component = sites["assignment"].astype(jnp.int32)
            labels = component if prior.labelled else canonical_in_jit(component, num_sticks)
            out = {"z": labels, "lp": target.lp_of_draw(labels, sites, num_sticks),
                   "diverging": state.diverging, "acceptance_rate": state.accept_prob}
            out.update({name: sites[name] for name in ("alpha", *target.model.hyperpriors) if name in sites})
            return out

        def step(i, carry):  # iteration i (0-based) of the chain, one NUTS transition (one copy in the program)
            state, kept = carry
            state = kernel.sample(state, (target,), {})
            if progress:
                jax.lax.cond((i + 1) % every == 0, lambda: jax.debug.callback(_advance, every, index, i < num_warmup),
                             lambda: None)
            after = i - skipped

            def write():
                return jax.tree.map(lambda buffer, v: buffer.at[after // thinning].set(v), kept, record(state))
            return state, jax.lax.cond((after >= 0) & (after % thinning == thinning - 1), write, lambda: kept)

        skipped = num_warmup + num_samples % thinning  # NumPyro's fori_collect: then every thinning-th is kept
        shapes = jax.eval_shape(record, state)
        kept = jax.tree.map(lambda v: jnp.zeros((num_samples // thinning,) + v.shape, v.dtype), shapes)
        _, kept = jax.lax.fori_loop(0, total, step, (state, kept))
        if progress and total % every:
            jax.debug.callback(_advance, total % every, index, False)
        return valid, kept

    return jax.lax.map(chain, (jnp.arange(keys.shape[0]), jax.random.wrap_key_data(keys)))


def model_truncation(target: Target, truncation: int) -> int:
    """The number of sticks of the model NUTS runs: `truncation`, or fewer for a finite labelled prior."""
    return target.nuts_model(truncation)[0].truncation


def sample_nuts(target: Target, spec: str, options: dict, *, num_warmup: int, num_samples: int,
                num_chains: int, seed: int, thinning: int, progress_bar: bool, truncation: int, **_):
    """Run NUTS (`run_chains`); return (records, attrs, record_dims) as the partition backend does:
    each random hyperparameter of the base measure (a site of the compiled model under its name) is
    recorded under its name, in `posterior`, as the partition kernels' hyperparameter move records it.

    Thinning follows the rule of every backend: `num_samples` iterations after warmup, of
    which `num_samples // thinning` are kept (NumPyro's, every `thinning`-th). ModelError when a
    chain finds no initial parameters of finite log density and gradient (NumPyro's 100 draws)."""
    if options:
        raise KernelError(f"kernel 'nuts' takes no options, got {sorted(options)}")
    keys = chain_keys(seed, num_chains)
    # XLA's elemental emitters (LIGHT_OPTIONS): the program compiles in ~20% less CPU and its NUTS steps
    # ran no slower (docs/kernels/nuts.md#one-compiled-program-per-run)
    statics = dict(truncation=truncation, num_warmup=num_warmup, num_samples=num_samples, thinning=thinning,
                   progress=progress_bar)
    run = on_target("nuts", target, functools.partial(run_chains, **statics), *sorted(statics.items()), light=True)
    display = RunProgress(num_chains * (num_warmup + num_samples), 0, progress_bar, "nuts")
    try:
        with display.compiling(("nuts", structure_key(target), num_chains, *sorted(statics.items())),
                               "the NUTS program"):
            prepare(run, keys)
        _SHOWN[0] = display
        valid, records = run(keys)
        records = jax.tree.map(np.asarray, records)
    finally:
        _SHOWN[0] = None
        display.close()
    hold()  # the last iteration is done (dpppl.run.interrupts)
    stuck = np.flatnonzero(~np.asarray(valid))
    if stuck.size:
        raise ModelError(f"kernel 'nuts': chain(s) {', '.join(str(c) for c in stuck)} found no initial "
                         "parameters with a finite log density and gradient in 100 draws (NumPyro's "
                         "init_to_uniform, unconstrained values in [-2, 2]): check the model and the data's scale")
    if not target.prior.alpha_is_random:
        records["alpha"] = np.full(records["lp"].shape, target.prior.initial_alpha)
    hyper = target.model.hyperpriors
    return (records, dict(kernel="nuts", exact=0, truncation=truncation, interrupted=0, init="nuts"),
            {name: [] for name in hyper} or None)


register("nuts", None, exact=False, backend="nuts",
         description="NumPyro NUTS on the truncated stick-breaking model (labels summed out; DDP models "
                     "too); approximate")


__all__ = ["chain_keys", "conditioned_model", "init_in_one_program", "model_truncation", "one_program_init",
           "run_chains", "sample_nuts"]
