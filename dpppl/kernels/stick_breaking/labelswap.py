"""Label moves for stick-breaking priors: `labelswap` and `labelpermute`
(Porteous, Ihler, Smyth & Welling 2006, sec. 3.3).

Under a stick-breaking prior the law of a labelled assignment Z changes when labels are
permuted, while the collapsed likelihood p(X | Z) does not, so a relabelling Z' = sigma(Z)
proposed symmetrically is accepted with

    min(1, P(Z') / P(Z)),   P(Z) = prod_i B(a_i + N_i, b_i + M_i) / B(a_i, b_i),   M_i = sum_{j>i} N_j

([`StickBreaking.log_prob_labels`][dpppl.StickBreaking.log_prob_labels], sticks integrated out).

- **labelswap**: two labels i, j drawn independently from the prior weights p_i = E[pi_i]
  (eq. 6 with no data; for eq. 7, gamma_i / gamma) are swapped. For the pseudo-particle prior of
  eq. (7) the ratio is the paper's closed form
  ([`swap_log_ratio_pseudo_particles`][dpppl.kernels.stick_breaking.labelswap.swap_log_ratio_pseudo_particles]); for
  general (a_i, b_i) that form is wrong, so the ratio of the labelled laws is always used.
- **labelpermute**: m drawn from the prior weights, then a uniformly random permutation of the
  labels 1..m (probability p_m / m! both ways). A permutation of more than W labels
  ([`permute_width`][dpppl.kernels.stick_breaking.labelswap.permute_width], a property of the prior,
  not of the slots) is rejected: a proposal and its reverse have the same m, so the indicator
  1[m <= W] keeps detailed balance, and each proposal draws W keys whatever the slots.

Each is proposed between assignment updates with probability `swap_prob` / `permute_prob`
(the paper's M_i): one step makes Binomial(N, prob) proposals. A proposal whose highest label r
is past the horizon H = 2 L + 1 (L the largest occupied slot) of the state it leaves or of the one
it proposes is rejected: the acceptance is min(1, P(Z') / P(Z)) 1[r <= H(Z)] 1[r <= H(Z')], in
detailed balance because a proposal and its reverse have the same r and probability, so a label
past the slots is never needed unless H(Z) reaches them (`horizon`). The derivation, the batching
of the relabelling, the cost and the capacity handling are in `docs/kernels/labelswap.md`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from dpppl.core import numerics_random as random
from dpppl.families.base import take
from dpppl.kernels.base import Kernel, register
from dpppl.kernels.stick_breaking.sbgibbs import stick_breaking_only
from dpppl.models.native_seating import native_relabel, use_native_sticks
from dpppl.errors import KernelError



class RelabelInfo(NamedTuple):
    """The statistics of one relabelling step (`labelswap`, `labelpermute`): `accept_prob`,
    the mean acceptance probability of its proposals (1 when it made none), and the numbers
    (int32) of proposals made and accepted."""

    accept_prob: jax.Array
    proposals: jax.Array
    accepted: jax.Array


def swap_log_ratio_pseudo_particles(gamma_i, gamma_j, n_i, n_j):
    """log of the paper's closed-form label-swap ratio (sec. 3.3) for the pseudo-particle
    prior of eq. (7): log [Gamma(gamma_i + N_j) Gamma(gamma_j + N_i) /
    (Gamma(gamma_i + N_i) Gamma(gamma_j + N_j))], N_i, N_j the sizes before the swap.
    Valid only when a_i + b_i = b_{i-1} (eq. 7); kept to test the general ratio against."""
    return (gammaln(gamma_i + n_j) + gammaln(gamma_j + n_i)
            - gammaln(gamma_i + n_i) - gammaln(gamma_j + n_j))


def _check_prob(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise KernelError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


CHUNK = 512
"""The most proposals drawn together (vectorised) and then accepted or rejected in order, per
chunk; a step on N points makes its proposals in chunks of `chunk_size(N)`."""


def chunk_size(num_points: int) -> int:
    """The proposals of one chunk on `num_points` points (rows): the power of two at or above it, at
    most `CHUNK` (a power of two). The same for N points and for N padded to their shape class
    (`dpppl.run.runner.point_class`, from 64 points on: N <= class <= the power of two at or above N), so the
    chunk's random numbers, one draw of this many rows, do not depend on the padding."""
    return min(CHUNK, 1 << max(int(num_points) - 1, 0).bit_length())

