"""Sub-cluster split sampler (Chang & Fisher 2013): `kernel="subcluster"`.

Weights and parameters of the K occupied clusters are instantiated, and every part of a step
is a vector operation over points or over clusters. One step:

1. **Restricted Gibbs sweep** (sec. 4.1): `(pi_1, ..., pi_K, pi_rest) ~ Dir(N_1, ..., N_K, alpha)`
   (eqs. 6-7), `theta_k ~ p(theta | x_k)` (eq. 8), and every label at once from
   `p(z_i = k) ∝ pi_k f(x_i; theta_k)` over the occupied clusters (eq. 9); it never creates one.
2. **Sub-clusters** (sec. 5.1-5.2): `(pi_kl, pi_kr) ~ Dir(N_kl + alpha/2, N_kr + alpha/2)` (eq. 13),
   `theta_ks ~ p(theta | x_ks)` (eq. 14), `p(zbar_i = s) ∝ pi_{z_i s} f(x_i; theta_{z_i s})` (eq. 15).
3. **Sub-cluster splits** (sec. 5.3-5.4): every cluster whose sub-clusters ran `split_delay`
   iterations proposes the split into them, accepted by eq. (21), conjugate form
   `H = alpha Gamma(N_l) f(x_l) Gamma(N_r) f(x_r) / (Gamma(N_c) f(x_c))`, f the marginal likelihood.
4. **Random split / merge** (sec. 5.5): a Beta(a, a) random split of a uniform cluster or the
   merge of a uniform pair, with its exact Metropolis-Hastings ratio.
5. **Restricted-Gibbs split-merge of anchor pairs** (exact variant, conjugate families; Jain &
   Neal 2004): random pairs of points propose the split of their cluster or the merge of their
   two, from two-part sub-clusters built inside the move by parallel restricted scans, accepted
   with the exact ratio (the final scan's probability as q); the pairs whose clusters no earlier
   pair claimed move at once (`_restricted_split_merge`). Every `auxiliary_every`-th pair takes
   an auxiliary-variable split-merge instead (`_auxiliary_log_q`), whose merges need no scan to
   reproduce the current split.
6. **Singleton births and deaths** (exact variant, conjugate families): `singleton_moves` exact
   Metropolis-Hastings moves that seat a point alone or return a one-point cluster to a cluster
   ([`dpppl.kernels.subcluster.singletons`][dpppl.kernels.subcluster.singletons]).

Non-conjugate families move parameters by a Markov kernel on p(theta | x_k)
([`dpppl.kernels.subcluster.parameter_moves`][dpppl.kernels.subcluster.parameter_moves]) and use the first expression of
eq. (21).
Options: super-clusters (Algorithm 1, `dpppl.kernels.subcluster.superclusters`) and pair
merges. The published sampler is approximate; the exact variant (steps 1, 4, 5 and 6, the labels
of step 1 updated with one anchor point per cluster held and a Metropolis-Hastings correction,
`_anchored`) is exact. By default warmup runs the published sampler, which
finds clusters fast, and the kept draws the exact variant (`variant="exact"`,
`warmup_variant="auto"`), as perm keeps its projections to warmup. Below `collapsed_below` points
(conjugate families) the exact step is a collapsed Gibbs sweep with SAMS split-merge, in warmup too
(`_collapsed_step`). The acceptance ratios of step 4, the seeding of new sub-clusters, the
exactness measurements and the blocked, sharded layout of the passes are in
`docs/kernels/subcluster.md` ("Design notes").
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax.scipy.special import gammaln

from dpppl.core import numerics_random as random
from dpppl.families.base import Family, segment_sums, segment_sums_by_sorting, take, translated_params
from dpppl.families.gaussian import SMALL_DIM, whitened_log_likelihood_pairs, whitened_log_likelihood_rows
from dpppl.core.points import num_real, real_index, real_rows, row_of_real, uniforms_at
from dpppl.core.numerics import computed_once, log_gamma_draw
from dpppl.core.state import is_point_field
from dpppl.errors import KernelError
from dpppl.kernels.base import Kernel, exchangeable_prior_only, info_type, register
from dpppl.kernels.gibbs import build_gibbs_kernel
from dpppl.kernels.splitmerge import build_splitmerge_kernel
from dpppl.kernels.subcluster.parameter_moves import build_parameter_update
from dpppl.kernels.subcluster import singletons
from dpppl.kernels.subcluster.superclusters import has_j_divergence, j_divergence, sample_super_clusters
from dpppl.models.seating import seat_points, sweep_draws

SPLIT_DELAY = 3
SPLIT_MERGE_PAIRS = 32  # anchor pairs of the restricted-Gibbs split-merge moves per iteration
LAUNCH_SCANS = 3  # parallel restricted scans from the launch state before the final one
AUXILIARY_EVERY = 2  # every second anchor pair takes the auxiliary-variable split-merge
AUXILIARY_POINTS = 10.0  # the auxiliary law's components: a cluster's posterior given this many points' worth
WEIGHT_GRID = 64  # the auxiliary side weight w takes the values (g + 1/2) / WEIGHT_GRID
NEAR_CANDIDATES = 16  # an auxiliary pair's j: the nearest to x_i of this many uniform draws
SINGLETON_MOVES = 32  # singleton births and deaths per exact step (`dpppl.kernels.subcluster.singletons`)
ROW_CHUNK = 8  # cluster slots whose likelihoods one step of the label pass forms together
SORTED_BLOCK = 1024  # points per block product when statistics are summed by sorting (D > SMALL_DIM)
COLLAPSED_BELOW = 3_000  # below this many points the exact step is collapsed Gibbs with SAMS split-merge
VARIANTS = ("paper", "exact")


SLOT_KEYS = 4  # keys per slot in `_StepKeys`: its Gamma variates, its cluster's and sub-clusters' parameters
SPLIT_MERGE_KEYS = 2  # the keys `build_splitmerge_kernel`'s step takes at once (its `keys_per_step`)
REST_STREAM = 2**31 - 1  # `_step_keys`: the keys of no slot are streams REST_STREAM - j (slot k's: SLOT_KEYS k + j)
ROW_UNIFORMS = 5  # uniforms per row in `_draw_parameters`, before a slot's direction (`_StepUniforms`)


class _StepKeys(NamedTuple):
    """A step's keys (`_step_keys`): per slot (C, SLOT_KEYS) the keys of its Gamma variates, of its
    cluster's parameters and of its two sub-clusters' (`slots`); and, of no slot, those of the
    rest's Gamma variates (`gamma`), of the non-conjugate parameter moves (`update`), of the
    step's cluster-level uniforms (`uniforms`, `_StepUniforms`), of the points' uniforms
    (`points`), of the super-clusters (`group`), of the pair moves (`pairs`: the anchor pairs or
    the pair merges), of the collapsed step's sweep (`sweep`; in the sub-cluster step, the singleton
    moves') and split-merge moves (`split_merge`: the `SPLIT_MERGE_KEYS` keys the move takes at
    once, `Kernel.keys_per_step`, so it splits none), of the non-conjugate proposals of the random
    split's halves, of its merge and of the sub-cluster splits (`q_half`, `q_merge`, `q_sub`); and
    per scan of the anchor pairs the keys of their parameter draws (`scans`, (scans, 2 pairs); none
    where the step has no such scans)."""

    slots: jax.Array
    gamma: jax.Array
    update: jax.Array
    uniforms: jax.Array
    points: jax.Array
    group: jax.Array
    pairs: jax.Array
    sweep: jax.Array
    split_merge: jax.Array
    q_half: jax.Array
    q_merge: jax.Array
    q_sub: jax.Array
    scans: jax.Array


def _step_keys(rng_key, capacity, scans=(0, 0)):
    """Every key of a step, each `rng_key` with its stream index folded in, all in one call (each
    `jax.random` call is a threefry expansion of hundreds of instructions in the compiled step):
    slot k's keys are streams `SLOT_KEYS` k + j, so a slot's draws do not depend on the capacity;
    field j of no slot is stream `REST_STREAM` - j, then the split-merge move's further keys, then
    the `scans` (a shape: scans, keys per scan) keys of the anchor pairs' scans."""
    rest = len(_StepKeys._fields) - 2
    extra = SPLIT_MERGE_KEYS - 1
    num_scans = scans[0] * scans[1]
    index = jnp.concatenate([jnp.arange(capacity * SLOT_KEYS, dtype=jnp.int32),
                             REST_STREAM - jnp.arange(rest + extra + num_scans, dtype=jnp.int32)])
    keys = random.fold_in(rng_key, index)
    slots, tail = keys[:capacity * SLOT_KEYS], keys[capacity * SLOT_KEYS:]
    own = dict(zip(_StepKeys._fields[1:-1], tail))
    own["split_merge"] = jnp.concatenate([tail[_StepKeys._fields.index("split_merge") - 1][None],
                                          tail[rest:rest + extra]])
    return _StepKeys(slots.reshape(capacity, SLOT_KEYS), **own, scans=tail[rest + extra:].reshape(scans))


def _slot_draws(keys, shapes, rest):
    """Per cluster slot k (the rows of `shapes`, (C, m) Gamma shapes, 0 for none) and for the row
    `rest` (m,) of no slot: log G for G ~ Gamma(shape) (-inf where the shape is 0), all in one
    `log_gamma_draw` loop, slot k's from its own key (`_StepKeys`: the rest's from `keys.gamma`)."""
    m = shapes.shape[1]
    all_shapes = jnp.concatenate([shapes, rest[None].astype(shapes.dtype)])
    drawn = all_shapes > 0
    log_g = jax.vmap(functools.partial(log_gamma_draw, shape=(m,), dtype=all_shapes.dtype))(
        jnp.concatenate([keys.slots[:, 0], keys.gamma[None]]), jnp.where(drawn, all_shapes, 1.0))
    return jnp.where(drawn, log_g, -jnp.inf)


