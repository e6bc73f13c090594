"""``dpppl.sample``: check inputs, initialise chains, drive a kernel, return InferenceData.

The driver runs chunks of iterations as one jitted ``fori_loop`` vmapped over chains.
After each chunk it (1) grows the cluster capacity on the host and re-runs the chunk
from the same keys when a chain ran out of empty slots (so growth never changes the
draws), (2) updates the progress bar, and (3) keeps the draws, so that a run stopped
with Ctrl-C returns what it has. Iteration t of chain c uses the key
``fold_in(chain_key[c], t)``: the same seed gives the same draws whatever the chunking.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpppl import kernels as _kernels
from dpppl.models.mixture import BoundModel, Model
from dpppl.errors import DataError, KernelError
from dpppl.kernels.base import Kernel
from dpppl.models.seating import sequential_prediction
from dpppl.core.state import PartitionState, canonical_labels, grow, num_clusters
from dpppl.families.base import cluster_log_marginals
from dpppl.models.mixture import log_joint as _state_log_joint, state_from_labels

INIT_METHODS = ("sequential", "single", "prior", "search")
_CHUNK_SECONDS = 0.5          # target wall time of one chunk (progress-bar refresh)
_CHUNK_BYTES = 256 * 2**20    # device memory for one chunk's recorded draws


def _as_model(model) -> Model:
    if isinstance(model, Model):
        return model
    if isinstance(model, BoundModel):
        return model.model
    if isinstance(model, (str, os.PathLike)):
        from dpppl.dsl.parser import load, parse

        text = str(model)
        return parse(text) if "\n" in text else load(text)
    raise TypeError(f"model must be a dpppl Model or a model-file path, got {type(model).__name__}")


def _check_positive_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def sample(model, data, kernel: str = "gibbs", *, num_warmup: int = 500, num_samples: int = 1000,
           num_chains: int = 1, seed: int = 0, init: Any = "sequential", progress_bar: bool = True,
           thinning: int = 1, capacity: int | None = None, truncation: int = 20, **kernel_options):
    """Sample the posterior of a DP mixture model; return ArviZ InferenceData.

    Parameters
    ----------
    model : Model or str
        A model (``dpppl.DPMixture(...)``, ``dpppl.load(path)``) or a model-file path.
    data : array-like
        The data, checked against the model's declaration before anything runs.
    kernel : str, default ``"gibbs"``
        A registered kernel (``dpppl.kernels.available()``), a hybrid joined with ``+``
        (``"gibbs+splitmerge"``), or ``"nuts"`` (NumPyro NUTS on the truncated
        stick-breaking model; labels are each point's most probable component).
    num_warmup, num_samples : int
        Iterations discarded as burn-in (adaptation happens here), and kept.
    num_chains : int
        Independent chains, run vectorised.
    seed : int
        The same seed gives the same draws.
    init : {"sequential", "single", "prior", "search"} or array of labels
        ``"sequential"``: sequential prediction (Liang et al. 2007, sec. 5.1; one cluster
        for a non-conjugate component, which has no closed-form predictive);
        ``"single"``: one cluster; ``"prior"``: a draw from the partition prior;
        ``"search"``: every chain starts from :func:`dpppl.map_search` (inadmissible
        score, beam 100; Daume 2007); or
        labels of shape (N,) or (num_chains, N).
    progress_bar : bool
        Off when the ``CI`` environment variable is set.
    thinning : int
        Keep every ``thinning``-th draw.
    capacity : int, optional
        Initial cluster capacity (grown automatically when full).
    truncation : int
        Number of sticks for ``kernel="nuts"``.
    **kernel_options
        Options of the kernel's moves (see ``dpppl.kernels``).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``z`` (chain, draw, point), the label-invariant summaries
        ``num_clusters``, ``largest_cluster``, ``cluster_sizes`` (sorted, padded) and
        ``entropy`` (:mod:`dpppl.diagnostics.summaries`), and ``alpha`` when resampled;
        ``sample_stats``: ``lp`` (the collapsed log joint) and each move's statistics;
        ``observed_data``: ``x``; attrs: kernel, exactness, model, versions.
    """
    model = _as_model(model)
    for name, value, minimum in (("num_warmup", num_warmup, 0), ("num_samples", num_samples, 1),
                                 ("num_chains", num_chains, 1), ("thinning", thinning, 1)):
        _check_positive_int(name, value, minimum)
    _kernels.check_applies(kernel, model)
    bound = model.bind(data)
    if kernel == "nuts":
        from dpppl.run.nuts import sample_nuts

        if kernel_options:
            raise KernelError(f"kernel 'nuts' takes no options, got {sorted(kernel_options)}")
        return sample_nuts(bound, num_warmup=num_warmup, num_samples=num_samples,
                           num_chains=num_chains, seed=seed, truncation=truncation,
                           progress_bar=progress_bar, thinning=thinning)
    kern = _kernels.build(kernel, bound, **kernel_options)
    labels = _given_labels(init, bound.num_points, num_chains, getattr(bound.prior, "labelled", False))

    x = jnp.asarray(bound.x)
    k_init, k_run = jax.random.split(jax.random.key(seed))
    chain_keys = jax.random.split(k_run, num_chains)
    states = initial_states(bound, init, labels, jax.random.split(k_init, num_chains), capacity)
    if kern.init is not None:  # the kernel's carried values in state.aux
        states = jax.jit(jax.vmap(kern.init, in_axes=(0, None)))(states, x)

    runner = _Runner(bound, kern, x, num_chains)
    show = progress_bar and not os.environ.get("CI")
    records, states, interrupted = runner.run(states, chain_keys, num_warmup, num_samples, thinning, show)
    return _to_inference_data(bound, records, dict(
        kernel=kernel, exact=kern.exact, init=init if isinstance(init, str) else "labels",
        seed=seed, num_warmup=num_warmup, thinning=thinning, interrupted=interrupted,
        final_capacity=int(states.stats.n.shape[-1])), kern.record_dims)


# ---------------------------------------------------------------------------- init ---
def _given_labels(init, n, num_chains, labelled=False):
    if isinstance(init, str):
        if init not in INIT_METHODS:
            raise ValueError(f"init must be one of {INIT_METHODS} or an array of labels, got {init!r}")
        return None
    labels = np.asarray(init)
    if labels.dtype.kind not in "iu" and not (labels.dtype.kind == "f" and np.all(labels == np.round(labels))):
        raise DataError(f"init labels must be integers, got dtype {labels.dtype}")
    if labels.ndim == 1:
        labels = np.broadcast_to(labels, (num_chains, labels.shape[0]))
    if labels.shape != (num_chains, n):
        raise DataError(f"init labels must have shape ({n},) or ({num_chains}, {n}), got {np.shape(init)}")
    if labelled:  # labels are explicit (label k is stick k + 1): kept as given
        if labels.min() < 0:
            raise DataError("init labels of a stick-breaking prior must be non-negative (label k is stick k + 1)")
        return labels.astype(np.int32)
    return np.stack([canonical_labels(row) for row in labels.astype(np.int64)])


def _prior_labels(prior, alpha, n, rng):
    """A partition drawn from the CRP / Pitman-Yor prior, seated sequentially (from a
    labelled prior: drawn by its prediction rule, clusters numbered by first appearance)."""
    if hasattr(prior, "sample_labels"):
        return canonical_labels(prior.sample_labels(n, rng))
    counts = []
    labels = np.empty(n, np.int32)
    for i in range(n):
        w = np.array([c - prior.discount for c in counts] + [alpha + prior.discount * len(counts)])
        k = int(rng.choice(len(w), p=w / w.sum()))
        if k == len(counts):
            counts.append(0)
        counts[k] += 1
        labels[i] = k
    return labels


def _initial_capacity(n, k_max, requested):
    if requested is not None:
        _check_positive_int("capacity", requested, 2)
        return int(min(max(requested, k_max + 1), n + 1))
    return int(min(n + 1, max(16, 2 * k_max + 8)))


def initial_states(bound: BoundModel, init, labels, init_keys, capacity=None) -> PartitionState:
    """Initial states of all chains (batched along axis 0)."""
    if hasattr(bound, "initial_states"):  # models with their own state (the DDP)
        return bound.initial_states(init, labels, init_keys, capacity)
    n, family = bound.num_points, bound.family
    alpha = bound.prior.initial_alpha
    x = jnp.asarray(bound.x)
    if labels is None and init == "sequential" and not family.conjugate:
        init = "single"  # sequential prediction needs a closed-form predictive
    if labels is None and init == "single":
        labels = np.zeros((len(init_keys), n), np.int32)
    elif labels is None and init == "prior":
        labels = np.stack([_prior_labels(bound.prior, alpha, n, np.random.default_rng(
            np.asarray(jax.random.key_data(k)).ravel())) for k in init_keys])
    elif labels is None and init == "search":  # every chain starts from one MAP search (Daume 2007)
        from dpppl.search.beam import map_search

        found = map_search(bound.model, bound.x, heuristic="inadmissible", beam=100).labels
        labels = np.broadcast_to(found, (len(init_keys), n))
    # a prior on explicit labels suggests enough slots that growing (a recompilation) is rare
    hint = getattr(bound.prior, "initial_capacity", None)
    floor = hint(n) if hint is not None and capacity is None else 0
    if labels is not None:
        cap = max(_initial_capacity(n, int(labels.max()) + 1, capacity), int(labels.max()) + 1, floor)
        return jax.vmap(lambda lab: state_from_labels(family, x, lab, cap, alpha))(jnp.asarray(labels))

    # sequential prediction, growing the capacity until no chain overflows
    cap = max(_initial_capacity(n, 8, capacity), floor)
    while True:
        empty = PartitionState(jnp.zeros((len(init_keys), n), jnp.int32),
                               family.empty_stats((len(init_keys), cap)),
                               jnp.full((len(init_keys),), alpha, x.dtype),
                               jnp.zeros((len(init_keys),), bool), {})
        seq = jax.jit(jax.vmap(lambda k, s: sequential_prediction(bound, k, s, x)))
        states = seq(init_keys, empty)
        if not bool(jnp.any(states.overflow)) or cap >= n + 1:
            return states
        cap = min(2 * cap, n + 1)


# -------------------------------------------------------------------------- driver ---
class _Runner:
    """Runs a kernel over batched chains in jitted chunks; see the module docstring."""

    def __init__(self, bound, kern: Kernel, x, num_chains):
        self.bound, self.kern, self.x, self.num_chains = bound, kern, x, num_chains
        self._compiled = {}

    def _record(self, state, info, with_z):
        rec = {"num_clusters": num_clusters(state).astype(jnp.int32),
               "alpha": state.alpha,
               "lp": _state_log_joint(self.bound.family, self.bound.prior, state)
               if self.kern.log_joint is None else self.kern.log_joint(state)}
        rec.update(info)
        if self.kern.record is not None and with_z:
            rec.update(self.kern.record(state))
        if with_z:
            rec["z"] = state.z
        return rec

    def _chunk_fn(self, warmup: bool, length: int, with_z: bool, capacity: int):
        key = (warmup, length, with_z, capacity)
        if key in self._compiled:
            return self._compiled[key]
        step = self.kern.warmup if warmup else self.kern.step

        def per_chain(state, chain_key, start, n_iter, x):
            def one(state, t):
                state, info = step(jax.random.fold_in(chain_key, t), state, x)
                return state, self._record(state, info, with_z)

            shapes = jax.eval_shape(lambda s: one(s, 0)[1], state)
            buf = jax.tree.map(lambda s: jnp.zeros((length,) + s.shape, s.dtype), shapes)

            def body(t, carry):
                state, buf = carry
                state, rec = one(state, start + t)
                return state, jax.tree.map(lambda b, r: b.at[t].set(r), buf, rec)

            return jax.lax.fori_loop(0, n_iter, body, (state, buf))

        fn = jax.jit(jax.vmap(per_chain, in_axes=(0, 0, None, None, None)))
        self._compiled[key] = fn
        return fn

    def run(self, states, chain_keys, num_warmup, num_samples, thinning, show):
        total = num_warmup + num_samples
        n = self.x.shape[0]
        max_len = int(np.clip(_CHUNK_BYTES // max(1, self.num_chains * (4 * n + 64)), 1, 256))
        kept: list[dict] = []
        bar = _progress(total, show, self.kern.name)
        t, per_iter, interrupted = 0, None, False
        limit = _capacity_limit(self.bound)
        try:
            while t < total:
                warmup = t < num_warmup
                phase_end = num_warmup if warmup else total
                length = min(max_len, num_warmup if warmup else num_samples)  # static: one compile per phase
                n_iter = 1 if per_iter is None else int(np.clip(_CHUNK_SECONDS / per_iter, 1, length))
                n_iter = min(n_iter, phase_end - t)
                while True:
                    capacity = int(states.stats.n.shape[-1])
                    compiled = (warmup, length, not warmup, capacity) in self._compiled
                    fn = self._chunk_fn(warmup, length, not warmup, capacity)
                    tic = time.perf_counter()
                    new_states, buf = fn(states, chain_keys, t, n_iter, self.x)
                    jax.block_until_ready(new_states)
                    if compiled:  # time chunks that did not compile, to size the next one
                        per_iter = (time.perf_counter() - tic) / n_iter
                    if not bool(jnp.any(new_states.overflow)):
                        break
                    if capacity >= limit:
                        _check_label_limit(self.bound, limit)
                        break
                    states = grow(states, min(2 * capacity, limit))
                states = new_states
                if not warmup:
                    host = jax.tree.map(lambda b: np.asarray(b[:, :n_iter]), buf)
                    offset = t - num_warmup
                    keep = [j for j in range(n_iter) if (offset + j) % thinning == thinning - 1]
                    kept.append(jax.tree.map(lambda h: h[:, keep], host))
                t += n_iter
                if bar is not None:
                    nc = np.asarray(buf["num_clusters"][:, n_iter - 1])
                    lp = np.asarray(buf["lp"][:, n_iter - 1])
                    bar.set_postfix_str(f"K={_fmt(nc)} lp={_fmt(lp, '.1f')}" + (" (warmup)" if warmup else ""))
                    bar.update(n_iter)
        except KeyboardInterrupt:
            interrupted = True
            if not kept:
                raise
            warnings.warn(f"interrupted after {t} iterations: returning the {sum(k['lp'].shape[1] for k in kept)} "
                          "draws kept so far", RuntimeWarning, stacklevel=3)
        finally:
            if bar is not None:
                bar.close()
        records = {k: _concatenate_padded([c[k] for c in kept]) for k in kept[0]}
        return records, states, interrupted


def _concatenate_padded(chunks):
    """Concatenate chunks of draws (chain, draw, ...) along draws; per-slot arrays of chunks
    run before the capacity grew are padded (NaN, or 0 for integers) to the widest."""
    widest = tuple(max(c.shape[j] for c in chunks) for j in range(2, chunks[0].ndim))
    fill = np.nan if np.issubdtype(chunks[0].dtype, np.floating) else 0
    padded = [np.pad(c, [(0, 0), (0, 0)] + [(0, w - s) for w, s in zip(widest, c.shape[2:])],
                     constant_values=fill) for c in chunks]
    return np.concatenate(padded, axis=1)
def _capacity_limit(bound) -> int:
    """Most cluster slots a chain may need: N + 1 for an exchangeable prior (new clusters
    take the first empty slot); for a prior on explicit labels, whose slot k is label
    k + 1, its ``max_labels(N)`` (labels may lie past N + 1); never more than a bound
    model's own ``max_capacity`` (the DDP's)."""
    n = bound.num_points
    max_labels = getattr(bound.prior, "max_labels", None)
    limit = n + 1 if max_labels is None else max(int(max_labels(n)), 2)
    return min(limit, getattr(bound, "max_capacity", limit))


def _check_label_limit(bound, limit):
    if getattr(bound.prior, "labelled", False):
        raise KernelError(f"a move drew a label past {limit}, the most slots dpppl gives a "
                          f"{bound.prior.describe()} prior; its tail is too heavy to sample on "
                          f"explicit labels: use a finite sequence of sticks (ending with b_L = 0)")


def _fmt(values, spec="d"):
    values = np.atleast_1d(values)
    return "/".join(format(v.item() if spec == "d" else float(v), spec) for v in values[:4]) + (
        "/..." if values.size > 4 else "")


def _progress(total, show, name):
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"dpppl {name}", unit="it", dynamic_ncols=True)


# ----------------------------------------------------------------------- results ---
def _to_inference_data(bound: BoundModel, records: dict, attrs: dict, record_dims=None):
    from dpppl import __version__
    from dpppl.diagnostics.summaries import label_summaries
    from dpppl.diagnostics.arviz_compat import to_arviz
    import numpyro

    z = records.pop("z").astype(np.int32)
    records.pop("num_clusters", None)  # the driver's, for its progress bar; recomputed from z below
    posterior = {"z": z, **label_summaries(z)}
    alpha = records.pop("alpha")
    if bound.prior.alpha_is_random:
        posterior["alpha"] = alpha
    record_dims = record_dims or {}
    posterior.update({k: records.pop(k) for k in record_dims})  # kernel-recorded cluster parameters
    sample_stats = {"lp": records.pop("lp")}
    sample_stats.update(records)
    n, d = bound.x.shape
    model = bound.model
    all_attrs = dict(attrs, model=model.describe(), model_source=model.source or repr(model),
                     dpppl_version=__version__, jax_version=jax.__version__,
                     numpyro_version=numpyro.__version__)
    observed = {model.data.name: bound.x, **getattr(bound, "observed_extra", {})}  # + a DDP's times
    return to_arviz(
        {"posterior": posterior, "sample_stats": sample_stats, "observed_data": observed},
        coords={"point": np.arange(n), "dim": np.arange(d)},
        dims={"z": ["point"], "cluster_sizes": ["cluster"], model.data.name: ["point", "dim"], **record_dims,
              **{name: ["point"] for name in observed if name != model.data.name}},
        attrs=all_attrs)


def log_joint(model, data, z) -> float:
    """The collapsed log p(x, z) of labels ``z`` (any integer labels) under ``model``.

    Component parameters are integrated out (numerically for a non-conjugate component,
    :meth:`dpppl.NormalLogNormal.log_marginal_numerical`); the partition prior is the
    CRP/Pitman-Yor EPPF at alpha (its Gamma prior mean when alpha is random, without the
    Gamma density).
    For a stick-breaking prior labels are explicit: label k >= 0 is stick k + 1 and the
    prior term is the probability of the labelled assignment with the sticks integrated
    out (:meth:`dpppl.StickBreaking.log_prob_labels`).
    """
    bound = _as_model(model).bind(data)
    if hasattr(bound, "log_joint_state"):
        raise KernelError("a DDP model has no collapsed log joint (its prior on the parameters is not "
                          "conjugate); sample it and read 'lp', or see dpppl.models.ddp.log_joint_state")
    labels = np.asarray(z)
    if labels.shape != (bound.num_points,):
        raise DataError(f"z must have shape ({bound.num_points},), got {labels.shape}")
    if getattr(bound.prior, "labelled", False):
        if labels.dtype.kind not in "iu" or labels.min() < 0:
            raise DataError("z must hold non-negative integer labels (label k is stick k + 1)")
        lab = labels.astype(np.int64)
    else:
        lab = canonical_labels(labels)
    state = state_from_labels(bound.family, bound.x, lab, int(lab.max()) + 1, bound.prior.initial_alpha)
    counts = state.stats.n
    lm = jnp.sum(cluster_log_marginals(bound.family, state.stats))
    return float(bound.prior.log_eppf(counts, state.alpha) + lm)
