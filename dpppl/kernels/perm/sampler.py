"""The permutation-augmented sampler (Liang, Jordan & Taskar 2007): the permutation move
`kernel="perm-move"`, the move at every `every`-th step `kernel="perm-every"`, and `kernel="perm"`,
the paper's sampler: a collapsed Gibbs sweep and split-merge each iteration, the permutation move
every 16th (`"gibbs+splitmerge+perm-every"`, sec. 5: the move beside Gibbs sweeps and split-merge;
`PAPER_SAMPLER` says why split-merge is in it and `PERM_EVERY` why every 16th).

The clustering C is augmented with a permutation pi that keeps every cluster contiguous
(`dpppl.kernels.perm.permutations`). One step is a blocked Gibbs sweep: pi ~ p(pi | C)
(sec. 4), then C ~ p(C | pi, x), then pi is dropped. For the uniform law of eq. (3) the
joint is eq. (4),

    p(C, pi, x) = A(|C|) prod_{c in C} B(c)   (pi in Pi(C)),   A(K) = alpha^K / (AF(alpha, N) K!),
    B(c) = p(x_c) / |c|,

so the clusterings consistent with pi, its segmentations, are summed over by dynamic
programming, B of a segment from prefix sums of statistics along pi: `dp="exact"`
(sec. 3.1, g(r, K) conditioned on K, an exact Gibbs draw, O(N^3)); `dp="mh"` (default,
sec. 3.2: K! replaced by beta^K, the O(N^2) recursion of eq. (6) and a Metropolis-Hastings
correction, beta adapted in warmup only); `beam_epsilon` (sec. 3.3, O(N W), kept an exact
Metropolis-Hastings proposal; by default from `BEAM_MIN_POINTS` points on, epsilon 1e-32 and
width 16). Pitman-Yor priors change A and B. The Pitman-Yor forms, the
choice of beta, the beam's exactness, the projection (hill-climbing) target and the cost of
each configuration are in `docs/kernels/perm.md` ("Design notes").
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.scipy.special import digamma, gammaln, logsumexp

from dpppl.core import numerics_random as random
from dpppl.errors import KernelError
from dpppl.families.base import segment_stats
from dpppl.priors.crp import PitmanYor
from dpppl.kernels.base import Kernel, info_type, register, register_alias
from dpppl.kernels.perm.permutations import (EXACT_PERMUTATIONS, PERMUTATIONS, pairwise_log_predictive,
                                             sample_permutation, single_point_predictive)
from dpppl.core.state import NoExtras, PartitionState, num_clusters
from dpppl.core.numerics import computed_once, sample_index
from dpppl.models.native_seating import PERM_SOURCE, native_perm_segments, use_native


class PermExtras(NamedTuple):
    """What `dp="mh"` carries: the sum and count of the numbers of clusters K seen in warmup,
    whose mean is the reference K (`k_ref`) of lambda after warmup (sec. 3.2)."""

    k_sum: jax.Array
    k_count: jax.Array


class ScheduleExtras(NamedTuple):
    """What `perm-every` carries: `steps`, the number of steps it has taken (warmup included,
    int32), and `move`, the permutation move's own extras (`PermExtras` or `NoExtras`)."""

    steps: jax.Array
    move: Any


class PermInfo(NamedTuple):
    """The statistics of one `dp="exact"` step: `accept_prob` (1), `accepted` (int32) and
    `proposed_clusters`, K of the drawn clustering."""

    accept_prob: jax.Array
    accepted: jax.Array
    proposed_clusters: jax.Array


class PermMHInfo(NamedTuple):
    """The statistics of one `dp="mh"` step: those of `PermInfo` (`accept_prob` the
    Metropolis-Hastings acceptance probability), `k_ref`, the reference K of lambda, and
    `in_beam` (int32), whether the current clustering is within the beam (1 without one)."""

    accept_prob: jax.Array
    accepted: jax.Array
    proposed_clusters: jax.Array
    k_ref: jax.Array
    in_beam: jax.Array

DP_FORMS = ("mh", "exact")
DEFAULT_BEAM_WIDTH = 16
DEFAULT_BEAM_EPSILON = 1e-32
STEP_COLUMNS = 4
"""Columns of a step's uniforms (N, 4), one row per point (N rows: padding adds rows after the real
points' and changes none of theirs): 0 and 1 the uniform permutation (`uniform_permutation`: the
clusters' order, the order within them), 2 the backward draw of the segments (`_backward`: segment
i from the end takes row i; there are at most N), 3 in row 0 the Metropolis-Hastings acceptance;
`dp="exact"` adds column 4, its row 0 the number of clusters K (`sample_by_count`). One threefry
draw where split keys would each be a loop of their own in the compiled program."""
BEAM_MIN_POINTS = 225
"""Points from which `beam_epsilon="auto"` (the default) uses the beam: at N = 250 one move of
the O(N^2) dynamic program of sec. 3.2 already costs 7 collapsed Gibbs sweeps, the beam's
about one, with the same acceptance (`benchmarks/bench_auto_rule.py`, W1 with D = 10). 225 is
one more than the shape class 224 (`dpppl.run.runner.point_class`), so that N points and the same
points padded to their class (225-256 points: 256 rows) make the same choice."""