PERMUTE_TAIL = 1e-3
"""`labelpermute` draws keys for the labels up to the first past which the prior weights leave less
than this mass ([`permute_width`][dpppl.kernels.stick_breaking.labelswap.permute_width])."""
PERMUTE_KEYS = (16, 1024)
"""The fewest and the most keys a `labelpermute` proposal draws."""


def permute_width(prior) -> int:
    """W, the most labels a `labelpermute` proposal may permute: the first L such that a label drawn
    from the prior weights lies past L with probability below `PERMUTE_TAIL`
    ([`labels_needed`][dpppl.priors.stick_breaking.StickBreaking.labels_needed]), clipped to
    `PERMUTE_KEYS`. It depends on the prior only, so the draws do not depend on the slots; a
    proposal of m > W is rejected (`docs/kernels/labelswap.md`, "The horizon")."""
    low, high = PERMUTE_KEYS
    return int(min(max(prior.labels_needed(1, PERMUTE_TAIL), low), high))


def horizon(counts):
    """The highest slot a relabelling proposal may reach from the labels with these counts: 2 L + 1,
    L the largest occupied slot (-1 when none), that is labels up to twice the largest occupied one
    (`docs/kernels/labelswap.md`, "The horizon")."""
    slots = jnp.arange(counts.shape[-1])
    return 2 * jnp.max(jnp.where(counts > 0, slots, -1), axis=-1) + 1


def proposed_move(labels, keys, C: int, permute: bool):
    """The map from each of the C slots to its slot under a proposal: `labels` (2,) the two labels
    of a swap (i, j), or (m, m) for the permutation of slots 0..m, each slot s <= m going to the
    rank of `keys[s]` among `keys[:m + 1]` (`keys` (W,): the keys past m, and the slots past the W
    keys, are larger than every uniform, so those slots keep their places). A label past the slots
    (C), or a permutation past the keys (m >= W), is clipped: such a proposal is never applied
    (`_accept_in_jax`)."""
    slots = jnp.arange(C, dtype=jnp.int32)
    if permute:
        W = keys.shape[-1]
        keys = keys[:C] if W >= C else jnp.concatenate([keys, 2.0 + slots[W:].astype(keys.dtype)])
        return jnp.zeros_like(slots).at[jnp.argsort(keys)].set(slots)
    i, j = labels[0], labels[1]
    return jnp.minimum(jnp.where(slots == i, j, jnp.where(slots == j, i, slots)), C - 1)


