"""`dpppl.sample` and `dpppl.resume`: check inputs, hand the run to the kernel's backend,
return InferenceData.

Every model kind goes through the same path: the model is bound to its data (a *target*,
`dpppl.core.protocols.Target`), the kernel's backend runs the chains (partition
kernels: `dpppl.run.runner`; NUTS: `dpppl.run.nuts`) and
`dpppl.run.output` writes the InferenceData. A partition-kernel run may be saved to a
checkpoint (`dpppl.run.checkpoint`) and continued by `resume`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import warnings
from typing import Any

import jax
import numpy as np

from dpppl.config import in_x64
from dpppl.dsl.parser import as_model, bind_data
from dpppl.errors import ArgumentError, DataError, check_bool, check_positive_int
from dpppl.kernels.auto import AUTO, dim_of, resolve
from dpppl.kernels.base import available, backend_of, check_applies, entry
from dpppl.models.init import resolve_init
from dpppl.run import distributed
from dpppl.run.checkpoint import DEFAULT_EVERY, CheckpointFile, ProcessCheckpointFile, RunSpec, read_checkpoint
from dpppl.run.interrupts import Completed, finishing, hold
from dpppl.run.memory import check_memory, run_bytes
from dpppl.run.nuts import sample_nuts
from dpppl.run.output import (PointwiseParts, check_log_likelihood, import_conversion_modules,
                              log_likelihood_refusal, prepare_pointwise, settle, to_inference_data)
from dpppl.run.partition_gibbs import sample_model
from dpppl.run.runner import check_states, continue_partition, sample_partition
from dpppl.version import __version__

BACKENDS = {"partition": sample_partition, "nuts": sample_nuts}
"""The samplers a registered kernel names as its `backend`."""


def check_seed(seed, name: str = "seed") -> None:
    """Raise [`ArgumentError`][dpppl.errors.ArgumentError] unless `seed` is a Python or NumPy integer
    (not a bool) in [0, 2**63 - 1], the seeds `jax.random.key` takes as distinct keys; with JAX's
    64-bit mode off (`JAX_ENABLE_X64=0`) the range is [0, 2**32 - 1], since larger seeds are
    truncated there (2**32 would give the draws of seed 0)."""
    top = 2**63 - 1 if jax.config.jax_enable_x64 else 2**32 - 1
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ArgumentError(f"{name} must be an integer in [0, {top}], got {seed!r} "
                            f"({type(seed).__name__})")
    if not 0 <= int(seed) <= top:
        mode = "" if jax.config.jax_enable_x64 else " (JAX's 64-bit mode is off)"
        raise ArgumentError(f"{name} must be an integer in [0, {top}]{mode}, got {int(seed)}")


@in_x64
def sample(model, data=None, kernel: str = AUTO, *, num_warmup: int = 500, num_samples: int = 1000,
           num_chains: int = 1, seed: int = 0, init: Any = "sequential", progress_bar: bool = True,
           thinning: int = 1, capacity: int | None = None, truncation: int = 20, checkpoint=None,
           checkpoint_every: float = DEFAULT_EVERY, model_args: tuple = (), model_kwargs: dict | None = None,
           log_likelihood="auto", **kernel_options):
    """Sample the posterior of a DP mixture model; return ArviZ InferenceData.

    Parameters
    ----------
    model : Model, BoundModel, str or callable
        A model (`dpppl.DPMixture(...)`, `dpppl.load(path)`), a model-file path, or a model
        bound to its data (`model.bind(x)`). Or a NumPyro model function holding partition
        sites (`dpppl.dp_mixture`, `dpppl.Partition`; docs/numpyro-sites.md), called with
        `model_args` and `model_kwargs`: it runs [`dpppl.PartitionGibbs`][dpppl.PartitionGibbs]
        (NUTS on the continuous sites, `kernel` on the partitions;
        [`sample_model`][dpppl.run.partition_gibbs.sample_model] says what it returns), whose
        options (`inner_kernel`, `sweeps`, and the partition kernel's) go in `kernel_options`.
    data : array-like, str or path-like, optional
        The data, checked against the model's declaration before anything runs. A string
        or path is what the command line's `--data` takes: a data set name
        (`"galaxies"`, see [`dpppl.datasets.available`][dpppl.datasets.available]; loaded with default options)
        or a CSV/NPY/NPZ file ([`dpppl.datasets.read_data`][dpppl.datasets.read_data]); anything else raises
        [`dpppl.DataError`][dpppl.DataError] naming the data sets. Rankings given as item names are
        read with `dpppl.datasets.read_rankings`. None (the default): the data of a bound
        model, else those the model file names (`data x : real[N] = dataset("galaxies")`;
        [`bind_data`][dpppl.dsl.parser.bind_data]); data given here win over both. A model
        with no data and none given raises [`dpppl.DataError`][dpppl.DataError] saying how
        to give them.
    kernel : str, default "auto"
        `"auto"`: chosen by the model and the number of points
        ([`dpppl.kernels.auto.choose`][dpppl.kernels.auto.choose]; docs/kernels/auto.md has the
        rule and its measured thresholds): `gibbs+splitmerge` for a DP mixture of a
        conjugate component on fewer than 3,000 points, `subcluster` (sub-cluster splits in
        warmup, exact draws after it) from there, `sbgibbs+labelswap+labelpermute` for a
        stick-breaking prior, `ddp+ddpswap` for a DDP model, `mallows-slice` for rankings.
        The choice is in `attrs["kernel"]`, `attrs["kernel_reason"]` says why. Or a
        registered kernel (`dpppl.kernels.available()`), a hybrid joined with `+`
        (`"gibbs+splitmerge"`), or `"nuts"` (NumPyro NUTS on the truncated
        stick-breaking model, a backend of its own; labels are each point's most probable
        component).
    num_warmup : int
        Iterations discarded as burn-in (adaptation happens here).
    num_samples : int
        Iterations kept (before thinning).
    num_chains : int
        Independent chains, run vectorised.
    seed : int
        The same seed gives the same draws. A Python or NumPy integer in `[0, 2**63 - 1]`
        (`[0, 2**32 - 1]` with JAX's 64-bit mode off); anything else (a float, None, a bool,
        a negative or larger integer) raises [`dpppl.ArgumentError`][dpppl.ArgumentError].
    init : {"sequential", "single", "prior", "search"}, a callable or an array of labels
        `"sequential"`: sequential prediction (Liang et al. 2007, sec. 5.1; one cluster
        for a non-conjugate component, which has no closed-form predictive);
        `"single"`: one cluster; `"prior"`: a draw from the partition prior;
        `"search"`: every chain starts from [`dpppl.map_search`][dpppl.map_search] (inadmissible
        score, beam 100; Daume 2007); or
        labels of shape (N,) or (num_chains, N); or a strategy
        `(target, keys, capacity) -> states` (`dpppl.models.init`).
    progress_bar : bool
        Off when the `CI` environment variable is set.
    thinning : int
        Keep every `thinning`-th draw; at most `num_samples`. One rule for every backend
        (partition kernels, `"nuts"`, a NumPyro model function): `num_samples` iterations
        run after warmup and `num_samples // thinning` of them are kept.
    capacity : int, optional
        Initial cluster capacity (grown automatically when full).
    truncation : int
        Number of sticks for `kernel="nuts"`.
    checkpoint : str or path-like, optional
        A file to save the run in, to continue it with [`dpppl.resume`][dpppl.resume] after a
        crash or Ctrl-C: written every `checkpoint_every` seconds, at the end of warmup, at the
        end of the run and on Ctrl-C (during warmup too), each time atomically. Partition
        kernels only (not `"nuts"`); see docs/checkpoints.md.
    checkpoint_every : float, default 60
        Seconds between two checkpoints.
    model_args, model_kwargs : tuple, dict
        Arguments of a NumPyro model function (`model` callable only; `data` must then be None).
    log_likelihood : {"auto", True, False}
        Whether the run has a pointwise `log_likelihood` group (chain, draw, point) under the data's
        name, for `az.loo` and `az.compare`: the conditional predictive log p(x_i | x_-i, z_-i, alpha)
        of each point at each draw (docs/analysis.md says why this quantity). `"auto"`: when it has a
        closed form (conjugate components; rankings and DDP: log f(x_i | its cluster's recorded
        parameters); not NormalLogNormal or `kernel="nuts"`) and chains x kept
        draws x points is at most 2^25 (256 MB in float64; `dpppl.run.output.LOG_LIKELIHOOD_BUDGET`),
        otherwise left out with one warning; True: always, an
        [`ArgumentError`][dpppl.ArgumentError] where there is no closed form.
    **kernel_options
        Options of the kernel's moves (see `dpppl.kernels`); with `kernel="auto"`, options
        of the chosen kernel (an option none of its parts takes raises
        [`dpppl.KernelError`][dpppl.KernelError] naming it).

    Returns
    -------
    arviz.InferenceData
        `posterior`: the label-invariant summaries `num_clusters`, `largest_cluster` and
        `entropy` (`dpppl.diagnostics.summaries`), and `alpha` when resampled;
        `posterior_partition`: `z` (chain, draw, point) and `cluster_sizes` (sorted, padded);
        `sample_stats`: `lp` (the collapsed log joint) and each move's statistics;
        `observed_data`: `x`; `log_likelihood`: `x` (chain, draw, point), see `log_likelihood`;
        attrs: `kernel` (the spec that ran), `kernel_requested`
        (`"auto"` or the kernel asked for), `kernel_reason` (with `"auto"`), `exact`
        (whether the kept draws leave the posterior invariant), model, versions.
    """
    for name, value, minimum in (("num_warmup", num_warmup, 0), ("num_samples", num_samples, 1),
                                 ("num_chains", num_chains, 1), ("thinning", thinning, 1)):
        check_positive_int(name, value, minimum)
    _check_thinning(thinning, num_samples)
    check_seed(seed)
    seed = int(seed)  # a NumPy integer is recorded in attrs and checkpoints as the int it is
    check_bool("progress_bar", progress_bar)
    if capacity is not None:
        check_positive_int("capacity", capacity, 2)
    check_positive_int("truncation", truncation, 2)
    if callable(model):
        return _sample_numpyro_model(model, data, kernel, model_args, model_kwargs, num_warmup=num_warmup,
                                     num_samples=num_samples, num_chains=num_chains, seed=seed, thinning=thinning,
                                     progress_bar=progress_bar, capacity=capacity, checkpoint=checkpoint,
                                     log_likelihood=log_likelihood, **kernel_options)
    if model_args or model_kwargs:
        raise ArgumentError("model_args and model_kwargs are the arguments of a NumPyro model function; a dpppl "
                            "model takes its data through data=")
    given, model = model, as_model(model)
    if kernel != AUTO:
        check_applies(kernel, model)
    _, init_name = resolve_init(init)
    own = run_on = None
    if distributed.process_count() > 1:  # every process gave its own rows: the run is over all of them
        distributed.check_kernel(kernel)
        distributed.check_options(init)
        target, own = distributed.bound(model, data)
        program = distributed.program_of(target, own)
        data, run_on = own.rows, dict(program=program, init=distributed.start(init, target, own, program))
    else:
        data, target = bind_data(model if isinstance(given, (str, os.PathLike)) else given, data)
    requested = kernel
    kernel, kernel_options, choice = resolve(kernel, model, target.num_points if own is None else own.total,
                                             dim_of(target), kernel_options)
    backend = backend_of(kernel)
    if checkpoint is not None and backend != "partition":
        partition = [name for name in available() if entry(name).backend == "partition"]
        raise ArgumentError(f"kernel {kernel!r} cannot save a checkpoint: the partition kernels "
                            f"({', '.join(partition)}) and their hybrids can")
    pointwise = check_log_likelihood(log_likelihood, log_likelihood_refusal(target, backend),
                                     num_chains * (num_samples // thinning) * (target.num_points if own is None
                                                                              else own.total))
    spec = RunSpec(model, data, kernel, kernel_options, seed, init_name, num_warmup, num_samples, num_chains,
                   thinning, requested, None if choice is None else choice.reason)
    saving = (contextlib.nullcontext() if checkpoint is None
              else _checkpoint_file(checkpoint, spec, checkpoint_every, own))
    with saving as saved, finishing() as late:  # a Ctrl-C after the last iteration: `Completed`, holding the run
        check_memory(run_bytes(target, kernel, kernel_options, backend, num_chains=num_chains, num_samples=num_samples,
                               thinning=thinning, capacity=capacity, truncation=truncation))
        # the pointwise program compiles in a thread while the chains run, traced once the first chunk is lowered
        lowered = threading.Event() if backend == "partition" else None
        compiling = (prepare_pointwise(target, num_chains * (num_samples // thinning), lowered)
                     if pointwise and own is None else None)  # over processes: `distributed.pointwise_log_likelihood`
        import_conversion_modules()  # while the chains run
        # the pointwise log likelihood of each chunk's kept draws, in a thread while the next chunks run
        parts = (PointwiseParts(target, num_chains * (num_samples // thinning))
                 if compiling is not None and backend == "partition" else None)
        try:
            records, attrs, record_dims = BACKENDS[backend](
                target, kernel, kernel_options, num_warmup=num_warmup, num_samples=num_samples,
                num_chains=num_chains, seed=seed, capacity=capacity, thinning=thinning, truncation=truncation,
                progress_bar=_shows_bar(progress_bar), checkpoint=saved, **(run_on or dict(init=init)),
                **({} if parts is None else dict(on_kept=parts.add)), **({} if lowered is None else dict(
                    first_lowered=lowered)))
        finally:  # however the run ended, the pointwise thread does not wait for a chunk that was never lowered
            if lowered is not None:
                lowered.set()
        hold()
        settle(compiling)
        idata = _inference_data(target, spec, records, attrs, record_dims, pointwise, own, parts)
    return _completed(idata, late)


def _checkpoint_file(path, spec: RunSpec, every: float, own: distributed.ProcessRows | None):
    """The checkpoint a run saves to: one file, or in a multi-process run (`own`, this process's rows)
    the run's file written by process 0 and this process's part (docs/distributed.md)."""
    if own is None:
        return CheckpointFile(path, spec, every)
    return ProcessCheckpointFile(path, spec, every, jax.process_index(), own.counts, slice(0, len(own.rows)))


def _sample_numpyro_model(fn, data, kernel, model_args, model_kwargs, *, num_warmup, num_samples, num_chains, seed,
                          thinning, progress_bar, capacity, checkpoint, log_likelihood, **kernel_options):
    """`sample` of a NumPyro model function: its own checks, then `dpppl.run.partition_gibbs.sample_model`."""
    if data is not None:
        raise ArgumentError("a NumPyro model function takes its data through model_args / model_kwargs, not data=")
    if checkpoint is not None:
        raise ArgumentError("a NumPyro model function runs in NumPyro's MCMC loop, which cannot save a checkpoint")
    if not isinstance(model_args, tuple):
        raise ArgumentError(f"model_args must be a tuple, got {type(model_args).__name__}")
    with finishing() as late:
        idata = sample_model(fn, model_args, model_kwargs, kernel, num_warmup=num_warmup, num_samples=num_samples,
                             num_chains=num_chains, seed=seed, thinning=thinning,
                             progress_bar=_shows_bar(progress_bar), capacity=capacity, log_likelihood=log_likelihood,
                             **kernel_options)
    return _completed(idata, late)


@in_x64
def resume(path, num_samples: int | None = None, *, progress_bar: bool = True,
           checkpoint_every: float = DEFAULT_EVERY):
    """Continue a run saved by `dpppl.sample(..., checkpoint=path)`; return its InferenceData.

    The continued run makes the draws the run would have made had it not been stopped (the
    same keys for the same iterations): its `posterior`, `sample_stats` and
    `posterior_partition` equal those of the uninterrupted run, bit for bit. It goes on
    saving to `path`. See docs/checkpoints.md.

    Parameters
    ----------
    path : str or path-like
        The checkpoint file.
    num_samples : int, optional
        Iterations kept (before thinning), the run's own by default. A larger number extends
        the run: the result is then the run that was asked for `num_samples` from the start.
        A number smaller than the iterations already sampled after warmup raises
        [`dpppl.ArgumentError`][dpppl.ArgumentError].
    progress_bar : bool
        Off when the `CI` environment variable is set.
    checkpoint_every : float, default 60
        Seconds between two checkpoints.

    Returns
    -------
    arviz.InferenceData
        As [`dpppl.sample`][dpppl.sample] returns. A missing, damaged or foreign file, or a
        checkpoint in another format version, raises [`dpppl.ArgumentError`][dpppl.ArgumentError]
        before anything is sampled; a checkpoint written by another dpppl version gives a
        warning (its draws may differ from that version's).
    """
    check_bool("progress_bar", progress_bar)
    own = None
    if distributed.process_count() > 1:  # every process reads the run's file and its own part
        spec, progress, written_by, own = distributed.resumed_run(path)
    else:
        spec, progress, written_by = read_checkpoint(path)
    if num_samples is None:
        num_samples = spec.num_samples
    check_positive_int("num_samples", num_samples, 1)
    sampled = max(0, progress.t - spec.num_warmup)
    if num_samples < sampled:
        raise ArgumentError(f"num_samples ({num_samples}) is smaller than the {sampled} iterations the checkpoint "
                            f"{os.fspath(path)} has already sampled after warmup: a run cannot be shortened")
    _check_thinning(spec.thinning, num_samples)
    if written_by != __version__:
        warnings.warn(f"{os.fspath(path)} was written by dpppl {written_by}, this is dpppl {__version__}: the "
                      "continued run may not make the draws of an uninterrupted run", RuntimeWarning, stacklevel=2)
    spec = dataclasses.replace(spec, num_samples=num_samples)
    target = spec.model.bind(spec.data, None if own is None else own.summaries)
    check_states(target, spec.kernel, spec.options, progress)
    program = None
    if own is not None:  # this process's points back on its devices, in the run's global arrays
        program, progress = distributed.program_of(target, own), distributed.placed(progress, own)
    with _checkpoint_file(path, spec, checkpoint_every, own) as saved, finishing() as late:
        import_conversion_modules()  # while the chains run
        records, attrs, record_dims = continue_partition(
            target, spec.kernel, spec.options, progress, num_warmup=spec.num_warmup, num_samples=num_samples,
            thinning=spec.thinning, progress_bar=_shows_bar(progress_bar), checkpoint=saved, program=program)
        hold()
        pointwise = check_log_likelihood("auto", log_likelihood_refusal(target), num_samples // spec.thinning
                                         * spec.num_chains * (target.num_points if own is None else own.total))
        idata = _inference_data(target, spec, records, attrs, record_dims, pointwise, own)
    return _completed(idata, late)


def _check_thinning(thinning: int, num_samples: int) -> None:
    if thinning > num_samples:
        raise ArgumentError(f"thinning ({thinning}) is larger than num_samples ({num_samples}): "
                            "no draw would be kept")


def _completed(idata, late: list):
    """`idata`, or `Completed(idata)` raised when a Ctrl-C was held back after the last iteration."""
    if late:
        raise Completed(idata)
    return idata


def _shows_bar(progress_bar: bool) -> bool:
    """Whether to show the bar: asked for, not in CI, and on the first process of a multi-process run only."""
    return progress_bar and not os.environ.get("CI") and jax.process_index() == 0


def _inference_data(target, spec: RunSpec, records: dict, attrs: dict, record_dims, log_likelihood: bool,
                    own: distributed.ProcessRows | None = None, pointwise: PointwiseParts | None = None):
    """The run's InferenceData; in a multi-process run (`own`) its `point` coordinate is the indices of
    this process's points in the global data set, and its pointwise log likelihood that of its points
    against every process's clusters (`distributed.pointwise_log_likelihood`). `pointwise`: its pointwise
    log likelihood computed while it ran."""
    chosen = {"kernel_requested": spec.kernel_requested or spec.kernel,
              **({"kernel_reason": spec.kernel_reason} if spec.kernel_reason else {})}
    attrs = dict(dict(init=spec.init, seed=spec.seed, num_warmup=spec.num_warmup, thinning=spec.thinning), **attrs,
                 **chosen)
    return to_inference_data(target, records, attrs, record_dims, log_likelihood,
                             None if own is None else own.points, pointwise,
                             None if own is None else distributed.pointwise_log_likelihood)


@in_x64
def log_joint(model, data, z) -> float:
    """The log p(x, z) a run records as `lp`, of labels `z` under `model`.

    `data` as [`dpppl.sample`][dpppl.sample] takes it: None for the data of a bound model or
    those its model file names.

    Component parameters are integrated out (numerically for a non-conjugate component,
    [`log_marginal_numerical`][dpppl.families.NormalLogNormal.log_marginal_numerical]); the partition prior
    is the
    CRP/Pitman-Yor EPPF at alpha (its Gamma prior mean when alpha is random, without the
    Gamma density). Random hyperparameters of the base measure (`m ~ Normal(0, 10)` in a model
    file) are at their priors' medians, without their densities; a run's `lp` is at each draw's
    values and includes them (docs/hyperpriors.md).
    For a stick-breaking prior labels are explicit: label k >= 0 is stick k + 1 and the
    prior term is the probability of the labelled assignment with the sticks integrated
    out ([`log_prob_labels`][dpppl.priors.StickBreaking.log_prob_labels]). A DDP model's parameters are
    instantiated: its states come from kernels, and it has no log joint of labels alone.
    """
    _, target = bind_data(model, data)
    labels = np.asarray(z)
    if labels.shape != (target.num_points,):
        raise DataError(f"z must have shape ({target.num_points},), got {labels.shape}")
    return float(target.log_joint_of_labels(target.prior.canonical(labels)))


__all__ = ["BACKENDS", "check_positive_int", "check_seed", "log_joint", "resume", "sample"]