# ----------------------------------------------------------------- the factors A, B ---
def log_count_factor(prior, alpha, k, n, augmented: bool = True):
    """log A(K) of eq. (4) for the CRP or Pitman-Yor prior, normaliser included.

    `augmented=False` drops the 1/K! of p(pi | C): the factor of p(C, x) itself (the
    hill-climbing target of sec. 4.2). `k` may be a float (for the slope lambda).
    """
    d = prior.discount
    if d == 0:
        new_terms = (k - 1.0) * jnp.log(alpha)
    else:
        new_terms = (k - 1.0) * jnp.log(d) + gammaln(alpha / d + k) - gammaln(alpha / d + 1.0)
    log_a = new_terms - (gammaln(alpha + n) - gammaln(alpha + 1.0))
    return log_a - gammaln(k + 1.0) if augmented else log_a


def log_count_slope(prior, alpha, k_ref, augmented: bool = True):
    """lambda = d/dK log A(K) at `k_ref`: the per-cluster factor that replaces A in the
    factored proposal (sec. 3.2): log alpha - psi(k_ref + 1) for the DP, log d +
    psi(alpha / d + k_ref) - psi(k_ref + 1) for Pitman-Yor (without psi(k_ref + 1) when not
    `augmented`; the number of points does not enter it). One digamma of the stacked arguments:
    one copy of its code in the program."""
    d = prior.discount
    k_ref = jnp.asarray(k_ref, jnp.result_type(float))
    if d == 0:
        return jnp.log(alpha) - (digamma(k_ref + 1.0) if augmented else 0.0)
    psi = digamma(jnp.stack([alpha / d + k_ref, k_ref + 1.0]))
    return jnp.log(d) + psi[0] - (psi[1] if augmented else 0.0)


def log_count_change(prior, alpha, k_new, k_old, augmented: bool = True):
    """log A(k_new) - log A(k_old) (`log_count_factor`; the normaliser cancels): one log-gamma
    of the stacked arguments, so the Metropolis-Hastings ratio of `dp="mh"` is one copy of its
    code in the program."""
    d = prior.discount
    k_new, k_old = jnp.broadcast_arrays(k_new, k_old)
    dk = k_new - k_old
    if d == 0:
        args, change = jnp.stack([k_new + 1.0, k_old + 1.0]), dk * jnp.log(alpha)
    else:
        args = jnp.stack([k_new + 1.0, k_old + 1.0, alpha / d + k_new, alpha / d + k_old])
        change = dk * jnp.log(d)
    lg, = computed_once(gammaln(args))
    if d != 0:
        change = change + lg[2] - lg[3]
    return change - (lg[0] - lg[1]) if augmented else change


def prefix_stats(family, x_pi):
    """P_r = sum_{t < r} stats(x_{pi_t}), r = 0..N (leading axis N + 1)."""
    point = family.point_stats(x_pi)
    return jax.tree.map(lambda p: jnp.concatenate([jnp.zeros_like(p[:1]), jnp.cumsum(p, axis=0)]), point)


def segment_log_weights(family, prior, prefix, starts, end, *, uniform_order: bool):
    """log B of the segments pi_{s+1..end} for every start s in `starts` (any shape;
    None: every s = 0..N, without a gather), -inf where s >= end or s < 0:
    log p(x_seg) + log (1 - d)_{m-1} [- log m! when the within-cluster order is uniform
    (eq. 3)], m = end - s."""
    if starts is None:
        starts = jnp.arange(prefix.n.shape[0])
        m = end - starts
        valid = m >= 1
        # rows s >= end have negative counts; their values are masked below
        stats = jax.tree.map(lambda p: p[end] - p, prefix)
    else:
        m = end - starts
        valid = (m >= 1) & (starts >= 0)
        safe = jnp.where(valid, starts, end)
        stats = jax.tree.map(lambda p: p[end] - p[safe], prefix)   # zeros (the prior) where invalid
    mf = jnp.where(valid, m, 1).astype(prefix.n.dtype)
    d = prior.discount
    lw = family.log_marginal(stats) + gammaln(mf - d) - gammaln(1.0 - d)
    if uniform_order:
        lw = lw - gammaln(mf + 1.0)
    return jnp.where(valid, lw, -jnp.inf)


