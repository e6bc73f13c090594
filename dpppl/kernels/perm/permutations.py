"""Sampling the permutation given the clustering (Liang, Jordan & Taskar 2007, sec. 3 and 4).

The permutation-augmented sampler (:mod:`dpppl.kernels.perm`) alternates between a
permutation pi of the N points given the clustering C, and C given pi. This module holds
the first half: three laws p(pi | C), each placing every cluster in one contiguous block
(pi is *consistent* with C, pi in Pi(C)), so that C is among the clusterings the dynamic
program of the second half sums over.

``"uniform"`` - eq. (3): the uniform law on Pi(C),

    p(pi | C) = 1 / (|C|! prod_{c in C} |c|!):

a uniformly random order of the clusters, then a uniformly random order within each
cluster. Exact; O(N log N).

``"markov"`` - Markov Gibbs scans (sec. 4.1): the clusters in a uniformly random order;
within a cluster the first point is uniform and each next point j is drawn from the
points of the cluster not yet placed with probability proportional to the predictive
likelihood w(i -> j) = p(x_j | x_i) of j given the previous point i alone,

    p(pi | C) = 1/|C|! prod_{c in C} h(pi_c),
    h(pi_c) = 1/|c| prod_{t=2}^{|c|} w(pi_{t-1} -> pi_t) / sum_{u >= t} w(pi_{t-1} -> pi_u),

with pi_c the order of the points of c. p(pi | C) keeps the A(|C|) prod_c B(c) form
of eq. (4) (the factor h joins B(c)), so the clustering step stays a dynamic program
(:func:`dpppl.kernels.perm.markov_segment_matrix` evaluates h on every segment). Exact;
the clusters are scanned in parallel, max_c |c| steps of O(N D) (NIW: O(N D^2)) each,
O(N max_c |c|) in all - the O(|c|^2) of the paper per cluster.

``"projection"`` - random projections (sec. 4.2): draw a uniformly random unit vector u,
sort the clusters by u . v_c (v_c the mean of the points' vector representations) and
the points within each cluster by u . v_i. The representation is the point itself for
real and binary data and its proportions x_i / sum_j x_ij for counts. p(pi | C) is the
volume of a polyhedral cone and cannot be evaluated, so the augmented chain is *not*
exact: it is the paper's stochastic hill-climbing for burn-in (see :mod:`dpppl.kernels.perm`).
O(N D + N log N).

Every sampler draws random numbers whose shapes depend on N and D only, never on the
cluster capacity (see :mod:`dpppl.core.state`). Ties (probability zero) are broken by
slot index, so the result is always consistent with C.

Reference
---------
P. Liang, M. I. Jordan and B. Taskar, "A permutation-augmented sampler for DP mixture
models", ICML 2007.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpppl.families.base import take

PERMUTATIONS = ("uniform", "markov", "projection")
EXACT_PERMUTATIONS = ("uniform", "markov")


def _cluster_keys(rng_key, z, capacity):
    """I.i.d. uniform keys, one per occupied slot, from N uniforms: slot c takes the
    uniform of its lowest-indexed point (which does not depend on the uniforms), so the
    induced order of the clusters is uniformly random. Returns the key of each point's
    cluster, shape (N,)."""
    n = z.shape[0]
    u = jax.random.uniform(rng_key, (n,))
    first = jax.ops.segment_min(jnp.arange(n), z, num_segments=capacity)
    return u[jnp.minimum(first, n - 1)][z]


def _consistent_order(cluster_key, z, within):
    """Indices of the points sorted by their cluster's key (ties by slot), then by
    ``within``: every cluster is a contiguous block."""
    return jnp.lexsort((within, z, cluster_key)).astype(jnp.int32)


def uniform_permutation(rng_key, z, capacity):
    """pi ~ p(pi | C) uniform on Pi(C) (eq. 3)."""
    k_clusters, k_points = jax.random.split(rng_key)
    within = jax.random.uniform(k_points, z.shape)
    return _consistent_order(_cluster_keys(k_clusters, z, capacity), z, within)


def single_point_predictive(family, x):
    """Predictive parameters of p(. | x_i) for every point i: rows of ``x``."""
    return family.predictive_params(family.point_stats(x))


def pairwise_log_predictive(family, params, x):
    """log p(x_j | x_i) for matched rows: ``params`` (from
    :func:`single_point_predictive`, rows i) and points ``x`` (rows j) -> (rows,)."""
    def one(p, xj):
        return family.log_predictive(jax.tree.map(lambda a: a[None], p), xj)[0]
    return jax.vmap(one)(params, x)


def markov_permutation(rng_key, family, x, z, capacity):
    """pi ~ the Markov Gibbs scan law of sec. 4.1 (see the module docstring).

    All clusters are scanned at once: step t places the t-th point of every cluster that
    has one left, choosing among the cluster's unplaced points by Gumbel-max on log
    w(previous -> j) (uniform at t = 0).
    """
    n = x.shape[0]
    k_clusters, k_scan = jax.random.split(rng_key)
    params = single_point_predictive(family, x)
    sizes = jax.ops.segment_sum(jnp.ones(n, jnp.int32), z, num_segments=capacity)
    steps = jnp.max(sizes)

    def body(carry):
        t, placed, rank, prev = carry
        g = jax.random.gumbel(jax.random.fold_in(k_scan, t), (n,), dtype=x.dtype)
        prev_of = prev[z]
        logw = pairwise_log_predictive(family, take(params, jnp.maximum(prev_of, 0)), x)
        score = jnp.where(placed, -jnp.inf, jnp.where(t == 0, 0.0, logw) + g)
        best = jax.ops.segment_max(score, z, num_segments=capacity)
        chosen = ~placed & (score == best[z])
        rank = jnp.where(chosen, t, rank)
        prev = prev.at[jnp.where(chosen, z, capacity)].set(jnp.arange(n, dtype=jnp.int32), mode="drop")
        return t + 1, placed | chosen, rank, prev

    init = (jnp.zeros((), jnp.int32), jnp.zeros(n, bool), jnp.zeros(n, jnp.int32),
            jnp.full(capacity, -1, jnp.int32))
    _, _, rank, _ = jax.lax.while_loop(lambda c: c[0] < steps, body, init)
    return _consistent_order(_cluster_keys(k_clusters, z, capacity), z, rank)


def projection_representation(family, x):
    """The vector representation v_i of each point for random projections (sec. 4.2):
    the point itself, or its proportions for count data."""
    if family.data_kind == "count":
        return x / jnp.maximum(jnp.sum(x, axis=-1, keepdims=True), 1.0)
    return x


def projection_permutation(rng_key, family, x, z, capacity):
    """pi from a random projection (sec. 4.2): clusters by u . v_c, points by u . v_i."""
    u = jax.random.normal(rng_key, (x.shape[1],), dtype=x.dtype)
    u = u / jnp.linalg.norm(u)
    proj = projection_representation(family, x) @ u
    total = jax.ops.segment_sum(proj, z, num_segments=capacity)
    count = jax.ops.segment_sum(jnp.ones_like(proj), z, num_segments=capacity)
    cluster_proj = (total / jnp.maximum(count, 1.0))[z]
    return _consistent_order(cluster_proj, z, proj)


def sample_permutation(kind: str, rng_key, family, x, z, capacity):
    """Dispatch on ``kind`` in :data:`PERMUTATIONS`; returns pi, int32 (N,)."""
    if kind == "uniform":
        return uniform_permutation(rng_key, z, capacity)
    if kind == "markov":
        return markov_permutation(rng_key, family, x, z, capacity)
    return projection_permutation(rng_key, family, x, z, capacity)
