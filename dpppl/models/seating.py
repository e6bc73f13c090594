"""Seating points one at a time by the collapsed conditional (Neal 2000, algorithm 3).

With the component parameters integrated out, point i joins slot c with probability

    p(z_i = c | z_-i, x) ∝ w_c(z_-i) p(x_i | x_{c, -i}),

where w_c are the prior's sequential weights (`log_seat_weights`: |c| - d and
alpha + K d for the CRP/Pitman-Yor, E[pi_c | Z] for stick-breaking sticks, eq. 6 of
Porteous et al. 2006). A Gibbs sweep removes each point first; over an empty partition the
same pass is the *sequential prediction* initialiser of Liang et al. (2007, sec. 5.1).
Statistics are updated incrementally and the predictive parameters of the two slots a
point left and joined are recomputed, nothing else.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.core.numerics import sample_index
from dpppl.core.state import PartitionState, set_row
from dpppl.families.base import add_point, take
from dpppl.models.native_seating import native_sb_sweep, native_seat_points, use_native, use_native_sticks
from dpppl.priors.stick_breaking import StickBreaking

def refresh(family, stats, params, k):
    """After a point left or joined slot `k`: zero the slot's statistics exactly when it
    emptied, and recompute its predictive parameters (the only ones that changed)."""
    row = take(stats, k)
    emptied = row.n < 0.5
    row = jax.tree.map(lambda s: jnp.where(emptied, jnp.zeros_like(s), s), row)
    return set_row(stats, k, row), set_row(params, k, family.predictive_params(row))


def sweep_draws(rng_key, x):
    """The random numbers of one sweep over the points of `x`: `shuffle` (N,) uniforms that
    fix the visiting order (`visiting_order`) and `seat` (N,) uniforms, one per visit
    (shapes independent of the slot capacity, so growing it never changes the draws).

    Both are the columns of one (N, 2) uniform draw: one threefry hash in the program rather
    than three (a split and two draws; on CPU each is a loop of some 150-200 instructions), and
    row i is the same for every N >= i (the draw's counters run row by row), so points padded
    at the end never change the real points' numbers."""
    u = random.uniform(rng_key, (x.shape[0], 2), dtype=x.dtype)
    return u[:, 0], u[:, 1]


def visiting_order(shuffle, n=None):
    """The Fisher-Yates shuffle of 0..N-1 driven by uniforms `shuffle` (N,): for
    j = N-1, ..., 1, swap the entries at j and r_j = min(floor(v_j (j + 1)), j).

    Uniform over permutations up to the resolution of the float uniforms (r_j is off by at
    most (j + 1) 2^-52 in probability in float64); a Gibbs sweep leaves the posterior
    invariant for any visiting order drawn independently of the state, so this only
    matters for mixing. It is one sequential pass (the native sweep runs the same one),
    where `jax.random.permutation` sorts twice: 8 ms for 10^4 points on this CPU.

    `n` (traced, at most N): the order of the first n points only, padded points staying at the
    end; its first n entries are the order `visiting_order(shuffle[:n])` gives.
    """
    size = shuffle.shape[0]
    n = size if n is None else n

    def swap(t, order):
        j = n - 1 - t
        r = jnp.minimum(jnp.floor(shuffle[j] * (j + 1)).astype(order.dtype), j)
        a, b = order[j], order[r]
        return order.at[j].set(b).at[r].set(a)

    return jax.lax.fori_loop(0, n - 1, swap, jnp.arange(size, dtype=jnp.int32))


def visit_points(family, state: PartitionState, order, body, n=None) -> PartitionState:
    """Run `body(t, (z, stats, predictive params, overflow))` for each point of `order` (its
    first `n`, the real points, when the points are padded)."""
    params = family.predictive_params(state.stats)
    z, stats, _, overflow = jax.lax.fori_loop(
        0, order.shape[0] if n is None else n, body, (state.z, state.stats, params, state.overflow))
    return state._replace(z=z, stats=stats, overflow=overflow)


def seat_points(family, prior, x, shuffle, uniforms, state: PartitionState, remove_first: bool,
                native: bool | None = None, num_valid=None):
    """Seat every point one at a time in the order `visiting_order(shuffle)`, point t of
    that order drawn with `uniforms[t]`; with `remove_first` they leave their current
    cluster first (a Gibbs sweep), otherwise they start unassigned.

    On CPU the loop runs as one native call where it is covered
    ([`native_seating`][dpppl.models.native_seating]; same draws up to rounding; under a stick-breaking
    prior, the seating without `remove_first`, `init="sequential"`'s): `native`
    True requires it, False never takes it, None follows `DPPPL_NATIVE` (default: when it builds).
    `num_valid` (traced): only the first `num_valid` points are real (`BoundModel.padded`); the
    others are never visited, and the draws are those of the unpadded points.
    """
    if use_native(family, prior, native):
        return native_seat_points(family, prior, x, shuffle, uniforms, state, remove_first, num_valid)
    if not remove_first and isinstance(prior, StickBreaking) and native is not False and use_native_sticks(family):
        return native_sb_sweep(family, prior, x, shuffle, uniforms, state, num_valid, sequential=True)
    alpha = state.alpha
    order = visiting_order(shuffle, num_valid)

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

    return visit_points(family, state, order, body, num_valid)


def sequential_prediction(bound_model, rng_key, state: PartitionState, x) -> PartitionState:
    """Seat every point, in a random order, into `state` (whose statistics must be
    empty) by CRP weight times posterior predictive (Liang et al. 2007, sec. 5.1)."""
    shuffle, uniforms = sweep_draws(rng_key, x)
    return seat_points(bound_model.family, bound_model.prior, x, shuffle, uniforms, state, remove_first=False,
                       num_valid=bound_model.num_valid)
