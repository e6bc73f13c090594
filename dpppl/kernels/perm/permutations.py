"""Sampling the permutation given the clustering (Liang, Jordan & Taskar 2007, sec. 3 and 4).

The first half of the permutation-augmented sampler (`dpppl.kernels.perm.sampler`): three
laws p(pi | C), each placing every cluster in one contiguous block (pi in Pi(C)).

`"uniform"` - eq. (3): p(pi | C) = 1 / (|C|! prod_{c in C} |c|!), a uniformly random order of
the clusters, then within each cluster. Exact; O(N log N).

`"markov"` - Markov Gibbs scans (sec. 4.1): the clusters in a uniformly random order; within a
cluster the first point is uniform and each next point j is drawn from those not yet placed
with probability proportional to w(i -> j) = p(x_j | x_i), i the previous point,

    p(pi | C) = 1/|C|! prod_{c in C} h(pi_c),
    h(pi_c) = 1/|c| prod_{t=2}^{|c|} w(pi_{t-1} -> pi_t) / sum_{u >= t} w(pi_{t-1} -> pi_u),

which keeps the form of eq. (4) (h joins B(c)). Exact.

`"projection"` - random projections (sec. 4.2): clusters sorted by u . v_c and points within
them by u . v_i for a uniformly random unit vector u. p(pi | C) cannot be evaluated, so this is
the paper's stochastic hill-climbing for burn-in, not exact. O(N D + N log N).

Costs, the point representations and the handling of ties are in `docs/kernels/perm.md`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.families.base import take

PERMUTATIONS = ("uniform", "markov", "projection")
EXACT_PERMUTATIONS = ("uniform", "markov")


def _cluster_keys(u, z, capacity):
    """I.i.d. uniform keys, one per occupied slot, from the N uniforms `u`: slot c takes the
    uniform of its lowest-indexed point (which does not depend on the uniforms), so the
    induced order of the clusters is uniformly random. Returns the key of each point's
    cluster, shape (N,) (meaningless for a point without a slot). The uniforms have the points
    on their axis, so padding the points adds draws after the real points' and changes none."""
    n = z.shape[0]
    first = jax.ops.segment_min(jnp.arange(n), z, num_segments=capacity)
    return u[jnp.minimum(first, n - 1)][z]


def _consistent_order(cluster_key, z, within):
    """Indices of the points sorted by their cluster's key (ties by slot), then by
    `within`: every cluster is a contiguous block. Points without a slot (label -1, padded
    points, `BoundModel.padded`) come last, after the real points in the order they have
    without them."""
    return jnp.lexsort((within, z, jnp.where(z >= 0, cluster_key, jnp.inf))).astype(jnp.int32)


def uniform_permutation(uniforms, z, capacity):
    """pi ~ p(pi | C) uniform on Pi(C) (eq. 3), from `uniforms` (N, 2), one row per point: column
    0 orders the clusters (`_cluster_keys`), column 1 the points within them."""
    return _consistent_order(_cluster_keys(uniforms[:, 0], z, capacity), z, uniforms[:, 1])


def single_point_predictive(family, x):
    """Predictive parameters of p(. | x_i) for every point i: rows of `x`."""
    return family.predictive_params(family.point_stats(x))


def pairwise_log_predictive(family, params, x):
    """log p(x_j | x_i) for matched rows: `params` (from
    `single_point_predictive`, rows i) and points `x` (rows j) -> (rows,)."""
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
    k_clusters, k_scan = random.split(rng_key)
    cluster_u = random.uniform(k_clusters, (n,))
    params = single_point_predictive(family, x)
    sizes = jax.ops.segment_sum(jnp.ones(n, jnp.int32), z, num_segments=capacity)
    steps = jnp.max(sizes)

    def body(carry):
        t, placed, rank, prev = carry
        g = jax.random.gumbel(random.fold_in(k_scan, t), (n,), dtype=x.dtype)
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
    return _consistent_order(_cluster_keys(cluster_u, z, capacity), z, rank)


def projection_representation(family, x):
    """The vector representation v_i of each point for random projections (sec. 4.2):
    the point itself, or its proportions for count data."""
    if family.data_kind == "count":
        return x / jnp.maximum(jnp.sum(x, axis=-1, keepdims=True), 1.0)
    return x


def projection_permutation(rng_key, family, x, z, capacity):
    """pi from a random projection (sec. 4.2): clusters by u . v_c, points by u . v_i."""
    u = random.normal(rng_key, (x.shape[1],), dtype=x.dtype)
    u = u / jnp.linalg.norm(u)
    proj = projection_representation(family, x) @ u
    total = jax.ops.segment_sum(proj, z, num_segments=capacity)
    count = jax.ops.segment_sum(jnp.ones_like(proj), z, num_segments=capacity)
    cluster_proj = (total / jnp.maximum(count, 1.0))[z]
    return _consistent_order(cluster_proj, z, proj)


def sample_permutation(kind: str, rng_key, uniforms, family, x, z, capacity):
    """Dispatch on `kind` in `PERMUTATIONS`; returns pi, int32 (N,). `"uniform"` reads the
    (N, 2) `uniforms` (one row per point), the others draw from `rng_key`. With `"uniform"` and
    `"projection"` the points labelled -1 (padded, `BoundModel.padded`) are last and the real
    points' order is the one drawn without them."""
    if kind == "uniform":
        return uniform_permutation(uniforms, z, capacity)
    if kind == "markov":
        return markov_permutation(rng_key, family, x, z, capacity)
    return projection_permutation(rng_key, family, x, z, capacity)
