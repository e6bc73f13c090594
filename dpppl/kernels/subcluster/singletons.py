"""Singleton births and deaths in the exact sub-cluster step (docs/kernels/subcluster.md,
"Singleton births and deaths").

The exact step's target is the collapsed posterior of the partition C (alpha fixed during the
move, resampled apart),

    pi(C) ∝ alpha^K prod_c Gamma(N_c) m(x_c),

m the family's marginal likelihood. One move is a Metropolis-Hastings pair:

- *birth* (probability 1/2): a point i drawn uniformly among the N points; if its cluster c holds
  N_c >= 2 points, propose to seat i alone (c loses i, a free slot takes {i});
- *death* (probability 1/2): a singleton cluster {i} drawn uniformly among the S singletons;
  propose to move i into another cluster k drawn with the collapsed Gibbs weights
  r(k | i, C) = N_k p(x_i | x_k) / Z_i,  Z_i = sum_{l != {i}} N_l p(x_i | x_l).

The birth of i in C (to C') is reversed by the death of {i} in C' into c \\ i, so with
S' the singletons of C' and Z'_i the sum above in C',

    H_birth = alpha m(x_i) / Z'_i * N / S',        H_death = Z_i / (alpha m(x_i)) * S / N,

(pi(C') / pi(C) = alpha m(x_i) m(x_{c\\i}) / ((N_c - 1) m(x_c)) times the proposal ratio
(1/S') r(c\\i | i, C') / (1/N): the Gamma and marginal factors cancel against r's numerator).
Every quantity is a statistic of the clusters (O(K) predictive densities per move): nothing
reads the points inside a move. `singleton_moves` moves run in sequence in each step (a loop over
moves, each a vector operation over the cluster slots), each leaving pi invariant; the points are
read once before (the drawn points' coordinates and labels, by their global index) and relabelled
once after (a slot map and the born points' labels)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.core.numerics import computed_once
from dpppl.core.points import num_real, row_of_real

UNIFORMS = 5  # per move: its type, its point, its singleton, its death's target, its acceptance


class _Loop(NamedTuple):
    """What the moves of one step carry from one to the next: the clusters' statistics and sums
    of x (`rows`), their log marginal likelihoods (`log_m`), where each slot's points at the
    step's start are now (`slot_map`), per move the slot its born point now sits in (`born`,
    valid where `alive`: an accepted birth not undone by a later birth of the same point), the
    slots touched, the overflow flag and the numbers of births and deaths accepted."""

    rows: tuple
    log_m: jax.Array
    slot_map: jax.Array
    born: jax.Array
    alive: jax.Array
    touched: jax.Array
    overflow: jax.Array
    births: jax.Array
    deaths: jax.Array


def birth_death_log_ratio(is_birth, log_new, log_z, log_n, log_singletons):
    """log of the Metropolis-Hastings ratio of a singleton move (module docstring):
    log alpha m(x_i) - log Z_i + log N - log S' for a birth, its negative (with S, Z_i of the
    current state) for a death; `log_new` = log alpha m(x_i), `log_z` = log Z_i, `log_n` = log N
    and `log_singletons` = log S' (birth) or log S (death)."""
    return jnp.where(is_birth, 1.0, -1.0) * (log_new - log_z + log_n - log_singletons)