def _accept_in_jax(prior, counts, slot_of, labels, keys, uniforms, count, *, permute: bool):
    """[`native_relabel`][dpppl.models.native_seating.native_relabel] as a JAX loop: the first
    `count` proposals of a chunk (`proposed_move`) accepted or rejected in order, proposal t with
    probability min(1, P(Z') / P(Z)) 1[reach_t <= horizon(Z)] 1[reach_t <= horizon(Z')], reach_t
    its highest label (and, for a permutation, 1[reach_t < W], W the keys per proposal); a proposal
    that reaches past the C slots but not past the horizon sets the overflow flag (returned last)."""
    C = counts.shape[-1]
    width = keys.shape[-1] if permute else C + 1  # a swap's reach is bounded by the slots only

    def body(t, carry):
        slot_of, counts, log_p, acc_sum, accepted, overflow = carry
        move, r = proposed_move(labels[t], keys[t], C, permute), jnp.max(labels[t])
        reachable = (r <= horizon(counts)) & (r < width)
        new_counts = jnp.zeros_like(counts).at[move].set(counts)
        new_log_p = prior.log_prob_labels(new_counts)
        ok_here = reachable & (r < C) & (r <= horizon(new_counts))
        accept_prob = jnp.where(ok_here, jnp.exp(jnp.minimum(new_log_p - log_p, 0.0)), 0.0)
        ok = uniforms[t] < accept_prob
        return (jnp.where(ok, move[slot_of], slot_of), jnp.where(ok, new_counts, counts),
                jnp.where(ok, new_log_p, log_p), acc_sum + accept_prob, accepted + ok.astype(jnp.int32),
                overflow | (reachable & (r >= C)))

    init = (slot_of, counts, prior.log_prob_labels(counts), jnp.zeros((), counts.dtype), jnp.zeros((), jnp.int32),
            jnp.zeros((), bool))
    slot_of, counts, _, acc_sum, accepted, overflow = jax.lax.fori_loop(0, count, body, init)
    return slot_of, counts, acc_sum, accepted, overflow


