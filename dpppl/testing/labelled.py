"""Exact posteriors over *labelled* assignments under a stick-breaking prior, and a
statistical check of sampler output against them.

Under a stick-breaking prior (Porteous et al. 2006, sec. 3) a state is a labelled
assignment z in {1, 2, ...}^n with

    p(z | x)  ∝  P(z) p(x | C(z)),    P(z) = prod_i B(a_i + N_i, b_i + M_i) / B(a_i, b_i),

C(z) the partition z induces (the likelihood does not see labels). The label space is
infinite, so the posterior is computed in two parts:

1. The partition law. Summing P over the injective labellings of a partition's K blocks
   gives its prior probability W(C) (for Pitman-Yor parameters, the Pitman-Yor EPPF).
   W depends on the block sizes only and is computed by a dynamic programme over labels
   from L' down to 1 whose state is the set of blocks already placed above the current
   label (2^K states): g_i(S) = g_{i+1}(S) f_i(0, |S|) + sum_{b in S} g_{i+1}(S \\ b)
   f_i(s_b, |S \\ b|), f_i(N, M) = B(a_i + N, b_i + M) / B(a_i, b_i), W = g_1(all). The
   labellings that use a label past L' have total prior mass at most n prod_{j<=L'} b_j /
   (a_j + b_j) (each point's label exceeds L' with that prior probability); L' is doubled
   until this bound is below `tol` times the smallest W (a finite prior of L sticks is
   exact with L' = L). Then p(C | x) ∝ W(C) p(x | C) over all set partitions.
2. The labelled law on labels 1..L: p(z | x) = p(C(z) | x) P(z) / W(C(z)) for every z in
   {1..L}^n, and one more cell "some label > L" holding the rest of the mass.

`check_labelled_samples` tests draws of independent chains against both: the
labelled law (the Pearson/Box test of `dpppl.testing.exact` on the cells above) and
the partition law, P(K = k) and co-clustering (`check_kernel_samples`),
with `family_alpha` split equally between them.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from dpppl.models.mixture import Model
from dpppl.testing.exact import (ExactPosterior, HarnessResult, QuantityCheck, _partition_law_check,
                                 check_kernel_samples, exact_posterior, partition_index)

MAX_TRUNCATION = 2**14


def _log_f(a, b, n_block, m_above, last, beyond):
    """log f_i(N, M) = log B(a_i + N, b_i + M) - log B(a_i, b_i) with the conventions of a
    last stick (V_L = 1: 0 if M = 0, else -inf) and labels past it (-inf if N > 0)."""
    if beyond:
        return np.where(n_block > 0, -np.inf, 0.0)
    if last:
        return np.where(m_above > 0, -np.inf, 0.0)
    return special.betaln(a + n_block, b + m_above) - special.betaln(a, b)


def _log_w_for_sizes(sizes, a, b, last_index):
    """log W for one multiset of block sizes, labels 1..len(a) (see module docstring)."""
    K = len(sizes)
    masks = np.arange(2**K)
    member = (masks[:, None] >> np.arange(K)[None, :]) & 1                   # (2^K, K)
    total = member @ np.asarray(sizes, float)
    log_g = np.full(2**K, -np.inf)
    log_g[0] = 0.0
    for i in range(len(a) - 1, -1, -1):
        last = last_index is not None and i == last_index
        beyond = last_index is not None and i > last_index
        stay = log_g + _log_f(a[i], b[i], 0.0, total, last, beyond)
        terms = [stay]
        for blk in range(K):
            has = member[:, blk] == 1
            without = masks ^ (1 << blk)
            above = np.where(has, total - sizes[blk], 0.0)
            add = np.where(has, log_g[without] + _log_f(a[i], b[i], float(sizes[blk]), above, last,
                                                         beyond), -np.inf)
            terms.append(add)
        log_g = special.logsumexp(np.stack(terms), axis=0)
    return float(log_g[-1])


def stick_breaking_log_eppf(prior, counts, *, tol: float = 1e-10):
    """log W(C) for partitions with cluster sizes `counts` (B, n) (zeros ignored): the
    stick-breaking prior summed over all labellings (module docstring, part 1).

    Returns `(log_w (B,), truncation L', bound)`: `bound` is the largest relative
    error of any W (at most `tol`). Raises ValueError when the prior's tail is too heavy
    for L' <= `MAX_TRUNCATION`."""
    counts = np.asarray(counts)
    keys = [tuple(sorted(int(c) for c in row if c > 0)) for row in counts]
    distinct = sorted(set(keys))
    n = int(counts[0].sum())
    trunc = 64
    while True:
        if prior.num_sticks is not None:
            trunc = prior.num_sticks
        a, b = prior.sticks(trunc)
        last = None if prior.num_sticks is None else prior.num_sticks - 1
        log_w = {s: _log_w_for_sizes(s, a, b, last) for s in distinct}
        if last is not None:  # a finite prior: every label is listed, nothing is cut
            return np.array([log_w[k] for k in keys]), trunc, 0.0
        log_tail = float(np.sum(np.log(b / (a + b))))
        bound = n * np.exp(log_tail - min(v for v in log_w.values() if np.isfinite(v)))
        if bound <= tol:
            return np.array([log_w[k] for k in keys]), trunc, float(bound)
        if trunc >= MAX_TRUNCATION:
            raise ValueError(f"{prior.describe()}: the prior's tail is too heavy to enumerate labels "
                             f"(relative error bound {bound:.3g} at {trunc} labels)")
        trunc *= 2


