"""Collapsed Gibbs sampling of cluster labels (Neal 2000, algorithm 3).

With the component parameters integrated out, each label is drawn from its full
conditional given all other labels (the CRP/Pitman-Yor seating weights times the
posterior predictive of the point under each cluster; Liang et al. 2007, sec. 2;
Porteous et al. 2006, eq. 9 in the stick-breaking form):

    p(z_i = c | z_-i, x) ∝ (|c|_-i - d) p(x_i | x_{c, -i})      for an existing cluster c,
    p(z_i = new | z_-i, x) ∝ (alpha + K_-i d) p(x_i)               for a new cluster.

One sweep visits every point once, in a fresh random order. The cluster statistics
are updated incrementally as a point leaves and joins a cluster, and the predictive
quantities (e.g. the Student-t precision of NIW) are recomputed for those two clusters
only: a sweep costs O(N C D^2) for C slots. The same pass without removals, over an
empty partition, is the *sequential prediction* initialiser of Liang et al. (2007,
sec. 5.1): points are seated one by one by the CRP weights times the predictive.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..families.base import add_point, take
from .base import Kernel, exchangeable_prior_only, register
from .state import PartitionState, sample_index, set_row


def refresh(family, stats, params, k):
    """After a point left or joined slot ``k``: zero the slot's statistics exactly when it
    emptied, and recompute its predictive parameters (the only ones that changed)."""
    row = take(stats, k)
    emptied = row.n < 0.5
    row = jax.tree.map(lambda s: jnp.where(emptied, jnp.zeros_like(s), s), row)
    return set_row(stats, k, row), set_row(params, k, family.predictive_params(row))


def sweep_draws(rng_key, x):
    """A random visiting order of the points of ``x`` and one uniform per visit (shapes
    independent of the slot capacity, so growing it never changes the draws)."""
    k_order, k_u = jax.random.split(rng_key)
    n = x.shape[0]
    return jax.random.permutation(k_order, n), jax.random.uniform(k_u, (n,), dtype=x.dtype)


def visit_points(family, state: PartitionState, order, body) -> PartitionState:
    """Run ``body(t, (z, stats, predictive params, overflow))`` for each point of ``order``."""
    params = family.predictive_params(state.stats)
    z, stats, _, overflow = jax.lax.fori_loop(
        0, order.shape[0], body, (state.z, state.stats, params, state.overflow))
    return state._replace(z=z, stats=stats, overflow=overflow)


def _seat(family, prior, x, order, uniforms, state: PartitionState, remove_first: bool):
    """Seat points ``order`` one at a time; with ``remove_first`` they leave their
    current cluster first (a Gibbs sweep), otherwise they start unassigned."""
    alpha = state.alpha

    def body(t, carry):
        z, stats, params, overflow = carry
        i = order[t]
        xi = x[i]
        point = family.point_stats(xi)
        if remove_first:
            stats = add_point(stats, z[i], point, -1.0)
            stats, params = refresh(family, stats, params, z[i])
        counts = stats.n
        log_existing, log_new = prior.log_seat_weights(counts, alpha)
        log_pred = family.log_predictive(params, xi)
        empty = counts < 0.5
        has_empty = jnp.any(empty)
        first_empty = jnp.argmax(empty)
        logits = log_existing + log_pred
        logits = jnp.where(has_empty, logits.at[first_empty].set(log_new + log_pred[first_empty]), logits)
        k = sample_index(logits, uniforms[t])
        stats = add_point(stats, k, point, 1.0)
        stats, params = refresh(family, stats, params, k)
        return z.at[i].set(k), stats, params, overflow | ~has_empty

    return visit_points(family, state, order, body)


def build_gibbs_kernel(bound_model) -> Kernel:
    """One collapsed-Gibbs sweep over all points, in a random order, per step."""
    family, prior = bound_model.family, bound_model.prior

    def step(rng_key, state, x):
        order, uniforms = sweep_draws(rng_key, x)
        return _seat(family, prior, x, order, uniforms, state, remove_first=True), {}

    return Kernel("gibbs", exact=True, step=step)


def sequential_prediction(bound_model, rng_key, state: PartitionState, x) -> PartitionState:
    """Seat every point, in a random order, into ``state`` (whose statistics must be
    empty) by CRP weight times posterior predictive (Liang et al. 2007, sec. 5.1)."""
    order, uniforms = sweep_draws(rng_key, x)
    return _seat(bound_model.family, bound_model.prior, x, order, uniforms, state, remove_first=False)


register("gibbs", build_gibbs_kernel, exact=True, applies=exchangeable_prior_only,
         description="collapsed Gibbs, one label at a time (Neal 2000, alg. 3); O(N K D^2) per sweep")
