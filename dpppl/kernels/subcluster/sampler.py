"""Sub-cluster split sampler (Chang & Fisher 2013): ``kernel="subcluster"``.

An instantiated-weight sampler in which every step is a vector operation over points or
over clusters, so it scales to millions of points and across devices. One step:

1. **Restricted Gibbs on the regular clusters** (sec. 4.1). Given the labels, the weights
   of the K occupied clusters and of the rest of the stick are (eqs. 6, 7)
   ``(pi_1, ..., pi_K, pi_rest) ~ Dir(N_1, ..., N_K, alpha)``, each parameter is drawn from
   its posterior ``theta_k ~ p(theta | x_k)`` (eq. 8), and every label is drawn in parallel
   from ``p(z_i = k) ∝ pi_k f(x_i; theta_k)`` over the occupied clusters (eq. 9). The step
   never creates a cluster: it is not ergodic alone.
2. **Sub-clusters** (sec. 5.1-5.2). Each cluster k carries a left and a right sub-cluster
   with weights ``(pi_kl, pi_kr) ~ Dir(N_kl + alpha/2, N_kr + alpha/2)`` (eq. 13),
   parameters ``theta_ks ~ p(theta | x_ks)`` (eq. 14) and sub-labels
   ``p(zbar_i = s) ∝ pi_{z_i s} f(x_i; theta_{z_i s})`` (eq. 15), drawn with the labels.
3. **Sub-cluster splits** (sec. 5.3). Every cluster whose sub-clusters have run for
   ``split_delay`` iterations (the deferred burn-in of sec. 5.4) proposes the split into
   its sub-clusters, all clusters at once, accepted with the Hastings ratio of eq. (21)
   in its conjugate form

       H_split = alpha Gamma(N_l) f(x_l) Gamma(N_r) f(x_r) / (Gamma(N_c) f(x_c)),

   with f the marginal likelihood (parameters integrated out). A new cluster's
   sub-labels are seeded once by the hyperplane through its mean normal to a random
   direction, a split the following sweeps refine (two sub-clusters drawn alike would
   split it almost at random); the seeding affects which splits are proposed, not the
   ratio.
4. **Random split / merge** (sec. 5.5). Merges through sub-clusters are almost never
   accepted, so merges come from a data-independent proposal and its reverse: with
   probability 1/2 a uniformly chosen cluster c is split at random (a point goes right
   with probability p, p ~ Beta(a, a): a Dirichlet-multinomial partition), else a
   uniformly chosen pair is merged. With K clusters before the move and the unordered
   proposal probabilities ``q_split = (1/2)(1/K) 2 B(N_l + a, N_r + a) / B(a, a)`` and
   ``q_merge = (1/2) 2 / (K (K - 1))``, the acceptance ratios are

       H_split = p(C') / p(C) * B(a, a) / ((K + 1) B(N_l + a, N_r + a)),
       H_merge = p(C') / p(C) * K B(N_l + a, N_r + a) / B(a, a)   (l, r the merged pair).

   A merged cluster's sub-clusters are the two clusters it was made of.

Non-conjugate components (``family.conjugate`` false, e.g.
:class:`~dpppl.families.NormalLogNormal`): the parameters are kept in the state and moved
given the labels by a Markov kernel on p(theta | x_k) (:mod:`dpppl.kernels.subcluster.parameter_moves`:
Metropolis-Hastings or NumPyro's NUTS) instead of drawn from it in steps 1-2, and every split
and merge uses the first expression of eq. (21), the new clusters' parameters drawn from the
family's data-driven proposal q(theta | x_k):

    H_split = alpha q(theta_c | x_c) / (Gamma(N_c) f_theta(theta_c) f_x(x_c; theta_c))
              * prod_{k in l, r} Gamma(N_k) f_theta(theta_k) f_x(x_k; theta_k) / q(theta_k | x_k).

Options beyond the published defaults: ``super_clusters=True`` restricts step 1 to the
super-clusters of Algorithm 1 (sec. 4.1; :mod:`dpppl.kernels.subcluster.superclusters`), which keeps
it exact; ``pair_merges=True`` adds merges of the pairs of a random pairing of the
clusters, each accepted with the inverse of eq. (21) as if the reverse sub-cluster split
were certain (approximate, like the sub-cluster splits it undoes).

Exactness: the published sampler is approximate; ``variant="exact"`` is not.
Steps 1 and 4 leave p(z | x) invariant once the restricted sweep may not empty a cluster,
but the sampler as published departs from invariance in two ways, both visible on the
enumerated posteriors of small data (``tests/test_subcluster.py``):

- the restricted sweep of eq. (9) may empty a cluster, and no move re-creates it at the
  matching rate (a Gibbs update restricted to the occupied clusters is reversible only if
  the set of occupied clusters cannot change); this biases towards fewer clusters;
- the sub-cluster splits of step 3 have no reverse move: the matching merges, whose
  proposal probability would need the law of the sub-cluster variables, are "approximated
  with an automatic rejection" (sec. 5.5); this biases towards more clusters.

On the 5-point NIW case ``niw_2d_overlap`` of :func:`dpppl.testing.small_datasets`
(64 chains x 500 draws) the published sampler is off by a total-variation distance of
0.26 from the exact partition law (P(K = 2) = 0.47 against 0.31), and with only the first
departure removed by 0.29 (P(K = 5) = 0.21 against 0.04). The bias comes from moves that
change the number of clusters, so it matters most where clusters are small; it was not
measured at large N. ``variant="exact"`` drops the sub-clusters and rejects a sweep that
would empty a cluster (a restricted Gibbs update on the event that the occupied set is
unchanged), leaving steps 1 and 4: it passes the enumeration harness, and finds new
clusters only through the random splits, so it is slow to grow. The kernel is registered
as approximate (``exact=False``); an instance built with ``variant="exact"`` is exact.

Cost and precision. Per iteration O(N K D^2) for full covariances (O(N K D) diagonal),
computed over blocks of points so memory stays O(N D + K D^2): the log likelihoods
against the clusters are formed one block of points at a time (clusters along rows, so
the running sum that inverts the CDF reads contiguous rows; the occupied clusters only,
gathered to the first rows and formed ``ROW_CHUNK`` at a time, so the cost follows the K
occupied clusters, not the C slots of the capacity) and reduced to a label at once; for
the Gaussian families each point is then scored against its own cluster's two
sub-clusters only. Labels use one uniform per point (inverse CDF), sub-labels
another. Likelihoods run in ``likelihood_dtype`` (float32 by default, on data centred
at their mean: the values only rank clusters against each other), while sufficient
statistics are summed in float64 (the data's dtype): sums of 10^6 squares in float32
would lose the digits the marginal likelihoods of eq. (21) need.

All labels change at once, so the statistics are a segment sum over the points (a
parallel reduction, sharded over devices when the data are), not per-point updates.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax.scipy.special import betaln, gammaln

from dpppl.families.base import Family, segment_sums, segment_sums_by_sorting, take
from dpppl.families.gaussian import SMALL_DIM, whitened_log_likelihood_pairs, whitened_log_likelihood_rows
from dpppl.errors import KernelError
from dpppl.kernels.base import Kernel, exchangeable_prior_only, register
from dpppl.kernels.subcluster.parameter_moves import build_parameter_update
from dpppl.kernels.subcluster.superclusters import has_j_divergence, j_divergence, sample_super_clusters

SPLIT_DELAY = 3
ROW_CHUNK = 8  # cluster slots whose likelihoods one step of the label pass forms together
SORTED_BLOCK = 1024  # points per block product when statistics are summed by sorting (D > SMALL_DIM)
VARIANTS = ("paper", "exact")


def _slot_keys(rng_key, capacity):
    """One key per cluster slot, so per-cluster draws do not depend on the capacity."""
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(rng_key, jnp.arange(capacity))


def log_evidence(family, stats, u=None):
    """The per-cluster factor of eq. (21): log f_x(x_c; lambda) = log p(x_c) for a conjugate
    family (the second expression); for a non-conjugate one, with the cluster's
    unconstrained parameters ``u``, log f_theta(theta_c) + log f_x(x_c; theta_c) -
    log q(theta_c | x_c) (the first expression, q the family's data-driven proposal)."""
    if u is None:
        return family.log_marginal(stats)
    return family.log_prior(u) + family.log_likelihood_of_stats(u, stats) - family.log_proposal(u, stats)


def log_split_gain(family, alpha, left, right, whole, u=None):
    """log of the Hastings ratio of eq. (21) for splitting the cluster with statistics
    ``whole`` into ``left`` and ``right`` under a DP(alpha) prior,

        log alpha + log Gamma(N_l) + log Gamma(N_r) - log Gamma(N_c) + e_l + e_r - e_c,

    e the :func:`log_evidence` of each part: with a conjugate family (``u`` None) this is
    log p(C', x) / p(C, x), parameters integrated out; with a non-conjugate one ``u`` holds
    the (proposed left, proposed right, current whole) unconstrained parameters."""
    u_left, u_right, u_whole = (None, None, None) if u is None else u
    return (jnp.log(alpha) + gammaln(left.n) + gammaln(right.n) - gammaln(whole.n)
            + log_evidence(family, left, u_left) + log_evidence(family, right, u_right)
            - log_evidence(family, whole, u_whole))


def _inverse_cdf_rows(logits, u, fallback, num_rows=None):
    """One index per column of ``logits`` (K, B) drawn by inverting the CDF at ``u`` (B,):
    a running sum over the rows, each a contiguous vector over the block's points
    (cumsum along a short axis is slow on CPU). Rows from ``num_rows`` on (default K, may be
    traced) must hold -inf and are not visited. Rounding past the total gives ``fallback``
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
    (D > SMALL_DIM) and (B, D, D) statistics stay within ``budget`` numbers (cache-sized)."""
    per_point = capacity_hint * (dim if dim > SMALL_DIM else 1) + dim * dim
    return int(max(256, min(n, budget // per_point)))


def build_subcluster_kernel(bound_model, *, variant: str = "paper", split_delay: int = SPLIT_DELAY,
                            merge_concentration: float = 1.0, likelihood_dtype: str = "float32",
                            block_size: int | None = None, record_parameters: bool = True,
                            devices=None, super_clusters: bool = False, pair_merges: bool = False,
                            param_update: str = "mh", param_steps: int | None = None, proposal=None,
                            nuts_step_size: float = 0.7) -> Kernel:
    """The sub-cluster split sampler; see the module docstring.

    Parameters
    ----------
    variant : {"paper", "exact"}
        ``"paper"`` (default, approximate): Chang & Fisher's sampler as published, with
        sub-cluster splits. ``"exact"``: no sub-clusters, restricted sweeps that would
        empty a cluster are rejected, random splits and merges only; leaves p(z | x)
        invariant but finds splits slowly.
    split_delay : int, default 3
        Iterations a cluster's sub-clusters run before it may split (sec. 5.4).
    merge_concentration : float, default 1
        a of the Beta(a, a) mixing proportion of the random splits (sec. 5.5).
    likelihood_dtype : {"float32", "float64"}
        dtype of the (points x clusters) likelihood work; statistics stay in the data's dtype.
    block_size : int, optional
        Points per block of the likelihood and statistics passes (default: from N and D).
    record_parameters : bool, default True
        Keep each draw's cluster parameters (``theta_*``, per slot) in the posterior; the
        weights are always kept. Turn off where D x D covariances per slot and draw are
        too much to store.
    devices : int or sequence of jax devices, optional
        Devices the points are sharded over (default: every local device of the default
        backend; an int takes the first that many). With more than one, each device
        holds a contiguous range of blocks of points, runs the label and statistics passes
        on them (``jax.shard_map``) and the sufficient statistics are summed across
        devices (``psum``); cluster-level work is replicated. The draws do not depend on
        the number of devices (every block draws its uniforms from its global index) up
        to the rounding of the float64 sums.
    super_clusters : bool, default False
        Restrict each point's label to the clusters of its current cluster's super-cluster,
        drawn every iteration by Algorithm 1 (:mod:`dpppl.kernels.subcluster.superclusters`); keeps the
        sweep exact. Needs a family with a J-divergence (Gaussian, multinomial, Bernoulli).
    pair_merges : bool, default False
        Also propose, every iteration, to merge the clusters of a random pairing of the
        occupied clusters, each pair accepted with the inverse of eq. (21), as if the reverse
        sub-cluster split were certain (approximate: the published variant only).
    param_update : {"mh", "nuts"}, default "mh"
        Non-conjugate components only (``family.conjugate`` false, e.g.
        :class:`~dpppl.families.NormalLogNormal`): how cluster and sub-cluster parameters
        move given the labels, in place of the posterior draws of eqs. (8) and (14)
        (:mod:`dpppl.kernels.subcluster.parameter_moves`): Metropolis-Hastings with the family's
        data-driven proposal and a random walk, or NumPyro's NUTS. Splits and merges then
        use the first expression of eq. (21), new clusters' parameters drawn from that
        proposal.
    param_steps : int, optional
        Parameter transitions per iteration (default 10 for ``"mh"``, 1 for ``"nuts"``).
    proposal : callable, optional
        A user Metropolis-Hastings proposal ``(rng_key, u, stats) -> (u_new, log_q_ratio)``
        over every row's unconstrained parameters at once (``param_update="mh"``).
    nuts_step_size : float, default 0.7
        NUTS step size, in units of the proposal's scale (the diagonal mass matrix).
    """
    family = bound_model.family
    if variant not in VARIANTS:
        raise KernelError(f"subcluster: variant must be one of {VARIANTS}, got {variant!r}")
    use_sub = variant == "paper"
    if not (isinstance(split_delay, int) and split_delay >= 1):
        raise KernelError(f"subcluster: split_delay must be an integer >= 1, got {split_delay!r}")
    if not merge_concentration > 0:
        raise KernelError(f"subcluster: merge_concentration must be > 0, got {merge_concentration!r}")
    if pair_merges and not use_sub:
        raise KernelError("subcluster: pair_merges=True is approximate (its reverse is a sub-cluster split), "
                          "so the exact variant refuses it; use variant='paper'")
    if super_clusters and not has_j_divergence(family):
        raise KernelError(f"subcluster: super_clusters=True needs a J-divergence between components, which the "
                          f"{family.name} family lacks")
    if likelihood_dtype not in ("float32", "float64"):
        raise KernelError(f"subcluster: likelihood_dtype must be 'float32' or 'float64', got {likelihood_dtype!r}")
    conjugate = family.conjugate
    if conjugate and (param_update != "mh" or param_steps is not None or proposal is not None):
        raise KernelError(f"subcluster: param_update, param_steps and proposal apply to non-conjugate components; "
                          f"{family.name}'s parameters are drawn from their posterior")
    if not conjugate:
        try:
            update_params = build_parameter_update(
                family, method=param_update, steps=param_steps or (1 if param_update == "nuts" else 10),
                proposal=proposal, nuts_step_size=nuts_step_size)
        except KernelError as e:
            raise KernelError(f"subcluster: {e}") from None
    n, dim = bound_model.x.shape
    block = int(block_size) if block_size else block_size_for(n, dim)
    devices = _resolve_devices(devices)
    num_shards = len(devices)
    blocks_per_shard = -(-n // (block * num_shards))
    num_blocks = blocks_per_shard * num_shards
    pad = num_blocks * block - n
    mesh = Mesh(np.asarray(devices), ("points",)) if num_shards > 1 else None
    center = jnp.asarray(bound_model.x.mean(axis=0)) if family.data_kind == "real" else None
    ll_dtype = jnp.float32 if likelihood_dtype == "float32" else jnp.asarray(bound_model.x).dtype
    a_merge = float(merge_concentration)
    whitened = hasattr(family, "whitening")
    if conjugate:
        one_row = jax.eval_shape(family.posterior_draw, jax.random.key(0), family.empty_stats())
    else:
        num_u = family.num_unconstrained
        one_row = jax.eval_shape(family.params_of, jax.ShapeDtypeStruct((num_u,), jnp.asarray(bound_model.x).dtype))
    recorded_params = tuple(one_row) if record_parameters else ()
    record_dims = {"weights": ["slot"], **{f"theta_{name}": ["slot"] + [f"theta_{name}_dim_{j}" for j in
                                                                        range(len(one_row[name].shape))]
                                           for name in recorded_params}}

    def cast_params(params):
        """Parameters in the likelihood dtype, means shifted to the centred data first."""
        if center is not None and "mu" in params:
            params = {**params, "mu": params["mu"] - center}
        return jax.tree.map(lambda p: p.astype(ll_dtype) if jnp.issubdtype(p.dtype, jnp.floating) else p, params)

    def as_blocks(a):
        """Points (N, ...) -> (num_blocks, block, ...), padded with zeros (masked where used)."""
        return jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1)).reshape((num_blocks, block) + a.shape[1:])

    def prepare_points(x):
        return as_blocks(((x - center) if center is not None else x).astype(ll_dtype))

    def per_shard(fn, in_specs, out_specs):
        """``fn(first_block, *args)`` over the blocks of points: on one device as it is; on
        several, once per device on its contiguous range of blocks (``jax.shard_map``;
        ``first_block`` is the global index of the device's first block), with arguments
        and results split along their leading (block) axis where their spec says
        ``P("points")`` and replicated where it says ``P()``."""
        if mesh is None:
            return lambda *args: fn(0, *args)
        return jax.shard_map(lambda *args: fn(jax.lax.axis_index("points") * blocks_per_shard, *args),
                             mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)

    def replicated(tree):
        """The state replicated on every device of the mesh, in and out of each step, so
        that the jitted step sees one input sharding (else it compiles a second time)."""
        if mesh is None:
            return tree
        return jax.lax.with_sharding_constraint(tree, NamedSharding(mesh, P()))

    def across_devices(total):
        return jax.lax.psum(total, "points") if mesh is not None else total

    def block_uniforms(rng_key, first_block, shape):
        """Uniforms of the local blocks, block b from ``fold_in(rng_key, b)`` with b its
        global index (the same values whatever the number of devices); and the mask of
        real (not padding) points."""
        index = first_block + jnp.arange(shape[0])
        u = jax.vmap(lambda b: jax.random.uniform(jax.random.fold_in(rng_key, b), shape[1:], dtype=ll_dtype))(index)
        valid = index[:, None] * block + jnp.arange(block)[None] < n
        return u, valid

    def draw_parameters(rng_key, state):
        """Weights and parameters of clusters and sub-clusters (eqs. 7, 8, 13, 14), drawn in
        one batch of 3C rows: C clusters, then C (left, right) pairs; and the proportion
        p ~ Beta(a, a) of the random split (sec. 5.5). All Gamma variates come from one
        batched draw (each Gamma sampler costs seconds of compilation).

        Non-conjugate parameters are instead moved from their current values
        (``slots["u"]``, ``slots["sub_u"]``) by ``update_params``; a fresh cluster's two
        sub-clusters start from two draws of the proposal given the cluster's points.
        Returns (log pi, log pibar, parameters, p, unconstrained rows or None, the
        parameter moves' acceptance rate or None)."""
        stats, slots = state.stats, state.aux["slots"]
        capacity = stats.n.shape[0]
        k_w, k_rest, k_p, k_beta = jax.random.split(rng_key, 4)
        occupied = stats.n > 0
        fresh = slots["age"] == 0  # no valid sub-cluster statistics yet (new clusters)
        sub = slots["sub_stats"]
        # Gamma shapes: Dir(N_1..N_C, alpha) over clusters + rest, Dir(N_kl + alpha/2, N_kr + alpha/2)
        shapes = jnp.concatenate([jnp.where(occupied, stats.n, 0.0), state.alpha[None],
                                  jnp.where(fresh[:, None], 1.0, sub.n + state.alpha / 2).reshape(-1),
                                  jnp.full(2, a_merge)])
        safe = jnp.where(shapes > 0, shapes, 1.0)
        per_slot = _slot_keys(k_w, capacity)  # slot k: its cluster, then its two sub-clusters
        three = jax.vmap(lambda k: jax.random.split(k, 3))(per_slot)
        keys = jnp.concatenate([three[:, 0], k_rest[None], three[:, 1:].reshape(-1), jax.random.split(k_beta)])
        log_g = jnp.where(shapes > 0, jax.vmap(jax.random.loggamma)(keys, safe), -jnp.inf)
        log_pi = log_g[:capacity] - jax.scipy.special.logsumexp(log_g[:capacity + 1])
        log_sub = log_g[capacity + 1:3 * capacity + 1].reshape(capacity, 2)
        p_right = jax.nn.sigmoid(log_g[-2] - log_g[-1])  # g1 / (g1 + g2) ~ Beta(a, a)
        log_pibar = jnp.where(fresh[:, None], jnp.log(0.5),
                              log_sub - jax.scipy.special.logsumexp(log_sub, axis=1, keepdims=True))
        # parameters from the posteriors; a fresh cluster's two sub-clusters are two draws
        # from the cluster's own posterior
        sub_source = jax.tree.map(lambda s, c: jnp.where(
            fresh.reshape((-1, 1) + (1,) * (c.ndim - 1)), c[:, None], s), sub, stats)
        three = jax.vmap(lambda k: jax.random.split(k, 3))(_slot_keys(k_p, capacity))
        rows = jax.tree.map(lambda c, s: jnp.concatenate([c, s.reshape((2 * capacity,) + c.shape[1:])]),
                            stats, sub_source) if use_sub else stats
        if conjugate:
            keys = jnp.concatenate([three[:, 0], three[:, 1:].reshape(-1)]) if use_sub else three[:, 0]
            return log_pi, log_pibar, jax.vmap(family.posterior_draw)(keys, rows), p_right, None, None
        u_rows = slots["u"]
        if use_sub:
            starts = jax.vmap(lambda k, c: family.draw_proposal(k, c))(
                three[:, 1:].reshape(-1), jax.tree.map(lambda c: jnp.repeat(c, 2, axis=0), stats))
            sub_u = jnp.where(fresh[:, None, None], starts.reshape(capacity, 2, -1), slots["sub_u"])
            u_rows = jnp.concatenate([u_rows, sub_u.reshape(2 * capacity, -1)])
        u_rows, accept_rate = update_params(jax.random.fold_in(k_p, 2**30), u_rows, rows)  # not a slot's key
        return log_pi, log_pibar, family.params_of(u_rows), p_right, u_rows, accept_rate

    def sample_labels(first_block, rng_key, x_blocks, z_blocks, group, log_pi, log_pibar, params, seed):
        """Labels (eq. 9) and sub-labels (eq. 15) of the points of ``x_blocks``, block by
        block, and the number of (real) points given each label, summed across devices.
        With super-clusters (``group`` per slot), a point whose current label is
        ``z_blocks`` considers only the clusters of that label's group.

        Gaussian families evaluate whitened likelihoods with clusters along rows
        (:func:`~dpppl.families.gaussian.whitened_log_likelihood_rows`), and each point's
        two sub-clusters only, gathered by its new label; other families use
        ``log_likelihood`` against all clusters and sub-clusters.

        In a fresh cluster (``seed = (fresh, mean, direction)``, per slot) the sub-labels
        are instead the sides of the hyperplane through the cluster's mean normal to a
        random direction: a split for the sub-cluster sweeps to refine, where two nearly
        equal posterior draws would give an almost random one.
        """
        capacity = log_pi.shape[0]
        params = cast_params(params)
        log_pi = log_pi.astype(ll_dtype)
        log_pibar = log_pibar.astype(ll_dtype)
        fresh, mean, direction = seed
        u, valid = block_uniforms(rng_key, first_block, x_blocks.shape[:2] + (2,))
        occupied = jnp.isfinite(log_pi)
        last_slot = capacity - 1 - jnp.argmax(occupied[::-1])
        if whitened:
            rows = family.whitening(params)
            # occupied slots first (in slot order), padded to whole chunks of ROW_CHUNK rows
            order = jnp.argsort(~occupied, stable=True)
            num_active = jnp.sum(occupied)
            padded = -(-capacity // ROW_CHUNK) * ROW_CHUNK
            active = jax.tree.map(lambda a: jnp.pad(a[order], [(0, padded - capacity)] + [(0, 0)] * (a.ndim - 1)),
                                  jax.tree.map(lambda a: a[:capacity], rows))
            active_log_pi = jnp.pad(log_pi[order], (0, padded - capacity), constant_values=-jnp.inf)
            active_group = jnp.pad(group[order], (0, padded - capacity), constant_values=-1)
            position_of = jnp.argsort(order)
            if use_sub:
                subs = jax.tree.map(lambda a: a[capacity:].reshape((capacity, 2) + a.shape[1:]), rows)

        def active_logits(xb):
            """log pi_k + log f(x_b; theta_k) with the occupied clusters along rows (the
            order ``order``), formed ROW_CHUNK rows at a time for the occupied rows only;
            the other rows hold -inf. Costs O(K B D^2), K occupied, not O(C B D^2)."""
            def add_chunk(j, logits):
                start = j * ROW_CHUNK
                w = jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, start, ROW_CHUNK), active)
                chunk = (jax.lax.dynamic_slice_in_dim(active_log_pi, start, ROW_CHUNK)[:, None]
                         + whitened_log_likelihood_rows(w, xb))
                return jax.lax.dynamic_update_slice_in_dim(logits, chunk, start, 0)

            return jax.lax.fori_loop(0, -(-num_active // ROW_CHUNK), add_chunk,
                                     jnp.full((padded, xb.shape[0]), -jnp.inf, ll_dtype))

        def one_block(args):
            xb, zb, ub = args
            if whitened:
                logits = active_logits(xb)  # (C, B), occupied clusters first
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
        counts = jax.ops.segment_sum(valid.reshape(-1).astype(jnp.int32), z.reshape(-1), num_segments=capacity)
        return z, zbar, across_devices(counts)

    label_pass = per_shard(sample_labels, in_specs=(P(), P("points"), P("points"), P(), P(), P(), P(), P()),
                           out_specs=(P("points"), P("points"), P()))

    def sum_statistics(capacity, first_block, rng_key, x_blocks, z, zbar, c, p_right):
        """One pass over the points for the rows of every sub-cluster (segment 2k + zbar)
        and of the proposed random half of cluster ``c`` (segments 2C + zbar; a point of c
        joins it with probability ``p_right``, sec. 5.5), summed across devices; rows are
        (family statistics, sums of x) pairs. Returns the rows and the half's mask.

        Above :data:`~dpppl.families.gaussian.SMALL_DIM` dimensions the per-point
        statistics (D x D outer products) are not formed: the points are sorted by segment
        and summed as block matrix products (:func:`~dpppl.families.base.segment_sums_by_sorting`)."""
        u, valid = block_uniforms(rng_key, first_block, z.shape)
        in_half = (z == c) & (u < p_right) & valid
        segments = jnp.where(valid, jnp.where(in_half, 2 * capacity, 2 * z) + zbar, 2 * capacity + 2)
        points, labels = x_blocks.reshape(-1, dim), segments.reshape(-1)
        if dim > SMALL_DIM:
            rows = segment_sums_by_sorting(lambda xb, w: (family.weighted_stats(xb, w), w @ xb), points, labels,
                                           2 * capacity + 2, SORTED_BLOCK)
        else:
            rows = segment_sums(lambda p: (family.point_stats(p), p), points, labels, 2 * capacity + 2, block)
        return across_devices(rows), in_half

    def statistics_pass(capacity):
        return per_shard(functools.partial(sum_statistics, capacity),
                         in_specs=(P(), P("points"), P("points"), P("points"), P(), P()),
                         out_specs=(P(), P("points")))

    def merge_pairs(rng_key, z, zbar, rows, sub, age, alpha, u=None):
        """Merges of pairs of clusters (sec. 5.5's merges, proposed for a random pairing of
        the occupied clusters): the occupied slots in random order are paired first with
        second, third with fourth, ...; each pair (k, m) merges into k with probability
        min(1, 1 / H_split) (eq. 21 for the split back into k and m), all pairs at once. The
        merged cluster's sub-clusters are its two parts. Non-conjugate parameters ``u`` =
        (clusters', sub-clusters') are carried along, a merged cluster's drawn from the
        proposal given its points."""
        capacity = age.shape[0]
        slot_index = jnp.arange(capacity)
        k_order, k_accept, k_u = jax.random.split(rng_key, 3)
        occupied = rows[0].n > 0
        order = jnp.argsort(jnp.where(occupied, jax.random.uniform(k_order, (capacity,)), 2.0))
        position = jnp.argsort(order)
        partner = order[jnp.minimum(position ^ 1, capacity - 1)]
        keeps = (position % 2 == 0) & occupied & occupied[partner] & (partner != slot_index)
        left, right = rows, take(rows, partner)
        merged = jax.tree.map(jnp.add, left, right)
        if u is not None:
            u_merged = family.draw_proposal(k_u, merged[0])
            log_h = -log_split_gain(family, alpha, left[0], right[0], merged[0], u=(u[0], u[0][partner], u_merged))
        else:
            log_h = -log_split_gain(family, alpha, left[0], right[0], merged[0])
        accept = keeps & (jnp.log(jax.random.uniform(k_accept, (capacity,))) < log_h)
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
        if u is not None:
            u = (jnp.where(accept[:, None], u_merged, u[0]),
                 jnp.where(accept[:, None, None], jnp.stack([u[0], u[0][partner]], axis=1), u[1]))
        return z, zbar, rows, sub, age, jnp.sum(accept).astype(jnp.int32), u

    def step(rng_key, state, x):
        k_par, k_lab, k_move, k_split, k_dir, k_group, k_pairs = jax.random.split(rng_key, 7)
        capacity = state.stats.n.shape[0]
        slots = state.aux["slots"]
        slot_index = jnp.arange(capacity)

        # 1-2. restricted Gibbs sweep over clusters and sub-clusters, all points at once
        log_pi, log_pibar, params, p_right, u_rows, param_accept = draw_parameters(k_par, state)
        if not conjugate:  # the clusters' and sub-clusters' unconstrained parameters, and proposal keys
            u_c = u_rows[:capacity]
            u_sub = u_rows[capacity:].reshape(capacity, 2, -1) if use_sub else slots["sub_u"]
            k_q_half, k_q_merge, k_q_sub = jax.random.split(jax.random.fold_in(rng_key, 8), 3)
        mean = slots["x_sum"] / jnp.maximum(state.stats.n, 1.0)[:, None]
        if center is not None:
            mean = mean - center
        direction = jax.vmap(lambda k: jax.random.normal(k, (dim,)))(_slot_keys(k_dir, capacity))
        seed = (slots["age"] == 0, mean.astype(ll_dtype), direction.astype(ll_dtype))
        occupied_before = state.stats.n > 0
        group = (sample_super_clusters(k_group, j_divergence(family, take(params, slice(0, capacity))),
                                       occupied_before) if super_clusters else slot_index)
        z_new, zbar, counts = label_pass(k_lab, prepare_points(x), as_blocks(state.z), group, log_pi, log_pibar,
                                         params, seed)
        # The restricted sweep has no move back that re-creates a cluster it empties; the
        # exact variant keeps the set of occupied clusters fixed by rejecting such sweeps
        # (a Gibbs update restricted to that event), so only split / merge moves change it.
        emptied = jnp.any((state.stats.n > 0) & (counts == 0)) & (not use_sub)
        z = jnp.where(emptied, as_blocks(state.z), z_new)
        counts = jnp.where(emptied, state.stats.n.astype(counts.dtype), counts)

        # random split / merge proposal (sec. 5.5): choose it now, so that the statistics
        # pass below also sums the proposed random half
        occupied = counts > 0
        num_k = jnp.sum(occupied)
        k_type, k_pick, k_side, k_acc = jax.random.split(k_move, 4)
        propose_split = jax.random.uniform(k_type) < 0.5
        rank = jnp.cumsum(occupied) - 1  # rank of each occupied slot in slot order
        first_pick, second_pick = jax.random.uniform(k_pick, (2,))
        c = jnp.argmax(occupied & (rank == jnp.floor(first_pick * num_k).astype(rank.dtype)))
        # the random half of c is summed by sub-label, and still belongs to c
        seg, in_half = statistics_pass(capacity)(k_side, as_blocks(x), z, zbar, c, p_right)
        sub = jax.tree.map(lambda s: s.reshape((capacity + 1, 2) + s.shape[1:]), seg)
        half_by_side = take(sub, capacity)
        sub = jax.tree.map(lambda s, h: s[:capacity].at[c].add(h), sub, half_by_side)
        half_right = jax.tree.map(lambda h: h[0] + h[1], half_by_side)
        rows = jax.tree.map(lambda s: s[:, 0] + s[:, 1], sub)
        age = jnp.where(occupied, slots["age"] + 1, 0)

        # 4a. random split of c: the half moves to the first free slot
        whole = take(rows, c)
        half_left = jax.tree.map(jnp.subtract, whole, half_right)
        n_left, n_right = half_left[0].n, half_right[0].n
        if not conjugate:  # eq. (21), first expression: the halves' parameters drawn from q
            u_halves = family.draw_proposal(k_q_half, jax.tree.map(lambda a, b: jnp.stack([a, b]),
                                                                   half_left[0], half_right[0]))
        log_h_split = (log_split_gain(family, state.alpha, half_left[0], half_right[0], whole[0],
                                      u=None if conjugate else (u_halves[0], u_halves[1], u_c[c]))
                       + betaln(a_merge, a_merge) - jnp.log(num_k + 1.0)
                       - betaln(n_left + a_merge, n_right + a_merge))
        free = ~occupied
        new_slot = jnp.argmax(free)
        proper_split = (n_left > 0) & (n_right > 0)
        # 4b. merge of a uniformly chosen pair (m, o), m before o in slot order
        second = jnp.floor(second_pick * (num_k - 1)).astype(rank.dtype)
        second = second + (second >= rank[c])  # a different occupied cluster
        o_slot = jnp.argmax(occupied & (rank == second))
        m, o = jnp.minimum(c, o_slot), jnp.maximum(c, o_slot)
        left, right = take(rows, m), take(rows, o)
        merged = jax.tree.map(jnp.add, left, right)
        u_merged = None if conjugate else family.draw_proposal(k_q_merge, merged[0])
        log_h_merge = (-log_split_gain(family, state.alpha, left[0], right[0], merged[0],
                                       u=None if conjugate else (u_c[m], u_c[o], u_merged)) + jnp.log(num_k * 1.0)
                       + betaln(left[0].n + a_merge, right[0].n + a_merge) - betaln(a_merge, a_merge))
        log_u = jnp.log(jax.random.uniform(k_acc))
        do_split = propose_split & proper_split & jnp.any(free) & (log_u < log_h_split)
        do_merge = ~propose_split & (num_k > 1) & (log_u < log_h_merge)
        overflow = state.overflow | (propose_split & proper_split & ~jnp.any(free))

        z = jnp.where(do_split & in_half, new_slot, z)
        rows = jax.tree.map(lambda s, hl, hr: jnp.where(do_split, s.at[c].set(hl).at[new_slot].set(hr), s),
                            rows, half_left, half_right)
        age = jnp.where(do_split & ((slot_index == c) | (slot_index == new_slot)), 0, age)
        # a merged cluster's sub-clusters are the two clusters it was made of
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

        if pair_merges:
            z, zbar, rows, sub, age, num_pair_merges, carried = merge_pairs(
                k_pairs, z, zbar, rows, sub, age, state.alpha, None if conjugate else (u_c, u_sub))
            if not conjugate:
                u_c, u_sub = carried

        # 3. sub-cluster splits of every eligible cluster (eq. 21), all at once; the right
        # sub-cluster moves to a free slot (the r-th accepted split takes the r-th free slot)
        occupied = rows[0].n > 0
        sub_left, sub_right = take(sub, (slice(None), 0)), take(sub, (slice(None), 1))
        eligible = use_sub & occupied & (age > split_delay) & (sub_left[0].n > 0) & (sub_right[0].n > 0)
        if conjugate:
            log_h = log_split_gain(family, state.alpha, sub_left[0], sub_right[0], rows[0])
        else:  # eq. (21), first expression: the two new clusters' parameters drawn from q
            u_parts = family.draw_proposal(k_q_sub, sub[0])  # (C, 2, P)
            log_h = log_split_gain(family, state.alpha, sub_left[0], sub_right[0], rows[0],
                                   u=(u_parts[:, 0], u_parts[:, 1], u_c))
        accept = eligible & (jnp.log(jax.vmap(jax.random.uniform)(_slot_keys(k_split, capacity))) < log_h)
        free = ~occupied
        free_rank = jnp.where(free, jnp.cumsum(free) - 1, capacity)
        matches = free_rank[None, :] == jnp.where(accept, jnp.cumsum(accept) - 1, -1)[:, None]
        target = jnp.argmax(matches, axis=1)
        overflow = overflow | jnp.any(accept & ~jnp.any(matches, axis=1))
        accept = accept & jnp.any(matches, axis=1)
        z = jnp.where(accept[z] & (zbar == 1), target[z], z)
        drop_target = jnp.where(accept, target, capacity)
        rows = jax.tree.map(lambda s, l_, r_: jnp.where(_expand(accept, s), l_, s).at[drop_target].set(
            r_, mode="drop"), rows, sub_left, sub_right)
        age = jnp.where(accept, 0, age).at[drop_target].set(0, mode="drop")
        sub_stats = jax.tree.map(lambda s: jnp.where(_expand(age == 0, s), 0.0, s), sub[0])
        if not conjugate:
            u_c = jnp.where(accept[:, None], u_parts[:, 0], u_c).at[drop_target].set(u_parts[:, 1], mode="drop")

        drawn = jnp.isfinite(log_pi)  # slots occupied at the start of the step
        recorded = {f"theta_{name}": jnp.where(_expand(drawn, params[name][:capacity]), params[name][:capacity],
                                               jnp.nan) for name in recorded_params}
        info = {"num_splits": jnp.sum(accept).astype(jnp.int32), "sweep_rejected": emptied,
                **({"num_pair_merges": num_pair_merges} if pair_merges else {}),
                **({"num_super_clusters": jnp.sum(occupied_before & (group == slot_index)).astype(jnp.int32)}
                   if super_clusters else {}),
                "random_split_accept": do_split, "random_merge_accept": do_merge,
                "split_accept_rate": jnp.sum(accept) / jnp.maximum(jnp.sum(eligible), 1),
                **({} if conjugate else {"param_accept_rate": param_accept})}
        new_slots = {"sub_stats": sub_stats, "x_sum": rows[1], "age": age.astype(jnp.int32),
                     "weights": jnp.exp(log_pi), **recorded,
                     **({} if conjugate else {"u": u_c, "sub_u": u_sub})}
        new_state = state._replace(z=_unblock(z, n), stats=rows[0], overflow=overflow,
                                   aux={**state.aux, "sub_z": _unblock(zbar, n), "slots": new_slots})
        return replicated(new_state), info

    def init(state, x):
        capacity = state.stats.n.shape[0]
        x_sum = jax.ops.segment_sum(x, state.z, num_segments=capacity)
        drawn = {f"theta_{name}": jnp.full((capacity,) + one_row[name].shape, jnp.nan, one_row[name].dtype)
                 for name in recorded_params}
        slots = {"sub_stats": family.empty_stats((capacity, 2)), "x_sum": x_sum,
                 "age": jnp.zeros(capacity, jnp.int32), "weights": jnp.zeros(capacity, x.dtype), **drawn}
        if not conjugate:  # start every cluster's parameters at the centre of the proposal
            u = family.proposal(state.stats)[0]
            slots = {**slots, "u": u, "sub_u": jnp.stack([u, u], axis=1)}
        return replicated(state._replace(aux={**state.aux, "sub_z": jnp.zeros_like(state.z), "slots": slots}))

    def record(state):
        """The weights and parameters drawn in the last step, per slot (the values of z)."""
        return {name: state.aux["slots"][name] for name in record_dims}

    return Kernel("subcluster", exact=not use_sub, step=step, init=init,
                  info_names=("num_splits", "sweep_rejected", "random_split_accept", "random_merge_accept",
                              "split_accept_rate") + (("num_pair_merges",) if pair_merges else ())
                  + (("num_super_clusters",) if super_clusters else ())
                  + (() if conjugate else ("param_accept_rate",)), record=record, record_dims=record_dims)


def _resolve_devices(devices):
    if devices is None:
        return list(jax.local_devices())
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
    if getattr(getattr(model, "prior", None), "discount", 0.0) != 0.0:
        return ("the sub-cluster split ratio (Chang & Fisher 2013, eq. 21) is derived for the Dirichlet "
                "process; this model has a Pitman-Yor prior (discount > 0)")
    component = getattr(model, "component", None)
    if component is not None and not component.conjugate:
        return None if hasattr(component, "log_likelihood_of_stats") else (
            f"a non-conjugate {component.name} needs log_likelihood_of_stats and a proposal (see "
            f"dpppl.kernels.subcluster.parameter_moves)")
    if component is None or type(component).posterior_draw is Family.posterior_draw:
        return "the sampler draws cluster parameters from their posterior, which this component family lacks"
    return None


register("subcluster", build_subcluster_kernel, exact=False, applies=_applies,
         description="sub-cluster splits with parallel restricted Gibbs (Chang & Fisher 2013); "
                     "O(N K D^2) per iteration, vectorised over points and clusters")