def markov_segment_matrix(family, prior, prefix, x_pi):
    """L[r - 1, s] = log B(pi_{s+1..r}) with the Markov scan probability h of sec. 4.1.

    log h(s, r) = -log m + sum_{t=s+1}^{r-1} [log w(t-1 -> t) - log S_t(r)] over
    positions t of pi (0-based), S_t(r) = sum_{u=t}^{r-1} w(t-1 -> u): S is carried over
    r (S_t(r + 1) = S_t(r) + w(t-1 -> r)), and the sums over t are suffix sums. O(N)
    memory in the scan, O(N^2 D) time, the (N, N + 1) table returned.
    """
    n = x_pi.shape[0]
    params = single_point_predictive(family, x_pi)
    log_w_next = jnp.concatenate([jnp.zeros((1,), x_pi.dtype),
                                  pairwise_log_predictive(family, jax.tree.map(lambda a: a[:-1], params),
                                                          x_pi[1:])])        # t: log w(t-1 -> t)
    positions = jnp.arange(n + 1)
    starts = positions

    def body(log_s, r):
        column = family.log_predictive(params, x_pi[r - 1])                 # p: log w(p -> r-1)
        t_ok = (positions >= 1) & (positions <= r - 1)
        col_t = jnp.where(t_ok, jnp.concatenate([jnp.zeros((1,), x_pi.dtype), column]), -jnp.inf)
        log_s = jnp.logaddexp(log_s, col_t)
        v = jnp.where(t_ok, jnp.concatenate([log_w_next, jnp.zeros((1,), x_pi.dtype)]) - log_s, 0.0)
        tail = jnp.sum(v) - jnp.cumsum(v)                                     # s: sum_{t > s} v_t
        m = r - starts
        log_h = -jnp.log(jnp.where(m >= 1, m, 1).astype(x_pi.dtype)) + tail
        row = segment_log_weights(family, prior, prefix, None, r, uniform_order=False) + log_h
        return log_s, jnp.where(m >= 1, row, -jnp.inf)

    _, rows = jax.lax.scan(body, jnp.full((n + 1,), -jnp.inf, x_pi.dtype), jnp.arange(1, n + 1))
    return rows


# ---------------------------------------------------------------- dynamic programs ---
def forward_factored(row_fn, n, dtype):
    """log g'(r), r = 0..N, of eq. (6), and the rows it summed: `row_fn(r)` gives
    log B'(pi_{s+1..r}) for s = 0..N (-inf for s >= r), row r at index r - 1 of the (N, N + 1)
    table returned, which the backward draw reads (`sample_factored`), so the segments' weights
    are one computation in the program, not two."""
    def body(log_g, r):
        row = row_fn(r)
        return log_g.at[r].set(logsumexp(log_g + row)), row

    init = jnp.full((n + 1,), -jnp.inf, dtype).at[0].set(0.0)
    return jax.lax.scan(body, init, jnp.arange(1, n + 1))


def forward_by_count(row_fn, n, dtype):
    """log g(r, K), r, K = 0..N (sec. 3.1): the segmentations of the first r points into
    K segments, weighted by prod B; and the rows `row_fn(r)` at index r - 1 (`forward_factored`)."""
    def body(log_g, r):
        row = row_fn(r)
        by_count = logsumexp(log_g[:, :-1] + row[:, None], axis=0)          # K = 1..N
        return log_g.at[r].set(jnp.concatenate([jnp.full((1,), -jnp.inf, dtype), by_count])), row

    init = jnp.full((n + 1, n + 1), -jnp.inf, dtype).at[0, 0].set(0.0)
    return jax.lax.scan(body, init, jnp.arange(1, n + 1))


def forward_beam(weights_fn, n, epsilon, width, dtype):
    """The beam of sec. 3.3 over eq. (6).

    At position r the candidates are N_r = {m + 1 : m in M_{r-1}} u {1}; M_r keeps those
    whose contribution g~(r - m) B'(segment) is at least epsilon / |N_r| of the sum over
    N_r, so that M_r captures at least 1 - epsilon of it, as the paper's smallest such
    subset does (found here without sorting); when all W + 1 candidates qualify the
    smallest is dropped. A length m + 1 at r has the same start as m at r - 1, so the
    carry is W slots of kept lengths (0: free) with their starts' log g~(s), and
    g~(r - 1): O(W) work per position.

    `weights_fn(starts, r)` gives log B'(pi_{s+1..r}) for an array of starts. Returns
    log g~(r) (N + 1,), the kept lengths M_r (N + 1, W) (0: unused) and their log
    contributions (N + 1, W), row 0 unused.
    """
    cut = jnp.log(jnp.asarray(epsilon, dtype) / (width + 1))

    def body(carry, r):
        log_g_prev, kept, kept_log_g = carry
        lengths = jnp.concatenate([jnp.where(kept > 0, kept + 1, 0), jnp.ones((1,), jnp.int32)])
        start_log_g = jnp.concatenate([kept_log_g, log_g_prev[None]])
        contrib = jnp.where(lengths > 0, start_log_g + weights_fn(r - lengths, r), -jnp.inf)
        keep = (contrib >= logsumexp(contrib) + cut) & jnp.isfinite(contrib)
        keep = keep.at[jnp.argmin(jnp.where(keep, contrib, jnp.inf))].set(~jnp.all(keep))
        free = jnp.argmin(keep[:width])                       # a slot for the new length-1 segment
        take_new = keep[width] & ~keep[free]
        slots = jnp.arange(width)
        moved = jnp.where(take_new & (slots == free), width, slots)
        kept_mask = keep[moved]
        kept = jnp.where(kept_mask, lengths[moved], 0)
        kept_contrib = jnp.where(kept_mask, contrib[moved], -jnp.inf)
        log_g = logsumexp(kept_contrib)
        return (log_g, kept, start_log_g[moved]), (log_g, kept, kept_contrib)

    init = (jnp.zeros((), dtype), jnp.zeros((width,), jnp.int32), jnp.full((width,), -jnp.inf, dtype))
    _, (log_g, kept, contrib) = jax.lax.scan(body, init, jnp.arange(1, n + 1))
    return (jnp.concatenate([jnp.zeros((1,), dtype), log_g]),
            jnp.concatenate([jnp.zeros((1, width), jnp.int32), kept]),
            jnp.concatenate([jnp.full((1, width), -jnp.inf, dtype), contrib]))