@dataclasses.dataclass(frozen=True)
class ExactLabelledPosterior:
    """The exact posterior of a stick-breaking mixture on a small data set.

    Attributes
    ----------
    partitions : ExactPosterior
        The law of the partition (labels forgotten).
    assignments : ndarray (L^n, n)
        Every labelled assignment with labels 0..L-1 (label k is stick k + 1).
    log_prob : ndarray (L^n,)
        log p(z | x) of each, normalised over the whole (infinite) label space.
    tail_prob : float
        P(some label >= L | x) = 1 - sum(exp(log_prob)).
    max_label : int
        L.
    truncation : int
        Labels L' the partition law was summed over; relative error at most `error_bound`.
    """

    partitions: ExactPosterior
    assignments: np.ndarray
    log_prob: np.ndarray
    tail_prob: float
    max_label: int
    truncation: int
    error_bound: float

    @property
    def prob(self) -> np.ndarray:
        return np.exp(self.log_prob)

    @property
    def n(self) -> int:
        return int(self.assignments.shape[1])

    def label_marginals(self) -> np.ndarray:
        """P(z_n = k | x) for k < L, shape (n, L)."""
        return np.stack([np.bincount(col, weights=self.prob, minlength=self.max_label)
                         for col in self.assignments.T])


def exact_labelled_posterior(model: Model, x, max_label: int = 4, *, tol: float = 1e-10) -> ExactLabelledPosterior:
    """The exact posterior of a [`StickBreakingMixture`][dpppl.StickBreakingMixture] over labelled
    assignments of `x` (at most 7 points), with labels 1..`max_label` listed one by
    one and the rest lumped (module docstring)."""
    prior = model.prior
    if not prior.labelled:
        raise ValueError("exact_labelled_posterior needs a stick-breaking (labelled) prior")
    n = model.bind(x).num_points
    if n > 7:
        raise ValueError(f"exact_labelled_posterior: at most 7 points, got {n}")
    info = {}

    def log_prior(counts):
        log_w, info["truncation"], info["bound"] = stick_breaking_log_eppf(prior, counts, tol=tol)
        return log_w

    parts = exact_posterior(model, x, partition_log_prior=log_prior)
    z = np.array(list(itertools.product(range(max_label), repeat=n)), dtype=np.int64)
    counts = (z[:, :, None] == np.arange(max_label)[None, None, :]).sum(axis=1).astype(float)
    log_p_labels = np.asarray(jax.jit(jax.vmap(prior.log_prob_labels))(jnp.asarray(counts)))
    index = partition_index(z, n)
    part_counts = (parts.partitions[:, :, None] == np.arange(n)[None, None, :]).sum(axis=1)
    log_w, _, _ = stick_breaking_log_eppf(prior, part_counts, tol=tol)
    log_prob = parts.log_prob[index] + log_p_labels - log_w[index]
    tail = float(max(0.0, 1.0 - np.exp(special.logsumexp(log_prob))))
    for arr in (z, log_prob):
        arr.setflags(write=False)
    return ExactLabelledPosterior(parts, z, log_prob, tail, max_label, info["truncation"], info["bound"])


