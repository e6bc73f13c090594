"""Collapsed Gibbs sampling of explicit labels under a stick-breaking prior
(Ishwaran & James 2003; Porteous, Ihler, Smyth & Welling 2006, sec. 3.2).

With the component parameters and the sticks V integrated out, label z_n is drawn from
eq. (9):

    P(z_n = i | Z_-n, X) ∝ E[pi_i | Z_-n] p(x_n | x_{i, -n}),    i = 1, 2, ...,

where E[pi_i | Z_-n] is eq. (6) with a*_i = a_i + N_i^-n, b*_i = b_i + sum_{j>i} N_j^-n
(`log_expected_weights`). Labels below the largest
occupied one K that are empty are sampled with the prior predictive p(x_n); every label
past K has the prior predictive too, so their total, prod_{j<=K} b*_j / (a*_j + b*_j)
p(x_n), is one lumped term and the normaliser is a sum of K + 1 terms (sec. 3.2). The
draw inverts the CDF at one uniform u over labels 1, 2, ... in order, so when it falls
in the lumped tail the concrete label is the first i > K whose cumulative weight passes
u: given the tail, label K + m with probability a_{K+m} / (a_{K+m} + b_{K+m})
prod_{K<j<K+m} b_j / (a_j + b_j), the prior's stick-breaking continued past K (sec. 3.2:
"by finding each of these probabilities sequentially ...").

Slot k of the [`PartitionState`][dpppl.core.state.PartitionState] is label k + 1. With C slots
the CDF covers labels 1..C and a last cell "past C" whose mass is the remaining stick
times p(x_n); a draw landing there sets `overflow` and [`dpppl.sample`][dpppl.sample] re-runs the
chunk with twice the slots, from the same keys: the uniforms do not depend on C, so the
re-run makes the same draws. The chain therefore samples P(Z | X) on the infinite label
space exactly. One sweep visits every point once in a fresh random order; the cost is
O(N C D^2) for NIW in this JAX loop, O(N (L D^2 + m)) in the native sweep (CPU), L the largest
occupied label and m how far past it a new label is drawn: it evaluates labels 1..L and the
lumped tail only, and continues the inversion along the prior's terms when the uniform falls
in the tail (`docs/kernels/sbgibbs.md`). Alone, this sampler mixes poorly over labels
(sec. 3.3): combine it with `labelswap` and `labelpermute`.
"""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp

from dpppl.families.base import add_point
from dpppl.priors.stick_breaking import StickBreaking
from dpppl.kernels.base import Kernel, NoInfo, register
from dpppl.models.native_seating import native_sb_sweep, use_native_sticks
from dpppl.models.seating import refresh, sweep_draws, visit_points, visiting_order
from dpppl.core.numerics import sample_index


def stick_breaking_only(model) -> Optional[str]:
    """`applies` of the stick-breaking kernels: they need a [`StickBreaking`][dpppl.StickBreaking] prior."""
    prior = model.prior
    if not isinstance(prior, StickBreaking):
        return (f"it samples explicit labels of a stick-breaking prior (StickBreakingMixture, "
                f"'z ~ StickBreaking(a, b)'), but this model's prior is {prior.describe()}; a Pitman-Yor prior "
                f"is StickBreakingMixture(a=1 - d, b=alpha + i * d)")
    return None


def _sweep(family, prior: StickBreaking, x, order, uniforms, state, num_valid=None):
    """Draw the labels of the points `order` (its first `num_valid`, the real points, when the
    points are padded), point t of that order with `uniforms[t]`, by eq. (9)."""
    empty_params = family.predictive_params(family.empty_stats((1,)))

    def body(t, carry):
        z, stats, params, overflow = carry
        i = order[t]
        xi = x[i]
        point = family.point_stats(xi)
        old = z[i]
        stats = add_point(stats, old, point, -1.0)
        stats, params = refresh(family, stats, params, old)
        log_w, log_rest = prior.log_expected_weights(stats.n)           # eq. (6), Z_-n
        log_pred = family.log_predictive(params, xi)                    # empty slots: p(x_n)
        log_tail = log_rest + family.log_predictive(empty_params, xi)[0]
        logits = jnp.concatenate([log_w + log_pred, log_tail[None]])    # eq. (9), labels 1..C, past C
        k = sample_index(logits, uniforms[t])
        past = k == log_w.shape[0]
        k = jnp.where(past, old, k)  # the chunk is re-run with more slots: keep the state valid
        stats = add_point(stats, k, point, 1.0)
        stats, params = refresh(family, stats, params, k)
        return z.at[i].set(k), stats, params, overflow | past

    return visit_points(family, state, order, body, num_valid)


def build_sbgibbs_kernel(bound_model) -> Kernel:
    """One collapsed-Gibbs sweep over all labels, in a random order, per step (eq. 9). On points
    padded to a shape class it visits the first `num_valid` (the real points) only, with the
    draws of the unpadded sweep (`sweep_draws`, `visiting_order`). On CPU, for the families the
    native sweep covers, the sweep is one native call
    (`dpppl.models.native_seating.native_sb_sweep`; `DPPPL_NATIVE`) making the
    JAX loop's draws up to rounding."""
    family, prior, num_valid = bound_model.family, bound_model.prior, bound_model.num_valid
    on_cpu = use_native_sticks(family)

    def step(rng_key, state, x):
        shuffle, uniforms = sweep_draws(rng_key, x)
        if on_cpu:
            return native_sb_sweep(family, prior, x, shuffle, uniforms, state, num_valid), NoInfo()
        return _sweep(family, prior, x, visiting_order(shuffle, num_valid), uniforms, state, num_valid), NoInfo()

    return Kernel("sbgibbs", exact=True, step=step, masked_points=True,
                  light_compile=on_cpu)  # the sweep one native call (Kernel)


register("sbgibbs", build_sbgibbs_kernel, exact=True, applies=stick_breaking_only,
         description="collapsed Gibbs over explicit stick-breaking labels, sticks integrated out "
                     "(Porteous et al. 2006, eqs. 6, 9); O(N L D^2) per sweep natively (L the largest "
                     "occupied label), O(N C D^2) in JAX; mixes poorly over "
                     "labels alone: add labelswap, labelpermute")
