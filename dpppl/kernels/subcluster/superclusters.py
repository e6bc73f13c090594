"""Super-clusters of similar clusters (Chang & Fisher 2013, sec. 4.1, Algorithm 1).

The restricted Gibbs sweep of the sub-cluster sampler may be restricted further: each point
only considers the clusters of its current cluster's *super-cluster*. Any randomised grouping
that gives every grouping a positive probability keeps the sweep valid (a Gibbs update within
a block of clusters that the update cannot leave), and grouping similar clusters keeps the
moves that matter. Algorithm 1 draws the groups g given the cluster parameters:

1. A_{k,m} = exp(-D(f(.; theta_k), f(.; theta_m))) for the occupied clusters k, m, with D the
   symmetric Kullback-Leibler (J-) divergence;
2. each cluster k draws one neighbour k' with probability proportional to A_{k,k'}
   (itself included, A_{k,k} = 1);
3. the super-clusters are the connected components of the graph with the edges k - k'.

J-divergences in closed form: Gaussians (the families with a `whitening`) and, as the
paper does for multinomials, the categorical (Dirichlet-multinomial) and Bernoulli
(beta-Bernoulli) distributions of the parameters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpppl.families.base import Family, log_clipped
from dpppl.families.beta_bernoulli import BetaBernoulli
from dpppl.families.dirichlet_multinomial import DirichletMultinomial


def gaussian_j_divergence(loc, white):
    """(K, K) J-divergences between N(loc_k, S_k) with `white` W_k, S_k^-1 = W_k^T W_k
    ((K, D, D) lower triangular, or (K, D) for diagonal covariances):
    J = [tr(S_m^-1 S_k) + tr(S_k^-1 S_m) + d^T (S_k^-1 + S_m^-1) d] / 2 - D, d = loc_k - loc_m,
    with tr(S_k^-1 S_m) = |W_k W_m^-1|_F^2."""
    dim = loc.shape[-1]
    diff = loc[:, None] - loc[None]
    if white.ndim == 2:
        trace = jnp.sum((white[:, None] / white[None]) ** 2, axis=-1)
        mahalanobis = jnp.sum((white[:, None] * diff) ** 2, axis=-1)
    else:
        inverse = jnp.linalg.inv(white)
        trace = jnp.sum(jnp.einsum("kij,mjl->kmil", white, inverse) ** 2, axis=(-2, -1))
        mahalanobis = jnp.sum(jnp.einsum("kij,kmj->kmi", white, diff) ** 2, axis=-1)
    return 0.5 * (trace + trace.T + mahalanobis + mahalanobis.T) - dim


def categorical_j_divergence(probs):
    """(K, K) J-divergences sum_d (p_kd - p_md)(log p_kd - log p_md) between categorical
    distributions (rows of `probs`)."""
    log_p = log_clipped(probs)
    return jnp.sum((probs[:, None] - probs[None]) * (log_p[:, None] - log_p[None]), axis=-1)


def bernoulli_j_divergence(probs):
    """(K, K) J-divergences between products of independent Bernoullis (rows of `probs`)."""
    return categorical_j_divergence(probs) + categorical_j_divergence(1.0 - probs)


def j_divergence(family: Family, params):
    """J-divergences between the K clusters' observation distributions."""
    if hasattr(family, "whitening"):
        w = family.whitening(params)
        return gaussian_j_divergence(w.loc, w.white)
    if isinstance(family, DirichletMultinomial):
        return categorical_j_divergence(params["probs"])
    if isinstance(family, BetaBernoulli):
        return bernoulli_j_divergence(params["probs"])
    raise NotImplementedError(f"no J-divergence for the {family.name} family")


def has_j_divergence(family: Family) -> bool:
    return hasattr(family, "whitening") or isinstance(family, (DirichletMultinomial, BetaBernoulli))


def sample_super_clusters(rng_key, divergence, occupied):
    """Super-cluster of every slot (Algorithm 1): the smallest slot of its connected
    component. `divergence` (K, K) J-divergences, `occupied` (K,) mask; empty slots are
    groups of their own."""
    capacity = occupied.shape[0]
    logits = jnp.where(occupied[None] & occupied[:, None], -divergence, -jnp.inf)
    logits = jnp.where(jnp.eye(capacity, dtype=bool), 0.0, logits)  # A_kk = 1, also for empty slots
    neighbour = jax.random.categorical(rng_key, logits, axis=1)
    index = jnp.arange(capacity)

    def spread(group):
        """One round of label propagation along the edges k - k' in both directions."""
        group = jnp.minimum(group, group[neighbour])
        return jnp.minimum(group, jax.ops.segment_min(group, neighbour, num_segments=capacity))

    def changing(carry):
        return carry[1]

    def step(carry):
        group = carry[0]
        new = spread(group)
        return new, jnp.any(new != group)

    return jax.lax.while_loop(changing, step, (index, jnp.array(True)))[0]