def _backward(choose, n, uniforms, k0=0, end=None):
    """Walk back from r = `end` (default N; traced for padded points, the real ones):
    `choose(r, k, u) -> previous boundary s`, the i-th segment from the end with `uniforms[i]`
    (N,: at most N segments); returns the segment starts as a bool mask over positions 0..N."""
    def body(carry):
        r, k, i, starts = carry
        s = choose(r, k, uniforms[i])
        return s, k - 1, i + 1, starts.at[s].set(True)

    init = (jnp.asarray(n if end is None else end, jnp.int32), jnp.asarray(k0, jnp.int32), jnp.zeros((), jnp.int32),
            jnp.zeros((n + 1,), bool))
    return jax.lax.while_loop(lambda c: c[0] > 0, body, init)[3]


def sample_factored(rows, log_g, uniforms, end=None):
    """Segment starts of C ~ prod B' / g'(N), drawn backwards (sec. 3.1) from `forward_factored`'s
    rows and log g' with the (N,) `uniforms` (`_backward`); of the first `end` positions only when
    given (the real points of padded ones)."""
    n = log_g.shape[0] - 1
    return _backward(lambda r, k, u: sample_index(log_g + rows[r - 1], u), n, uniforms, end=end)


def sample_by_count(rows, log_g, log_a, u_count, uniforms):
    """K ~ A(K) g(N, K) / p(pi, x) with the uniform `u_count`, then the segments backwards
    (sec. 3.1) with the (N,) `uniforms` (`_backward`), from `forward_by_count`'s rows and log g.
    `log_a`: log A(K) for K = 0..N. Returns (starts mask, K, log p(pi, x))."""
    n = log_g.shape[0] - 1
    logits = log_a + log_g[n]
    k = sample_index(logits, u_count)
    starts = _backward(lambda r, kk, u: sample_index(log_g[:, kk - 1] + rows[r - 1], u), n, uniforms, k)
    return starts, k, logsumexp(logits)


def sample_beam(kept, contrib, uniforms, end=None):
    """Segment starts of C ~ the beam proposal: at r, length M_r[j] with probability
    proportional to its stored contribution, with the (N,) `uniforms` (`_backward`); of the first
    `end` positions when given."""
    n = kept.shape[0] - 1
    return _backward(lambda r, k, u: r - kept[r, sample_index(contrib[r], u)], n, uniforms, end=end)


def in_beam(kept, z_pi, end=None):
    """Whether every segment of the clustering `z_pi` (labels along pi, each cluster
    contiguous) ends at r with a length in M_r; the segments of the first `end` positions
    when given (the real points, labels -1 after them)."""
    n = z_pi.shape[0]
    positions = jnp.arange(n)
    is_start = jnp.concatenate([jnp.ones((1,), bool), z_pi[1:] != z_pi[:-1]])
    start_of = jax.lax.cummax(jnp.where(is_start, positions, 0))
    ends = jnp.arange(1, n + 1)
    is_end = jnp.concatenate([is_start[1:], jnp.ones((1,), bool)])
    length = ends - start_of
    member = jnp.any(kept[1:] == length[:, None], axis=1)
    return jnp.all(member | ~is_end | (positions >= (n if end is None else end)))


def labels_from_starts(starts):
    """Segment index of each position 0..N-1, and the number of segments."""
    seg = jnp.cumsum(starts[:-1]) - 1
    return seg.astype(jnp.int32), jnp.sum(starts[:-1]).astype(jnp.int32)


# --------------------------------------------------------------------------- kernel ---
def _check_options(dp, permutation, warmup_permutation, beam_epsilon, beam_width):
    if dp not in DP_FORMS:
        raise KernelError(f"perm: dp must be one of {DP_FORMS}, got {dp!r}")
    for name, value in (("permutation", permutation), ("warmup_permutation", warmup_permutation)):
        if value not in PERMUTATIONS:
            raise KernelError(f"perm: {name} must be one of {PERMUTATIONS}, got {value!r}")
    if isinstance(beam_width, bool) or not isinstance(beam_width, numbers.Integral) or beam_width < 1:
        raise KernelError(f"perm: beam_width must be an integer >= 1, got {beam_width!r}")
    if beam_epsilon is None or (isinstance(beam_epsilon, str) and beam_epsilon == "auto"):
        return
    if isinstance(beam_epsilon, bool) or not isinstance(beam_epsilon, numbers.Real) or not 0 <= beam_epsilon < 1:
        raise KernelError(f"perm: beam_epsilon must be a number in [0, 1), None or 'auto', got {beam_epsilon!r}")
    if dp != "mh":
        raise KernelError("perm: the beam (beam_epsilon) applies to dp='mh' only (sec. 3.3 prunes eq. 6)")
    if "markov" in (permutation, warmup_permutation):
        raise KernelError("perm: permutation='markov' evaluates the scan probability on every segment "
                          "and cannot be combined with the beam (beam_epsilon)")


