"""A run's records as ArviZ InferenceData (the contract of `docs/inference-data.md`).

Inside `with run_groups_only():` (the command line's `sample` and `resume`), a run is returned as a
`dpppl.diagnostics.arviz_compat.RunGroups` instead: the same groups as xarray Datasets,
written to the same netCDF file, without importing ArviZ.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import functools
import importlib
import threading
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import numpyro

from dpppl.config import x64
from dpppl.core.compiled import in_thread, on_target, persisted, prepare
from dpppl.core.protocols import Target
from dpppl.diagnostics.arviz_compat import PARTITION_GROUPS, to_arviz, to_run_groups, writes_without_arviz
from dpppl.diagnostics.summaries import compact_labels, count_summaries, label_summaries
from dpppl.errors import ArgumentError
from dpppl.families.base import segment_stats
from dpppl.families.generalized_mallows import log_gm
from dpppl.models.ddp import DDPBound
from dpppl.models.mixture import BoundModel
from dpppl.run.runner import kept_records, point_class
from dpppl.version import __version__


_RUN_GROUPS = contextvars.ContextVar("dpppl_run_groups_only", default=False)

CLUSTER_DIMS = frozenset({"slot", "gm_cluster"})
"""Record dimensions that index clusters (label slots; the Mallows kernels' largest clusters): a
kernel record with one goes to `posterior_partition`, out of ArviZ's default summaries."""
SUMMARY_BLOCK = 2**24
"""Labels summarised at a time by `blocked_label_summaries` (its int64 temporaries, about 24 bytes
a label, then stay near 0.4 GB)."""


def blocked_label_summaries(z: np.ndarray) -> dict:
    """`label_summaries` of the labels `z` (chain, draw, point), computed on blocks of draws of
    at most `SUMMARY_BLOCK` labels: the same arrays, without temporaries several times the size
    of `z` (W3's 1,000 draws of 10^6 points: 4 GB of labels, 24 GB of temporaries at once)."""
    step = max(1, SUMMARY_BLOCK // max(1, z.shape[0] * z.shape[2]))
    return kept_records(tuple(label_summaries(z[:, i:i + step]) for i in range(0, z.shape[1], step)))


LOG_LIKELIHOOD_BUDGET = 2**25
"""Pointwise log-likelihood values (chains x draws x points) that `log_likelihood="auto"` computes: 256 MB
in float64. A larger run has no `log_likelihood` group unless asked for (`log_likelihood=True`)."""
POINTWISE_BATCH = 2**23
"""Numbers formed at once (about points x cluster slots per draw, times the draws vectorised together)
while computing the pointwise log likelihood."""


def log_likelihood_refusal(target, backend: str = "partition") -> str | None:
    """Why the pointwise log likelihood of `target`'s runs by `backend` is not computed (None when it
    is): it needs a mixture with collapsed, conjugate components (a BoundModel whose family has a
    posterior predictive) and draws of the labels (not `kernel="nuts"`'s most probable components)."""
    if backend == "nuts":
        return ("kernel='nuts' records each point's most probable component, not a draw of the partition, so "
                "the conditional predictive given the other points' labels is not a posterior quantity")
    if isinstance(target, DDPBound):
        return None  # log N(x_i | atom of z_i at its slice) of the recorded atoms: `ddp_log_likelihood`
    if not isinstance(target, BoundModel):
        return f"{type(target).__name__} runs have no pointwise log likelihood"
    if target.family.data_kind == "ranking":
        return None  # log GM(x_i | sigma_(z_i), theta_(z_i)) of the recorded parameters: `ranking_log_likelihood`
    if not target.family.conjugate:
        return (f"{target.family.name} has no closed-form posterior predictive, so the conditional predictive "
                "log p(x_i | x_-i, z_-i) has no closed form")
    return None


def check_log_likelihood_option(option) -> None:
    """Raise ArgumentError unless `option` is True, False or "auto" (the `log_likelihood` of `dpppl.sample`)."""
    if not (isinstance(option, bool) or (isinstance(option, str) and option == "auto")):
        raise ArgumentError(f"log_likelihood must be True, False or 'auto', got {option!r}")


def check_log_likelihood(option, why: str | None, num_values: int) -> bool:
    """Whether a run keeping `num_values` = chains x kept draws x points records the pointwise log
    likelihood, for `log_likelihood` = True, False or "auto" (the default: when it has a closed form,
    `why` None, and `num_values` <= `LOG_LIKELIHOOD_BUDGET`; otherwise one warning says why not).
    Raises ArgumentError for another value, or for True where there is no closed form (`why` says
    why: `log_likelihood_refusal`)."""
    check_log_likelihood_option(option)
    if option is False:
        return False
    if why is not None:
        if option is True:
            raise ArgumentError(f"log_likelihood=True: {why}; sample with log_likelihood='auto' or False")
        return False
    if option == "auto" and num_values > LOG_LIKELIHOOD_BUDGET:
        warnings.warn(f"the run has no log_likelihood group: chains x draws x points = {num_values:,} values "
                      f"({num_values * 8 / 2**20:,.0f} MB in float64) exceed the default budget of "
                      f"{LOG_LIKELIHOOD_BUDGET:,} ({LOG_LIKELIHOOD_BUDGET * 8 // 2**20} MB); pass "
                      "log_likelihood=True to compute it, or thin the run", RuntimeWarning, stacklevel=3)
        return False
    return True


SLOT_CHUNK = 4
"""Cluster slots whose predictive densities `conditional_log_predictive` forms at a time: a draw of K
clusters costs ceil((K + 1) / SLOT_CHUNK) passes over its points, whatever the program's capacity."""


def conditional_log_predictive(family, prior, x, z, alpha, capacity: int, slot=None, num_labels: int | None = None,
                               num_clusters=None, stats=None):
    """log p(x_i | x_-i, z_-i, alpha, h) of every point i (N,) given one draw's labels `z` (N,) of the
    points `x` (N, D): point i taken out of its cluster's statistics, then seated by the prior's rule,

        log[sum_k w_k(z_-i) p(x_i | x_{k,-i}) + w_new(z_-i) p(x_i)] - log[sum_k w_k(z_-i) + w_new(z_-i)],

    with w the prior's seat weights (`log_seat_weights`: n_k^-i - d and alpha + K^-i d for CRP /
    Pitman-Yor, whose total is N - 1 + alpha; E[pi_k | z_-i] and the mass of every empty stick for a
    stick-breaking prior on explicit labels) and p(x_i | x_c) the family's posterior predictive. The
    own cluster's term is log p(x_c) - log p(x_c minus x_i) (`log_marginal`), the others'
    `log_predictive` of the draw's statistics: O(N K) predictive evaluations. Labels lie in
    [0, capacity); `family` resolved and conjugate. Traceable (docs/analysis.md).

    The seat weights given z_-i are the same for every point of one cluster, so they, and the second
    term, are formed once per cluster (C rows of the prior's labels, not N). `slot` (C,) is each
    cluster's label in the prior's own label space [0, num_labels) where labels matter (a
    stick-breaking prior's explicit labels: the draw's clusters renumbered 0..C-1 for the family's
    statistics, their labels kept for E[pi_k | z_-i], so the cost follows the clusters, not the
    largest label); by default the cluster's index itself. The first term's sum runs over the new
    cluster and the slots in blocks of `SLOT_CHUNK`, up to `num_clusters` (a traced count: the
    clusters occupy slots 0..num_clusters-1, as `slot_labels` numbers them) or, by default, every slot:
    its cost follows the draw's clusters, not the capacity. `stats`: the clusters' statistics of the
    draw when `x` is a part of its points (a run over several processes: every process's sums added,
    `dpppl.run.distributed.pointwise_log_likelihood`); by default those of `x` and `z`."""
    n = x.shape[0]
    stats = segment_stats(family, x, z, capacity) if stats is None else stats
    without = jax.tree.map(lambda s, p: s[z] - p, stats, family.point_stats(x))
    # one call of each family function on stacked rows (the slots and the points without
    # themselves; an empty cluster and the slots): one copy of it in the compiled program, not two
    marginals = family.log_marginal(jax.tree.map(lambda s, w: jnp.concatenate([s, w]), stats, without))
    own = marginals[:capacity][z] - marginals[capacity:]
    if slot is None:
        slot, num_labels = jnp.arange(capacity), capacity
    by_label = jnp.zeros(num_labels, stats.n.dtype).at[slot].add(stats.n)
    without_one = by_label[None, :] - jax.nn.one_hot(slot, num_labels, dtype=stats.n.dtype)  # row k: a point of k out
    weights, new_by_cluster = jax.vmap(lambda c: prior.log_seat_weights(c, alpha))(without_one)
    weights = jnp.where(stats.n[None, :] > 0, jnp.take(weights, slot, axis=1), -jnp.inf)  # (C, C): clusters' columns
    total = jax.nn.logsumexp(jnp.concatenate([weights, new_by_cluster[:, None]], axis=1), axis=1)[z]
    # column 0 the new cluster (the empty row's predictive), column k + 1 slot k; padded to whole blocks
    width = -(-(capacity + 1) // SLOT_CHUNK) * SLOT_CHUNK
    empty = family.empty_stats((width - capacity,))
    rows = jax.tree.map(lambda e, s: jnp.concatenate([e[:1].astype(s.dtype), s, e[1:].astype(s.dtype)]), empty, stats)
    params = family.predictive_params(rows)
    seat = jnp.concatenate([new_by_cluster[:, None], weights, jnp.full((capacity, width - capacity - 1), -jnp.inf,
                                                                        weights.dtype)], axis=1)
    blocks = width // SLOT_CHUNK if num_clusters is None else (num_clusters + SLOT_CHUNK) // SLOT_CHUNK

    def block(b, carry):  # a running logsumexp over the columns b * SLOT_CHUNK ...
        top, acc = carry
        start = b * SLOT_CHUNK
        part = jax.tree.map(lambda p: jax.lax.dynamic_slice_in_dim(p, start, SLOT_CHUNK), params)
        columns = start + jnp.arange(SLOT_CHUNK)
        log_pred = jax.vmap(lambda xi: family.log_predictive(part, xi))(x)  # (N, SLOT_CHUNK)
        log_pred = jnp.where(columns[None, :] == z[:, None] + 1, own[:, None], log_pred)
        w = jax.lax.dynamic_slice_in_dim(seat, start, SLOT_CHUNK, axis=1)[z]
        terms = jnp.where(jnp.isfinite(w), w + log_pred, -jnp.inf)
        new_top = jnp.maximum(top, jnp.max(terms, axis=1))
        shift = jnp.where(jnp.isfinite(new_top), new_top, 0.0)
        return new_top, acc * jnp.exp(top - shift) + jnp.sum(jnp.exp(terms - shift[:, None]), axis=1)

    dtype = own.dtype
    top, acc = jax.lax.fori_loop(0, blocks, block, (jnp.full(n, -jnp.inf, dtype), jnp.zeros(n, dtype)))
    return jnp.log(acc) + jnp.where(jnp.isfinite(top), top, 0.0) - total


def recorded_cluster(z: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """For labels `z` (..., N) and the slots `slot` (..., K) whose parameters a Mallows kernel
    recorded (`gm_cluster_slot`, -1 where none), the index in 0..K-1 of each point's cluster among
    the recorded ones, -1 where its cluster's parameters were not recorded (a draw with more
    clusters than the kernel's `record_clusters`)."""
    lead = z.shape[:-1]
    z, slot = z.reshape(-1, z.shape[-1]), slot.reshape(-1, slot.shape[-1])
    width = int(max(np.max(z, initial=0), np.max(slot, initial=0))) + 1
    inverse = np.full((z.shape[0], width), -1, np.int32)
    draw, k = np.nonzero(slot >= 0)
    inverse[draw, slot[draw, k]] = k
    return np.take_along_axis(inverse, z, axis=1).reshape(lead + (z.shape[-1],))


def _gm_point_densities(points, m, index, pos, theta):
    """log GM of each point `points` (P, n) under its recorded cluster `index` (B, P) of every draw
    of a block (`pos` (B, K, n), `theta` (B, K, n-1)); NaN where `index` is -1."""
    def one(k, p, t):
        ll = jax.vmap(lambda r, pk, tk: log_gm(r, pk, tk, m))(points, p[jnp.maximum(k, 0)], t[jnp.maximum(k, 0)])
        return jnp.where(k >= 0, ll, jnp.nan)

    return jax.vmap(one)(index, pos, theta)


def _ddp_point_densities(points, slices, z, mu, cov):
    """log N of each point `points` (P, D) at its slice under its label's atom, every draw of a
    block (`z` (B, P), `mu` (B, C, T, D), `cov` (B, C, S, D, D))."""
    def one(labels, m, c):
        loc, scale = ddp_atoms_at_points(labels, slices, m, c)
        return jax.scipy.stats.multivariate_normal.logpdf(points, loc, scale)

    return jax.vmap(one)(z, mu, cov)


def _by_blocks(name: str, fn, shared: tuple, per_draw: list) -> np.ndarray:
    """`fn(*shared, *block)` over the draws (leading axis of `per_draw`) in blocks of at most 256
    (a power of two; the last block padded with copies of the first draw), by one persisted (light)
    program per shape class: the caller pads the points to their class (`point_class`), and no
    array is put on the device outside it (a program of its shape)."""
    draws = per_draw[0].shape[0]
    block = max(1, min(256, 1 << (draws - 1).bit_length()))
    rows = -(-draws // block) * block
    per_draw = [np.concatenate([v, np.broadcast_to(v[:1], (rows - draws,) + v.shape[1:])]) for v in per_draw]
    program = persisted((name, block), fn, light=True)  # run a few times a run: LIGHT_OPTIONS
    return np.concatenate([np.asarray(program(*shared, *(v[i:i + block] for v in per_draw)))
                           for i in range(0, rows, block)])[:draws]


def ranking_log_likelihood(family, x, z, sigma, theta, slot) -> np.ndarray:
    """log GM(x_i | sigma_(z_i), theta_(z_i)) (chain, draw, point) of a rankings run: each point's
    density under its own cluster's recorded central permutation `sigma` (..., K, n; item at each
    rank) and dispersions `theta` (..., K, n-1), the clusters found by `recorded_cluster` from the
    labels `z` and the recorded slots `slot`; NaN for a point whose cluster was not recorded. The
    instantiated-parameter likelihood, not a conditional predictive (docs/analysis.md)."""
    lead, n = z.shape[:-1], z.shape[-1]
    size = point_class(n)  # padded rows: the ranking 0..n-1, in no recorded cluster
    x = np.asarray(x)[:n].astype(np.int32)
    points = np.concatenate([x, np.broadcast_to(np.arange(x.shape[1], dtype=np.int32), (size - n, x.shape[1]))])
    index = np.pad(recorded_cluster(z, slot).reshape(-1, n), [(0, 0), (0, size - n)], constant_values=-1)
    pos = np.argsort(sigma, axis=-1).reshape((-1,) + sigma.shape[-2:]).astype(np.int32)
    theta = np.asarray(theta, float).reshape((-1,) + theta.shape[-2:])
    out = _by_blocks("ranking_log_likelihood", _gm_point_densities, (points, np.asarray(family.m, float)),
                     [index, pos, theta])
    return out[:, :n].reshape(lead + (n,))


def ddp_atoms_at_points(z, slices, mu, cov):
    """Each point's atom in one draw of a DDP run: its label's mean at its slice (N, D) and
    covariance (N, D, D), from the recorded `atom_mu` (C, T, D) and `atom_cov` (C, S, D, D)
    (S = T per slice, 1 shared); `slices` (N,) the points' slice indices."""
    return mu[z, slices], cov[z, slices if cov.shape[1] == mu.shape[1] else 0]


def ddp_log_likelihood(x, slices, z, mu, cov) -> np.ndarray:
    """log N(x_i; mu_(z_i, t_i), Sigma_(z_i, s(t_i))) (chain, draw, point) of a DDP run: each point's
    density under its own label's recorded atom at its slice (`ddp_atoms_at_points`), the points
    `x` (N, D) in the data's frame. The instantiated-parameter likelihood, as for rankings
    (docs/analysis.md)."""
    lead, n = z.shape[:-1], z.shape[-1]
    size = point_class(n)  # padded rows: the origin in slice 0, label 0, dropped below
    points = np.pad(np.asarray(x, float), [(0, size - n), (0, 0)])
    where = np.pad(np.asarray(slices, np.int32), (0, size - n))
    labels = np.pad(z.reshape(-1, n).astype(np.int32), [(0, 0), (0, size - n)])
    flat = [np.reshape(v, (-1,) + v.shape[len(lead):]) for v in (mu, cov)]
    out = _by_blocks("ddp_log_likelihood", _ddp_point_densities, (points, where), [labels] + flat)
    return out[:, :n].reshape(lead + (n,))


MIN_SLOTS = 32
"""Fewest cluster slots of the pointwise program: runs of up to 31 clusters share one program."""


def slot_labels(prior, z: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """`(clusters, slot, capacity, num_labels)` on which `conditional_log_predictive` runs, for labels
    `z` (draws, N) of `n` points: each draw's clusters renumbered 0..K-1 (`compact_labels`) and, for
    each, its label in the prior's label space (`slot`, (draws, capacity); the cluster's index for an
    exchangeable prior, the label itself where labels matter). `capacity` is at least `MIN_SLOTS`, a
    power of two above the largest K; `num_labels` is the capacity for an exchangeable prior and, for a
    labelled one, a power of two above the largest label and the slots a sampler starts `n` points
    with (`initial_capacity`), so that runs of one shape class share the program."""
    clusters, counts = compact_labels(z)
    capacity = max(MIN_SLOTS, 1 << counts.shape[-1].bit_length())
    if not prior.labelled:
        return clusters.astype(np.int32), np.broadcast_to(np.arange(capacity, dtype=np.int32), (len(z), capacity)), \
            capacity, capacity
    slot = np.zeros((len(z), capacity), np.int32)
    slot[np.arange(len(z))[:, None], clusters] = z
    top = max(int(np.max(z, initial=0)) + 1, prior.initial_capacity(n))
    return clusters.astype(np.int32), slot, capacity, 1 << (top - 1).bit_length()


def _pointwise_draws(target, z, slot, num_clusters, alpha, hyper, *, capacity, num_labels):
    most = jnp.max(num_clusters)  # one count for the block (not one per draw): a loop the draws share

    def one(labels, cluster_labels, a, h):
        bound = target.at_hyperparameters(h)
        return conditional_log_predictive(bound.family, bound.prior, jnp.asarray(bound.x), labels, a, capacity,
                                          cluster_labels, num_labels, most)

    return jax.vmap(one)(z, slot, alpha, hyper)


def _pointwise_program(target: BoundModel, draws: int, capacity: int, num_labels: int):
    """`(program, point class, block)` of `pointwise_log_likelihood` for `draws` draws of
    `target` on `capacity` slots and `num_labels` labels: the target padded to its `point_class` rows,
    blocks of at most 256 draws and at most `POINTWISE_BATCH` numbers."""
    n = target.num_points
    size = point_class(n)  # points padded to their class, labelled `capacity` (in no cluster): one program
    per_draw = size * (SLOT_CHUNK + target.x.shape[1] ** 2 + 2) + capacity * num_labels
    block = max(1, min(256, 1 << (draws - 1).bit_length(), POINTWISE_BATCH // per_draw))
    fn = on_target("pointwise_log_predictive", target.padded(size) if size > n else target,
                   functools.partial(_pointwise_draws, capacity=capacity, num_labels=num_labels),
                   capacity, num_labels, block, light=True)  # run a few times a run: LIGHT_OPTIONS
    return fn, size, block


def prepare_pointwise(target, draws: int, after: threading.Event | None = None) -> concurrent.futures.Future | None:
    """Start compiling, in a thread of its own, the program `pointwise_log_likelihood` runs for `draws`
    draws (chains x kept draws) of a run of `target` whose draws have fewer than `MIN_SLOTS` clusters
    (and, for a labelled prior, labels below the slots it starts with): the program's shapes are known
    before the chains run, so its compilation overlaps theirs. Returns the thread's future (None for a
    target whose pointwise log likelihood is not a conditional predictive); wait for it before
    `pointwise_log_likelihood` (`settle`). A run whose draws need more slots compiles its own program then.
    `after`: an event the thread waits for before it traces (the runner's first chunk lowered:
    `sample_partition`'s `first_lowered`), so that the two programs' tracing, which holds the
    interpreter, does not share it; their XLA compiles overlap."""
    if isinstance(target, DDPBound) or not isinstance(target, BoundModel) or target.family.data_kind == "ranking":
        return None

    def compile_it():
        if after is not None:
            after.wait()
        n, capacity = target.num_points, MIN_SLOTS
        num_labels = (1 << (target.prior.initial_capacity(n) - 1).bit_length() if target.prior.labelled
                      else capacity)
        fn, size, block = _pointwise_program(target, draws, capacity, num_labels)
        dtype = jax.dtypes.canonicalize_dtype(target.x.dtype)
        labels, slot = (jax.ShapeDtypeStruct((block, width), np.int32) for width in (size, capacity))
        shaped = functools.partial(jax.ShapeDtypeStruct, (block,))
        hyper = {k: shaped(dtype) for k in target.model.hyperpriors}
        prepare(fn, labels, slot, shaped(np.int32), shaped(dtype), hyper)

    return in_thread(compile_it, "dpppl-pointwise")


def settle(future: concurrent.futures.Future | None) -> None:
    """Wait for `prepare_pointwise`'s compilation to end. Its failure is not this run's: the program
    then compiles (and any error shows) where `pointwise_log_likelihood` calls it."""
    if future is not None:
        with contextlib.suppress(Exception):
            future.result()


def pointwise_log_likelihood(target: BoundModel, z: np.ndarray, alpha: np.ndarray, hyper: dict,
                             run_draws: int | None = None) -> np.ndarray:
    """`conditional_log_predictive` of every draw (chain, draw, point) of a run of `target`: labels `z`
    (chain, draw, N), `alpha` (chain, draw) and the random hyperparameters of the base measure
    `hyper` ({name: (chain, draw)}; the family at each draw's values). One compiled program per shape
    class (`on_target`: the data are an argument, padded to `point_class` rows, the cluster slots
    `slot_labels` says), run on blocks of draws (`_pointwise_program`; the last block padded with
    copies of the first draw), so the number of draws is not part of it. The draws run in order of
    their number of clusters, so a block's cost follows its draws' clusters (`SLOT_CHUNK`). `run_draws`: the
    draws (chains x kept) of the whole run when `z` is a part of them (`PointwiseParts`), whose blocks
    are then the whole run's (one program)."""
    lead, n = z.shape[:-1], target.num_points
    labels, slot, capacity, num_labels = slot_labels(target.prior, z.reshape(-1, n), n)
    draws = labels.shape[0]
    fn, size, block = _pointwise_program(target, run_draws or draws, capacity, num_labels)
    clusters = labels.max(axis=1).astype(np.int32) + 1  # each draw's, numbered 0..K-1 by `slot_labels`
    labels = np.pad(labels, [(0, 0), (0, size - n)], constant_values=capacity)
    order = np.argsort(clusters, kind="stable")
    dtype = jax.dtypes.canonicalize_dtype(target.x.dtype)
    rows = -(-draws // block) * block
    inputs = [labels, slot, clusters] + [np.reshape(v, -1).astype(dtype) for v in [alpha, *hyper.values()]]
    inputs = [np.concatenate([v[order], np.broadcast_to(v[order[:1]], (rows - draws,) + v.shape[1:])])
              for v in inputs]
    out = np.empty((rows, size))
    for i in range(0, rows, block):  # NumPy arguments: `jnp.asarray` would compile a program per shape
        part = [v[i:i + block] for v in inputs]
        out[i:i + block] = np.asarray(fn(*part[:4], dict(zip(hyper, part[4:]))))
    out[order] = out[:draws].copy()
    return out[:draws, :n].reshape(lead + (n,))


class PointwiseParts:
    """The pointwise log likelihood (`pointwise_log_likelihood`) of a run's kept draws, computed in a
    thread of its own part by part as the runner keeps them (`add`, the runner's `on_kept`), so that it
    overlaps the chains' next chunks instead of following the run (Old Faithful's default run: 0.4 s of
    2,000 draws). The chunks are gathered into parts of at least `PART_DRAWS` draws (chains x draws, a
    whole block of the program), each run on the whole run's program (`run_draws`: chains x kept draws);
    a draw's values depend on that draw only, so they are those of the draws computed together."""

    PART_DRAWS = 256

    def __init__(self, target: BoundModel, run_draws: int):
        self.target, self.run_draws = target, run_draws
        self.hyper = tuple(target.model.hyperpriors)
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dpppl-pointwise")
        self.parts: list[concurrent.futures.Future] = []
        self.pending: list[dict] = []

    def add(self, records: dict) -> None:
        """Keep a chunk's kept records (chain, draw, ...) (its labels `z`, `alpha` and the random
        hyperparameters of the base measure); start on the chunks kept so far once they hold a part. A
        chunk that kept no draw (thinning) adds nothing."""
        if records["z"].shape[1] == 0:
            return
        self.pending.append({k: records[k] for k in ("z", "alpha", *self.hyper)})
        if sum(r["z"].shape[0] * r["z"].shape[1] for r in self.pending) >= self.PART_DRAWS:
            self._start()

    def _part(self) -> Callable[[], np.ndarray]:
        """The pointwise log likelihood of the chunks kept so far, to compute (they are then done with)."""
        kept = {k: np.concatenate([r[k] for r in self.pending], axis=1) for k in self.pending[0]}
        self.pending = []

        def part():
            with x64():
                return pointwise_log_likelihood(self.target, kept["z"], kept["alpha"],
                                                {k: kept[k] for k in self.hyper}, self.run_draws)
        return part

    def _start(self) -> None:
        self.parts.append(self.pool.submit(self._part()))

    def result(self, draws: int) -> np.ndarray | None:
        """The parts put together (chain, draw, point) when they hold the run's `draws` kept draws per
        chain, else None (a run stopped between keeping a chunk and adding it: the caller computes the
        whole); a part's error is raised here. The chunks kept after the last part are computed here,
        in the caller's thread (the run is over: nothing to overlap)."""
        last = self._part()() if self.pending else None
        self.pool.shutdown(wait=True)
        values = [part.result() for part in self.parts] + ([] if last is None else [last])
        if sum(v.shape[1] for v in values) != draws:
            return None
        return np.concatenate(values, axis=1)


def to_inference_data(target: Target, records: dict, attrs: dict, record_dims: dict | None = None,
                      log_likelihood: bool = False, points: np.ndarray | None = None,
                      pointwise: PointwiseParts | None = None, evaluate: Callable | None = None):
    """`posterior`: the label-invariant summaries of `z` (scalars per draw), `alpha`
    when it has a prior, a copy of `lp` and the kernel's label-invariant continuous records;
    `posterior_partition`: `z`, `cluster_sizes` and the records indexed by cluster
    (`CLUSTER_DIMS`) or integer-valued (what ArviZ should not see by default); `sample_stats`: `lp` and
    each move's statistics; `observed_data`: the target's observed variables; with
    `log_likelihood` (`check_log_likelihood` decides), `log_likelihood`: the pointwise conditional
    predictive (`pointwise_log_likelihood`) under the data's name, dims (chain, draw, point).
    `points`: the `point` coordinate (the points' indices; 0 to N - 1 by default). `pointwise`: the
    pointwise log likelihood computed while the run went on (`PointwiseParts`), used when it holds every
    kept draw. `evaluate`: what computes it otherwise, `pointwise_log_likelihood` by default (a run over
    several processes: `dpppl.run.distributed.pointwise_log_likelihood`). Records holding
    `cluster_counts` (the clusters' sizes at each draw: a run over several processes, whose `z` are
    this process's points only) give the summaries from them (`count_summaries`), not from `z`."""
    records = dict(records)
    z = records.pop("z").astype(np.int32, copy=False)
    records.pop("num_clusters", None)  # the runner's, for its progress bar; recomputed from z below
    counts = records.pop("cluster_counts", None)
    summaries = blocked_label_summaries(z) if counts is None else count_summaries(counts)
    partition = {"z": z, "cluster_sizes": summaries.pop("cluster_sizes")}
    posterior = dict(summaries)
    alpha = records.pop("alpha")
    if target.prior.alpha_is_random:
        posterior["alpha"] = alpha
    posterior["lp"] = records["lp"]  # also in sample_stats, where ArviZ's conventions put it
    record_dims = record_dims or {}
    for k in record_dims:
        value = records.pop(k)
        by_slot = bool(CLUSTER_DIMS & set(record_dims[k])) or np.asarray(value).dtype.kind in "iub"
        (partition if by_slot else posterior)[k] = value
    sample_stats = {"lp": records.pop("lp"), **records}
    model = target.model
    observed = target.observed()
    name = model.data.name
    all_attrs = dict(attrs, model=model.describe(), model_source=model.source or repr(model),
                     dpppl_version=__version__, jax_version=jax.__version__,
                     numpyro_version=numpyro.__version__)
    groups = {"posterior": posterior, PARTITION_GROUPS["posterior"]: partition, "sample_stats": sample_stats,
              "observed_data": observed}
    dims = {"z": ["point"], "cluster_sizes": ["cluster"], name: ["point", "dim"], **record_dims,
            **{other: ["point"] for other in observed if other != name}}
    if log_likelihood and isinstance(target, DDPBound):
        if "atom_mu" in partition:
            groups["log_likelihood"] = {name: ddp_log_likelihood(target.observed_x, target.slices, z,
                                                                  partition["atom_mu"], partition["atom_cov"])}
        else:
            warnings.warn("the run has no log_likelihood group: its kernel recorded no DDP atoms (kernel 'ddp' "
                          "records them unless record_atoms=False)", RuntimeWarning, stacklevel=3)
    elif log_likelihood and target.family.data_kind == "ranking":
        pointwise = ranking_log_likelihood(target.family, target.x, z, partition["sigma"], partition["theta"],
                                           partition["gm_cluster_slot"])
        if np.isnan(pointwise).any():
            warnings.warn(f"the run has no log_likelihood group: a draw has more clusters "
                          f"({int(np.max(posterior['num_clusters']))} at most) than the "
                          f"{partition['sigma'].shape[2]} whose parameters the kernel recorded; sample with "
                          "record_clusters= at least that", RuntimeWarning, stacklevel=3)
        else:
            groups["log_likelihood"] = {name: pointwise}
    elif log_likelihood:  # by point only: ArviZ and `to_run_groups` drop the data's `dim` for it
        values = None if pointwise is None else pointwise.result(z.shape[1])
        if values is None:
            values = (evaluate or pointwise_log_likelihood)(target, z, alpha,
                                                            {k: posterior[k] for k in model.hyperpriors})
        groups["log_likelihood"] = {name: values}
    convert = to_run_groups if _RUN_GROUPS.get() and writes_without_arviz() else to_arviz
    return convert(groups, coords={"point": np.arange(target.num_points) if points is None else points,
                                   "dim": np.arange(target.x.shape[1])},
                   dims=dims, attrs=all_attrs)


CONVERSION_MODULES = ("xarray", "h5netcdf")
"""What `to_inference_data` and the netCDF write of a `RunGroups` import on first use (xarray and its
pandas: about 0.8 s of a new process), imported in a thread while the chains run
(`import_conversion_modules`)."""


def import_conversion_modules() -> threading.Thread | None:
    """Start importing `CONVERSION_MODULES` in a thread of its own inside `run_groups_only` (where ArviZ
    0.x is installed; the command line's runs), so that the import overlaps the run's compiled programs,
    which release the interpreter, instead of following them; None elsewhere (ArviZ is imported
    where it is used, in the caller's thread). An import that fails there fails again, with its
    error, where the module is used."""
    if not (_RUN_GROUPS.get() and writes_without_arviz()):
        return None

    def run():
        for name in CONVERSION_MODULES:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="dpppl-imports", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def run_groups_only():
    """Within it, `to_inference_data` returns a `RunGroups` (where ArviZ 0.x is installed): for a
    caller that only writes and summarises the run."""
    token = _RUN_GROUPS.set(True)
    try:
        yield
    finally:
        _RUN_GROUPS.reset(token)


__all__ = ["CLUSTER_DIMS", "CONVERSION_MODULES", "LOG_LIKELIHOOD_BUDGET", "MIN_SLOTS", "POINTWISE_BATCH",
           "SUMMARY_BLOCK", "PointwiseParts", "blocked_label_summaries", "check_log_likelihood",
           "check_log_likelihood_option", "conditional_log_predictive", "ddp_atoms_at_points", "ddp_log_likelihood",
           "import_conversion_modules", "log_likelihood_refusal", "pointwise_log_likelihood", "ranking_log_likelihood",
           "recorded_cluster", "run_groups_only", "slot_labels", "to_inference_data"]