def _relabel_kernel(name, bound_model, prob, propose, columns: int, permute: bool):
    """A kernel making Binomial(N, prob) MH proposals of relabellings (N the real points: on
    points padded to a shape class, `num_valid`; the padded points keep the label -1).

    `propose(u, cdf) -> (labels, keys)`: the proposal's labels (2,) and keys (of a permutation;
    see `proposed_move`) from its row `u` of `columns` uniforms (the last column is the acceptance's),
    labels drawn from the prior weights' CDF `cdf` over the C slots and past them (`_draw_label`; C: a
    label past the slots, not drawn further). With `prob` 1 the number of proposals, Binomial(N, 1),
    is N, taken without a draw. The proposals are drawn `chunk_size(N)` at a time, chunk c from one
    (`chunk_size(N)`, `columns`) uniform draw of `fold_in(key, c)`, a row per proposal (one threefry
    draw, where keys split per proposal would each be a loop of their own in the compiled program);
    each chunk is then accepted or rejected in order, on CPU in one native call
    ([`native_relabel`][dpppl.models.native_seating.native_relabel]; `DPPPL_NATIVE`), else in a JAX
    loop: the same draws up to rounding. A proposal reaching past the horizon (`horizon`) of its state
    or of the state it proposes is rejected; one past the slots but within the horizon sets `overflow`
    (the driver re-runs the chunk with more slots).
    """
    prior, points = bound_model.prior, bound_model.points
    size = chunk_size(bound_model.num_points)
    on_cpu = use_native_sticks()
    accept = functools.partial(native_relabel if on_cpu else _accept_in_jax, permute=permute)

    def step(rng_key, state, x):
        counts = state.stats.n
        C = counts.shape[-1]
        log_pw, log_rest = prior.log_prior_weights(C, counts.dtype)
        logits = jnp.concatenate([log_pw, log_rest[None]])
        cdf = jnp.cumsum(jnp.exp(logits - jnp.max(logits)))       # `sample_index`'s, once per step
        # Binomial(N, prob) proposals, N the real points
        if prob == 1.0:
            num, k_props = jnp.asarray(points, jnp.int32), rng_key
        else:
            k_num, k_props = random.split(rng_key)
            num = jax.random.binomial(k_num, points, prob).astype(jnp.int32)

        def chunk(carry):
            start, slot_of, counts, overflow, acc_sum, accepted = carry
            u = random.uniform(random.fold_in(k_props, start // size), (size, columns), counts.dtype)
            labels, keys = jax.vmap(propose, in_axes=(0, None))(u, cdf)
            count = jnp.minimum(num - start, size)
            slot_of, counts, chunk_sum, chunk_accepted, chunk_overflow = accept(
                prior, counts, slot_of, labels, keys, u[:, -1], count)
            return (start + size, slot_of, counts, overflow | chunk_overflow, acc_sum + chunk_sum,
                    accepted + chunk_accepted)

        init = (jnp.zeros((), jnp.int32), jnp.arange(C, dtype=jnp.int32), counts, state.overflow,
                jnp.zeros((), counts.dtype), jnp.zeros((), jnp.int32))
        _, slot_of, _, overflow, acc_sum, accepted = jax.lax.while_loop(lambda c: c[0] < num, chunk, init)
        source = jnp.zeros_like(slot_of).at[slot_of].set(jnp.arange(C, dtype=slot_of.dtype))  # new slot -> old
        # padded points (label -1, `BoundModel.padded`) keep it
        state = state._replace(z=jnp.where(state.z >= 0, slot_of[state.z], -1).astype(state.z.dtype),
                               stats=take(state.stats, source), overflow=overflow)
        return state, RelabelInfo(accept_prob=jnp.where(num > 0, acc_sum / jnp.maximum(num, 1), 1.0),
                                  proposals=num, accepted=accepted)

    return Kernel(name, exact=True, step=step, info_type=RelabelInfo, masked_points=True,
                  light_compile=on_cpu)  # the acceptance loop one native call (Kernel)


def _draw_label(u, cdf):
    """A label drawn from the prior weights p_i (index C: past the slots) with the uniform `u` (an
    array of uniforms: a label for each):
    `sample_index` of their logits, inverted at the CDF `cdf` computed once per step: the number of
    cells below the target, found by bisection (`cdf` is non-decreasing), O(log C)."""
    target = jnp.maximum(u, jnp.finfo(cdf.dtype).tiny) * cdf[-1]
    return jnp.searchsorted(cdf, target, side="left").astype(jnp.int32)


def build_labelswap_kernel(bound_model, *, swap_prob: float = 1.0) -> Kernel:
    """Label-swap proposals (sec. 3.3), each with probability `swap_prob` per point."""
    prob = _check_prob("swap_prob", swap_prob)

    def propose(u, cdf):  # u: the two labels' uniforms (one search for both), the acceptance's
        return _draw_label(u[:2], cdf), jnp.zeros((1,), cdf.dtype)

    return _relabel_kernel("labelswap", bound_model, prob, propose, 3, permute=False)


def build_labelpermute_kernel(bound_model, *, permute_prob: float = 1.0) -> Kernel:
    """Label-permute proposals (sec. 3.3), each with probability `permute_prob` per point; each
    draws `permute_width(prior)` keys, whatever the slots."""
    prob = _check_prob("permute_prob", permute_prob)
    width = permute_width(bound_model.prior)

    def propose(u, cdf):  # u: m's uniform, the W keys' and the acceptance's
        m = _draw_label(u[0], cdf)   # permute labels 1..m+1 (slots 0..m)
        slots = jnp.arange(width)
        keys = jnp.where(slots <= m, u[1:width + 1], 2.0 + slots)
        return jnp.stack([m, m]), keys

    return _relabel_kernel("labelpermute", bound_model, prob, propose, width + 2, permute=True)


register("labelswap", build_labelswap_kernel, exact=True, applies=stick_breaking_only,
         description="label-swap Metropolis-Hastings for stick-breaking priors (Porteous et al. "
                     "2006, sec. 3.3): two labels drawn by prior weight, accepted by the ratio of "
                     "labelled laws; Binomial(N, swap_prob) proposals per step, O(r) each natively (r the "
                     "highest label drawn); labels up to twice the largest occupied one")
register("labelpermute", build_labelpermute_kernel, exact=True, applies=stick_breaking_only,
         description="label-permute Metropolis-Hastings for stick-breaking priors (sec. 3.3): a "
                     "uniform permutation of labels 1..m, m drawn by prior weight; "
                     "Binomial(N, permute_prob) proposals per step, O(W + m log m) each (W keys: "
                     "permute_width(prior)); labels up to twice the largest occupied one")
