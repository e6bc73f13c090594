"""Small numerics shared by every layer: inverse-CDF draws of an index, Gamma draws on the log
scale and a slice sampler on the log scale."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core import numerics_random as random


def sample_index(logits: jax.Array, u: jax.Array) -> jax.Array:
    """Draw an index from unnormalised `logits` by inverting the CDF at `u` in [0, 1).

    Slots with -inf logits are never chosen, and appending -inf slots does not change
    the draw: this is what lets the capacity grow without changing a run.
    """
    p = jnp.exp(logits - jnp.max(logits))
    cdf = jnp.cumsum(p)
    target = jnp.maximum(u, jnp.finfo(cdf.dtype).tiny) * cdf[-1]
    return jnp.sum(cdf < target).astype(jnp.int32)


def log_gamma_draw(rng_key, shape_param, shape=(), dtype=None) -> jax.Array:
    """log G for G ~ Gamma(shape_param, 1), `shape` draws (`shape_param` broadcast to it), by Marsaglia &
    Tsang's (2000) rejection method, all entries in one `while_loop` (each round redraws the rejected
    ones; a round accepts an entry with probability >= 0.95); shapes below 1 use
    Gamma(a) = Gamma(a + 1) U^(1/a), added on the log scale (log G + log U / a), so a draw below the
    smallest float (a shape near 0) keeps a finite log. Exact like `jax.random.loggamma`, whose
    per-element loop is thousands of HLO instructions.

    Each round draws all its random numbers with one `jax.random.uniform` call (one threefry
    expansion in the compiled program): per entry the normal of the proposal, by Box-Muller from two
    uniforms, the acceptance uniform and the uniform of the shape boost; an entry keeps the numbers
    of the round that accepted it (the boost uniform of that round is independent of its acceptance).
    """
    dtype = dtype or jnp.result_type(float)
    a = jnp.broadcast_to(jnp.asarray(shape_param, dtype), shape)
    boost = a < 1.0
    d = jnp.where(boost, a + 1.0, a) - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)

    def body(carry):
        i, done, value = carry
        u = random.uniform(random.fold_in(rng_key, i), (4,) + tuple(shape), dtype)
        x = jnp.sqrt(-2.0 * jnp.log1p(-u[0])) * jnp.cos(2.0 * np.pi * u[1])  # N(0, 1) (Box-Muller)
        v = (1.0 + c * x) ** 3
        log_v = jnp.log(jnp.where(v > 0, v, 1.0))
        ok = (v > 0) & (jnp.log(u[2]) < 0.5 * x * x + d - d * v + d * log_v)
        log_g = jnp.log(d) + log_v + jnp.where(boost, jnp.log1p(-u[3]) / a, 0.0)
        return i + 1, done | ok, jnp.where(ok & ~done, log_g, value)

    return jax.lax.while_loop(lambda carry: ~jnp.all(carry[1]), body,
                              (0, jnp.zeros(shape, bool), jnp.zeros(shape, dtype)))[2]


def permutation_of_first(rng_key, size: int, n=None) -> jax.Array:
    """A random order (int32, `size`) of the first `n` of `size` indices, the others after them
    in place: its first n entries are `jax.random.permutation(rng_key, n)` bit for bit,
    whatever `size` (n traced, at most `size`; None: `size`), so a sweep over points padded to
    a shape class visits the real points in the order of the unpadded run.

    It is JAX's shuffle (`jax.random.permutation`): rounds of a stable sort by random 32-bit
    keys, as many rounds as 3 log(n) / log(2^32 - 1) rounded up; each round's keys are drawn for
    all `size` positions (partitionable threefry: the first n are the keys of the unpadded draw)
    and the padded positions get the largest key, so they stay last; a round the real points
    would not run (n past its size threshold only) leaves the order as it is.
    """
    order = jnp.arange(size, dtype=jnp.int32)
    real = None if n is None else jnp.arange(size) < n
    for r in range(_shuffle_rounds(size)):
        rng_key, subkey = random.split(rng_key)
        keys = random.bits(subkey, (size,))
        if real is None:
            order = jax.lax.sort_key_val(keys, order)[1]
        else:
            shuffled = jax.lax.sort_key_val(jnp.where(real, keys, jnp.iinfo(jnp.uint32).max), order)[1]
            order = jnp.where(n > _SHUFFLE_THRESHOLDS[r], shuffled, order)
    return order


def _shuffle_rounds(n: int) -> int:
    """The sorting rounds of `jax.random.permutation` over n entries (its formula)."""
    return int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))


def _first_needing(rounds: int) -> int:
    """The smallest n whose shuffle takes more than `rounds` rounds, minus one."""
    n = max(int(np.iinfo(np.uint32).max ** (rounds / 3)) - 2, 1)
    while _shuffle_rounds(n + 1) <= rounds:
        n += 1
    return n


_SHUFFLE_THRESHOLDS = tuple(_first_needing(r) for r in range(4))
"""Round r of the shuffle runs for n past `_SHUFFLE_THRESHOLDS[r]` entries (1, 1625, ...)."""


def slice_log_alpha(rng_key, alpha, log_density, width=1.0, max_steps=32, max_shrinks=200):
    """Slice-sample u = log alpha with target log_density(alpha) + u (the Jacobian): the
    [`slice_log`][dpppl.core.numerics.slice_log] update of a density given on alpha."""
    return jnp.exp(slice_log(rng_key, jnp.log(alpha), lambda u: log_density(jnp.exp(u)) + u,
                             width, max_steps, max_shrinks))


def slice_log(rng_key, u0, target, width=1.0, max_steps=32, max_shrinks=200):
    """One slice update (Neal 2003) of u = log alpha whose log density `target(u)` is given
    on u itself, so it stays finite where alpha = exp(u) underflows to 0.

    Stepping out is capped at `max_steps` per side and shrinkage at `max_shrinks`
    proposals; the level is drawn with `log U <= 0` and accepted with `>=`, so the
    current point always lies in the slice and the loop ends even when rounding makes the
    level equal to the current density. If the target is not finite at the current
    point, or no proposal is accepted within the cap (each rejection shrinks the
    interval, so this takes more than 2^-200 of its width), u is left unchanged.
    """
    k_level, k_pos, k_shrink = random.split(rng_key, 3)
    target0 = target(u0)
    level = target0 + jnp.log(random.uniform(k_level, minval=1e-300))
    left = u0 - width * random.uniform(k_pos)
    right = left + width

    def step_out(bound, direction):
        def cond(c):
            b, i = c
            return (i < max_steps) & (target(b) >= level)
        return jax.lax.while_loop(cond, lambda c: (c[0] + direction * width, c[1] + 1), (bound, 0))[0]

    left, right = step_out(left, -1.0), step_out(right, 1.0)

    def cond(c):
        return ~c[3] & (c[5] < max_shrinks)

    def shrink(c):
        lo, hi, key, _, _, i = c
        key, sub = random.split(key)
        u = random.uniform(sub, minval=lo, maxval=hi)
        ok = target(u) >= level
        lo = jnp.where(~ok & (u < u0), u, lo)
        hi = jnp.where(~ok & (u >= u0), u, hi)
        return lo, hi, key, ok, u, i + 1

    finite = jnp.isfinite(target0)
    _, _, _, ok, u, _ = jax.lax.while_loop(cond, shrink, (left, right, k_shrink, ~finite, u0, 0))
    return jnp.where(ok & finite, u, u0)


def normal_draw(rng_key, shape=(), dtype=None) -> jax.Array:
    """Standard normal draws of shape `shape` by Box-Muller from one `jax.random.uniform` draw of
    `shape + (2,)` (each draw's radius and angle uniforms on the last axis): exact like `jax.random.normal`,
    whose inverse-error-function polynomial is hundreds of HLO instructions per call site in float64
    against a few here. Entry [i, ...] of a draw depends on the key and its index only (partitionable
    threefry), so a leading axis of points padded to a shape class leaves the real points' draws as
    they are."""
    dtype = dtype or jnp.result_type(float)
    u = random.uniform(rng_key, tuple(shape) + (2,), dtype)
    return jnp.sqrt(-2.0 * jnp.log1p(-u[..., 0])) * jnp.cos(2.0 * np.pi * u[..., 1])


def computed_once(*values):
    """`values` (arrays of one shape, any dtypes) unchanged, each computed once in the compiled step:
    XLA fuses a chain of cheap elementwise work (a scalar decision's uniforms' threefry hash, its log
    Gammas) into every fusion that reads its result, so a decision read by many updates was hashed and
    expanded once per reader; a sort (by constant keys: the order does not change) is never fused into
    its readers, so what comes out of it is computed once and read from memory."""
    doubled = [jnp.stack([v, v]) for v in values]
    keys = jax.lax.broadcasted_iota(jnp.int32, doubled[0].shape, 0)
    return tuple(v[0] for v in jax.lax.sort((keys, *doubled), dimension=0, num_keys=1)[1:])