def default_beam_epsilon(n: int, dp: str, permutation: str, warmup_permutation: str) -> Optional[float]:
    """`beam_epsilon="auto"`: `DEFAULT_BEAM_EPSILON` on `BEAM_MIN_POINTS` points or more where the beam
    applies (`dp="mh"`, no Markov scan), else None (the full dynamic program)."""
    if n < BEAM_MIN_POINTS or dp != "mh" or "markov" in (permutation, warmup_permutation):
        return None
    return DEFAULT_BEAM_EPSILON


def _segment_row_fn(family, prior, prefix, x_pi, kind, augmented):
    """Row r of the dynamic programs: log B of the segments of pi ending at r, from the Markov
    scan's segment table (sec. 4.1) or from the prefix sums (eq. 4; without the 1/|c|! of
    p(pi | C) for the projection target of sec. 4.2)."""
    if kind == "markov":
        table = markov_segment_matrix(family, prior, prefix, x_pi)

        def base_row(r):
            return table[r - 1]
    else:
        def base_row(r):
            return segment_log_weights(family, prior, prefix, None, r, uniform_order=augmented)
    return base_row


def _draw_by_count(prior, alpha, base_row, n, dtype, augmented, u_count, uniforms):
    """`dp="exact"` (sec. 3.1): an exact Gibbs draw from p(C | pi, x) by the dynamic program
    g(r, K) conditioned on the number of clusters, K with the uniform `u_count`, the segments with
    the (N,) `uniforms`. Returns the segment starts and the log acceptance (0)."""
    counts = jnp.arange(n + 1)
    log_a = jnp.where(counts >= 1, log_count_factor(prior, alpha, counts.astype(dtype), n, augmented), -jnp.inf)
    log_g, rows = forward_by_count(base_row, n, dtype)
    starts, _, _ = sample_by_count(rows, log_g, log_a, u_count, uniforms)
    return starts, jnp.zeros((), dtype)


def _draw_factored(family, prior, alpha, base_row, prefix, k_ref, k_old, z_and_pi, n, dtype, augmented, beam,
                   uniforms, points, native_x=None):
    """`dp="mh"` (sec. 3.2): a draw from q_beta(C | pi) of eq. (6), every cluster carrying
    lambda = d/dK log A(K) at `k_ref`, with its log Metropolis-Hastings acceptance
    log A(K_new) - log A(K_old) - lambda (K_new - K_old); with `beam` = (epsilon, width) the
    beam of sec. 3.3, and the acceptance gains 1[C_old in the beam] (C_old: the labels and pi
    in `z_and_pi`). The programs run over the n positions of pi; the clustering is of its first
    `points` (the real points, first in pi: `n` unless the points are padded), drawn backwards with
    the (N,) `uniforms` (`_backward`). With `native_x` (the points, not permuted) the program and
    the backward draw are one native call (`native_perm_segments`: the same draws up to rounding;
    `base_row` and `prefix` unused). Returns the segment starts, the log acceptance and whether C_old
    is within the beam (int32)."""
    lam = log_count_slope(prior, alpha, k_ref, augmented)
    if native_x is not None:
        z, pi = z_and_pi
        starts, support = native_perm_segments(family, prior, native_x, pi, z, uniforms, lam, points, beam, augmented)
        support = support | (not augmented)
    elif beam is None:
        def row(r):
            return base_row(r) + lam
        log_g, rows = forward_factored(row, n, dtype)
        starts = sample_factored(rows, log_g, uniforms, end=points)
        support = jnp.ones((), bool)
    else:
        def weights(starts, r):
            return segment_log_weights(family, prior, prefix, starts, r, uniform_order=augmented) + lam
        _, kept, contrib = forward_beam(weights, n, beam[0], beam[1], dtype)
        starts = sample_beam(kept, contrib, uniforms, end=points)
        z, pi = z_and_pi
        support = in_beam(kept, z[pi], end=points) | (not augmented)
    k_new = jnp.sum(starts[:-1])
    log_accept = (log_count_change(prior, alpha, k_new.astype(dtype), k_old.astype(dtype), augmented)
                  - lam * (k_new - k_old))
    log_accept = jnp.where(support, log_accept, -jnp.inf)
    return starts, log_accept, support.astype(jnp.int32)