@dataclasses.dataclass(frozen=True)
class LabelledHarnessResult:
    """Result of `check_labelled_samples`.

    `labelled_law` is the test of the law over labelled assignments (cells: each
    assignment with labels < L, and "some label >= L"); `partitions` is the
    `HarnessResult` of the partition law, P(K = k) and co-clustering.
    `tv_distance` is the total-variation distance between the sampled and exact
    labelled laws over those cells; `label_marginals` the sampled P(z_n = k), k < L.
    """

    passed: bool
    labelled_law: QuantityCheck
    partitions: HarnessResult
    tv_distance: float
    label_marginals: np.ndarray
    report: str


def check_labelled_samples(exact: ExactLabelledPosterior, labels, *, family_alpha: float = 1e-3,
                           min_cell_count: float = 10.0) -> LabelledHarnessResult:
    """Test labelled draws `labels` (chains, draws, n) of *independent* chains (label k
    is stick k + 1, as in `dpppl.diagnostics.arviz_compat.labels(idata)`) against an exact labelled posterior;
    see the module docstring. `family_alpha` bounds the false-alarm rate of the whole
    check (half for the labelled law, half for the partition checks)."""
    labels = np.asarray(labels, dtype=np.int64)
    n, L = exact.n, exact.max_label
    if labels.ndim != 3 or labels.shape[2] != n:
        raise ValueError(f"labels must have shape (chains, draws, {n}), got {labels.shape}")
    C, T = labels.shape[:2]
    A = exact.assignments.shape[0]
    inside = (labels < L).all(axis=2)
    code = np.where(inside, (np.minimum(labels, L - 1) * (L ** np.arange(n - 1, -1, -1))).sum(axis=2), A)
    freq = np.bincount((code + (A + 1) * np.arange(C)[:, None]).ravel(),
                       minlength=C * (A + 1)).reshape(C, A + 1) / T
    prob = np.append(exact.prob, exact.tail_prob)
    law = _partition_law_check(freq, prob, T, min_cell_count, family_alpha / 2)
    law = dataclasses.replace(law, group="labelled law", name="labelled law")
    parts = check_kernel_samples(exact.partitions, labels, family_alpha=family_alpha / 2)
    tv = 0.5 * float(np.abs(freq.mean(axis=0) - prob).sum())
    marg = np.stack([(labels == k).mean(axis=(0, 1)) for k in range(L)], axis=1)
    passed = law.passed and parts.passed
    report = "\n".join([
        f"labelled check {'PASSED' if passed else 'FAILED'}: {C} chains x {T} draws, n = {n}, "
        f"labels < {L} listed ({A} cells) + P(some label >= {L}) = {exact.tail_prob:.4f}",
        f"labelled law: {law.describe()}",
        f"total-variation distance to the exact labelled law: {tv:.4f}",
        parts.report])
    return LabelledHarnessResult(passed, law, parts, tv, marg, report)


__all__ = ["ExactLabelledPosterior", "LabelledHarnessResult", "check_labelled_samples",
           "exact_labelled_posterior", "stick_breaking_log_eppf"]