def singleton_moves(setup, alpha, rng_key, clusters, x, overflow, num_moves):
    """`num_moves` singleton births and deaths (module docstring) in sequence on `clusters` (the
    exact step's `_Clusters`, points in blocks of `setup`), conjugate families. A birth that finds
    no free slot is refused and sets `overflow` (the runner grows the capacity and runs the chunk
    again). Returns the clusters, the numbers of births and deaths accepted, and the flag."""
    family = setup.family
    z, rows, age = clusters.z, clusters.rows, clusters.age
    capacity = age.shape[0]
    slots = jnp.arange(capacity, dtype=jnp.int32)
    moves = jnp.arange(num_moves, dtype=jnp.int32)
    n_dtype = rows[0].n.dtype
    u, = computed_once(random.uniform(rng_key, (num_moves, UNIFORMS), n_dtype))
    count = jnp.asarray(num_real(setup.num_valid, setup.n), jnp.int32)
    drawn = jnp.minimum(jnp.floor(u[:, 1] * count).astype(jnp.int32), count - 1)
    point = row_of_real(setup.num_valid, setup.n, drawn)  # each birth's point, by its index among the real points
    x_point = setup.rows_at(setup.as_blocks(x), point)
    z_point = setup.rows_at(z, point)
    point_stats = family.point_stats(x_point)
    log_n = jnp.log(count.astype(n_dtype))

    def move(b, loop):
        stats, x_sum = loop.rows
        n = stats.n
        singleton = n == 1
        num_singletons = jnp.sum(singleton)
        is_birth = u[b, 0] < 0.5
        # birth: the drawn point's slot now (its own if an earlier move seated it alone and it is still there)
        earlier = loop.alive & (point == point[b]) & (moves < b)
        c = jnp.where(jnp.any(earlier), loop.born[jnp.argmax(earlier)], loop.slot_map[z_point[b]]).astype(jnp.int32)
        # death: the singleton of rank floor(u S) in slot order
        rank = jnp.cumsum(singleton) - 1
        s = jnp.argmax(singleton & (rank == jnp.floor(u[b, 2] * num_singletons).astype(rank.dtype))).astype(jnp.int32)
        source = jnp.where(is_birth, c, s)
        moving = jax.tree.map(lambda p, r: jnp.where(is_birth, p[b], r[s]), point_stats, stats)
        x_moving = jnp.where(is_birth, x_point[b], x_sum[s])
        # one evaluation of the marginal: every slot with the point added, its source without it, the point
        # alone; the predictive log p(x_i | x_l) = log m(x_l + x_i) - log m(x_l) (`log_m` carried per slot)
        without = jax.tree.map(lambda r, p: r[source] - p, stats, moving)
        parts = jax.tree.map(lambda r, w, p: jnp.concatenate([r + p, w[None], p[None]]), stats, without, moving)
        log_parts = family.log_marginal(parts)
        log_with, log_without, log_alone = log_parts[:capacity], log_parts[capacity], log_parts[capacity + 1]
        log_m = loop.log_m.at[source].set(log_without)  # the clusters without the moving point
        n_without = n.at[source].add(-1.0)
        log_predictive = jnp.where(slots == source, loop.log_m[source] - log_without, log_with - log_m)
        logits = jnp.where(n_without > 0, jnp.log(jnp.maximum(n_without, 1.0)) + log_predictive, -jnp.inf)
        log_z = jax.scipy.special.logsumexp(logits)
        log_new = jnp.log(alpha) + log_alone
        # the death's target, by the inverse CDF of r at the move's uniform
        p = jnp.exp(logits - log_z)
        k = jnp.sum(jnp.cumsum(p) < u[b, 3] * jnp.sum(p))
        # the first cluster from there (rounding past the last one: the first cluster)
        k = jnp.argmax(jnp.where((slots >= k) & (n_without > 0), capacity - slots,
                                 0.5 * (n_without > 0))).astype(jnp.int32)
        free = n == 0
        t = jnp.argmax(free).astype(jnp.int32)
        # S' after a birth: the new singleton, and c \ i if it is left with one point
        log_singletons = jnp.log(jnp.where(is_birth, num_singletons + 1.0 + (n[c] == 2), num_singletons))
        log_h = birth_death_log_ratio(is_birth, log_new, log_z, log_n, log_singletons)
        can_birth = is_birth & (n[c] >= 2)
        can_death = ~is_birth & (num_singletons > 0) & jnp.isfinite(log_z)
        overflow = loop.overflow | (can_birth & ~jnp.any(free))
        accept = ((can_birth & jnp.any(free)) | can_death) & (jnp.log(u[b, 4]) < log_h)
        birth, death = accept & is_birth, accept & ~is_birth
        # the receiving slot: the free slot t (birth) or k (death), which gets its statistics plus the point's
        receiver = jnp.where(is_birth, t, k)
        received = jax.tree.map(lambda r: r[receiver], parts)
        stats = jax.tree.map(lambda r, w, g: jnp.where(accept, r.at[source].set(w).at[receiver].set(g), r),
                             stats, without, received)
        x_sum = jnp.where(accept, x_sum.at[source].add(-x_moving).at[receiver].add(x_moving), x_sum)
        log_m = jnp.where(accept, log_m.at[receiver].set(log_with[receiver]), loop.log_m)
        slot_map = jnp.where(death & (loop.slot_map == s), k, loop.slot_map)
        born = jnp.where(death & (loop.born == s), k, loop.born).at[b].set(jnp.where(birth, t, -1))
        alive = (loop.alive & ~(birth & earlier)).at[b].set(birth)
        touched = loop.touched | (accept & ((slots == source) | (slots == receiver)))
        return _Loop((stats, x_sum), log_m, slot_map, born, alive, touched, overflow,
                     loop.births + birth, loop.deaths + death)

    start = _Loop(rows, family.log_marginal(rows[0]), slots,
                  jnp.full(num_moves, -1, jnp.int32), jnp.zeros(num_moves, bool), jnp.zeros(capacity, bool),
                  overflow, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    loop = jax.lax.fori_loop(0, num_moves, move, start)
    # relabel: every point by the slot map, then each born point that is still alive to its slot
    z = jnp.append(loop.slot_map, -1)[z]
    index = jnp.arange(z.size, dtype=jnp.int32).reshape(z.shape)
    order = jnp.argsort(jnp.where(loop.alive, point, z.size))
    sorted_points, sorted_slots = jnp.where(loop.alive, point, z.size)[order], loop.born[order]
    at = jnp.minimum(jnp.searchsorted(sorted_points, index), num_moves - 1)
    z = jnp.where(sorted_points[at] == index, sorted_slots[at], z)
    age = jnp.where(loop.touched, 0, age)
    clusters = clusters._replace(z=z, rows=loop.rows, age=age)
    return clusters, (loop.births, loop.deaths), loop.overflow
