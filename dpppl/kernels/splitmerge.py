"""Split-merge Metropolis-Hastings moves: SAMS (Dahl 2003) and restricted Gibbs (Jain & Neal 2004).

The target is the collapsed posterior of partitions, pi(C) ∝ p(C | alpha) prod_{c in C} m(x_c)
(`prior.log_eppf` times `family.log_marginal`). Two distinct points i, j are chosen
uniformly; if they share a cluster a split C* separating them is proposed, else the merge C*
of their two clusters, accepted with probability

    a(C*, C) = min[1, q(C | C*) pi(C*) / (q(C* | C) pi(C))],

a merge being deterministic. For the DP a split of c (n_c points) into sizes a and b has prior
ratio alpha (a - 1)! (b - 1)! / (n_c - 1)! (Jain & Neal 2004); the code takes the difference of
`log_eppf`, which covers Pitman-Yor. `method="sams"` allocates the other members S one at a
time in random order by seating weight times predictive (Dahl 2003); `"restricted_gibbs"`
builds a random launch state, runs `num_restricted_scans` restricted Gibbs scans, and the
split is one more scan. q(C | C*) of a merge is the probability that the same mechanism, with
the same auxiliary random numbers (whose law does not depend on the state), gives the current
two clusters, so each proposal is reversible. The Pitman-Yor ratio, the allocation and scan
probabilities, the reversibility argument and the implementation and its cost are in
`docs/kernels/splitmerge.md` ("Design notes").
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpppl.errors import KernelError
from dpppl.families.base import add_point, segment_stats, take
from dpppl.kernels.base import Kernel, exchangeable_prior_only, own_keys, register
from dpppl.core.state import PartitionState, set_row
from dpppl.core import numerics_random as random
from dpppl.core.numerics import sample_index
from dpppl.models.native_seating import native_allocation_pass, native_splitmerge_step, threefry_words, use_native

METHODS = ("sams", "restricted_gibbs")
DEFAULT_NUM_PROPOSALS = 10
DEFAULT_NUM_RESTRICTED_SCANS = 5


class Proposal(NamedTuple):
    """One split or merge proposal (see `propose`).

    - **z**, **stats** - labels and per-slot statistics of the proposed partition.
    - **log_accept** - log of the Metropolis-Hastings ratio q(C | C*) pi(C*) /
      (q(C* | C) pi(C)); -inf when the split found no empty slot.
    - **log_q** - log probability of the allocation of S: the proposal probability of
      the split (`split`) or the reverse-move probability of the current split (merge).
    - **split** - bool, True when i and j shared a cluster.
    - **overflow** - bool, a split needed an empty slot and found none.
    - **order**, **count** - the points of S are `order[:count]`, in the order visited.
    - **side** - (N,) int32: 0 for c_i, 1 for c_j, for the points of S, i and j after
      the final pass (elsewhere meaningless).
    """

    z: jax.Array
    stats: Any
    log_accept: jax.Array
    log_q: jax.Array
    split: jax.Array
    overflow: jax.Array
    order: jax.Array
    count: jax.Array
    side: jax.Array


def allocation_pass(family, prior, x, alpha, stats2, side, order, count, uniforms, force, target,
                    *, reseat: bool, native: bool = False):
    """Assign the points `order[:count]` one at a time to one of two clusters.

    Parameters
    ----------
    stats2 : family statistics with leading axis 2
        The two clusters (c_i, c_j). With `reseat=False` the points are not in them yet
        (SAMS sequential allocation); with `reseat=True` each point leaves its side
        `side[k]` first (a restricted Gibbs scan).
    side : int32 (N,)
        Current side of each point (read with `reseat`), updated as points are placed.
    uniforms : (N,)
        `uniforms[t]` draws the side of the t-th point visited.
    force : bool scalar
        When True the sides are not drawn but taken from `target` (N,): the pass then
        evaluates the probability of that allocation.
    native : bool
        Run the loop as one native call
        ([`native_allocation_pass`][dpppl.models.native_seating.native_allocation_pass]; the
        same draws up to rounding), for a model it covers (`native_seating.covers`).

    Returns
    -------
    stats2, side, log_q
        `log_q` is the sum over the visited points of log P(side chosen), with
        P(k -> c) ∝ (|c| - d) p(x_k | x_c) over the two clusters.
    """
    if native:
        return native_allocation_pass(family, prior, x, stats2, side, order, count, uniforms, force, target,
                                      reseat=reseat)

    def body(t, carry):
        stats2, side, log_q = carry
        k = order[t]
        xk = x[k]
        point = family.point_stats(xk)
        if reseat:
            stats2 = add_point(stats2, side[k], point, -1.0)
        log_weight, _ = prior.log_seat_weights(stats2.n, alpha)
        logits = log_weight + family.log_predictive(family.predictive_params(stats2), xk)
        s = jnp.where(force, target[k], sample_index(logits, uniforms[t]))
        log_q = log_q + jax.nn.log_softmax(logits)[s]
        return add_point(stats2, s, point, 1.0), side.at[k].set(s), log_q

    return jax.lax.fori_loop(0, count, body, (stats2, side, jnp.zeros((), x.dtype)))


def propose(family, prior, state: PartitionState, x, i, j, permutation, rng_key, *, method: str = "sams",
            num_restricted_scans: int = DEFAULT_NUM_RESTRICTED_SCANS, native: bool = False) -> Proposal:
    """The split or merge proposal for the pair of points (i, j), i != j.

    The points of S are visited in the order in which they appear in `permutation` (of
    all N points). Pure: the same state, pair, permutation and key give the same
    proposal. The random numbers (the permutation, and the launch assignment and scans'
    uniforms drawn from `rng_key`) do not depend on the state, so a split proposed
    from C and the merge proposed back from C_split with the same i, j, permutation and
    key use the same order and launch state; their `log_accept` are then exact
    negatives of each other. With `native` the allocation passes run natively
    ([`allocation_pass`][dpppl.kernels.splitmerge.allocation_pass]).

    The proposal's uniforms are one draw of shape (N, 1) (`"sams"`: the pass) or (N, scans + 2)
    (`"restricted_gibbs"`: the final scan, the launch state, then each restricted scan), one
    threefry expansion in the compiled program; the points are on its leading axis, so with
    padded points (rows past the real ones, never in S) the real points' uniforms are those of
    the unpadded draw.
    """
    n = x.shape[0]
    z, stats, alpha = state.z, state.stats, state.alpha
    uniforms = proposal_uniforms(rng_key, n, 1 if method == "sams" else num_restricted_scans + 2, x.dtype)
    ci, cj = z[i], z[j]
    split = ci == cj
    points = jnp.arange(n)
    union = (z == ci) | (z == cj)
    member = union & (points != i) & (points != j)
    count = jnp.sum(member)
    order = permutation[jnp.nonzero(member[permutation], size=n, fill_value=0)[0]]
    target = (z == cj).astype(jnp.int32)  # the current sides, for a merge's reverse move
    u_final = uniforms[:, 0]

    if method == "sams":
        stats2 = family.point_stats(x[jnp.stack([i, j])])
        side = jnp.zeros(n, jnp.int32)
        stats2, side, log_q = allocation_pass(family, prior, x, alpha, stats2, side, order, count,
                                              u_final, ~split, target, reseat=False, native=native)
    elif method == "restricted_gibbs":
        side = (uniforms[:, 1] < 0.5).astype(jnp.int32)
        launch_labels = jnp.where(member, side, 2).at[i].set(0).at[j].set(1)
        stats2 = segment_stats(family, x, launch_labels, 2)

        def scan(s, carry):
            stats2, side = carry
            stats2, side, _ = allocation_pass(family, prior, x, alpha, stats2, side, order, count,
                                              uniforms[:, 2 + s], jnp.zeros((), bool), target, reseat=True,
                                              native=native)
            return stats2, side

        stats2, side = jax.lax.fori_loop(0, num_restricted_scans, scan, (stats2, side))
        stats2, side, log_q = allocation_pass(family, prior, x, alpha, stats2, side, order, count,
                                              u_final, ~split, target, reseat=True, native=native)
    else:
        raise KernelError(f"splitmerge: method must be one of {METHODS}, got {method!r}")
    side = side.at[i].set(0).at[j].set(1)

    empty = stats.n < 0.5
    has_empty = jnp.any(empty)
    new_slot = jnp.argmax(empty).astype(z.dtype)
    b = jnp.where(split, new_slot, cj)                    # the slot of c_j after the move
    merged = jax.tree.map(lambda r, s: r + s, take(stats, ci), take(stats, cj))
    row_a = jax.tree.map(lambda s, m: jnp.where(split, s, m), take(stats2, 0), merged)
    row_b = jax.tree.map(lambda s: jnp.where(split, s, jnp.zeros_like(s)), take(stats2, 1))
    new_stats = set_row(set_row(stats, ci, row_a), b, row_b)
    new_z = jnp.where(union, jnp.where(split & (side == 1), b, ci), z)

    rows = jax.tree.map(lambda *r: jnp.stack(r), row_a, row_b, take(stats, ci), take(stats, b))
    lm = jnp.where(rows.n > 0.5, family.log_marginal(rows), 0.0)
    log_ratio = (prior.log_eppf_change(rows.n[2:], rows.n[:2], stats.n, alpha)
                 + lm[0] + lm[1] - lm[2] - lm[3])
    feasible = ~split | has_empty
    log_accept = jnp.where(feasible, log_ratio + jnp.where(split, -log_q, log_q), -jnp.inf)
    return Proposal(new_z, new_stats, log_accept, log_q, split, split & ~has_empty, order, count, side)


def proposal_uniforms(rng_key, n: int, columns: int, dtype):
    """A proposal's uniforms from its key: one (n, columns) draw, the points on the leading axis
    (`propose`'s docstring says which column does what)."""
    return random.uniform(rng_key, (n, columns), dtype=dtype)


def choose_pair(u, n):
    """Two distinct points, uniformly among the n (n - 1) ordered pairs, from two uniforms in [0, 1)
    (`u[..., 0]`, `u[..., 1]`): i = floor(n u_0) and j = floor((n - 1) u_1), moved past i when
    j >= i; arrays of `u.shape[:-1]`. Uniform up to the uniforms' resolution (each pair's probability
    within n 2^-52 of 1 / (n (n - 1)) relatively in float64)."""
    dtype = jnp.result_type(u)
    i = jnp.minimum(jnp.floor(u[..., 0] * jnp.asarray(n, dtype)), n - 1).astype(jnp.int32)
    j = jnp.minimum(jnp.floor(u[..., 1] * jnp.asarray(n - 1, dtype)), n - 2).astype(jnp.int32)
    return i, j + (j >= i)


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise KernelError(f"splitmerge: {name} must be an integer >= {minimum}, got {value!r}")


class SplitMergeInfo(NamedTuple):
    """The statistics of one split-merge step: `accept_prob`, the mean Metropolis-Hastings
    acceptance probability of its proposals, and the counts (int32) of its split and merge
    proposals and of those accepted."""

    accept_prob: jax.Array
    split_proposed: jax.Array
    split_accepted: jax.Array
    merge_proposed: jax.Array
    merge_accepted: jax.Array


def build_splitmerge_kernel(bound_model, *, method: str = "sams", num_proposals: int = DEFAULT_NUM_PROPOSALS,
                            num_restricted_scans: Optional[int] = None, native: bool | None = None) -> Kernel:
    """Split-merge Metropolis-Hastings moves (see the module docstring for the mathematics).

    Parameters
    ----------
    method : {"sams", "restricted_gibbs"}, default "sams"
        `"sams"`: the sequentially-allocated merge-split sampler of Dahl (2003), one
        allocation pass per proposal. `"restricted_gibbs"`: Jain & Neal (2004), a random
        launch state, `num_restricted_scans` restricted Gibbs scans and one final scan
        per proposal.
    num_proposals : int, default 10
        Split or merge proposals per step, each with a fresh pair (i, j). A proposal
        costs O(N + C) vector work plus |S| sequential allocation steps (S: the other
        points of the one or two clusters involved), whereas a Gibbs sweep is N
        sequential steps over all C slots. Measured on CPU (float64; synthetic Gaussian
        mixtures, N = 1000 and 10000, D = 10 with 40 clusters and D = 2 NIW with 10), ten
        SAMS proposals cost 0.25 to 1.1 Gibbs sweeps, so the default gives
        `"gibbs+splitmerge"` roughly the even division of time between the moves used
        by Liang et al. (2007, sec. 5). Acceptance is low near a mode (below 1% of
        proposals in those runs; most proposals pair points of different clusters and
        are merges), so one proposal per step would leave most steps without a large
        move. `method="restricted_gibbs"` costs `num_restricted_scans + 1` passes per
        proposal (1 to 7 Gibbs sweeps for ten proposals in the same runs).
    num_restricted_scans : int, default 5 (`method="restricted_gibbs"` only)
        Intermediate restricted Gibbs scans that build the launch state (Jain & Neal
        2004); with 0 the final scan starts from the uniformly random launch.
    native : bool or None, default None
        Run the move natively on CPU (`dpppl.models.native_seating`; the same draws up to
        rounding): with `"sams"` the whole step (every proposal's pair, allocation, marginal
        likelihoods and acceptance) is one native call, with `"restricted_gibbs"` each allocation
        pass is. True requires it (a `KernelError` for a model it does not cover: NormalInverseWishart and
        NormalKnownCov components under the CRP and Pitman-Yor priors), False runs the JAX
        loop, None (default) follows `DPPPL_NATIVE` (default: native where covered and built).
        In a hybrid (`"gibbs+splitmerge"`) the option goes to both moves.

    Returns
    -------
    Kernel
        `exact=True`. `info`: a `SplitMergeInfo`: `accept_prob` (mean Metropolis-Hastings
        acceptance probability of the step's proposals), `split_proposed`, `split_accepted`,
        `merge_proposed`, `merge_accepted` (counts in the step).
    """
    if method not in METHODS:
        raise KernelError(f"splitmerge: method must be one of {METHODS}, got {method!r}")
    _check_int("num_proposals", num_proposals, 1)
    if num_restricted_scans is None:
        num_restricted_scans = DEFAULT_NUM_RESTRICTED_SCANS
    elif method != "restricted_gibbs":
        raise KernelError("splitmerge: num_restricted_scans applies to method='restricted_gibbs' only")
    _check_int("num_restricted_scans", num_restricted_scans, 0)
    family, prior = bound_model.family, bound_model.prior
    run_native = use_native(family, prior, native, "split-merge")

    def step(rng_key, state, x):
        n = x.shape[0]
        zero = jnp.zeros((), jnp.int32)
        if n < 2:  # no pair to choose
            return state, SplitMergeInfo(accept_prob=jnp.zeros((), x.dtype), split_proposed=zero,
                                         split_accepted=zero, merge_proposed=zero, merge_accepted=zero)

        # the step's random numbers in one uniform draw (one threefry expansion in the compiled
        # program): each proposal's pair and acceptance uniforms, then a permutation key per point
        # (points last, so with padded points the real points' keys are those of the unpadded
        # draw); each proposal's own uniforms come from the key it folds its index into
        k_uniform, k_proposals = own_keys(rng_key, 2)
        uniforms = random.uniform(k_uniform, (3 * num_proposals + n,), dtype=x.dtype)
        per_proposal = uniforms[:3 * num_proposals].reshape(num_proposals, 3)
        pairs_i, pairs_j = choose_pair(per_proposal[:, :2], bound_model.points)
        u_accept, keys = per_proposal[:, 2], uniforms[3 * num_proposals:]
        if bound_model.num_valid is not None:  # padded points: last in the permutation, never chosen
            keys = jnp.where(jnp.arange(n) < bound_model.num_valid, keys, 2.0)
        # the whole step in one native call, the same draws up to rounding: each proposal's allocation
        # uniforms are those of `proposal_uniforms` on its key, drawn natively for the points its pass visits
        allocation_keys = threefry_words(random.fold_in(k_proposals, jnp.arange(num_proposals))) if (
            run_native and method == "sams") else None
        if allocation_keys is not None:
            pairs = jnp.stack([pairs_i, pairs_j], axis=-1)
            state, total_p, counts = native_splitmerge_step(family, prior, x, state, pairs, u_accept, keys,
                                                            allocation_keys)
            return state, SplitMergeInfo(accept_prob=total_p / num_proposals, split_proposed=counts[0],
                                         split_accepted=counts[1], merge_proposed=counts[2], merge_accepted=counts[3])
        permutation = jnp.argsort(keys)

        def one(t, carry):
            state, total_p, counts = carry
            prop = propose(family, prior, state, x, pairs_i[t], pairs_j[t], permutation,
                           random.fold_in(k_proposals, t), method=method,
                           num_restricted_scans=num_restricted_scans, native=run_native)
            accept = jnp.log(u_accept[t]) < prop.log_accept
            state = state._replace(
                z=jnp.where(accept, prop.z, state.z),
                stats=jax.tree.map(lambda new, old: jnp.where(accept, new, old), prop.stats, state.stats),
                overflow=state.overflow | prop.overflow)
            p = jnp.exp(jnp.minimum(prop.log_accept, 0.0))
            counts = counts + jnp.stack([prop.split, prop.split & accept,
                                         ~prop.split, ~prop.split & accept]).astype(jnp.int32)
            return state, total_p + p, counts

        state, total_p, counts = jax.lax.fori_loop(
            0, num_proposals, one, (state, jnp.zeros((), x.dtype), jnp.zeros(4, jnp.int32)))
        return state, SplitMergeInfo(accept_prob=total_p / num_proposals, split_proposed=counts[0],
                                     split_accepted=counts[1], merge_proposed=counts[2], merge_accepted=counts[3])

    return Kernel("splitmerge", exact=True, step=step, info_type=SplitMergeInfo, masked_points=True, keys_per_step=2,
                  light_compile=run_native and method == "sams")  # the whole step one native call (Kernel)


register("splitmerge", build_splitmerge_kernel, exact=True, applies=exchangeable_prior_only,
         description="split-merge Metropolis-Hastings: SAMS (Dahl 2003) or restricted Gibbs "
                     "(Jain & Neal 2004, method='restricted_gibbs'); O(N + |S|) per proposal")