def _accept_clustering(family, state, x, pi, starts, log_accept, u_accept):
    """The clustering with segments `starts` along pi, accepted with probability
    min(1, exp(log_accept)) (when the uniform `u_accept` is below it) when it fits the capacity
    (else `overflow` is set); and the step's `PermInfo`."""
    capacity = state.stats.n.shape[0]
    seg, k_new = labels_from_starts(starts)
    fits = k_new <= capacity
    # points without a slot (padded, last in pi) keep -1
    z_new = jnp.where(state.z >= 0, jnp.zeros_like(state.z).at[pi].set(seg), -1)
    accept = fits & (jnp.log(u_accept) < log_accept)
    stats_new = segment_stats(family, x, jnp.where(fits, z_new, jnp.minimum(z_new, 0)), capacity)
    state = state._replace(
        z=jnp.where(accept, z_new, state.z),
        stats=jax.tree.map(lambda a, b: jnp.where(accept, a, b), stats_new, state.stats),
        overflow=state.overflow | ~fits)
    return state, PermInfo(accept_prob=jnp.exp(jnp.minimum(log_accept, 0.0)), accepted=accept.astype(jnp.int32),
                           proposed_clusters=k_new)


def build_perm_kernel(bound_model, *, dp: str = "mh", permutation: str = "uniform",
                      warmup_permutation: Optional[str] = "projection", beam_epsilon="auto",
                      beam_width: int = DEFAULT_BEAM_WIDTH, adapt_k_ref: bool = True) -> Kernel:
    """The permutation-augmented sampler; see the module docstring for the mathematics,
    the cost and the exactness of each configuration.

    Parameters
    ----------
    dp : {"mh", "exact"}, default "mh"
        `"mh"`: eq. (6) with the Metropolis-Hastings correction (sec. 3.2), k_ref
        adapted in warmup and fixed after it. `"exact"`: the dynamic program
        conditioned on K (sec. 3.1), O(N^3).
    permutation : {"uniform", "markov", "projection"}, default "uniform"
        p(pi | C) after warmup. `"projection"` makes the kernel inexact.
    warmup_permutation : {"uniform", "markov", "projection"} or None, default "projection"
        p(pi | C) during warmup (None: as `permutation`). The default is the paper's
        burn-in (sec. 5.1): stochastic hill-climbing with random projections.
    beam_epsilon : float in [0, 1), None or "auto", default "auto"
        Use the beam of sec. 3.3 with this epsilon (`dp="mh"` only); None: the full
        O(N^2) dynamic program. `"auto"`: the beam with epsilon 1e-32 from
        `BEAM_MIN_POINTS` (225) points on, where `dp="mh"` and no Markov scan, else
        None (the beam's cost is O(N W), the full program's O(N^2): 2.2 s a move at
        N = 4000, D = 10, against 50 ms for the beam and for a Gibbs sweep).
    beam_width : int, default 16
        Most segment lengths kept per position by the beam (a static shape).
    adapt_k_ref : bool, default True
        `dp="mh"`: k_ref is the mean K over the warmup (True) or each chain's initial K for the
        whole run (False). Any fixed k_ref is exact; it sets how often the move is accepted.

    Returns
    -------
    Kernel
        `exact` unless `permutation="projection"`. It has a warmup step of its own (a second
        compiled program) only when warmup differs from sampling: `warmup_permutation` not
        `permutation`, or k_ref adapted (`dp="mh"` with `adapt_k_ref`). `info`: a `PermMHInfo` (`dp="mh"`) or
        `PermInfo` (`dp="exact"`): `accept_prob`
        (Metropolis-Hastings acceptance probability; 1 for dp="exact"), `accepted`,
        `proposed_clusters` (K of the drawn clustering), and for `dp="mh"`
        `k_ref` (the reference K of lambda; beta = exp psi(k_ref + 1) for the DP) and
        `in_beam` (C_old within the beam; always 1 without one). `dp="mh"` carries
        `PermExtras` in `state.extras`.
    """
    if warmup_permutation is None:
        warmup_permutation = permutation
    _check_options(dp, permutation, warmup_permutation, beam_epsilon, beam_width)
    n = bound_model.num_points
    if isinstance(beam_epsilon, str):
        beam_epsilon = default_beam_epsilon(n, dp, permutation, warmup_permutation)
    exact = permutation in EXACT_PERMUTATIONS
    if not exact:
        warnings.warn("perm: permutation='projection' is stochastic hill-climbing (Liang et al. 2007, "
                      "sec. 4.2), not an exact sampler; keep it to warmup (warmup_permutation) for "
                      "posterior draws", UserWarning, stacklevel=3)
    family, prior = bound_model.family, bound_model.prior
    beam = None if beam_epsilon is None else (beam_epsilon, beam_width)
    columns = STEP_COLUMNS + (dp == "exact")
    # dp="mh" without the Markov scan: C | pi in one native call on CPU (`native_perm_segments`)
    native = dp == "mh" and use_native(family, prior, None, "permutation move", source=PERM_SOURCE)

    def cluster_step(rng_key, state: PartitionState, x, kind: str, adapt: bool):
        """pi ~ p(pi | C) (sec. 4), then C ~ p(C | pi, x) by the dynamic program of `dp`. The step's
        random numbers are one (N, `columns`) uniform draw, a row per point (`STEP_COLUMNS`);
        the Markov scan and the projections draw from `fold_in(rng_key, 1)`."""
        u, = computed_once(random.uniform(rng_key, (n, columns), x.dtype))  # not hashed again in each reader
        capacity = state.stats.n.shape[0]
        pi = sample_permutation(kind, random.fold_in(rng_key, 1) if kind != "uniform" else None, u[:, :2],
                                family, x, state.z, capacity)
        augmented = kind != "projection"
        k_old = num_clusters(state)
        if native and kind != "markov":
            prefix = base_row = None
        else:
            x_pi = x[pi]
            prefix = prefix_stats(family, x_pi)
            base_row = _segment_row_fn(family, prior, prefix, x_pi, kind, augmented)
        if dp == "exact":
            starts, log_accept = _draw_by_count(prior, state.alpha, base_row, n, x.dtype, augmented, u[0, 4], u[:, 2])
            return _accept_clustering(family, state, x, pi, starts, log_accept, u[0, 3])
        k_ref = k_old.astype(x.dtype) if adapt else state.extras.k_sum / state.extras.k_count
        starts, log_accept, support = _draw_factored(family, prior, state.alpha, base_row, prefix, k_ref, k_old,
                                                     (state.z, pi), n, x.dtype, augmented, beam, u[:, 2],
                                                     bound_model.points, x if base_row is None else None)
        state, info = _accept_clustering(family, state, x, pi, starts, log_accept, u[0, 3])
        return state, PermMHInfo(*info, k_ref=k_ref, in_beam=support)

    def step(rng_key, state, x):
        return cluster_step(rng_key, state, x, permutation, adapt=False)

    adapts = dp == "mh" and adapt_k_ref

    def warmup_step(rng_key, state, x):
        state, info = cluster_step(rng_key, state, x, warmup_permutation, adapt=adapts)
        if adapts:
            k = num_clusters(state).astype(x.dtype)
            extras = state.extras
            state = state._replace(extras=PermExtras(extras.k_sum + k, extras.k_count + 1.0))
        return state, info

    def init(state, x):
        k = num_clusters(state).astype(x.dtype)
        return state._replace(extras=PermExtras(k, jnp.ones_like(k)))

    # padded points: dp="mh" without the Markov scan runs on the first `points` positions of pi; the
    # others (sums over every position, `forward_by_count`, `markov_segment_matrix`) run unpadded
    own_warmup = adapts or warmup_permutation != permutation
    no_scan = "markov" not in (permutation, warmup_permutation)
    return Kernel("perm-move", exact=exact, step=step, warmup_step=warmup_step if own_warmup else None,
                  info_type=PermMHInfo if dp == "mh" else PermInfo, init=init if dp == "mh" else None,
                  masked_points=dp == "mh" and no_scan,
                  light_compile=native and no_scan)  # the dynamic program one native call (Kernel)