def _stacked(*trees):
    """The pytrees `trees` (of equal structure) stacked leaf by leaf on a new leading axis."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def log_evidence(family, stats, u=None):
    """The per-cluster factor of eq. (21): log f_x(x_c; lambda) = log p(x_c) for a conjugate
    family (the second expression); for a non-conjugate one, with the cluster's
    unconstrained parameters `u`, log f_theta(theta_c) + log f_x(x_c; theta_c) -
    log q(theta_c | x_c) (the first expression, q the family's data-driven proposal)."""
    if u is None:
        return family.log_marginal(stats)
    return family.log_prior(u) + family.log_likelihood_of_stats(u, stats) - family.log_proposal(u, stats)


def log_evidences(family, *parts, u=None):
    """The `log_evidence` of each of `parts` (statistics of equal shapes), stacked on a new
    leading axis: one vectorised evaluation, one compiled copy of the family's marginal."""
    u_parts = None if u is None else jnp.stack(u)
    return jax.vmap(lambda stats, u_part: log_evidence(family, stats, u_part))(_stacked(*parts), u_parts)


def log_split_gain(family, alpha, left, right, whole, u=None, evidences=None, log_gammas=None):
    """log of the Hastings ratio of eq. (21) for splitting the cluster with statistics
    `whole` into `left` and `right` under a DP(alpha) prior,

        log alpha + log Gamma(N_l) + log Gamma(N_r) - log Gamma(N_c) + e_l + e_r - e_c,

    e the `log_evidence` of each part (`log_evidences`, or `evidences` when already computed):
    with a conjugate family (`u` None) this is log p(C', x) / p(C, x), parameters integrated
    out; with a non-conjugate one `u` holds the (proposed left, proposed right, current whole)
    unconstrained parameters. `log_gammas`: the three log Gamma(N) when already computed (each
    `gammaln` call compiles to hundreds of instructions: a caller needing others computes them
    all in one call)."""
    e = log_evidences(family, left, right, whole, u=u) if evidences is None else evidences
    g = gammaln(jnp.stack([left.n, right.n, whole.n])) if log_gammas is None else log_gammas
    return jnp.log(alpha) + g[0] + g[1] - g[2] + e[0] + e[1] - e[2]


def _inverse_cdf_rows(logits, u, fallback, num_rows=None):
    """One index per column of `logits` (K, B) drawn by inverting the CDF at `u` (B,):
    a running sum over the rows, each a contiguous vector over the block's points
    (cumsum along a short axis is slow on CPU). Rows from `num_rows` on (default K, may be
    traced) must hold -inf and are not visited. Rounding past the total gives `fallback`
    (a row with finite logits, per column or for all)."""
    num_rows = logits.shape[0] if num_rows is None else num_rows
    p = jnp.exp(logits - jnp.max(logits, axis=0))
    target = u * jnp.sum(p, axis=0)

    def add_row(k, carry):
        running, index = carry
        running = running + p[k]
        return running, index + (running < target).astype(jnp.int32)

    _, index = jax.lax.fori_loop(0, num_rows, add_row, (jnp.zeros_like(target), jnp.zeros(target.shape, jnp.int32)))
    return jnp.where(index >= num_rows, fallback, index).astype(jnp.int32)


def block_size_for(n, dim, capacity_hint=64, budget=2**18):
    """Points per block so that one block's (K, B) likelihood arrays, (K, D, B) products
    (D > SMALL_DIM) and (B, D, D) statistics stay within `budget` numbers (cache-sized); at
    most the power of two at or above `n`, so that `n` points and the same points padded to
    their shape class (`m 2^k` rows, `dpppl.run.runner.point_class`: no class crosses a power of
    two) take the same blocks and sum their statistics in the same order."""
    per_point = capacity_hint * (dim if dim > SMALL_DIM else 1) + dim * dim
    return int(max(256, min(1 << max(int(n) - 1, 0).bit_length(), budget // per_point)))


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What the pieces of a step share: the family, the builder's options, and the layout of
    the N rows of points in `num_blocks` blocks of `block` points (the last padded with `pad`),
    `blocks_per_shard` per device of `mesh` (None on one device). `num_valid` says which rows are
    real (`dpppl.core.points`): the first `num_valid` (traced, `BoundModel.padded`; N when the points
    are not padded), or in a run over several processes the first `num_valid[s]` of each process's
    segment, each device's rows whole blocks, and each point's uniforms by its index among the real
    points. The others are never counted, never in a sum and keep the label -1. Likelihoods run in
    `ll_dtype` (real data arrive centred: `BoundModel` translates them by their mean)."""

    family: Family
    use_sub: bool
    conjugate: bool
    whitened: bool
    super_clusters: bool
    a_merge: float
    ll_dtype: object
    n: int
    dim: int
    block: int
    num_blocks: int
    blocks_per_shard: int
    pad: int
    mesh: object
    num_valid: object
    num_pairs: int = 0
    launch_scans: int = LAUNCH_SCANS
    auxiliary_every: int = AUXILIARY_EVERY
    num_singletons: int = 0

    def cast_params(self, params):
        """Parameters in the likelihood dtype."""
        return jax.tree.map(lambda p: p.astype(self.ll_dtype) if jnp.issubdtype(p.dtype, jnp.floating) else p, params)

    def as_blocks(self, a):
        """Points (N, ...) -> (num_blocks, block, ...), padded with zeros (masked where used)."""
        return jnp.pad(a, [(0, self.pad)] + [(0, 0)] * (a.ndim - 1)).reshape((self.num_blocks, self.block)
                                                                               + a.shape[1:])

    def prepare_points(self, x):
        return self.as_blocks(x.astype(self.ll_dtype))

    def per_shard(self, fn, in_specs, out_specs):
        """`fn(*args)` over the blocks of points: on one device as it is; on several, once per
        device on its contiguous range of blocks (`jax.shard_map`), with arguments and
        results split along their leading (block) axis where their spec says `P("points")`
        and replicated where it says `P()`."""
        if self.mesh is None:
            return fn
        return jax.shard_map(fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)

    def replicated(self, tree):
        """The state on the devices of the mesh, in and out of each step, so that the jitted step
        sees one input sharding (else it compiles a second time): the labels and sub-labels (`z`,
        `sub_z`) split on the points' axis where it divides among the devices (no all-gather of
        them after each step), everything else replicated."""
        if self.mesh is None:
            return tree
        whole, by_point = NamedSharding(self.mesh, P()), NamedSharding(self.mesh, P("points"))

        def place(where, leaf):
            split = (is_point_field(where) and leaf.ndim == 1
                     and leaf.shape[0] % self.mesh.size == 0)
            return jax.lax.with_sharding_constraint(leaf, by_point if split else whole)

        return jax.tree_util.tree_map_with_path(place, tree)

    def rows_at(self, a, rows):
        """The rows `rows` (indices of points) of the points in blocks `a` (num_blocks, block, ...): on
        one device by indexing; on several, each device reads those among its own blocks and the reads
        are summed across devices (a psum of `len(rows)` values, where indexing the split array would
        gather it whole on every device)."""
        if self.mesh is None:
            return a.reshape((-1,) + a.shape[2:])[rows]
        per_device = self.blocks_per_shard * self.block

        def local(own, rows):
            offset = jax.lax.axis_index("points") * per_device
            got = own.reshape((-1,) + own.shape[2:])[jnp.clip(rows - offset, 0, per_device - 1)]
            here = (rows >= offset) & (rows < offset + per_device)
            return jax.lax.psum(jnp.where(_expand(here, got), got, jnp.zeros((), got.dtype)), "points")

        return jax.shard_map(local, mesh=self.mesh, in_specs=(P("points"), P()), out_specs=P(), check_vma=False)(
            a, rows)

    def across_devices(self, total):
        return jax.lax.psum(total, "points") if self.mesh is not None else total

    def point_uniforms(self, rng_key, per_point=()):
        """Uniforms `per_point` (a shape) for every point, in blocks: one draw with the points
        on its leading axis, so that (partitionable threefry) a point's uniforms depend on its
        index only, not on the blocks, the number of devices or the padding."""
        if jnp.ndim(self.num_valid) == 1:  # points in segments, one per process: by each row's point index
            u = uniforms_at(rng_key, real_index(self.num_valid, self.n), per_point, self.ll_dtype)
        else:
            u = random.uniform(rng_key, (self.num_blocks * self.block,) + tuple(per_point), dtype=self.ll_dtype)
        return u.reshape((self.num_blocks, self.block) + tuple(per_point))

    def real_points(self):
        """The mask of the real points in blocks (False for padded rows and the blocks' padding)."""
        return self.as_blocks(real_rows(self.num_valid, self.n))


class SubclusterSlots(NamedTuple):
    """What the sampler keeps per cluster slot (leading axis C): `sub_stats`, the family
    statistics of the slot's two sub-clusters (C, 2); `x_sum`, the sum of its points; `age`
    (int32), the iterations its sub-clusters have run (0: none yet); `weights`, the weight pi_k
    drawn in the last step; `theta`, the parameters drawn in the last step by the family's
    parameter names (NaN for slots empty at the step's start; empty with
    `record_parameters=False`); and for a non-conjugate family the unconstrained parameters
    `u` of the clusters and `sub_u` (C, 2, ...) of their sub-clusters (None when conjugate)."""

    sub_stats: tuple
    x_sum: jax.Array
    age: jax.Array
    weights: jax.Array
    theta: dict
    u: jax.Array | None = None
    sub_u: jax.Array | None = None


class SubclusterExtras(NamedTuple):
    """What the sampler carries from step to step: every point's sub-cluster label `sub_z`
    (0 left, 1 right) and the per-slot values `slots` (`grow` pads them)."""

    sub_z: jax.Array
    slots: SubclusterSlots


class _StepUniforms(NamedTuple):
    """The uniforms of a step's cluster-level moves, drawn with its parameters (`_draw_parameters`,
    one draw of `ROW_UNIFORMS` + D per row): per slot the uniform of its sub-cluster split
    (`split`) and a standard normal `direction` in R^D (the seeding of its sub-clusters); for the
    random split / merge the uniforms of its type, its two picks and its acceptance (`move`); and
    the uniform of the anchored sweep's acceptance (`anchored`)."""

    split: jax.Array
    direction: jax.Array
    move: jax.Array
    anchored: jax.Array


class _Sweep(NamedTuple):
    """The restricted sweep's draws (steps 1-2): log weights, parameters (clusters, then
    sub-cluster pairs), the random split's proportion `p_right`, non-conjugate unconstrained
    parameters and their acceptance rate (else None), the step's `_StepUniforms`, the
    super-cluster of each slot, the slots occupied before the sweep, and the new labels,
    sub-labels, counts and rejection flag."""

    log_pi: jax.Array
    params: dict
    p_right: jax.Array
    u_rows: jax.Array | None
    param_accept: jax.Array | None
    uniforms: _StepUniforms
    occupied_before: jax.Array
    group: jax.Array
    z: jax.Array
    zbar: jax.Array
    counts: jax.Array
    emptied: jax.Array


class _Clusters(NamedTuple):
    """What the split and merge moves update: labels `z` and sub-labels `zbar` (in blocks
    of points), `rows` = (family statistics, sums of x) per slot, `sub` the same per (slot,
    side), `age` per slot (iterations its sub-clusters have run), and the unconstrained
    parameters `u` of the clusters and `sub_u` of the sub-clusters (None when conjugate)."""

    z: jax.Array
    zbar: jax.Array
    rows: tuple
    sub: tuple
    age: jax.Array
    u: jax.Array | None
    sub_u: jax.Array | None


class _RandomMove(NamedTuple):
    """The random move of sec. 5.5: a split of `c` if `propose_split`, else the merge of
    (`m`, `o`), m before o in slot order; `num_k` occupied slots, `occupied` their mask, and
    `u_accept` the uniform of its acceptance."""

    propose_split: jax.Array
    c: jax.Array
    m: jax.Array
    o: jax.Array
    num_k: jax.Array
    occupied: jax.Array
    u_accept: jax.Array


def _draw_parameters(setup, update_params, keys, state):
    """Weights and parameters of clusters and sub-clusters (eqs. 7, 8, 13, 14), drawn in
    one batch of 3C rows: C clusters, then C (left, right) pairs; and the proportion
    p ~ Beta(a, a) of the random split (sec. 5.5). All Gamma variates come from one
    batched draw, a stream per slot (`_slot_draws`, `keys` the step's `_StepKeys`); the exact
    variant's rows are the C clusters (its sub-clusters' variates are drawn and not used).

    Non-conjugate parameters are instead moved from their current values
    (`slots.u`, `slots.sub_u`) by `update_params`; a fresh cluster's two
    sub-clusters start from two draws of the proposal given the cluster's points.
    Returns (log pi, log pibar, parameters, p, unconstrained rows or None, the
    parameter moves' acceptance rate or None, the step's `_StepUniforms`)."""
    family, use_sub = setup.family, setup.use_sub
    stats, slots = state.stats, state.extras.slots
    capacity = stats.n.shape[0]
    occupied = stats.n > 0
    fresh = slots.age == 0  # no valid sub-cluster statistics yet (new clusters)
    sub = slots.sub_stats
    # Gamma shapes per slot: N_k of Dir(N_1..N_C, alpha), N_kl + alpha/2 and N_kr + alpha/2 of its sub-clusters'
    # Dir (eq. 13); the rest: alpha, and (a, a) of the random split's g1 / (g1 + g2) ~ Beta(a, a)
    shapes = jnp.concatenate([jnp.where(occupied, stats.n, 0.0)[:, None],
                              jnp.where(fresh[:, None], 1.0, sub.n + state.alpha / 2)], axis=1)
    log_g = _slot_draws(keys, shapes, jnp.stack([state.alpha, setup.a_merge, setup.a_merge]))
    log_pi = log_g[:capacity, 0] - jax.scipy.special.logsumexp(log_g[:, 0])
    log_sub = log_g[:capacity, 1:]
    p_right = jax.nn.sigmoid(log_g[capacity, 1] - log_g[capacity, 2])
    # ROW_UNIFORMS + D uniforms per row, the rest's (the random move's and the anchored sweep's) first, then
    # each slot's (its split's, its direction: normals by the inverse CDF), in one draw: with partitionable
    # threefry a row's uniforms depend on its index only, not on the capacity; computed once, not hashed again in
    # each of their readers (`computed_once`)
    u, = computed_once(random.uniform(keys.uniforms, (capacity + 1, ROW_UNIFORMS + setup.dim), stats.n.dtype))
    direction = jax.scipy.special.ndtri(jnp.maximum(u[1:, ROW_UNIFORMS:], jnp.finfo(u.dtype).tiny))
    uniforms = _StepUniforms(u[1:, 0], direction, u[0, :4], u[0, 4])
    log_pibar = jnp.where(fresh[:, None], jnp.log(0.5),
                          log_sub - jax.scipy.special.logsumexp(log_sub, axis=1, keepdims=True))
    # parameters from the posteriors; a fresh cluster's two sub-clusters are two draws
    # from the cluster's own posterior
    sub_source = jax.tree.map(lambda s, c: jnp.where(
        fresh.reshape((-1, 1) + (1,) * (c.ndim - 1)), c[:, None], s), sub, stats)
    three = keys.slots[:, 1:]  # slot k: its cluster's, then its two sub-clusters' parameters
    rows = jax.tree.map(lambda c, s: jnp.concatenate([c, s.reshape((2 * capacity,) + c.shape[1:])]),
                        stats, sub_source) if use_sub else stats
    if setup.conjugate:
        row_keys = jnp.concatenate([three[:, 0], three[:, 1:].reshape(-1)]) if use_sub else three[:, 0]
        return log_pi, log_pibar, jax.vmap(family.posterior_draw)(row_keys, rows), p_right, None, None, uniforms
    u_rows = slots.u
    if use_sub:
        starts = jax.vmap(lambda k, c: family.draw_proposal(k, c))(
            three[:, 1:].reshape(-1), jax.tree.map(lambda c: jnp.repeat(c, 2, axis=0), stats))
        sub_u = jnp.where(fresh[:, None, None], starts.reshape(capacity, 2, -1), slots.sub_u)
        u_rows = jnp.concatenate([u_rows, sub_u.reshape(2 * capacity, -1)])
    u_rows, accept_rate = update_params(keys.update, u_rows, rows)
    return log_pi, log_pibar, family.params_of(u_rows), p_right, u_rows, accept_rate, uniforms


def _active_rows(setup, params, log_pi, group, occupied):
    """The whitened rows (`whitening` of the Gaussian families) of the occupied clusters
    first, in slot order, padded with -inf weights to whole chunks of ROW_CHUNK rows, with
    their log weights and super-clusters; `order` maps a row to its slot, `position_of` a
    slot to its row; and each slot's (left, right) sub-cluster rows (None without them)."""
    capacity = log_pi.shape[0]
    rows = setup.family.whitening(params)
    order = jnp.argsort(~occupied, stable=True)
    num_active = jnp.sum(occupied)
    padded = -(-capacity // ROW_CHUNK) * ROW_CHUNK
    active = jax.tree.map(lambda a: jnp.pad(a[order], [(0, padded - capacity)] + [(0, 0)] * (a.ndim - 1)),
                          jax.tree.map(lambda a: a[:capacity], rows))
    active_log_pi = jnp.pad(log_pi[order], (0, padded - capacity), constant_values=-jnp.inf)
    active_group = jnp.pad(group[order], (0, padded - capacity), constant_values=-1)
    position_of = jnp.argsort(order)
    subs = jax.tree.map(lambda a: a[capacity:].reshape((capacity, 2) + a.shape[1:]), rows) if setup.use_sub else None
    return order, num_active, active, active_log_pi, active_group, position_of, subs


def _active_logits(active, active_log_pi, num_active, xb, dtype):
    """log pi_k + log f(x_b; theta_k) (eq. 9) with the occupied clusters along rows (see
    `_active_rows`), formed ROW_CHUNK rows at a time for the occupied rows only; the
    other rows hold -inf. Costs O(K B D^2), K occupied, not O(C B D^2)."""
    def add_chunk(j, logits):
        start = j * ROW_CHUNK
        w = jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, start, ROW_CHUNK), active)
        chunk = (jax.lax.dynamic_slice_in_dim(active_log_pi, start, ROW_CHUNK)[:, None]
                 + whitened_log_likelihood_rows(w, xb))
        return jax.lax.dynamic_update_slice_in_dim(logits, chunk, start, 0)

    return jax.lax.fori_loop(0, -(-num_active // ROW_CHUNK), add_chunk,
                             jnp.full((active_log_pi.shape[0], xb.shape[0]), -jnp.inf, dtype))


def _sample_labels(setup, u, valid, x_blocks, z_blocks, group, log_pi, log_pibar, params, seed):
    """Labels (eq. 9) and sub-labels (eq. 15) of the points of `x_blocks`, block by
    block, drawn with their uniforms `u` (blocks, block, 2), and the number of real points
    (`valid`) given each label, summed across devices; a point that is not real keeps -1.
    With super-clusters (`group` per slot), a point whose current label is
    `z_blocks` considers only the clusters of that label's group.

    Gaussian families evaluate whitened likelihoods with clusters along rows
    (`whitened_log_likelihood_rows`), and each point's
    two sub-clusters only, gathered by its new label; other families use
    `log_likelihood` against all clusters and sub-clusters.

    In a fresh cluster (`seed = (fresh, mean, direction)`, per slot) the sub-labels
    are instead the sides of the hyperplane through the cluster's mean normal to a
    random direction: a split for the sub-cluster sweeps to refine, where two nearly
    equal posterior draws would give an almost random one.
    """
    family, use_sub, super_clusters, whitened = setup.family, setup.use_sub, setup.super_clusters, setup.whitened
    capacity = log_pi.shape[0]
    params = setup.cast_params(params)
    log_pi = log_pi.astype(setup.ll_dtype)
    log_pibar = log_pibar.astype(setup.ll_dtype)
    fresh, mean, direction = seed
    occupied = jnp.isfinite(log_pi)
    last_slot = capacity - 1 - jnp.argmax(occupied[::-1])
    if whitened:
        order, num_active, active, active_log_pi, active_group, position_of, subs = _active_rows(
            setup, params, log_pi, group, occupied)

    def one_block(args):
        xb, zb, ub = args
        if whitened:
            logits = _active_logits(active, active_log_pi, num_active, xb, setup.ll_dtype)  # occupied first
            if super_clusters:
                logits = jnp.where(active_group[:, None] == group[zb][None], logits, -jnp.inf)
            position = _inverse_cdf_rows(logits, ub[:, 0], position_of[zb] if super_clusters else num_active - 1,
                                         num_rows=num_active)
            z = order[position]
        else:
            ll = family.log_likelihood(params, xb)  # (B, 3C) or (B, C)
            logits = log_pi[:, None] + ll[:, :capacity].T
            if super_clusters:
                logits = jnp.where(group[:, None] == group[zb][None], logits, -jnp.inf)
            z = _inverse_cdf_rows(logits, ub[:, 0], zb if super_clusters else last_slot)
        if not use_sub:
            return z, jnp.zeros_like(z)
        if whitened:
            sub_ll = whitened_log_likelihood_pairs(jax.tree.map(lambda a: a[z], subs), xb)
        else:
            sub_ll = jnp.take_along_axis(ll[:, capacity:].reshape(-1, capacity, 2), z[:, None, None], axis=1)[:, 0]
        sub_logits = log_pibar[z] + sub_ll
        p_right = jax.nn.sigmoid(sub_logits[:, 1] - sub_logits[:, 0])
        side = jnp.sum((xb - mean[z]) * direction[z], axis=1) > 0
        return z, jnp.where(fresh[z], side, ub[:, 1] < p_right).astype(jnp.int32)

    z, zbar = jax.lax.map(one_block, (x_blocks, z_blocks, u))
    z = jnp.where(valid, z, -1)
    counts = jax.ops.segment_sum(jnp.ones(z.size, jnp.int32), z.reshape(-1), num_segments=capacity)
    return z, jnp.where(valid, zbar, 0), setup.across_devices(counts)


def _sum_statistics(setup, capacity, u, valid, x_blocks, z, zbar, c, p_right):
    """One pass over the real points (`valid`) for the rows of every sub-cluster (segment
    2k + zbar) and of the proposed random half of cluster `c` (segments 2C + zbar; a point of
    c joins it when its uniform `u` is below `p_right`, sec. 5.5), summed across devices; rows
    are (family statistics, sums of x) pairs. Returns the rows and the half's mask.

    Above `SMALL_DIM` dimensions the per-point
    statistics (D x D outer products) are not formed: the points are sorted by segment
    and summed as block matrix products (`segment_sums_by_sorting`)."""
    in_half = (z == c) & (u < p_right) & valid
    segments = jnp.where(valid, jnp.where(in_half, 2 * capacity, 2 * z) + zbar, 2 * capacity + 2)
    return _segment_rows(setup, x_blocks, segments, 2 * capacity + 2), in_half


def _segment_rows(setup, x_blocks, segments, num_segments):
    """(family statistics, sums of x) of the points of `x_blocks` by `segments` (labels from
    `num_segments` on are dropped), summed across devices. Above `SMALL_DIM` dimensions the
    per-point D x D outer products are not formed: the points are sorted by segment and
    summed as block matrix products (`segment_sums_by_sorting`)."""
    family, dim = setup.family, setup.dim
    points, labels = x_blocks.reshape(-1, dim), segments.reshape(-1)
    if dim > SMALL_DIM:
        rows = segment_sums_by_sorting(lambda xb, w: (family.weighted_stats(xb, w), w @ xb), points, labels,
                                       num_segments, SORTED_BLOCK)
    else:
        rows = segment_sums(lambda p: (family.point_stats(p), p), points, labels, num_segments, setup.block)
    return setup.across_devices(rows)


def _restricted_sweep(setup, draw_parameters, label_pass, keys, u_points, state, x):
    """Steps 1-2: weights and parameters of clusters and sub-clusters (eqs. 7, 8, 13, 14),
    then every label (eq. 9) and sub-label (eq. 15) at once, a label within its cluster's
    super-cluster (Algorithm 1) if they are on. The restricted sweep has no move back that
    re-creates a cluster it empties; the exact variant keeps the set of occupied clusters
    fixed by rejecting such sweeps (a Gibbs update restricted to that event), so only split /
    merge moves change it. `keys`: the step's `_StepKeys`; `u_points`: per point the label's and
    sub-label's uniforms, then the anchored sweep's."""
    capacity = state.stats.n.shape[0]
    slots = state.extras.slots
    log_pi, log_pibar, params, p_right, u_rows, param_accept, uniforms = draw_parameters(keys, state)
    mean = slots.x_sum / jnp.maximum(state.stats.n, 1.0)[:, None]
    seed = (slots.age == 0, mean.astype(setup.ll_dtype), uniforms.direction.astype(setup.ll_dtype))
    occupied_before = state.stats.n > 0
    group = (sample_super_clusters(keys.group, j_divergence(setup.family, take(params, slice(0, capacity))),
                                   occupied_before) if setup.super_clusters else jnp.arange(capacity))
    z_new, zbar, counts = label_pass(u_points[..., :2], setup.real_points(), setup.prepare_points(x),
                                     setup.as_blocks(state.z), group, log_pi, log_pibar, params, seed)
    if setup.use_sub:
        return _Sweep(log_pi, params, p_right, u_rows, param_accept, uniforms, occupied_before, group, z_new, zbar,
                      counts, jnp.zeros((), bool))
    z, counts, rejected = _anchored(setup, (u_points[..., 2], uniforms.anchored), state, z_new)
    return _Sweep(log_pi, params, p_right, u_rows, param_accept, uniforms, occupied_before, group, z, zbar, counts,
                  rejected)


def _anchored(setup, uniforms, state, z_new):
    """The exact variant's label update (design notes, "The anchored sweep"): in every
    occupied cluster one uniformly chosen point, its anchor, keeps its label, the others take
    their draws `z_new` (a Gibbs update given the anchors, which cannot empty a cluster), and
    the whole is accepted with the Metropolis-Hastings ratio prod_k N_k / N'_k of the anchors'
    selection probabilities (1 / N_k forward, 1 / N'_k back); `uniforms`: the points' (in blocks),
    which choose the anchors, and the acceptance's. Returns the labels, the counts and whether
    the update was rejected."""
    u_points, u_accept = uniforms
    capacity = state.stats.n.shape[0]
    real = setup.real_points().reshape(-1)
    z_old = setup.as_blocks(state.z)
    segment = jnp.where(real, z_old.reshape(-1), capacity)
    u = jnp.where(real, u_points.reshape(-1), -1.0)
    top = jax.ops.segment_max(u, segment, num_segments=capacity + 1)
    index = jnp.arange(u.size)
    first = jax.ops.segment_min(jnp.where(u == top[segment], index, u.size), segment, num_segments=capacity + 1)
    anchor = (index == first[segment]) & real
    z_prop = jnp.where(anchor, z_old.reshape(-1), z_new.reshape(-1))
    counts = jax.ops.segment_sum(real.astype(jnp.int32), jnp.where(real, z_prop, capacity),
                                 num_segments=capacity + 1)[:capacity]
    before = state.stats.n
    log_ratio = jnp.sum(jnp.where(before > 0, jnp.log(jnp.maximum(before, 1.0)) -
                                  jnp.log(jnp.maximum(counts, 1).astype(before.dtype)), 0.0))
    accept = jnp.log(u_accept) < log_ratio
    z = jnp.where(accept, z_prop.reshape(z_old.shape), z_old)
    return z, jnp.where(accept, counts, before.astype(counts.dtype)), ~accept


def _pick_random_move(u, counts):
    """The random move of sec. 5.5: with probability 1/2 a split of a uniformly chosen
    occupied cluster c, else the merge of a uniformly chosen pair, c and another, by the four
    uniforms `u` (`_StepUniforms.move`: its type, its two picks, then its acceptance)."""
    occupied = counts > 0
    num_k = jnp.sum(occupied)
    u_type, first_pick, second_pick, u_accept = u
    propose_split = u_type < 0.5
    rank = jnp.cumsum(occupied) - 1  # rank of each occupied slot in slot order
    c = jnp.argmax(occupied & (rank == jnp.floor(first_pick * num_k).astype(rank.dtype)))
    second = jnp.floor(second_pick * (num_k - 1)).astype(rank.dtype)
    second = second + (second >= rank[c])  # a different occupied cluster
    o_slot = jnp.argmax(occupied & (rank == second))
    # read by every update of the move's rows and labels: computed once (`computed_once`)
    propose_split, c, m, o, num_k = computed_once(propose_split, c, jnp.minimum(c, o_slot), jnp.maximum(c, o_slot),
                                                   num_k)
    return _RandomMove(propose_split, c, m, o, num_k, occupied, u_accept)


def _random_split_merge(setup, alpha, keys, move, clusters, half_right, in_half, overflow):
    """Step 4 (sec. 5.5): the random split of c, whose random half `half_right` (points
    `in_half`) moves to the first free slot, or the merge of (m, o) into m. With K clusters
    before the move, q_split = (1/2)(1/K) 2 B(N_l + a, N_r + a) / B(a, a) and
    q_merge = (1/2) 2 / (K (K - 1)), so

        H_split = p(C') / p(C) * B(a, a) / ((K + 1) B(N_l + a, N_r + a)),
        H_merge = p(C') / p(C) * K B(N_l + a, N_r + a) / B(a, a),

    p(C') / p(C) from `log_split_gain` (non-conjugate: the new clusters' parameters drawn
    from the family's proposal, `keys` = (split's q, merge's q)). A merged cluster's
    sub-clusters are the two clusters it was made of. Returns the clusters, whether the split
    and the merge were accepted, and the overflow flag."""
    family, a_merge, conjugate = setup.family, setup.a_merge, setup.conjugate
    k_q_half, k_q_merge = keys
    z, zbar, rows, sub, age, u_c, u_sub = clusters
    c, m, o, num_k = move.c, move.m, move.o, move.num_k
    slot_index = jnp.arange(age.shape[0])
    # split of c: the half moves to the first free slot
    whole = take(rows, c)
    half_left = jax.tree.map(jnp.subtract, whole, half_right)
    n_left, n_right = half_left[0].n, half_right[0].n
    # merge of (m, o)
    left, right = take(rows, m), take(rows, o)
    merged = jax.tree.map(jnp.add, left, right)
    if conjugate:
        u = None
    else:  # eq. (21), first expression: the halves' and the merged cluster's parameters drawn from q
        u_halves = family.draw_proposal(k_q_half, _stacked(half_left[0], half_right[0]))
        u_merged = family.draw_proposal(k_q_merge, merged[0])
        u = (jnp.stack([u_halves[0], u_c[m]]), jnp.stack([u_halves[1], u_c[o]]), jnp.stack([u_c[c], u_merged]))
    # the split's and the merge's p(C') / p(C) in one evaluation: [split of c, split of m + o into m and o],
    # with one log Gamma of the parts' and wholes' counts and of the counts + a for B(N_l + a, N_r + a) (JAX's
    # `betaln`, a series for large arguments, compiles to thousands of instructions)
    n_l, n_r = jnp.stack([n_left, left[0].n]), jnp.stack([n_right, right[0].n])
    n_c = jnp.stack([whole[0].n, merged[0].n])
    g = gammaln(jnp.stack([n_l, n_r, n_c, n_l + a_merge, n_r + a_merge, n_l + n_r + 2 * a_merge]))
    gain = log_split_gain(family, alpha, _stacked(half_left[0], left[0]), _stacked(half_right[0], right[0]),
                          _stacked(whole[0], merged[0]), u=u, log_gammas=g[:3])
    log_b = g[3] + g[4] - g[5]
    log_b_prior = float(scipy.special.betaln(a_merge, a_merge))  # B(a, a): a constant of the kernel
    log_h_split = gain[0] + log_b_prior - jnp.log(num_k + 1.0) - log_b[0]
    log_h_merge = -gain[1] + jnp.log(num_k * 1.0) + log_b[1] - log_b_prior
    free = ~move.occupied
    new_slot = jnp.argmax(free)
    proper_split = (n_left > 0) & (n_right > 0)
    log_u = jnp.log(move.u_accept)
    do_split = move.propose_split & proper_split & jnp.any(free) & (log_u < log_h_split)
    do_merge = ~move.propose_split & (num_k > 1) & (log_u < log_h_merge)
    overflow = overflow | (move.propose_split & proper_split & ~jnp.any(free))
    do_split, do_merge, new_slot = computed_once(do_split, do_merge, new_slot)

    z = jnp.where(do_split & in_half, new_slot, z)
    rows = jax.tree.map(lambda s, hl, hr: jnp.where(do_split, s.at[c].set(hl).at[new_slot].set(hr), s),
                        rows, half_left, half_right)
    age = jnp.where(do_split & ((slot_index == c) | (slot_index == new_slot)), 0, age)
    zbar = jnp.where(do_merge & (z == m), 0, jnp.where(do_merge & (z == o), 1, zbar))
    z = jnp.where(do_merge & (z == o), m, z)
    rows = jax.tree.map(lambda s, mg: jnp.where(do_merge, s.at[m].set(mg).at[o].set(0), s), rows, merged)
    sub = jax.tree.map(lambda s, l_, r_: jnp.where(do_merge, s.at[m, 0].set(l_).at[m, 1].set(r_), s),
                       sub, left, right)
    age = jnp.where(do_merge & (slot_index == o), 0, jnp.where(do_merge & (slot_index == m), 1, age))
    if not conjugate:
        u_sub = jnp.where(do_merge, u_sub.at[m].set(jnp.stack([u_c[m], u_c[o]])), u_sub)
        u_c = jnp.where(do_split, u_c.at[c].set(u_halves[0]).at[new_slot].set(u_halves[1]),
                        jnp.where(do_merge, u_c.at[m].set(u_merged), u_c))
    return _Clusters(z, zbar, rows, sub, age, u_c, u_sub), do_split, do_merge, overflow


class _PairMoves(NamedTuple):
    """The anchor pairs of one iteration's restricted-Gibbs split-merge moves: the points
    `i` and `j` of each pair, their clusters `ci` and `cj` (a split proposal when equal, else a
    merge), whether the pair moves (`active`: no earlier active pair claimed either cluster),
    and per point (in blocks) the pair whose move covers its cluster (`pair`; the number of
    pairs for none) and its side in the current partition (`side`: 1 in cj of a merge pair); the
    uniform of each pair's acceptance (`u_accept`) and per pair and scan the uniform that draws an
    auxiliary pair's side weight (`u_weight`, pairs x scans)."""

    i: jax.Array
    j: jax.Array
    ci: jax.Array
    cj: jax.Array
    active: jax.Array
    pair: jax.Array
    side: jax.Array
    u_accept: jax.Array
    u_weight: jax.Array


def _claim_pairs(setup, rng_key, z, capacity, num_pairs, num_scans, near, x_ll):
    """`num_pairs` ordered pairs of distinct real points, by a law that depends on the points
    `x_ll` (in blocks) but not on the state: i uniform; j uniform among the other points, or where
    `near` (per pair) the nearest to x_i of NEAR_CANDIDATES such uniform draws (design notes,
    "Auxiliary splits and merges"). In that order a pair is active if neither of its clusters
    was claimed by an earlier active pair, and then claims them (design notes, "Several moves at
    once"). With each pair's uniforms drawn at once: its acceptance's and its `num_scans` scans' side
    weights' (one threefry hash for all)."""
    # per pair: i, the candidates for j, the acceptance, the scans' side weights
    u, = computed_once(random.uniform(rng_key, (num_pairs, 2 + NEAR_CANDIDATES + num_scans)))
    count = jnp.asarray(num_real(setup.num_valid, setup.n), jnp.int32)
    i = jnp.minimum(jnp.floor(u[:, 0] * count).astype(jnp.int32), count - 1)
    candidates = jnp.minimum(jnp.floor(u[:, 1:1 + NEAR_CANDIDATES] * (count - 1)).astype(jnp.int32), count - 2)
    # the points by their index among the real points, then their rows (the same rows unless in segments)
    i, candidates = (row_of_real(setup.num_valid, setup.n, k) for k in (i, candidates + (candidates >= i[:, None])))
    distance = jnp.sum((setup.rows_at(x_ll, candidates) - setup.rows_at(x_ll, i)[:, None]) ** 2, axis=-1)
    j = jnp.where(near, jnp.take_along_axis(candidates, jnp.argmin(distance, axis=1)[:, None], axis=1)[:, 0],
                  candidates[:, 0])
    ci, cj = setup.rows_at(z, i), setup.rows_at(z, j)

    def claim(b, carry):
        claimed, active = carry
        ok = ~claimed[ci[b]] & ~claimed[cj[b]] & (count > 1)
        return claimed.at[ci[b]].set(claimed[ci[b]] | ok).at[cj[b]].set(claimed[cj[b]] | ok), active.at[b].set(ok)

    _, active = jax.lax.fori_loop(0, num_pairs, claim, (jnp.zeros(capacity, bool), jnp.zeros(num_pairs, bool)))
    owner = jnp.full(capacity + 1, num_pairs, jnp.int32)  # row `capacity`: the label -1 of padded points
    pairs = jnp.arange(num_pairs, dtype=jnp.int32)
    owner = owner.at[jnp.where(active, ci, capacity + 1)].set(pairs, mode="drop")
    owner = owner.at[jnp.where(active, cj, capacity + 1)].set(pairs, mode="drop")
    pair = jnp.where(setup.real_points(), owner[z], num_pairs)
    ci_of, cj_of = jnp.append(ci, -2)[pair], jnp.append(cj, -2)[pair]
    side = ((z == cj_of) & (ci_of != cj_of)).astype(jnp.int32)
    return _PairMoves(i, j, ci, cj, active, pair, side, u[:, 1 + NEAR_CANDIDATES], u[:, 2 + NEAR_CANDIDATES:])


def _pair_side_logits(setup, params, log_w, x_ll, pair, num_pairs):
    """log w_bs + log f(x; theta_bs) for each point and the two sides s of its pair b
    (blocks, block, 2); points of no pair get finite dummy values."""
    family = setup.family
    params = setup.cast_params(params)
    log_w = jnp.concatenate([log_w, jnp.zeros((1, 2), log_w.dtype)]).astype(setup.ll_dtype)
    if setup.whitened:
        rows = jax.tree.map(lambda a: jnp.concatenate([a, a[:2]]).reshape((num_pairs + 1, 2) + a.shape[1:]),
                            family.whitening(params))

    def one_block(args):
        xb, pb = args
        if setup.whitened:
            ll = whitened_log_likelihood_pairs(jax.tree.map(lambda a: a[pb], rows), xb)
        else:
            ll = family.log_likelihood(params, xb).reshape(xb.shape[0], num_pairs, 2)
            ll = jnp.take_along_axis(ll, jnp.minimum(pb, num_pairs - 1)[:, None, None], axis=1)[:, 0]
        return log_w[pb] + ll

    return jax.lax.map(one_block, (x_ll, pair))


def _split_merge_log_ratio(gain, log_q, is_split):
    """log of the Metropolis-Hastings ratio of an anchor pair's move: H / q(split) for a
    split, q(current split) / H for a merge, `gain` = log H of splitting (`log_split_gain`)
    and `log_q` the final scan's log probability of the split (restricted-Gibbs pairs) or
    `_auxiliary_log_q` (auxiliary pairs)."""
    return jnp.where(is_split, gain - log_q, log_q - gain)


def _auxiliary_log_q(evidences, beta, log_f_sum, log_weight_norm, log_mixture_sum):
    """The auxiliary pairs' counterpart of q (design notes, "Auxiliary splits and merges"):

        log m(x_A) + log m(x_B) - 2 log m_beta(x_U) + beta sum_k (log f_0 + log f_1)(x_k)
        - log G + log Z(N_A, N_B) - sum_k log(w f_0(x_k) + (1 - w) f_1(x_k)),

    sums over the points k of the union U = A + B, `evidences` = (log m(x_A), log m(x_B),
    log m_beta(x_U)) (m_beta: the marginal of U's statistics times `beta`), `log_f_sum` the sum of
    log f_0 + log f_1, `log_weight_norm` = log Z - log G (Z the sum over the G grid values of
    w^N_A (1 - w)^N_B) and `log_mixture_sum` the last sum. With it the move's ratio is
    `_split_merge_log_ratio`'s, as for the restricted-Gibbs pairs."""
    return (evidences[0] + evidences[1] - 2 * evidences[2] + beta * log_f_sum + log_weight_norm
            - log_mixture_sum)


def _auxiliary_beta(n):
    """The factor on a cluster's statistics of the auxiliary law's posterior, for `n` points:
    AUXILIARY_POINTS / n, at most 1."""
    return jnp.minimum(1.0, AUXILIARY_POINTS / jnp.maximum(n, 1.0))


def _log_weight_grid(n_left, n_right):
    """log w^N_A (1 - w)^N_B at the grid values w of the auxiliary side weight, per pair
    (pairs, WEIGHT_GRID), for the counts `n_left`, `n_right` (pairs,)."""
    grid = (jnp.arange(WEIGHT_GRID) + 0.5) / WEIGHT_GRID
    return n_left[:, None] * jnp.log(grid) + n_right[:, None] * jnp.log1p(-grid)


def _restricted_split_merge(setup, alpha, keys, u_scans, clusters, x, overflow):
    """Jain & Neal's restricted-Gibbs split-merge, several pairs at once and every scan
    parallel over points (design notes, "Exact splits and merges"), and on every
    `auxiliary_every`-th pair the auxiliary-variable split-merge ("Auxiliary splits and
    merges"). For each active anchor pair (i, j) (`_claim_pairs`) with U the union of their
    clusters:

    - restricted-Gibbs pair: a launch state of U split by the perpendicular bisector of x_i
      and x_j, `launch_scans` parallel restricted scans (two parameter sets drawn from their
      posteriors given the two sides, side weights (n_s + 1) / (n + 2), every point's side drawn
      given them; i and j stay on sides 0 and 1), then the final scan's parameters; q is the
      product of the final scan's per-point side probabilities;
    - auxiliary pair: two parameter sets drawn from the prior (i and j share a cluster) or from
      the posteriors of the two current clusters (a merge), side weights 1/2, every point's
      side drawn given them (i and j not held); a split needs i on side 0 and j on side 1; q is
      `_auxiliary_log_q`.

    If i and j share a cluster its split drawn by the final scan is accepted with
    H = p(C') / p(C) / q(split); otherwise their merge, with H = p(C') / p(C) q(current split).
    Every scan of both kinds runs in one loop (one traced copy), with no random-number hash of
    its own: `keys` = (the pairs' key, the scans' parameter-draw keys `_StepKeys.scans`), `u_scans`
    the points' uniforms of each scan (blocks, block, scans), drawn with the step's. Returns the
    clusters, the numbers of splits and merges accepted, and the overflow flag (a split that found
    no free slot is refused and sets it)."""
    family, num_pairs = setup.family, setup.num_pairs
    z, zbar, rows, sub, age, u_c, u_sub = clusters
    capacity = age.shape[0]
    k_pairs, scan_keys = keys
    every = setup.auxiliary_every
    auxiliary = (jnp.arange(num_pairs) % every == every - 1) if every else jnp.zeros(num_pairs, bool)
    x_blocks, x_ll = setup.as_blocks(x), setup.prepare_points(x)
    moves = _claim_pairs(setup, k_pairs, z, capacity, num_pairs, setup.launch_scans + 1, auxiliary, x_ll)
    pair = moves.pair
    in_move = pair < num_pairs
    is_split = moves.ci == moves.cj
    aux_point = jnp.append(auxiliary, False)[pair]
    index = jnp.arange(setup.num_blocks * setup.block).reshape(pair.shape)
    forced = jnp.where(index == jnp.append(moves.i, -1)[pair], 0,
                       jnp.where(index == jnp.append(moves.j, -1)[pair], 1, -1))
    forced = jnp.where(aux_point, -1, forced)
    x_i, x_j = setup.rows_at(x_blocks, moves.i), setup.rows_at(x_blocks, moves.j)
    mid, normal = (jnp.concatenate([a, jnp.zeros((1, setup.dim), a.dtype)])[pair]
                   for a in ((x_i + x_j) / 2, x_j - x_i))
    launch = (jnp.sum((x_blocks - mid) * normal, axis=-1) > 0).astype(jnp.int32)
    launch = jnp.where(forced >= 0, forced, launch)
    rows_pass = setup.per_shard(functools.partial(_segment_rows, setup, num_segments=2 * num_pairs),
                                in_specs=(P("points"), P("points")), out_specs=P())
    aux_split = auxiliary & is_split

    def side_log_probs(t, side):
        """log P(side 0), log P(side 1) per point, from parameters and side weights drawn given
        the sides (an auxiliary pair's: its auxiliary law or its merge proposal), the log of the
        sum of the two sides' unnormalised probabilities, log f_0 + log f_1, and the sides drawn,
        in scan `t`, from its row of the step's keys and uniforms (no hash in the loop)."""
        segments = jnp.where(in_move, 2 * pair + jnp.where(aux_point, moves.side, side), 2 * num_pairs)
        stats = jax.tree.map(lambda a: a.reshape((num_pairs, 2) + a.shape[1:]), rows_pass(x_blocks, segments)[0])
        counts = stats.n
        # an auxiliary split: both components from the cluster's posterior given AUXILIARY_POINTS of
        # its points' worth (its statistics scaled), the weight uniform on the grid; an auxiliary
        # merge: the two clusters' posteriors, the weight from w^N_A (1 - w)^N_B on the grid
        beta = _auxiliary_beta(counts[:, 0])
        stats = jax.tree.map(lambda a: jnp.where(_expand(aux_split, a), (_expand(beta, a[:, 0]) * a[:, 0])[:, None],
                                                 a), stats)
        params = jax.vmap(family.posterior_draw)(scan_keys[t],
                                                 jax.tree.map(lambda a: a.reshape((2 * num_pairs,) + a.shape[2:]),
                                                              stats))
        grid_logits = jnp.where(aux_split[:, None], 0.0, _log_weight_grid(counts[:, 0], counts[:, 1]))
        # the grid value by the inverse CDF at the pair's uniform (no Gumbel variates of its own)
        w = (_inverse_cdf_rows(grid_logits.T, moves.u_weight[:, t], WEIGHT_GRID - 1) + 0.5) / WEIGHT_GRID
        n = counts + 1.0
        log_w = jnp.where(auxiliary[:, None], jnp.stack([jnp.log(w), jnp.log1p(-w)], axis=1),
                          jnp.log(n) - jnp.log(jnp.sum(n, axis=1, keepdims=True)))
        # per device on its own blocks: a loop over the split blocks' axis would gather them whole
        logits = setup.per_shard(functools.partial(_pair_side_logits, setup, num_pairs=num_pairs),
                                 in_specs=(P(), P(), P("points"), P("points")), out_specs=P("points"))(
            params, log_w, x_ll, pair)
        log_total = jax.scipy.special.logsumexp(logits, axis=-1)
        log_p = logits - log_total[..., None]
        log_f = jnp.sum(logits, axis=-1) - jnp.append(jnp.sum(log_w, axis=1), 0.0)[pair].astype(logits.dtype)
        u_side = jax.lax.dynamic_index_in_dim(u_scans, t, axis=-1, keepdims=False)
        drawn = (u_side < jnp.exp(log_p[..., 1])).astype(jnp.int32)
        return log_p, log_total, log_f, jnp.where(forced >= 0, forced, drawn)

    # the launch scans, then the final one (one traced copy of the scan): its log probabilities
    # are those of the sides it drew, `proposed`
    zeros = jnp.zeros(launch.shape, setup.ll_dtype)
    log_p, log_total, log_f, proposed = jax.lax.fori_loop(
        0, setup.launch_scans + 1, lambda t, carry: side_log_probs(t, carry[3]),
        (jnp.zeros(launch.shape + (2,), setup.ll_dtype), zeros, zeros, launch))
    split_point = jnp.append(is_split, False)[pair]
    chosen = jnp.where(split_point, proposed, moves.side)
    log_q_point = jnp.where(in_move & (forced < 0), jnp.where(chosen == 1, log_p[..., 1], log_p[..., 0]), 0.0)
    # per pair: the restricted-Gibbs log q, and the auxiliary pairs' sums of log(w f_0 + (1 - w) f_1)
    # and of log f_0 + log f_1
    per_pair = jax.ops.segment_sum(
        jnp.stack([log_q_point.reshape(-1), log_total.reshape(-1), log_f.reshape(-1)], axis=1).astype(x.dtype),
        pair.reshape(-1), num_segments=num_pairs + 1)[:num_pairs]
    halves = rows_pass(x_blocks, jnp.where(in_move & split_point, 2 * pair + proposed, 2 * num_pairs))
    halves = jax.tree.map(lambda a: a.reshape((num_pairs, 2) + a.shape[1:]), halves)
    split_left, split_right = take(halves, (slice(None), 0)), take(halves, (slice(None), 1))
    first, second = take(rows, moves.ci), take(rows, moves.cj)
    merged = jax.tree.map(jnp.add, first, second)

    def by_kind(if_split, if_merge):
        return jax.tree.map(lambda a, b: jnp.where(_expand(is_split, a), a, b), if_split, if_merge)

    # a split pair splits its cluster into the two halves; a merge pair is the split of the merged
    # cluster into the two current ones, reversed
    left, right, whole = by_kind(split_left, first)[0], by_kind(split_right, second)[0], by_kind(first, merged)[0]
    beta = _auxiliary_beta(whole.n)
    evidences = log_evidences(family, left, right, whole, jax.tree.map(lambda a: _expand(beta, a) * a, whole))
    gain = log_split_gain(family, alpha, left, right, whole, evidences=evidences)
    log_weight_norm = (jax.scipy.special.logsumexp(_log_weight_grid(left.n, right.n), axis=1)
                       - jnp.log(float(WEIGHT_GRID)))
    log_q = jnp.where(auxiliary, _auxiliary_log_q(evidences[jnp.array([0, 1, 3])], beta, per_pair[:, 2],
                                                  log_weight_norm, per_pair[:, 1]), per_pair[:, 0])
    log_h = _split_merge_log_ratio(gain, log_q, is_split)
    # an auxiliary split moves only with i drawn on side 0 and j on side 1
    oriented = ~auxiliary | ~is_split | ((proposed.reshape(-1)[moves.i] == 0) & (proposed.reshape(-1)[moves.j] == 1))
    accept = moves.active & oriented & (jnp.log(moves.u_accept.astype(log_h.dtype)) < log_h)
    splits, merges = accept & is_split, accept & ~is_split
    free = rows[0].n == 0
    free_rank = jnp.where(free, jnp.cumsum(free) - 1, capacity)
    matches = free_rank[None, :] == jnp.where(splits, jnp.cumsum(splits) - 1, -1)[:, None]
    found = jnp.any(matches, axis=1)
    overflow = overflow | jnp.any(splits & ~found)
    splits = splits & found
    accept, splits, merges, target = computed_once(accept, splits, merges, jnp.argmax(matches, axis=1))
    z = jnp.where(jnp.append(splits, False)[pair] & (proposed == 1), jnp.append(target, 0)[pair], z)
    z = jnp.where(jnp.append(merges, False)[pair] & (moves.side == 1), jnp.append(moves.ci, 0)[pair], z)

    def at(cond, slots):
        return jnp.where(cond, slots, capacity)  # dropped where cond is False

    rows = jax.tree.map(lambda s, lo, hi, m: s.at[at(splits, moves.ci)].set(lo, mode="drop")
                        .at[at(splits, target)].set(hi, mode="drop").at[at(merges, moves.ci)].set(m, mode="drop")
                        .at[at(merges, moves.cj)].set(0, mode="drop"), rows, split_left, split_right, merged)
    touched = jnp.zeros(capacity, bool).at[at(accept, moves.ci)].set(True, mode="drop")
    touched = touched.at[at(merges, moves.cj)].set(True, mode="drop").at[at(splits, target)].set(True, mode="drop")
    age = jnp.where(touched, 0, age)
    counts = jnp.sum(splits).astype(jnp.int32), jnp.sum(merges).astype(jnp.int32)
    return _Clusters(z, zbar, rows, sub, age, u_c, u_sub), counts, overflow


def _merge_pairs(family, rng_key, clusters, alpha):
    """Merges of pairs of clusters (sec. 5.5's merges, proposed for a random pairing of
    the occupied clusters): the occupied slots in random order are paired first with
    second, third with fourth, ...; each pair (k, m) merges into k with probability
    min(1, 1 / H_split) (eq. 21 for the split back into k and m), all pairs at once. The
    merged cluster's sub-clusters are its two parts. Non-conjugate parameters are carried
    along, a merged cluster's drawn from the proposal given its points. Returns the clusters
    and the number of merges."""
    z, zbar, rows, sub, age, u_c, u_sub = clusters
    capacity = age.shape[0]
    slot_index = jnp.arange(capacity)
    k_order, k_accept, k_u = random.split(rng_key, 3)
    occupied = rows[0].n > 0
    order = jnp.argsort(jnp.where(occupied, random.uniform(k_order, (capacity,)), 2.0))
    position = jnp.argsort(order)
    partner = order[jnp.minimum(position ^ 1, capacity - 1)]
    keeps = (position % 2 == 0) & occupied & occupied[partner] & (partner != slot_index)
    left, right = rows, take(rows, partner)
    merged = jax.tree.map(jnp.add, left, right)
    if u_c is not None:
        u_merged = family.draw_proposal(k_u, merged[0])
        log_h = -log_split_gain(family, alpha, left[0], right[0], merged[0], u=(u_c, u_c[partner], u_merged))
    else:
        log_h = -log_split_gain(family, alpha, left[0], right[0], merged[0])
    accept = keeps & (jnp.log(random.uniform(k_accept, (capacity,))) < log_h)
    absorbed_by = slot_index.at[jnp.where(accept, partner, capacity)].set(slot_index, mode="drop")
    in_merge = accept[absorbed_by[z]]
    zbar = jnp.where(in_merge, (z != absorbed_by[z]).astype(zbar.dtype), zbar)
    z = absorbed_by[z]
    absorbed = absorbed_by != slot_index
    rows = jax.tree.map(lambda s, mg: jnp.where(_expand(absorbed, s), 0.0, jnp.where(_expand(accept, s), mg, s)),
                        rows, merged)
    sub = jax.tree.map(lambda s, l_, r_: jnp.where(_expand(accept, s), jnp.stack([l_, r_], axis=1), s),
                       sub, left, right)
    age = jnp.where(absorbed, 0, jnp.where(accept, 1, age))
    if u_c is not None:
        u_c, u_sub = (jnp.where(accept[:, None], u_merged, u_c),
                      jnp.where(accept[:, None, None], jnp.stack([u_c, u_c[partner]], axis=1), u_sub))
    return _Clusters(z, zbar, rows, sub, age, u_c, u_sub), jnp.sum(accept).astype(jnp.int32)


def _subcluster_splits(setup, alpha, split_delay, split_u, k_q_sub, clusters, overflow):
    """Step 3 (sec. 5.3-5.4): every cluster whose sub-clusters have run more than
    `split_delay` iterations proposes the split into them, all at once, accepted with
    eq. (21) (`log_split_gain`; non-conjugate: the two parts' parameters drawn from the
    family's proposal) against the slot's uniform `split_u`. The right sub-cluster moves to a
    free slot, the r-th accepted split taking the r-th free slot; a split that finds none is
    refused and sets `overflow`. Returns the clusters, the sub-cluster statistics to keep (zero where age is 0), the
    accepted and eligible masks and the overflow flag."""
    family, capacity = setup.family, clusters.age.shape[0]
    z, zbar, rows, sub, age, u_c, u_sub = clusters
    occupied = rows[0].n > 0
    sub_left, sub_right = take(sub, (slice(None), 0)), take(sub, (slice(None), 1))
    eligible = setup.use_sub & occupied & (age > split_delay) & (sub_left[0].n > 0) & (sub_right[0].n > 0)
    if setup.conjugate:
        log_h = log_split_gain(family, alpha, sub_left[0], sub_right[0], rows[0])
    else:  # eq. (21), first expression: the two new clusters' parameters drawn from q
        u_parts = family.draw_proposal(k_q_sub, sub[0])  # (C, 2, P)
        log_h = log_split_gain(family, alpha, sub_left[0], sub_right[0], rows[0],
                               u=(u_parts[:, 0], u_parts[:, 1], u_c))
    accept = eligible & (jnp.log(split_u) < log_h)
    free = ~occupied
    free_rank = jnp.where(free, jnp.cumsum(free) - 1, capacity)
    matches = free_rank[None, :] == jnp.where(accept, jnp.cumsum(accept) - 1, -1)[:, None]
    target = jnp.argmax(matches, axis=1)
    overflow = overflow | jnp.any(accept & ~jnp.any(matches, axis=1))
    accept, target = computed_once(accept & jnp.any(matches, axis=1), target)
    z = jnp.where(accept[z] & (zbar == 1), target[z], z)
    drop_target = jnp.where(accept, target, capacity)
    rows = jax.tree.map(lambda s, l_, r_: jnp.where(_expand(accept, s), l_, s).at[drop_target].set(
        r_, mode="drop"), rows, sub_left, sub_right)
    age = jnp.where(accept, 0, age).at[drop_target].set(0, mode="drop")
    sub_stats = jax.tree.map(lambda s: jnp.where(_expand(age == 0, s), 0.0, s), sub[0])
    if not setup.conjugate:
        u_c = jnp.where(accept[:, None], u_parts[:, 0], u_c).at[drop_target].set(u_parts[:, 1], mode="drop")
    return _Clusters(z, zbar, rows, sub, age, u_c, u_sub), sub_stats, accept, eligible, overflow


def _check_options(family, variant, warmup_variant, split_delay, merge_concentration, pair_merges, super_clusters,
                   likelihood_dtype, param_update, param_steps, proposal):
    """Raise [`KernelError`][dpppl.KernelError] for options the sampler cannot take."""
    for name, value, allowed in (("variant", variant, VARIANTS), ("warmup_variant", warmup_variant,
                                                                  VARIANTS + ("auto", None))):
        if value not in VARIANTS:
            raise KernelError(f"subcluster: {name} must be one of {allowed}, got {value!r}")
    if not (isinstance(split_delay, int) and split_delay >= 1):
        raise KernelError(f"subcluster: split_delay must be an integer >= 1, got {split_delay!r}")
    if not merge_concentration > 0:
        raise KernelError(f"subcluster: merge_concentration must be > 0, got {merge_concentration!r}")
    if pair_merges and "paper" not in (variant, warmup_variant):
        raise KernelError("subcluster: pair_merges=True is approximate (its reverse is a sub-cluster split), "
                          "so the exact variant refuses it; use warmup_variant='paper' (merges in warmup) "
                          "or variant='paper'")
    if super_clusters and not has_j_divergence(family):
        raise KernelError(f"subcluster: super_clusters=True needs a J-divergence between components, which the "
                          f"{family.name} family lacks")
    if likelihood_dtype not in ("float32", "float64"):
        raise KernelError(f"subcluster: likelihood_dtype must be 'float32' or 'float64', got {likelihood_dtype!r}")
    if family.conjugate and (param_update != "mh" or param_steps is not None or proposal is not None):
        raise KernelError(f"subcluster: param_update, param_steps and proposal apply to non-conjugate components; "
                          f"{family.name}'s parameters are drawn from their posterior")


def _statistics_pass(setup, capacity):
    """`_sum_statistics` over the blocks of points, per device (`_Setup.per_shard`)."""
    return setup.per_shard(functools.partial(_sum_statistics, setup, capacity),
                           in_specs=(P("points"),) * 5 + (P(), P()),
                           out_specs=(P(), P("points")))


def _step(setup, draw_parameters, label_pass, split_delay, pair_merges, recorded_params, rng_key, state, x):
    """One step of the sampler: steps 1-2 (`_restricted_sweep`), the statistics pass
    (`_sum_statistics`), step 4 (`_random_split_merge`), pair merges if on
    (`_merge_pairs`, published variant only), then step 3 (`_subcluster_splits`). Both
    variants read and write the same `SubclusterExtras`, so warmup may run one and the kept
    draws the other. The step's info is of the type `_info_type` gives for the setup."""
    family, conjugate, use_sub = setup.family, setup.conjugate, setup.use_sub
    capacity = state.stats.n.shape[0]
    pair_scans = setup.launch_scans + 1 if setup.num_pairs and conjugate and not use_sub else 0
    keys = _step_keys(rng_key, capacity, (pair_scans, 2 * setup.num_pairs if pair_scans else 0))
    # the label, sub-label and anchor, the random half, then each anchor-pair scan's side
    u_points = setup.point_uniforms(keys.points, (4 + pair_scans,))
    slots = state.extras.slots
    # 1-2. restricted Gibbs sweep over clusters and sub-clusters, all points at once
    sweep = _restricted_sweep(setup, draw_parameters, label_pass, keys, u_points, state, x)
    u_c = u_sub = None
    if not conjugate:  # the clusters' and sub-clusters' unconstrained parameters
        u_c = sweep.u_rows[:capacity]
        u_sub = sweep.u_rows[capacity:].reshape(capacity, 2, -1) if use_sub else slots.sub_u
    # 4. random split / merge (sec. 5.5): chosen now, so that the statistics pass below
    # also sums the proposed random half (which still belongs to c)
    move = _pick_random_move(sweep.uniforms.move, sweep.counts)
    real = setup.real_points()
    seg, in_half = _statistics_pass(setup, capacity)(u_points[..., 3], real, setup.as_blocks(x),
                                                     sweep.z, sweep.zbar, move.c, sweep.p_right)
    sub = jax.tree.map(lambda s: s.reshape((capacity + 1, 2) + s.shape[1:]), seg)
    half_by_side = take(sub, capacity)
    sub = jax.tree.map(lambda s, h: s[:capacity].at[move.c].add(h), sub, half_by_side)
    half_right = jax.tree.map(lambda h: h[0] + h[1], half_by_side)
    rows = jax.tree.map(lambda s: s[:, 0] + s[:, 1], sub)
    age = jnp.where(move.occupied, slots.age + 1, 0)
    clusters = _Clusters(sweep.z, sweep.zbar, rows, sub, age, u_c, u_sub)
    clusters, do_split, do_merge, overflow = _random_split_merge(
        setup, state.alpha, (keys.q_half, keys.q_merge), move, clusters, half_right, in_half, state.overflow)
    restricted = jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)
    if pair_scans:  # exact splits and merges of anchor pairs
        clusters, restricted, overflow = _restricted_split_merge(
            setup, state.alpha, (keys.pairs, keys.scans), u_points[..., 4:], clusters, x, overflow)
    singles = jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)
    if setup.num_singletons and conjugate and not use_sub:  # singleton births and deaths (`singletons`)
        clusters, singles, overflow = singletons.singleton_moves(setup, state.alpha, keys.sweep, clusters, x,
                                                                 overflow, setup.num_singletons)
    if pair_merges and use_sub:
        clusters, num_pair_merges = _merge_pairs(family, keys.pairs, clusters, state.alpha)
    elif pair_merges:  # the exact step of a kernel that merges pairs in its published warmup
        num_pair_merges = jnp.zeros((), jnp.int32)
    # 3. sub-cluster splits of every eligible cluster (eq. 21), all at once
    clusters, sub_stats, accept, eligible, overflow = _subcluster_splits(
        setup, state.alpha, split_delay, sweep.uniforms.split, keys.q_sub, clusters, overflow)

    drawn = jnp.isfinite(sweep.log_pi)  # slots occupied at the start of the step
    params = sweep.params
    recorded = {name: jnp.where(_expand(drawn, params[name][:capacity]), params[name][:capacity], jnp.nan)
                for name in recorded_params}
    group, occupied_before = sweep.group, sweep.occupied_before
    statistics = {"num_splits": jnp.sum(accept).astype(jnp.int32), "sweep_rejected": sweep.emptied,
                  "random_split_accept": do_split, "random_merge_accept": do_merge,
                  "restricted_splits": restricted[0], "restricted_merges": restricted[1],
                  "singleton_births": singles[0], "singleton_deaths": singles[1],
                  "split_accept_rate": jnp.sum(accept) / jnp.maximum(jnp.sum(eligible), 1),
                  "num_pair_merges": num_pair_merges if pair_merges else None,
                  "num_super_clusters": jnp.sum(occupied_before & (group == jnp.arange(capacity))).astype(jnp.int32)
                  if setup.super_clusters else None,
                  "param_accept_rate": None if conjugate else sweep.param_accept}
    info_of = _info_type(pair_merges, setup.super_clusters, conjugate)
    info = info_of(**{name: statistics[name] for name in info_of._fields})
    new_slots = SubclusterSlots(sub_stats=sub_stats, x_sum=clusters.rows[1], age=clusters.age.astype(jnp.int32),
                                weights=jnp.exp(sweep.log_pi), theta=recorded, u=clusters.u, sub_u=clusters.sub_u)
    # the moves relabel points by slot lookups, which would give a padded point's -1 a slot
    z, zbar = jnp.where(real, clusters.z, -1), jnp.where(real, clusters.zbar, 0)
    new_state = state._replace(z=_unblock(z, setup.n), stats=clusters.rows[0], overflow=overflow,
                               extras=SubclusterExtras(_unblock(zbar, setup.n), new_slots))
    return setup.replicated(new_state), info


def _init(setup, one_row, recorded_params, state, x):
    """The sampler's `SubclusterExtras`: no sub-clusters yet (age 0), each cluster's sum of x,
    and for a non-conjugate family every cluster's parameters at the centre of the proposal."""
    family = setup.family
    capacity = state.stats.n.shape[0]
    x_sum = jax.ops.segment_sum(x, state.z, num_segments=capacity)
    drawn = {name: jnp.full((capacity,) + one_row[name].shape, jnp.nan, one_row[name].dtype)
             for name in recorded_params}
    u = None if setup.conjugate else family.proposal(state.stats)[0]  # the centre of the proposal
    slots = SubclusterSlots(sub_stats=family.empty_stats((capacity, 2)), x_sum=x_sum,
                            age=jnp.zeros(capacity, jnp.int32), weights=jnp.zeros(capacity, x.dtype), theta=drawn,
                            u=u, sub_u=None if u is None else jnp.stack([u, u], axis=1))
    return setup.replicated(state._replace(extras=SubclusterExtras(jnp.zeros_like(state.z), slots)))


def _with_subset_sweep(setup, prior, size, exact_step, rng_key, state, x):
    """`exact_step` after a collapsed Gibbs sweep over `size` points drawn uniformly without
    replacement, independently of the state (docs/kernels/subcluster.md, "Subset sweeps"): each
    visit is the point's full conditional given every other label (Neal 2000, algorithm 3), so the
    sweep leaves p(z | x) invariant and can open and empty clusters one point at a time. The draw
    is one O(N) top-k of uniforms; the sequential part costs O(size K D^2)."""
    k_pick, k_order, k_step = random.split(rng_key, 3)
    n = x.shape[0]
    keys = jnp.where(real_rows(setup.num_valid, n), random.uniform(k_pick, (n,), x.dtype), -1.0)
    _, chosen = jax.lax.top_k(keys, size)  # real points first: padded ones have key -1
    shuffle, uniforms = sweep_draws(k_order, x[chosen])
    moved = seat_points(setup.family, prior, x[chosen], shuffle, uniforms, state._replace(z=state.z[chosen]),
                        remove_first=True, num_valid=jnp.minimum(size, num_real(setup.num_valid, n)))
    state = state._replace(z=state.z.at[chosen].set(moved.z), stats=moved.stats, overflow=moved.overflow)
    return exact_step(k_step, state, x)


def _collapsed_step(setup, moves, recorded_params, info_of, rng_key, state, x):
    """The exact step below `collapsed_below` points (docs/kernels/subcluster.md, "Small data"):
    one collapsed Gibbs sweep (Neal 2000, algorithm 3) then `gibbs+splitmerge`'s SAMS
    split-merge proposals (Dahl 2003), each leaving p(z | x) invariant, on the state the
    sub-cluster steps share. After them the weights `Dir(N_1, ..., N_K, alpha)` and each
    cluster's parameters are drawn from their conditionals given the new labels, for the
    record; no sub-clusters are carried (age 0: a later published step seeds them afresh).
    Its info is the sampler's, with `restricted_splits` and `restricted_merges` counting the
    SAMS splits and merges accepted."""
    sweep, split_merge = moves
    capacity = state.stats.n.shape[0]
    keys = _step_keys(rng_key, capacity)
    state, _ = sweep(keys.sweep, state, x)
    state, moved = split_merge(keys.split_merge, state, x)
    occupied = state.stats.n > 0
    log_pi, _, params = _draw_parameters(setup, None, keys, state)[:3]  # `setup` without sub-clusters: C rows
    recorded = {name: jnp.where(_expand(occupied, params[name]), params[name], jnp.nan) for name in recorded_params}
    real = state.z >= 0
    x_sum = jax.ops.segment_sum(jnp.where(real[:, None], x, 0.0), jnp.where(real, state.z, capacity),
                                num_segments=capacity + 1)[:capacity]
    slots = state.extras.slots._replace(x_sum=x_sum, age=jnp.zeros(capacity, jnp.int32), weights=jnp.exp(log_pi),
                                        theta=recorded)
    zero, no = jnp.zeros((), jnp.int32), jnp.zeros((), bool)
    statistics = {"num_splits": zero, "sweep_rejected": no, "random_split_accept": no, "random_merge_accept": no,
                  "restricted_splits": moved.split_accepted, "restricted_merges": moved.merge_accepted,
                  "singleton_births": zero, "singleton_deaths": zero,
                  "split_accept_rate": jnp.zeros((), x.dtype), "num_pair_merges": zero,
                  "num_super_clusters": jnp.ones((), jnp.int32)}  # every cluster open to every point
    info = info_of(**{name: statistics[name] for name in info_of._fields})
    return state._replace(extras=SubclusterExtras(jnp.zeros_like(state.z), slots)), info


_STATISTICS = ("num_splits", "sweep_rejected", "random_split_accept", "random_merge_accept", "restricted_splits",
               "restricted_merges", "singleton_births", "singleton_deaths", "split_accept_rate")


def _info_type(pair_merges: bool, super_clusters: bool, conjugate: bool) -> type:
    """The NamedTuple of a step's statistics (`dpppl.kernels.base.info_type`): `num_splits`
    (int32, sub-cluster splits accepted), `sweep_rejected` (the exact variant's anchored label
    update was rejected), `random_split_accept` and `random_merge_accept` (the random move
    of sec. 5.5 was a split / merge and was accepted), `restricted_splits` and
    `restricted_merges` (int32, splits and merges of the exact variant's restricted-Gibbs
    split-merge moves accepted), `singleton_births` and `singleton_deaths` (int32, the exact
    variant's singleton moves accepted), `split_accept_rate` (sub-cluster splits accepted over the
    clusters eligible), then `num_pair_merges` with `pair_merges`,
    `num_super_clusters` with `super_clusters` and `param_accept_rate` (the parameter moves'
    acceptance rate) for a non-conjugate family."""
    return info_type("SubclusterInfo", _STATISTICS + (("num_pair_merges",) if pair_merges else ())
                     + (("num_super_clusters",) if super_clusters else ())
                     + (() if conjugate else ("param_accept_rate",)))


def build_subcluster_kernel(bound_model, *, variant: str = "exact", warmup_variant: Optional[str] = "auto",
                            split_delay: int = SPLIT_DELAY, split_merge_pairs: int = SPLIT_MERGE_PAIRS,
                            launch_scans: int = LAUNCH_SCANS, auxiliary_every: int = AUXILIARY_EVERY,
                            collapsed_below: int = COLLAPSED_BELOW, subset_sweep: int = 0,
                            singleton_moves: int = SINGLETON_MOVES,
                            merge_concentration: float = 1.0,
                            likelihood_dtype: str = "float32", block_size: int | None = None,
                            record_parameters: bool = True,
                            devices=None, super_clusters: bool = False, pair_merges: bool = False,
                            param_update: str = "mh", param_steps: int | None = None, proposal=None,
                            nuts_step_size: float = 0.7) -> Kernel:
    """The sub-cluster split sampler; see the module docstring.

    Parameters
    ----------
    variant : {"exact", "paper"}, default "exact"
        The step of the kept draws. `"exact"`: no carried sub-clusters; the anchored
        restricted sweep, random splits and merges, and restricted-Gibbs splits and merges
        of anchor pairs (`split_merge_pairs`); leaves p(z | x) invariant. `"paper"` (approximate, with a
        warning): Chang & Fisher's sampler as published, with sub-cluster splits; on a
        small data set its posterior differs from the exact one (galaxies: mean K 4.9
        against 12.6, docs/kernels/subcluster.md).
    warmup_variant : {"paper", "exact", "auto"} or None, default "auto"
        The step during warmup (None: as `variant`). `"auto"` runs the published
        sampler in burn-in, where its sub-cluster splits find clusters fast, and the
        exact step after it, as perm keeps its projections to warmup; below
        `collapsed_below` points, where the exact step is collapsed Gibbs with split-merge
        (which finds the clusters of so few points itself), it runs that step in warmup
        too, unless `pair_merges` (a move of the published warmup) is on.
    split_delay : int, default 3
        Iterations a cluster's sub-clusters run before it may split (sec. 5.4).
    split_merge_pairs : int, default 32
        Anchor pairs of points per iteration of the exact variant's restricted-Gibbs
        split-merge moves (Jain & Neal 2004, scans parallel over points; conjugate families):
        a pair in one cluster proposes its split, a pair in two their merge, and the pairs
        whose clusters no earlier pair claimed move at once. 0 turns the moves off.
    launch_scans : int, default 3
        Parallel restricted scans from the launch state before the final scan of those moves.
    auxiliary_every : int, default 2
        Every `auxiliary_every`-th anchor pair (1: all, 0: none) takes the auxiliary-variable
        split-merge instead (docs/kernels/subcluster.md, "Auxiliary splits and merges"): a split
        along sides drawn from two prior components, a merge accepted through the two clusters'
        posterior components, whose ratio does not need a scan to reproduce the current split
        (restricted-Gibbs merges of large clusters are almost never accepted).
    collapsed_below : int, default 3000
        Below this many points (conjugate families; counted with the padding to the points'
        shape class, `dpppl.run.runner.point_class`: 82 points are 96 rows, from 2,561 points
        3,072) the exact step is one collapsed Gibbs
        sweep and `gibbs+splitmerge`'s SAMS split-merge proposals instead of steps 1, 4 and 5
        (docs/kernels/subcluster.md, "Small data"): on galaxies they mix K many times faster
        per second, and a sweep over so few points is cheap. 0 keeps the sub-cluster moves
        at every size. `attrs["kernel_note"]` says which step the kept draws ran.
    subset_sweep : int, default 0
        Points per iteration of a collapsed Gibbs sweep over a uniformly drawn subset of the
        points, run before the exact step's sub-cluster moves (conjugate families; 0: none;
        docs/kernels/subcluster.md, "Subset sweeps"): an exact move that empties and opens
        small clusters one point at a time, which the sub-cluster moves do not.
    singleton_moves : int, default 32
        Singleton births and deaths per exact step (conjugate families; 0: none;
        `dpppl.kernels.subcluster.singletons`, docs/kernels/subcluster.md, "Singleton births and
        deaths"): a uniformly drawn point proposed alone in a new cluster, or a uniformly drawn
        singleton proposed into a cluster drawn by its collapsed Gibbs weights, each an exact
        Metropolis-Hastings move on cluster statistics; they open and close the clusters of a
        point that the other sub-cluster moves open and close rarely.
    merge_concentration : float, default 1
        a of the Beta(a, a) mixing proportion of the random splits (sec. 5.5).
    likelihood_dtype : {"float32", "float64"}
        dtype of the (points x clusters) likelihood work; statistics stay in the data's dtype.
    block_size : int, optional
        Points per block of the likelihood and statistics passes (default: from N and D).
    record_parameters : bool, default True
        Keep each draw's cluster parameters (`theta_*`, per slot) in the posterior; the
        weights are always kept. Turn off where D x D covariances per slot and draw are
        too much to store.
    devices : int or sequence of jax devices, optional
        Devices the points are sharded over (default: every local device of the default
        backend; an int takes the first that many). With more than one, each device
        holds a contiguous range of blocks of points, runs the label and statistics passes
        on them (`jax.shard_map`) and the sufficient statistics are summed across
        devices (`psum`); cluster-level work is replicated. The draws do not depend on
        the number of devices (every block draws its uniforms from its global index) up
        to the rounding of the float64 sums.
    super_clusters : bool, default False
        Restrict each point's label to the clusters of its current cluster's super-cluster,
        drawn every iteration by Algorithm 1 (`dpppl.kernels.subcluster.superclusters`); keeps the
        sweep exact. Needs a family with a J-divergence (Gaussian, multinomial, Bernoulli).
    pair_merges : bool, default False
        Also propose, every iteration, to merge the clusters of a random pairing of the
        occupied clusters, each pair accepted with the inverse of eq. (21), as if the reverse
        sub-cluster split were certain (approximate: in the steps of the published variant
        only, so in warmup by default).
    param_update : {"mh", "nuts"}, default "mh"
        Non-conjugate components only (`family.conjugate` false, e.g.
        [`NormalLogNormal`][dpppl.families.NormalLogNormal]): how cluster and sub-cluster parameters
        move given the labels, in place of the posterior draws of eqs. (8) and (14)
        ([`dpppl.kernels.subcluster.parameter_moves`][dpppl.kernels.subcluster.parameter_moves]): Metropolis-Hastings
        with the family's
        data-driven proposal and a random walk, or NumPyro's NUTS. Splits and merges then
        use the first expression of eq. (21), new clusters' parameters drawn from that
        proposal.
    param_steps : int, optional
        Parameter transitions per iteration (default 10 for `"mh"`, 1 for `"nuts"`).
    proposal : callable, optional
        A user Metropolis-Hastings proposal `(rng_key, u, stats) -> (u_new, log_q_ratio)`
        over every row's unconstrained parameters at once (`param_update="mh"`).
    nuts_step_size : float, default 0.7
        NUTS step size, in units of the proposal's scale (the diagonal mass matrix).
    """
    family = bound_model.family
    for name, value in (("split_merge_pairs", split_merge_pairs), ("launch_scans", launch_scans),
                        ("auxiliary_every", auxiliary_every), ("collapsed_below", collapsed_below),
                        ("subset_sweep", subset_sweep), ("singleton_moves", singleton_moves)):
        if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0):
            raise KernelError(f"subcluster: {name} must be an integer >= 0, got {value!r}")
    # one process only: the collapsed sweep is sequential over points (a multi-process run shards them).
    # The points are counted with their padding (`BoundModel.padded`): the rule is one of the compiled shape.
    collapsed = family.conjugate and bound_model.num_points < collapsed_below and jax.process_count() == 1
    if warmup_variant == "auto":
        warmup_variant = "exact" if collapsed and variant == "exact" and not pair_merges else "paper"
    elif warmup_variant is None:
        warmup_variant = variant
    _check_options(family, variant, warmup_variant, split_delay, merge_concentration, pair_merges, super_clusters,
                   likelihood_dtype, param_update, param_steps, proposal)
    if variant == "paper":
        warnings.warn("subcluster: variant='paper' runs the published sub-cluster splits after warmup, which are "
                      "approximate (Chang & Fisher 2013; docs/kernels/subcluster.md); keep them to warmup "
                      "(warmup_variant='paper', the default from collapsed_below points) for posterior "
                      "draws", UserWarning, stacklevel=3)
    use_sub, conjugate = "paper" in (variant, warmup_variant), family.conjugate
    update_params = None
    if not conjugate:
        try:
            update_params = build_parameter_update(
                family, method=param_update, steps=param_steps or (1 if param_update == "nuts" else 10),
                proposal=proposal, nuts_step_size=nuts_step_size)
        except KernelError as e:
            raise KernelError(f"subcluster: {e}") from None
    n, dim = bound_model.x.shape
    devices = _resolve_devices(devices)
    num_shards = len(devices)
    segments = bound_model.num_valid is not None and np.ndim(bound_model.num_valid) == 1
    block = int(block_size) if block_size else block_size_for(n // num_shards if segments else n, dim)
    if segments and (n // num_shards) % block:  # a run over several processes: each device's rows in whole blocks
        raise KernelError(f"subcluster: block_size={block} does not divide the {n // num_shards} rows each of the "
                          f"{num_shards} devices of this multi-process run holds; leave block_size out")
    blocks_per_shard = -(-n // (block * num_shards))
    num_blocks = blocks_per_shard * num_shards
    setup = _Setup(
        family=family, use_sub=use_sub, conjugate=conjugate, whitened=hasattr(family, "whitening"),
        super_clusters=super_clusters, a_merge=float(merge_concentration),
        ll_dtype=jnp.float32 if likelihood_dtype == "float32" else jnp.result_type(bound_model.x),
        n=n, dim=dim, block=block, num_blocks=num_blocks, blocks_per_shard=blocks_per_shard,
        pad=num_blocks * block - n, mesh=Mesh(np.asarray(devices), ("points",)) if num_shards > 1 else None,
        num_valid=bound_model.num_valid if segments else bound_model.points, num_pairs=int(split_merge_pairs),
        launch_scans=int(launch_scans),
        auxiliary_every=int(auxiliary_every), num_singletons=int(singleton_moves))
    one_row = jax.eval_shape(_one_row, family, jnp.result_type(bound_model.x))
    recorded_params = tuple(one_row) if record_parameters else ()
    record_dims = {"weights": ["slot"], **{f"theta_{name}": ["slot"] + [f"theta_{name}_dim_{j}" for j in
                                                                        range(len(one_row[name].shape))]
                                           for name in recorded_params}}
    init = functools.partial(_init, setup, one_row, recorded_params)

    info_of = _info_type(pair_merges, super_clusters, conjugate)
    collapsed_moves = (build_gibbs_kernel(bound_model), build_splitmerge_kernel(bound_model)) if collapsed else ()

    def step_of(phase_variant):
        """The step of one variant: the setup with or without sub-clusters, same state."""
        phase = dataclasses.replace(setup, use_sub=phase_variant == "paper")
        if collapsed and phase_variant == "exact":
            moves = collapsed_moves
            return functools.partial(_collapsed_step, phase, tuple(m.step for m in moves), recorded_params, info_of)
        label_pass = phase.per_shard(functools.partial(_sample_labels, phase),
                                     in_specs=(P("points"),) * 4 + (P(),) * 5,
                                     out_specs=(P("points"), P("points"), P()))
        step = functools.partial(_step, phase, functools.partial(_draw_parameters, phase, update_params),
                                 label_pass, split_delay, pair_merges, recorded_params)
        if subset_sweep and conjugate and phase_variant == "exact":
            return functools.partial(_with_subset_sweep, phase, bound_model.prior, min(subset_sweep, n), step)
        return step

    def record(state):
        """The weights and parameters drawn in the last step, per slot (the values of z),
        locations back in the data's frame (`translated_params`)."""
        slots = state.extras.slots
        drawn = translated_params(family, slots.theta, bound_model.shift)
        return {"weights": slots.weights, **{f"theta_{name}": value for name, value in drawn.items()}}

    phases = " and ".join(name for name, v in (("warmup", warmup_variant), ("kept draws", variant)) if v == "exact")
    note = (f"subcluster: fewer than collapsed_below={collapsed_below} points (with their padding), so its exact step "
            f"({phases}) is a collapsed Gibbs sweep with SAMS split-merge proposals" if collapsed and phases else "")
    # XLA's elemental emitters (`Kernel.light_compile`): collapsed in both phases with the native sweep and
    # split-merge step, the chunk is native calls and the record's cluster-level draws; the sub-cluster steps
    # in up to SMALL_DIM dimensions (element-wise likelihoods, no matrix products) compile in ~0.7x the CPU
    # and run as fast (docs/kernels/subcluster.md, "Compiling the step")
    if variant == warmup_variant == "exact" and collapsed:
        light = all(m.light_compile for m in collapsed_moves)
    else:
        light = dim <= SMALL_DIM
    return Kernel("subcluster", exact=variant == "exact", step=step_of(variant),
                  warmup_step=step_of(warmup_variant) if warmup_variant != variant else None, init=init,
                  info_type=info_of, record=record, record_dims=record_dims, masked_points=True, note=note,
                  light_compile=light)


@functools.partial(jax.jit, static_argnums=1)
def _one_row(family, dtype):
    """One cluster's parameters (`jax.eval_shape` gives their shapes): a posterior draw given no
    points for a conjugate family, else the parameters of the unconstrained zeros. A function of
    the family as an argument, traced inside (no key or statistics made eagerly), so that the
    kernel built again for the same family (the run builds it more than once) reuses the trace."""
    if family.conjugate:
        return family.posterior_draw(jax.random.key(0), family.empty_stats())
    return family.params_of(jnp.zeros((family.num_unconstrained,), dtype))


def _resolve_devices(devices):
    if devices is None:  # a jax.distributed run: the devices of every process (docs/distributed.md)
        return list(jax.devices() if jax.process_count() > 1 else jax.local_devices())
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        available = jax.local_devices()
        if not 1 <= devices <= len(available):
            raise KernelError(f"subcluster: devices={devices} but {len(available)} local device(s) are available "
                              "(on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N before jax starts "
                              "makes N host devices)")
        return list(available[:devices])
    devices = list(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise KernelError(f"subcluster: devices must be an int or a non-empty sequence of jax devices, got {devices!r}")
    return devices


def _unblock(labels, n):
    """Labels in blocks of points (num_blocks, block) -> the N points' labels."""
    return labels.reshape(-1)[:n].astype(jnp.int32)


def _expand(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


def _applies(model):
    reason = exchangeable_prior_only(model)
    if reason:
        return reason
    if model.prior.discount != 0.0:  # an exchangeable prior is a PitmanYor
        return ("the sub-cluster split ratio (Chang & Fisher 2013, eq. 21) is derived for the Dirichlet "
                "process; this model has a Pitman-Yor prior (discount > 0)")
    component = model.component
    if not component.conjugate:
        return None if hasattr(component, "log_likelihood_of_stats") else (
            f"a non-conjugate {component.name} needs log_likelihood_of_stats and a proposal (see "
            f"dpppl.kernels.subcluster.parameter_moves)")
    if type(component).posterior_draw is Family.posterior_draw:
        return "the sampler draws cluster parameters from their posterior, which this component family lacks"
    return None


register("subcluster", build_subcluster_kernel, exact=True, applies=_applies,
         description="sub-cluster splits with parallel restricted Gibbs (Chang & Fisher 2013); "
                     "O(N K D^2) per iteration, vectorised over points and clusters; the published "
                     "sub-cluster splits in warmup, the exact variant after it (variant='paper' is inexact)")