def _applies(model) -> Optional[str]:
    if not isinstance(model.prior, PitmanYor):
        return "the permutation-augmented sampler needs a CRP or Pitman-Yor partition prior"
    return None


register("perm-move", build_perm_kernel, exact=True, applies=_applies,
         description="the permutation move alone (Liang, Jordan & Taskar 2007): blocked pi | C, "
                     "C | pi by dynamic programming, exact after warmup (warmup: random-projection "
                     "hill-climbing); default dp='mh', O(N^2) per step below 225 points and the beam "
                     "(O(N W), exact correction) from there; dp='exact' O(N^3); permutation='projection' "
                     "is inexact")

PERM_EVERY = 16
"""The default `every` of `perm-every`: the move runs at steps 0, 16, 32, ... On galaxies one move
costs about four iterations of `gibbs+splitmerge` (2 chains, compiled: its dynamic program evaluates
the marginal likelihood of all N (N + 1) / 2 segments of pi), and its gain in ESS of K per draw is
within the run-to-run spread of `gibbs+splitmerge`'s. Each iteration, `kernel="perm"` had 0.28 of
`gibbs+splitmerge`'s ESS of K per second, every 8th 0.38 (0.50 with the compile included), every
16th 0.80 (0.23 with the compile included, when warmup compiled a second program; 0.58 with one,
`SCHEDULED_MOVE_DEFAULTS`), side by side on the shared machine (`benchmarks/bench_perm_default.py`,
`benchmarks/results/perm_default.md`)."""


def _check_every(every):
    if isinstance(every, bool) or not isinstance(every, numbers.Integral) or every < 1:
        raise KernelError(f"perm-every: every must be an integer >= 1 (the move runs at steps 0, every, "
                          f"2 every, ...), got {every!r}")
    return int(every)


def every_kernel(move: Kernel, every: int) -> Kernel:
    """`move` at steps 0, `every`, 2 `every`, ... of the chain, the state unchanged at the others.

    The step count is carried in `state.extras` (`ScheduleExtras`), the same in every chain,
    so the fixed schedule is a sequence of kernels each leaving the posterior invariant (the
    move, or the identity): the chain is exact (Tierney 1994). The move sits in a
    `while_loop` that runs its body when the move is due: under `vmap` (several chains) a
    loop runs while any chain's condition holds, so, unlike a `cond` (which `vmap` turns into
    both branches and a select), the steps at which the move is not due cost nothing.
    `info` is the move's with `ran` (int32, 1 when the move ran); its statistics are zero at
    the other steps."""
    Info = info_type("PermEveryInfo", move.info_type._fields + ("ran",))

    def scheduled(move_step):
        def step(rng_key, state, x):
            extras = state.extras
            inner = state._replace(extras=extras.move)
            due = extras.steps % every == 0
            # the move is traced once: its jaxpr gives the info's shapes and is the loop's body
            # (`jax.eval_shape` and the body would trace it twice)
            closed, shapes = jax.make_jaxpr(move_step, return_shape=True)(rng_key, inner, x)
            moved_fn, out_tree = jax.extend.core.jaxpr_as_fun(closed), jax.tree.structure(shapes)
            zeros = jax.tree.map(lambda v: jnp.zeros(v.shape, v.dtype), shapes[1])

            def body(carry):
                _, moved, _ = carry
                moved, info = jax.tree.unflatten(out_tree, moved_fn(*jax.tree.leaves((rng_key, moved, x))))
                return jnp.zeros((), bool), moved, info

            _, inner, info = jax.lax.while_loop(lambda c: c[0], body, (due, inner, zeros))
            state = inner._replace(extras=ScheduleExtras(extras.steps + 1, inner.extras))
            return state, Info(*info, ran=due.astype(jnp.int32))
        return step

    def init(state, x):
        state = move.init(state, x) if move.init is not None else state._replace(extras=NoExtras())
        return state._replace(extras=ScheduleExtras(jnp.zeros((), jnp.int32), state.extras))

    return Kernel("perm-every", exact=move.exact, step=scheduled(move.step),
                  warmup_step=scheduled(move.warmup) if move.warmup_step is not None else None,
                  info_type=Info, init=init, masked_points=move.masked_points, light_compile=move.light_compile)


SCHEDULED_MOVE_DEFAULTS = {"warmup_permutation": None, "adapt_k_ref": False}
"""The move options whose defaults `perm-every` changes: warmup runs the sampling move (the uniform
permutation, k_ref each chain's initial K), so the move has no warmup step of its own and a run of
`kernel="perm"` compiles one program where a warmup step would compile a second one, Gibbs sweep,
split-merge and alpha move included: its first call on galaxies took 42-43 CPU s with two programs,
21.9 with one, against 16.5 for `gibbs+splitmerge` (`benchmarks/results/perm_default.md`). Beside
the Gibbs sweep and split-merge, the hill-climbing warmup of sec. 5.1 is not needed to find the
clusters, and any fixed k_ref is exact."""


def build_perm_every_kernel(bound_model, *, every: int = PERM_EVERY, **move_options) -> Kernel:
    """The permutation move (`build_perm_kernel`, whose options it takes, with the defaults of
    `SCHEDULED_MOVE_DEFAULTS`) at every `every`-th step (`every_kernel`): the move of
    `kernel="perm"`, beside a Gibbs sweep and split-merge each step."""
    return every_kernel(build_perm_kernel(bound_model, **{**SCHEDULED_MOVE_DEFAULTS, **move_options}),
                        _check_every(every))


build_perm_every_kernel.__signature__ = inspect.signature(build_perm_every_kernel).replace(parameters=[
    *list(inspect.signature(build_perm_every_kernel).parameters.values())[:2],
    *(p.replace(default=SCHEDULED_MOVE_DEFAULTS.get(p.name, p.default))
      for p in list(inspect.signature(build_perm_kernel).parameters.values())[1:])])  # the registry reads these

register("perm-every", build_perm_every_kernel, exact=True, applies=_applies,
         description=f"the permutation move at every `every`-th step (default {PERM_EVERY}), the state "
                     "unchanged at the others: a fixed schedule of invariant kernels, exact; the move's "
                     "options reach it")

PAPER_SAMPLER = "gibbs+splitmerge+perm-every"
"""What `kernel="perm"` runs: GIBBS+SPLITMERGE+PERM of Liang et al. (2007, sec. 5), a collapsed
Gibbs sweep and split-merge proposals each iteration and the permutation move every `PERM_EVERY`-th
(`perm-every`; `every=1`: each iteration, as the paper). Split-merge is in it because it measured
better: on galaxies (`benchmarks/bench_perm_default.py`) its ESS of K per second was 2.0-2.6 times
that of `gibbs+perm-move` (the paper's GIBBS+PERM) with the programs compiled, its ESS of K per
draw 2-8 times; the move alone mixes K worst. The move runs every 16th iteration because each
iteration it cost more ESS per second than it gave (`PERM_EVERY`)."""

register_alias("perm", PAPER_SAMPLER,
               description="the permutation-augmented sampler as Liang, Jordan & Taskar (2007, sec. 5) run "
                           f"it: a collapsed Gibbs sweep and split-merge each iteration, the permutation move "
                           f"every {PERM_EVERY}th (runs 'gibbs+splitmerge+perm-every'; option every=1: each "
                           "iteration; the move's options reach it)")
