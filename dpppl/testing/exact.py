"""Exact posteriors over set partitions, and a statistical test of sampler output.

For n <= 10 points every set partition can be listed (Bell(8) = 4140), so the posterior
of a conjugate DP (or Pitman-Yor) mixture over partitions is known exactly:

    p(C | x)  proportional to  p(C) * prod_{c in C} p(x_c),

with p(x_c) the family's log marginal likelihood and p(C) the prior's exchangeable
partition probability function (EPPF). With a Gamma prior on the concentration alpha,
p(C) = integral p(C | alpha) Gamma(alpha) d alpha. For the CRP and Pitman-Yor EPPFs
alpha enters only through the number of clusters K and the number of points N, so the
integral is done once per K, on a log-alpha grid.

`check_kernel_samples` compares draws of many *independent* chains with such an
exact posterior. Per-chain estimates (the frequency of each partition, of K = k, of
points i and j sharing a cluster) are i.i.d. across chains whatever the autocorrelation
within a chain, so their across-chain covariance gives honest Monte Carlo errors and
effective sample sizes. The partition law (n <= 5 by default) is tested with a
Pearson-type quadratic form scaled by that covariance and referred to an F law
(Box 1954; the "ANOVA-type statistic" of Brunner, Dette and Munk 1997); P(K = k), the
co-clustering probabilities and the mean of alpha are tested with Student-t statistics.
A Bonferroni correction over all tests holds the false-alarm rate of the whole check
at `family_alpha`.

References
----------
G. E. P. Box, "Some theorems on quadratic forms applied in the study of analysis of
variance problems, I", Ann. Math. Statist. 25(2), 1954.
E. Brunner, H. Dette and A. Munk, "Box-type approximations in nonparametric factorial
designs", J. Amer. Statist. Assoc. 92(440), 1997.
J. Pitman, "Combinatorial stochastic processes", Springer LNM 1875, 2006.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

from dpppl import families as fam
from dpppl.models.mixture import DPMixture, Model, PitmanYorMixture
from dpppl.families.base import cluster_log_marginals
from dpppl.priors.crp import Gamma

MAX_POINTS = 10
"""Largest n for which `set_partitions` lists partitions (Bell(10) = 115975)."""

_ALPHA_GRID_POINTS = 20001
_ALPHA_TAIL = 1e-30


# --------------------------------------------------------------------------------------
# Set partitions as restricted growth strings
# --------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _partitions(n: int) -> np.ndarray:
    rows = np.zeros((1, 1), dtype=np.int64)
    top = np.zeros(1, dtype=np.int64)  # largest label of each row
    for _ in range(1, n):
        choices = top + 2  # a row with labels up to m may continue with 0..m+1
        parent = np.repeat(np.arange(rows.shape[0]), choices)
        new = np.arange(parent.size) - np.repeat(np.cumsum(choices) - choices, choices)
        rows = np.concatenate([rows[parent], new[:, None]], axis=1)
        top = np.maximum(top[parent], new)
    rows.setflags(write=False)
    return rows


@functools.lru_cache(maxsize=None)
def _partition_keys(n: int) -> np.ndarray:
    keys = _partitions(n) @ (n ** np.arange(n - 1, -1, -1, dtype=np.int64))
    keys.setflags(write=False)
    return keys


def set_partitions(n: int) -> np.ndarray:
    """Every set partition of `n` points as canonical labels.

    Parameters
    ----------
    n : int, 1 <= n <= 10

    Returns
    -------
    numpy.ndarray of int64, shape (Bell(n), n), read-only
        Row b labels the points of partition b with 0, 1, ... in order of first
        occurrence (restricted growth strings: `labels[0] = 0` and
        `labels[i] <= max(labels[:i]) + 1`). Rows are in lexicographic order, so the
        mixed-radix key `sum_i labels[i] n^(n-1-i)` increases along them. Cached.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_POINTS:
        raise ValueError(f"set_partitions: n must be an integer in [1, {MAX_POINTS}], got {n!r}")
    return _partitions(int(n))


def canonical(labels) -> np.ndarray:
    """Relabel partitions canonically: clusters numbered 0, 1, ... by first occurrence.

    Parameters
    ----------
    labels : array_like of int, shape (..., n)
        Any integer labels; each row along the last axis is one partition.

    Returns
    -------
    numpy.ndarray of int64, shape (..., n)
        Two rows describe the same partition exactly when their canonical forms are equal.
    """
    labels = np.asarray(labels)
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"canonical: labels must be integers, got dtype {labels.dtype}")
    if labels.ndim == 0:
        raise ValueError("canonical: labels must have at least one axis (points)")
    out = np.zeros(labels.shape, dtype=np.int64)
    fresh = np.zeros(labels.shape[:-1], dtype=np.int64)  # next unused canonical label
    for i in range(labels.shape[-1]):
        same = labels[..., :i] == labels[..., i, None]
        seen = same.any(axis=-1)
        if i:
            first = np.argmax(same, axis=-1)[..., None]
            out[..., i] = np.where(seen, np.take_along_axis(out[..., :i], first, axis=-1)[..., 0], fresh)
        fresh += ~seen
    return out


def partition_index(labels, n: Optional[int] = None) -> np.ndarray:
    """Index of each partition in `set_partitions`.

    Parameters
    ----------
    labels : array_like of int, shape (..., n)
        Partitions in any labelling (they are made canonical first).
    n : int, optional
        Number of points; defaults to `labels.shape[-1]` and must agree with it.

    Returns
    -------
    numpy.ndarray of int64, shape (...)
        `set_partitions(n)[partition_index(labels)]` equals `canonical(labels)`.
    """
    canon = canonical(labels)
    if n is None:
        n = canon.shape[-1]
    if canon.shape[-1] != n:
        raise ValueError(f"partition_index: labels have {canon.shape[-1]} points, expected {n}")
    set_partitions(n)  # validates n
    keys = canon @ (n ** np.arange(n - 1, -1, -1, dtype=np.int64))
    return np.searchsorted(_partition_keys(n), keys)


# --------------------------------------------------------------------------------------
# Exact posterior by enumeration
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ExactPosterior:
    """The posterior over all set partitions of a small data set.

    Attributes
    ----------
    partitions : ndarray (B, n)
        `set_partitions(n)`.
    log_prob : ndarray (B,)
        Normalised log posterior probability of each partition.
    num_clusters : ndarray (B,)
        K of each partition.
    p_num_clusters : ndarray (n + 1,)
        P(K = k | x) for k = 0..n (entry 0 is 0).
    coclustering : ndarray (n, n)
        P(z_i = z_j | x); symmetric with a unit diagonal.
    alpha_mean, alpha_sd : float or None
        Posterior mean and standard deviation of the concentration when it has a Gamma
        prior; `None` when it is fixed.
    hyper_mean, hyper_sd : dict or None
        Posterior mean and standard deviation of each of the model's random hyperparameters (one or
        two), by name; `None` when it has none.
    """

    partitions: np.ndarray
    log_prob: np.ndarray
    num_clusters: np.ndarray
    p_num_clusters: np.ndarray
    coclustering: np.ndarray
    alpha_mean: Optional[float] = None
    alpha_sd: Optional[float] = None
    hyper_mean: Optional[dict] = None
    hyper_sd: Optional[dict] = None

    @property
    def n(self) -> int:
        """Number of points."""
        return int(self.partitions.shape[1])

    @property
    def prob(self) -> np.ndarray:
        """Posterior probability of each partition, shape (B,)."""
        return np.exp(self.log_prob)


def _representative_counts(n: int) -> np.ndarray:
    """Cluster sizes (n, n) of one partition with K = k + 1 clusters per row."""
    counts = np.zeros((n, n))
    for k in range(1, n + 1):
        counts[k - 1, :k] = 1.0
        counts[k - 1, 0] = n - k + 1
    return counts


def _alpha_integrals(prior, n: int, discounts=None):
    """Integrate the EPPF's alpha-dependent factor against the Gamma prior, per K.

    log p(C | alpha) = log p(C | 1) + f_K(alpha), where f_K depends on the partition C
    only through its number of clusters K: exp f_K(alpha) = prod_{j<K} (alpha + j d) /
    (1 + j d) * (2)_(N-1) / (alpha + 1)_(N-1), with (a)_m the rising factorial. So

        p(C) = p(C | 1) I_K,   I_K = int exp(f_K(alpha)) Gamma(alpha) d alpha,
        E[alpha^j | K, x] = int alpha^j exp(f_K(alpha)) Gamma(alpha) d alpha / I_K.

    exp f_K is bounded by a constant (prod_{j<K} (alpha + j d) <= (alpha + 1)_(N-1)), so
    cutting the integrals to the prior's central 1 - 2e-30 (lower end at least
    alpha = e^-700) loses nothing visible; they are done by the trapezoid rule on a
    uniform grid in u = log alpha (d alpha = alpha du), which converges geometrically for
    a smooth integrand that vanishes at both ends. With `discounts` (a random discount's grid,
    G values) they are done at each d (`prior.at_discount`), one d at a time.

    Returns
    -------
    log_integral, alpha_mean, alpha_second_moment : ndarrays (n,), entry K - 1 ((G, n) with `discounts`)
        log I_K, E[alpha | K, x], E[alpha^2 | K, x].
    """
    gamma_prior: Gamma = prior.alpha
    scale = 1.0 / gamma_prior.rate
    lo = stats.gamma.ppf(_ALPHA_TAIL, gamma_prior.shape, scale=scale)
    hi = stats.gamma.isf(_ALPHA_TAIL, gamma_prior.shape, scale=scale)
    u = np.linspace(max(np.log(lo) if lo > 0 else -700.0, -700.0), np.log(hi), _ALPHA_GRID_POINTS)
    counts = jnp.asarray(_representative_counts(n))

    def log_integrand(p, u):
        alpha = jnp.exp(u)
        log_f = jax.vmap(lambda c: jax.vmap(lambda a: p.log_eppf(c, a))(alpha)
                         - p.log_eppf(c, 1.0))(counts)                           # (n, G)
        return log_f + p.log_prior_alpha(alpha) + u                              # d alpha = alpha du

    if discounts is None:
        log_w = np.asarray(jax.jit(functools.partial(log_integrand, prior))(jnp.asarray(u)))
    else:
        log_w = np.asarray(jax.jit(lambda ds: jax.lax.map(lambda d: log_integrand(prior.at_discount(d), jnp.asarray(u)),
                                                          ds))(jnp.asarray(discounts)))
    trapezoid = np.full(u.size, np.log(u[1] - u[0]))
    trapezoid[[0, -1]] -= np.log(2.0)
    log_w = log_w + trapezoid
    log_integral = special.logsumexp(log_w, axis=-1)
    weights = np.exp(log_w - log_integral[..., None])
    alpha = np.exp(u)
    return log_integral, weights @ alpha, weights @ alpha**2


_HYPER_GRID_POINTS = {1: 4001, 2: 201}
"""Grid points per random hyperparameter when the model has one or two (a product grid of two)."""
_HYPER_TAIL = 1e-12


def _quadrature(prior, points: int):
    """A grid of `points` values of a random hyperparameter h with prior `prior`, for integrating it
    out by quadrature: uniform in u = T^-1(h), the unconstrained value the slice moves work on
    (`Hyperprior.to_unconstrained`), between the prior's 1e-12 and 1 - 1e-12 quantiles; each point's
    log weight is log p(u) (the prior's density with the Jacobian) plus the trapezoid rule's log
    step. The prior's tails beyond lose at most 2e-12 of its mass, and the trapezoid rule on a smooth
    integrand that vanishes at both ends converges geometrically.

    Returns
    -------
    values (G,), log_weight (G,)
    """
    ends = prior.scipy().ppf([_HYPER_TAIL, 1 - _HYPER_TAIL])
    u = np.linspace(*np.asarray(prior.to_unconstrained(jnp.asarray(ends))), points)
    log_weight = np.asarray(jax.vmap(prior.log_prob_unconstrained)(jnp.asarray(u))) + np.log(u[1] - u[0])
    log_weight[[0, -1]] -= np.log(2.0)
    return np.asarray(prior.to_value(jnp.asarray(u))), log_weight


def _product_grid(hyperpriors: dict, dims: int):
    """The product of the random hyperparameters' grids (`_quadrature`, `_HYPER_GRID_POINTS[dims]`
    each, `dims` the number of integrals, alpha's beside a random discount included): the trapezoid
    rule in each unconstrained coordinate, whose log weights add.

    Returns
    -------
    values : dict of ndarray (G,), by name
    log_weight : ndarray (G,)
    """
    points = _HYPER_GRID_POINTS[dims]
    axes = [_quadrature(prior, points) for prior in hyperpriors.values()]
    values = np.meshgrid(*(v for v, _ in axes), indexing="ij")
    weights = np.meshgrid(*(w for _, w in axes), indexing="ij")
    return {name: v.ravel() for name, v in zip(hyperpriors, values)}, sum(w.ravel() for w in weights)


def exact_posterior(model: Model, x, *, partition_log_prior: Optional[Callable] = None) -> ExactPosterior:
    """Exact posterior over every set partition of `x` under `model`.

    Parameters
    ----------
    model : Model
        A DP or Pitman-Yor mixture of a conjugate family, or of a non-conjugate one with a
        numerical marginal; alpha fixed or Gamma; one or two random hyperparameters (of the base
        measure, or a random Pitman-Yor discount), integrated out by quadrature on their product
        grid (`_product_grid`: 4001 points for one, 201 x 201 for two); a random discount beside a
        Gamma alpha is a two-dimensional integral too (alpha's per-K integrals at each d of 201).
    x : array_like
        Data with at most 10 points (the family's layout, as for `model.bind`).
    partition_log_prior : callable, optional
        `counts (B, n) -> log p(C) (B,)` used instead of the prior's EPPF, for priors
        without a closed-form one (stick-breaking priors summed over labellings:
        `dpppl.testing.labelled.exact_labelled_posterior`).

    Returns
    -------
    ExactPosterior

    Notes
    -----
    log p(C | x) = log p(C) + sum_c log p(x_c) - log Z. The log marginal likelihood of
    each of the 2^n - 1 non-empty subsets of points is computed in one batched call of
    the bound family's `log_marginal` (statistics are sums of point statistics), and
    each partition adds up the entries of its clusters (for a non-conjugate family, its
    numerical `log_marginal_numerical`). p(C) is `prior.log_eppf`; a
    Gamma prior on alpha is integrated out per K (see `_alpha_integrals`). In
    float64 unless dpppl was put in 32-bit mode (`DPPPL_X64=0`).
    """
    bound = model.bind(x)
    family, prior, n = bound.family, bound.prior, bound.num_points
    if prior.labelled and partition_log_prior is None:
        raise ValueError("exact_posterior: a prior on explicit labels has no EPPF here; use "
                         "dpppl.testing.labelled.exact_labelled_posterior")
    if n > MAX_POINTS:
        raise ValueError(f"exact_posterior: enumeration needs at most {MAX_POINTS} points, got {n}")
    parts = set_partitions(n)
    bits = 1 << np.arange(n)
    subsets = (np.arange(1, 2**n)[:, None] & bits) > 0                       # (2^n - 1, n)
    point = family.point_stats(jnp.asarray(bound.x))
    subset_stats = jax.tree.map(
        lambda p: jnp.tensordot(jnp.asarray(subsets, p.dtype), p, axes=1), point)
    member = parts[:, None, :] == np.arange(n)[None, :, None]                 # (B, cluster, point)
    codes = member @ bits                                                     # subset of each cluster
    hyper = len(model.hyperpriors)
    discount = model.prior.random_discount
    if hyper > 2:
        raise ValueError(f"exact_posterior: integrates one or two random hyperparameters, the model has {hyper}")
    joint_alpha = discount is not None and prior.alpha_is_random  # alpha's integrals at each d
    if joint_alpha and hyper > 1:
        raise ValueError("exact_posterior: integrates a random discount beside a random alpha only when the "
                         "discount is the model's one random hyperparameter")
    if hyper:  # the hyperparameters' product grid (G points), summed over below with their priors
        grid, log_weight = _product_grid(model.hyperpriors, hyper + joint_alpha)
    if hyper > (discount is not None):  # log p(x | C, h) on the grid (B, G)
        log_ml = np.asarray(jax.jit(jax.vmap(lambda values: cluster_log_marginals(
            bound.at_hyperparameters(values).family, subset_stats)))({k: jnp.asarray(v) for k, v in grid.items()}),
            dtype=float)  # (G, 2^n - 1)
        log_lik = np.zeros((parts.shape[0], log_weight.size))
        for cluster in range(n):
            c = codes[:, cluster]
            log_lik += np.where(c[:, None] > 0, log_ml[:, np.maximum(c, 1) - 1].T, 0.0)
    else:
        log_ml = np.asarray(jax.jit(functools.partial(cluster_log_marginals, family))(subset_stats),
                            dtype=float)  # (2^n - 1,)
        log_lik = np.where(codes > 0, log_ml[np.maximum(codes, 1) - 1], 0.0).sum(axis=1)
        log_lik = log_lik[:, None] if hyper else log_lik
    counts = jnp.asarray(member.sum(axis=2), dtype=float)
    num_clusters = parts.max(axis=1) + 1

    alpha_mean = alpha_sd = None
    if prior.alpha_is_random:  # (n,), or (G, n) at each d of the grid
        log_integral, mean_k, second_k = _alpha_integrals(prior, n, grid[discount] if joint_alpha else None)
        alpha = 1.0
    elif partition_log_prior is None:
        alpha = float(prior.alpha)
    if partition_log_prior is not None:
        log_prior = np.asarray(partition_log_prior(np.asarray(counts)), dtype=float)
    elif discount is not None:  # log p(C | d) on the grid (B, G)
        eppf = jax.jit(jax.vmap(lambda d: jax.vmap(lambda c: prior.at_discount(d).log_eppf(c, alpha))(counts)))
        log_prior = np.asarray(eppf(jnp.asarray(grid[discount])), dtype=float).T
    else:
        log_prior = np.asarray(jax.jit(jax.vmap(lambda c: prior.log_eppf(c, alpha)))(counts))
    if prior.alpha_is_random:
        log_prior = log_prior + (log_integral[:, num_clusters - 1].T if joint_alpha else log_integral[num_clusters - 1])
    if hyper:  # log p(C, h | x) + log Z on the grid (B, G), and its sum over h
        log_prior = log_prior if discount is not None else log_prior[:, None]
        joint_h = log_prior + log_lik + log_weight
        log_prior, log_lik = special.logsumexp(joint_h, axis=1), 0.0

    log_joint = log_prior + log_lik
    if not np.any(np.isfinite(log_joint)):
        raise ValueError("exact_posterior: every partition has zero probability")
    log_prob = log_joint - special.logsumexp(log_joint)
    prob = np.exp(log_prob)
    p_num_clusters = np.bincount(num_clusters, weights=prob, minlength=n + 1)
    same = parts[:, :, None] == parts[:, None, :]
    coclustering = np.einsum("b,bij->ij", prob, same)
    if joint_alpha:  # E[alpha^j | x] = sum over (C, d) of p(C, d | x) E[alpha^j | K, d]
        p_joint = np.exp(joint_h - special.logsumexp(log_joint))
        alpha_mean = float(np.sum(p_joint * mean_k[:, num_clusters - 1].T))
        second = float(np.sum(p_joint * second_k[:, num_clusters - 1].T))
        alpha_sd = float(np.sqrt(max(second - alpha_mean**2, 0.0)))
    elif prior.alpha_is_random:
        pk = p_num_clusters[1:]
        alpha_mean = float(pk @ mean_k)
        alpha_sd = float(np.sqrt(max(pk @ second_k - alpha_mean**2, 0.0)))
    hyper_mean = hyper_sd = None
    if hyper:  # p(h | x) on the grid: sum over partitions of p(C, h | x)
        p_h = np.exp(special.logsumexp(joint_h - special.logsumexp(log_joint), axis=0))
        hyper_mean = {name: float(p_h @ values) for name, values in grid.items()}
        hyper_sd = {name: float(np.sqrt(max(p_h @ values**2 - hyper_mean[name] ** 2, 0.0)))
                    for name, values in grid.items()}
    for a in (parts, log_prob, num_clusters, p_num_clusters, coclustering):
        a.setflags(write=False)
    return ExactPosterior(parts, log_prob, num_clusters, p_num_clusters, coclustering,
                          alpha_mean, alpha_sd, hyper_mean, hyper_sd)


# --------------------------------------------------------------------------------------
# Reference draws
# --------------------------------------------------------------------------------------

def _generator(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def sample_exact(exact: ExactPosterior, rng, shape) -> np.ndarray:
    """I.i.d. draws of partitions from an exact posterior.

    Parameters
    ----------
    exact : ExactPosterior
    rng : numpy.random.Generator or int seed
    shape : int or tuple of int
        Leading shape of the draws, e.g. `(chains, draws)`.

    Returns
    -------
    numpy.ndarray of int64, shape (*shape, n)
        Canonical labels.
    """
    index = _generator(rng).choice(exact.prob.size, size=shape, p=exact.prob / exact.prob.sum())
    return exact.partitions[index]


def sample_sticky_chains(exact: ExactPosterior, rng, num_chains: int, num_draws: int,
                         stickiness: float) -> np.ndarray:
    """Independent autocorrelated chains whose stationary law is the exact posterior.

    Each chain starts with a draw from the posterior; every later draw repeats the
    previous one with probability `stickiness` (rho) and is a fresh posterior draw
    otherwise. Every statistic then has lag-t autocorrelation rho^t and integrated
    autocorrelation time (1 + rho) / (1 - rho): the effective sample size of a chain
    is `num_draws (1 - rho) / (1 + rho)`.

    Returns
    -------
    numpy.ndarray of int64, shape (num_chains, num_draws, n)
    """
    if not 0.0 <= stickiness < 1.0:
        raise ValueError(f"stickiness must be in [0, 1), got {stickiness!r}")
    rng = _generator(rng)
    fresh = rng.choice(exact.prob.size, size=(num_chains, num_draws), p=exact.prob / exact.prob.sum())
    keep = rng.random((num_chains, num_draws)) < stickiness
    keep[:, 0] = False
    last_fresh = np.maximum.accumulate(np.where(keep, 0, np.arange(num_draws)), axis=1)
    return exact.partitions[np.take_along_axis(fresh, last_fresh, axis=1)]


# --------------------------------------------------------------------------------------
# The statistical check
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QuantityCheck:
    """One test of the check.

    Attributes
    ----------
    group : str
        `"partition law"`, `"P(K=k)"`, `"co-clustering"` or `"alpha"`.
    name : str
        The quantity, e.g. `"P(K=3)"` or `"P(z2=z5)"` (points numbered from 0).
    expected, observed : float
        Exact value and mean over all chains and draws (for the partition law: the
        total-variation distance between the pooled cells' laws, expected 0).
    se : float
        Monte Carlo standard error of `observed` from the across-chain variance (for the
        partition law: the approximate expected TV distance of an exact sampler).
    ess : float
        Effective sample size: the number of independent draws with the same standard
        error (p (1 - p) / se^2 for a probability, Var(alpha | x) / se^2 for alpha; for
        the partition law, its Pearson-weighted average).
    statistic, threshold : float
        Student-t (or ESS-scaled chi-square) statistic and the critical value it must not
        exceed (in absolute value for t).
    dof : float
        Degrees of freedom of the reference law (chi-square: effective dof).
    p_value : float
    level : float
        Level of this test after the Bonferroni split of `family_alpha`.
    tested : bool
        False when the quantity was too rare for its normal approximation (its expected
        effective count min(p, 1 - p) ESS is below the minimum) or, for the partition
        law, fewer than two cells were left after pooling; such a quantity never fails.
    passed : bool
    note : str
    """

    group: str
    name: str
    expected: float
    observed: float
    se: float
    ess: float
    statistic: float
    threshold: float
    dof: float
    p_value: float
    level: float
    tested: bool
    passed: bool
    note: str = ""

    def describe(self) -> str:
        """One line: the quantity, exact vs observed +- se, statistic vs threshold."""
        status = "FAIL" if not self.passed else ("ok" if self.tested else "not tested")
        if self.group == "partition law":
            body = (f"chi2 = {self.statistic:.2f} on {self.dof:.1f} effective dof, threshold "
                    f"{self.threshold:.2f}, p = {self.p_value:.3g}; TV(pooled) = {self.observed:.4f}")
        else:
            body = (f"exact {self.expected:.4f}, observed {self.observed:.4f} +- {self.se:.4f} "
                    f"(t = {self.statistic:+.2f}, |t| <= {self.threshold:.2f}, p = {self.p_value:.3g})")
        return f"[{status}] {self.name}: {body}, ESS {self.ess:.0f}" + (f"; {self.note}" if self.note else "")


@dataclasses.dataclass(frozen=True)
class HarnessResult:
    """Result of `check_kernel_samples`.

    Attributes
    ----------
    passed : bool
        True when no test rejected.
    family_alpha : float
        Bound on the probability that a correct sampler fails the whole check.
    num_chains, num_draws : int
    checks : tuple of QuantityCheck
        Every test, tested or not.
    tv_distance : float
        Total-variation distance between the sampled and exact partition laws (all
        partitions, no pooling).
    tv_noise : float
        Approximate expected value of `tv_distance` for an exact sampler with these
        Monte Carlo errors: 1/2 sum_b min(sqrt(2/pi) se_b, 2 p_b).
    p_num_clusters : ndarray (n + 1,)
        Sampled P(K = k).
    coclustering : ndarray (n, n)
        Sampled co-clustering matrix.
    report : str
        Readable summary: failures first, then the worst test of each group.
    """

    passed: bool
    family_alpha: float
    num_chains: int
    num_draws: int
    checks: tuple
    tv_distance: float
    tv_noise: float
    p_num_clusters: np.ndarray
    coclustering: np.ndarray
    report: str

    @property
    def failures(self) -> tuple:
        """The checks that rejected."""
        return tuple(c for c in self.checks if not c.passed)

    def group(self, name: str) -> tuple:
        """The checks of one group (`"P(K=k)"`, `"co-clustering"`, ...)."""
        return tuple(c for c in self.checks if c.group == name)


def _t_checks(group, names, per_chain, expected, num_draws, min_count, share, exact_variance=None,
              excursion_inflation=None):
    """Student-t tests of means over independent chains, Bonferroni within the group.

    `per_chain` (C, m) holds each chain's estimate of m quantities with exact values
    `expected` (m,); t = (mean - expected) / se with se^2 = s^2 / C is referred to
    Student-t with C - 1 dof, s^2 the across-chain variance.

    For probabilities (`exact_variance` None), s^2 is floored at lambda p (1 - p) / T,
    with lambda >= 1 the group's pooled variance inflation sum_j s_j^2 / sum_j p_j (1 - p_j)
    / T (dominated by the well-estimated, common quantities). The sample variance of a
    rare event's per-chain frequencies is skewed and usually too small, which would make
    t far too large when fewer events than expected happen; the floor gives such a
    quantity the Monte Carlo error of an average one. Where the chains entered a
    quantity's rare side too seldom for s^2 to say anything (a state behind a bottleneck:
    a few long excursions, or none), `excursion_inflation` (from `_excursion_inflation`)
    raises that floor to the longest excursion seen in the group. A quantity whose expected
    effective count min(p, 1 - p) ESS, ESS = C p (1 - p) / s^2, is below `min_count`
    is not tested; one whose exact value is 0 or 1 fails on any deviation.
    """
    C = per_chain.shape[0]
    observed = per_chain.mean(axis=0)
    var = per_chain.var(axis=0, ddof=1)
    diff = observed - expected
    is_probability = exact_variance is None
    if is_probability:
        exact_variance = expected * (1.0 - expected)
        iid = exact_variance / num_draws
        inflation = max(var.sum() / iid.sum(), 1.0) if iid.sum() > 0 else 1.0
        if excursion_inflation is not None:
            inflation = np.maximum(inflation, excursion_inflation)
        var = np.maximum(var, inflation * iid)
        structural = exact_variance <= 0.0
    else:
        exact_variance = np.broadcast_to(exact_variance, expected.shape)
        structural = np.zeros(expected.shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(var > 0, C * exact_variance / np.where(var > 0, var, 1.0), np.inf)
        se = np.sqrt(var / C)
        t = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff == 0, 0.0, np.inf))
        effective_count = np.where(structural, np.inf, np.minimum(expected, 1.0 - expected) * ess)
    tested = structural | (effective_count >= min_count) if is_probability else np.ones(expected.shape, bool)
    level = share / max(int(tested.sum()), 1)
    p_value = np.where(structural, (diff == 0).astype(float), 2.0 * stats.t.sf(np.abs(t), C - 1))
    threshold = stats.t.isf(level / 2.0, C - 1)
    out = []
    for j, name in enumerate(names):
        note = ""
        if structural[j]:
            note = "exact value 0 or 1: any deviation fails"
        elif not tested[j]:
            note = f"too rare to test (effective count {effective_count[j]:.1f} < {min_count:g})"
        passed = not (tested[j] and p_value[j] < level)
        out.append(QuantityCheck(group, name, float(expected[j]), float(observed[j]), float(se[j]),
                                 float(ess[j]), float(t[j]), float(threshold), float(C - 1),
                                 float(p_value[j]), float(level), bool(tested[j]), passed, note))
    return out


RARE_SIDE = 0.05  # events this rare show the sojourns of rare states (`_excursion_inflation`)


def _excursion_inflation(indicators, expected, min_count):
    """Variance inflation floors for quantities whose rare side the chains seldom entered.

    `indicators` (C, T, m) says in which draws each of m events held; `expected` (m,) their
    exact probabilities; the rare side of event j is the event if p_j < 1/2, else its
    complement. The across-chain variance of a frequency is a trustworthy Monte Carlo error
    only when the chains entered the rare side many times. When the rare side sits behind a
    bottleneck (e.g. two separated pairs of points merged: a single-site Gibbs sampler must
    pass through far rarer states to enter or leave it), it is entered in a few long
    excursions, or none in a finite run, and the sample variance says nothing. An
    excursion of L draws carries the information of about one draw, so a frequency whose
    excursions last L draws has variance inflation about 2 L - 1 over independent draws
    (a two-state Markov chain that leaves the rare side with probability 1/L per step).

    Returns (m,) floors: 2 L* - 1 for the events entered fewer than `min_count` times over
    all chains, L* the longest excursion of the run to the rare side of any event of the
    group whose rare side has probability below `RARE_SIDE` (what the run shows a sojourn in
    a rare state can last; the rare side of a common event has long runs even in i.i.d.
    draws), and 1 for the others. This lowers the expected effective count of such a
    quantity, so a state the run could not have entered often enough is reported as too
    rare to test rather than failed or passed on noise, while a sampler that never enters
    a state of probability 0.01 in 64 x 500 i.i.d.-like draws still fails.
    """
    expected = np.asarray(expected)
    rare_side = np.where(expected < 0.5, indicators, ~indicators)
    starts = rare_side & ~np.concatenate([np.zeros_like(rare_side[:, :1]), rare_side[:, :-1]], axis=1)
    entries = starts.sum(axis=(0, 1))
    # length of the excursion each draw ends: draws on the rare side since the last draw off it
    run = np.zeros((rare_side.shape[0], rare_side.shape[2]), dtype=np.int64)
    longest = 0
    rare = np.minimum(expected, 1.0 - expected) < RARE_SIDE
    for t in range(rare_side.shape[1]):
        run = np.where(rare_side[:, t], run + 1, 0)
        longest = max(longest, int(run[:, rare].max(initial=0)))
    return np.where(entries < min_count, max(2.0 * longest - 1.0, 1.0), 1.0)


def _partition_law_check(freq, prob, num_draws, min_cell_count, share):
    """Pearson-type test of the partition law with an across-chain covariance scale.

    Cells are partitions; those with expected effective count p_b ESS below
    `min_cell_count` are pooled into one cell (ESS from the variance-weighted average
    inflation of the cell frequencies over the i.i.d. multinomial variance). With f_c
    the per-chain cell frequencies (C, J), fbar their mean, S their sample covariance
    (C - 1 dof) and A = D^-1/2 S D^-1/2 (D = diag p),

        Q = sum_j (fbar_j - p_j)^2 / p_j,  E[Q] = tr(A) / C  under the null,

    and F = Q / (tr(A_hat) / C) is referred to F(h, (C - 1) h) with Box's effective
    dof h = tr(A)^2 / tr(A^2), both traces estimated without bias from the Wishart
    moments of S. `statistic` is the ESS-scaled chi-square h F (an i.i.d. sampler
    gives Pearson's chi-square with J - 1 dof). If tr(A_hat) is below the i.i.d. value
    (J - 1) / T it is replaced by it and F by the chi-square law with J - 1 dof.
    """
    C = freq.shape[0]
    var = freq.var(axis=0, ddof=1)
    binom = prob * (1.0 - prob) / num_draws
    inflation = max(var.sum() / binom.sum(), 1.0)
    ess = C * num_draws / inflation
    order = np.argsort(prob, kind="stable")
    rare = int(np.sum(prob * ess < min_cell_count))  # the rarest cells, pooled
    while 0 < rare < prob.size and prob[order[:rare]].sum() * ess < min_cell_count:
        rare += 1  # the pooled cell, too, must hold enough
    keep = np.ones(prob.size, dtype=bool)
    keep[order[:rare]] = False
    cells_f = np.concatenate([freq[:, keep], freq[:, ~keep].sum(axis=1, keepdims=True)], axis=1)
    cells_p = np.concatenate([prob[keep], [prob[~keep].sum()]])
    if keep.all():
        cells_f, cells_p = cells_f[:, :-1], cells_p[:-1]
    J = cells_p.size
    pooled = int((~keep).sum())
    observed_tv = 0.5 * float(np.abs(cells_f.mean(axis=0) - cells_p).sum())
    cell_se = np.sqrt(np.maximum(cells_f.var(axis=0, ddof=1), cells_p * (1 - cells_p) / num_draws) / C)
    tv_noise = 0.5 * float(np.sqrt(2 / np.pi) * cell_se.sum())
    if J < 2:
        return QuantityCheck("partition law", "partition law", 0.0, observed_tv, tv_noise, ess, 0.0,
                             np.inf, 0.0, 1.0, share, False, True,
                             f"fewer than two cells with expected effective count >= {min_cell_count:g}")
    dev = cells_f.mean(axis=0) - cells_p
    Q = float(np.sum(dev**2 / cells_p))
    w = 1.0 / np.sqrt(cells_p)
    A = np.cov(cells_f, rowvar=False) * w[:, None] * w[None, :]
    m = C - 1
    tr_a = float(np.trace(A))
    iid_tr = (J - 1) / num_draws
    if tr_a <= iid_tr:
        chi2 = Q * C / max(tr_a, iid_tr)
        dof = float(J - 1)
        p_value = float(stats.chi2.sf(chi2, dof))
        threshold = float(stats.chi2.isf(share, dof))
        note = "i.i.d. scale"
    else:
        a, b = float(np.sum(A * A)), tr_a**2
        tr_a2 = m * (m * a - b) / ((m + 2) * (m - 1))
        tr_sq = b - 2.0 * tr_a2 / m
        dof = float(np.clip(tr_sq / tr_a2, 1.0, J - 1)) if tr_a2 > 0 and tr_sq > 0 else float(J - 1)
        F = Q * C / tr_a
        chi2 = dof * F
        p_value = float(stats.f.sf(F, dof, m * dof))
        threshold = float(dof * stats.f.isf(share, dof, m * dof))
        note = f"F({dof:.1f}, {m * dof:.0f})"
    note = f"{J} cells ({pooled} rare partitions pooled), {note}"
    impossible = float(freq[:, prob == 0].sum())
    if impossible > 0:  # a partition of probability zero was visited
        p_value = 0.0
        note += f"; partitions of probability 0 visited (frequency {impossible / C:.2g})"
    return QuantityCheck("partition law", "partition law", 0.0, observed_tv, tv_noise, ess,
                         float(chi2), threshold, dof, p_value, share, True, p_value >= share, note)


def check_kernel_samples(exact: ExactPosterior, labels, *, alpha=None, hyper: Optional[dict] = None,
                         family_alpha: float = 1e-3,
                         partition_law_max_n: int = 5, min_effective_count: float = 20.0,
                         min_cell_count: float = 10.0) -> HarnessResult:
    """Test draws of independent chains against an exact posterior.

    Parameters
    ----------
    exact : ExactPosterior
    labels : array_like of int, shape (chains, draws, n)
        Cluster labels (any labelling) of post-warmup draws of *independent* chains,
        e.g. `dpppl.diagnostics.arviz_compat.labels(idata)`. At least 3 chains; 50-200 recommended.
    alpha : array_like, shape (chains, draws), optional
        Draws of the concentration, tested against `exact.alpha_mean` (Gamma prior).
    hyper : dict of array_like (chains, draws), optional
        Draws of the random hyperparameter by its name, tested against `exact.hyper_mean`.
    family_alpha : float, default 1e-3
        Probability that a sampler with the exact stationary law fails the check
        (Bonferroni bound, up to the normal approximations).
    partition_law_max_n : int, default 5
        Test the whole partition law when n is at most this.
    min_effective_count : float, default 20
        P(K = k) and co-clustering tests need an expected effective count
        min(p, 1 - p) ESS of at least this; rarer quantities are reported, not tested.
    min_cell_count : float, default 10
        Partition-law cells with a smaller expected effective count are pooled.

    Returns
    -------
    HarnessResult

    Notes
    -----
    Chain c gives estimates x_c of each quantity (the fraction of its draws with K = k,
    with z_i = z_j, in partition b, its mean alpha). Chains are independent and
    stationary, so the x_c are i.i.d. with mean equal to the exact value under the null,
    whatever the autocorrelation within chains; the across-chain variance gives the
    standard error se = s / sqrt(C) and ESS = Var / se^2. `family_alpha` is split
    equally among the groups that apply (partition law when n <= partition_law_max_n;
    P(K = k), k = 1..n; co-clustering, i < j; alpha), and within a group by Bonferroni
    over the tested quantities. See `_t_checks` and `_partition_law_check`
    for each test's statistic.
    """
    labels = np.asarray(labels)
    n = exact.n
    if labels.ndim != 3 or labels.shape[2] != n:
        raise ValueError(f"labels must have shape (chains, draws, {n}), got {labels.shape}")
    C, T = labels.shape[:2]
    if C < 3 or T < 1:
        raise ValueError(f"need at least 3 independent chains and 1 draw, got {C} x {T}")
    B = exact.prob.size
    index = partition_index(labels, n)
    freq = np.bincount((index + B * np.arange(C)[:, None]).ravel(), minlength=C * B).reshape(C, B) / T

    has_alpha = alpha is not None
    if has_alpha and exact.alpha_mean is None:
        raise ValueError("alpha draws were given but the exact posterior has a fixed alpha")
    if hyper is not None and (exact.hyper_mean is None or hyper.keys() != exact.hyper_mean.keys()):
        raise ValueError(f"hyperparameter draws of {sorted(hyper)} were given but the exact posterior has "
                         f"{sorted(exact.hyper_mean or {})}")
    groups = 2 + (n <= partition_law_max_n) + has_alpha + (hyper is not None)
    share = family_alpha / groups
    checks = []
    if n <= partition_law_max_n:
        checks.append(_partition_law_check(freq, exact.prob, T, min_cell_count, share))

    k_values = np.arange(1, n + 1)
    has_k = exact.num_clusters[:, None] == k_values[None, :]
    per_chain_k = freq @ has_k.astype(float)
    checks += _t_checks("P(K=k)", [f"P(K={k})" for k in k_values], per_chain_k,
                        exact.p_num_clusters[1:], T, min_effective_count, share,
                        excursion_inflation=_excursion_inflation(has_k[index], exact.p_num_clusters[1:],
                                                                 min_effective_count))
    iu = np.triu_indices(n, 1)
    together = exact.partitions[:, iu[0]] == exact.partitions[:, iu[1]]
    per_chain_pairs = freq @ together.astype(float)
    checks += _t_checks("co-clustering", [f"P(z{i}=z{j})" for i, j in zip(*iu)], per_chain_pairs,
                        exact.coclustering[iu], T, min_effective_count, share,
                        excursion_inflation=_excursion_inflation(together[index], exact.coclustering[iu],
                                                                 min_effective_count))
    if has_alpha:
        alpha = np.asarray(alpha, dtype=float)
        if alpha.shape != (C, T):
            raise ValueError(f"alpha must have shape {(C, T)}, got {alpha.shape}")
        checks += _t_checks("alpha", ["E[alpha]"], alpha.mean(axis=1, keepdims=True),
                            np.array([exact.alpha_mean]), T, min_effective_count, share,
                            exact_variance=exact.alpha_sd**2)
    for name, draws in (hyper or {}).items():
        draws = np.asarray(draws, dtype=float)
        if draws.shape != (C, T):
            raise ValueError(f"the draws of {name} must have shape {(C, T)}, got {draws.shape}")
        checks += _t_checks(name, [f"E[{name}]"], draws.mean(axis=1, keepdims=True), np.array([exact.hyper_mean[name]]),
                            T, min_effective_count, share, exact_variance=exact.hyper_sd[name]**2)

    mean_freq = freq.mean(axis=0)
    se_freq = np.sqrt(np.maximum(freq.var(axis=0, ddof=1), exact.prob * (1 - exact.prob) / T) / C)
    tv = 0.5 * float(np.abs(mean_freq - exact.prob).sum())
    tv_noise = 0.5 * float(np.minimum(np.sqrt(2 / np.pi) * se_freq, 2 * exact.prob).sum())
    p_k = np.concatenate([[0.0], per_chain_k.mean(axis=0)])
    cocl = np.eye(n)
    cocl[iu] = cocl[iu[::-1]] = per_chain_pairs.mean(axis=0)
    passed = all(c.passed for c in checks)
    report = _report(checks, passed, family_alpha, C, T, n, B, tv, tv_noise)
    return HarnessResult(passed, family_alpha, C, T, tuple(checks), tv, tv_noise, p_k, cocl, report)


def _report(checks, passed, family_alpha, C, T, n, B, tv, tv_noise) -> str:
    lines = [f"exact-posterior check {'PASSED' if passed else 'FAILED'} (family_alpha = {family_alpha:g}; "
             f"{C} chains x {T} draws; n = {n}, {B} partitions)",
             f"total-variation distance to the exact partition law: {tv:.4f} (noise level ~{tv_noise:.4f})"]
    failures = [c for c in checks if not c.passed]
    if failures:
        lines.append("failed:")
        lines += ["  " + c.describe() for c in failures]
    lines.append("worst test of each group:")
    for group in dict.fromkeys(c.group for c in checks):
        members = [c for c in checks if c.group == group]
        tested = [c for c in members if c.tested]
        worst = min(tested, key=lambda c: c.p_value) if tested else members[0]
        untested = len(members) - len(tested)
        lines.append(f"  {group}: " + worst.describe()
                     + (f" ({untested} of {len(members)} not tested: too rare)" if untested else ""))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Power
# --------------------------------------------------------------------------------------

def scale_concentration(model: Model, factor: float) -> Model:
    """`model` with its concentration multiplied by `factor`.

    A Gamma(shape, rate) prior becomes Gamma(shape, rate / factor), which scales alpha in
    distribution. For a DP with fixed alpha, the exact posterior of the result is the
    stationary law of collapsed Gibbs whose new-cluster weight is off by `factor`.
    """
    prior = model.prior
    if prior.alpha_is_random:
        alpha = Gamma(prior.alpha.shape, prior.alpha.rate / factor)
    else:
        alpha = float(prior.alpha) * factor
    return dataclasses.replace(model, prior=dataclasses.replace(prior, alpha=alpha))


@dataclasses.dataclass(frozen=True)
class PowerCurve:
    """Rejection rates of `check_kernel_samples` against biased samplers.

    Attributes
    ----------
    factors : ndarray (F,)
        Multipliers of the concentration (the new-cluster weight of collapsed Gibbs).
    tv : ndarray (F,)
        Total-variation distance between each biased posterior and the exact one.
    max_k_error : ndarray (F,)
        max_k |P_biased(K = k) - P(K = k)|.
    rejection_rate : ndarray (F,)
        Fraction of `repeats` runs the check rejected.
    num_chains, num_draws, repeats : int
    stickiness : float
    """

    factors: np.ndarray
    tv: np.ndarray
    max_k_error: np.ndarray
    rejection_rate: np.ndarray
    num_chains: int
    num_draws: int
    stickiness: float
    repeats: int

    def smallest_detected(self, power: float = 0.9) -> Optional[float]:
        """Smallest relative bias |factor - 1| rejected in at least `power` of the runs."""
        bias = np.abs(self.factors - 1.0)
        hit = (self.rejection_rate >= power) & (bias > 0)
        return round(float(bias[hit].min()), 12) if hit.any() else None


def power_curve(model: Model, x, factors: Sequence[float], *, num_chains: int, num_draws: int,
                stickiness: float = 0.0, repeats: int = 20, family_alpha: float = 1e-3,
                seed: int = 0, sampler: Optional[Callable] = None) -> PowerCurve:
    """Measure how often the check rejects a sampler whose concentration is off.

    A collapsed Gibbs sampler whose new-cluster weight is `factor * alpha` instead of
    `alpha` has the exact posterior of the model with concentration `factor * alpha`
    as its stationary law. For each factor, `repeats` data sets of
    (`num_chains`, `num_draws`) draws are generated from that biased posterior by
    `sample_sticky_chains` (i.i.d. when `stickiness` is 0) and checked against
    the exact posterior of `model`.

    Parameters
    ----------
    model : Model
    x : array_like
    factors : sequence of float
        Concentration multipliers; 1.0 measures the false-alarm rate.
    num_chains, num_draws : int
        The budget.
    stickiness : float, default 0
        Autocorrelation of the synthetic chains (effective draws per chain
        `num_draws (1 - rho) / (1 + rho)`).
    repeats : int, default 20
    family_alpha : float, default 1e-3
    seed : int, default 0
    sampler : callable, optional
        `sampler(exact_biased, rng) -> labels (chains, draws, n)` replacing the sticky
        chains (to measure power against another kind of autocorrelation).

    Returns
    -------
    PowerCurve
    """
    rng = np.random.default_rng(seed)
    exact = exact_posterior(model, x)
    factors = np.asarray(factors, dtype=float)
    tv, k_err, rate = [], [], []
    for factor in factors:
        biased = exact_posterior(scale_concentration(model, float(factor)), x)
        tv.append(0.5 * float(np.abs(biased.prob - exact.prob).sum()))
        k_err.append(float(np.abs(biased.p_num_clusters - exact.p_num_clusters).max()))
        rejected = 0
        for _ in range(repeats):
            if sampler is None:
                labels = sample_sticky_chains(biased, rng, num_chains, num_draws, stickiness)
            else:
                labels = sampler(biased, rng)
            rejected += not check_kernel_samples(exact, labels, family_alpha=family_alpha).passed
        rate.append(rejected / repeats)
    return PowerCurve(factors, np.array(tv), np.array(k_err), np.array(rate),
                      num_chains, num_draws, stickiness, repeats)


# --------------------------------------------------------------------------------------
# Small data sets
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ExactCase:
    """A named small data set with its model, for exactness tests of kernels."""

    name: str
    model: Model
    x: np.ndarray
    description: str

    @property
    def n(self) -> int:
        return int(self.x.shape[0])


def small_datasets() -> list:
    """Small, varied data sets (4 <= n <= 8) covering every conjugate family.

    Every family has a well-separated and an overlapping case; alpha is fixed in some and
    Gamma(shape, rate) in others; one case has a Pitman-Yor prior. Cases with n <= 5
    get the full partition-law test of `check_kernel_samples`. Hyperparameters are
    explicit, so the exact posteriors do not depend on data-driven defaults.

    Returns
    -------
    list of ExactCase
    """
    def case(name, model, x, description):
        return ExactCase(name, model, np.asarray(x, dtype=float), description)

    nkc = fam.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0)
    niw = fam.NormalInverseWishart(mu0=[0.0, 0.0], kappa0=0.1, nu0=4.0, psi0=[[0.5, 0.0], [0.0, 0.5]])
    ng = fam.NormalGamma(mu0=0.0, kappa0=0.1, a0=2.0, b0=0.5)
    return [
        case("normal_known_1d_separated", DPMixture(1.0, nkc),
             [[-2.1], [-1.9], [-2.0], [2.0], [1.8], [2.2]],
             "1-D, two tight groups of 3 far apart; alpha = 1"),
        case("normal_known_1d_overlap", DPMixture(Gamma(2.0, 2.0), nkc),
             [[-0.9], [-0.4], [-0.1], [0.2], [0.5], [0.9], [1.3], [1.6]],
             "1-D, 8 evenly spread points, no clear groups; alpha ~ Gamma(2, 2)"),
        case("normal_known_2d_overlap_n4", DPMixture(0.5, fam.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=1.0)),
             [[0.0, 0.3], [0.8, -0.2], [1.5, 0.9], [-0.6, 1.2]],
             "2-D, 4 overlapping points; alpha = 0.5 (partition law tested)"),
        case("niw_2d_separated", DPMixture(1.0, niw),
             [[0.0, 0.0], [0.2, 0.1], [3.0, 3.0], [3.1, 2.8], [-3.0, 3.0], [-2.8, 3.2]],
             "2-D, three pairs far apart; alpha = 1"),
        case("niw_2d_overlap", DPMixture(Gamma(1.0, 1.0), niw),
             [[0.0, 0.0], [0.7, 0.4], [1.2, -0.3], [-0.5, 0.9], [1.8, 1.1]],
             "2-D, 5 overlapping points; alpha ~ Gamma(1, 1) (partition law tested)"),
        case("normal_gamma_1d_overlap", DPMixture(0.7, ng),
             [[-1.0], [-0.6], [0.1], [0.4], [1.2]],
             "1-D, 5 points with unequal spread; alpha = 0.7 (partition law tested)"),
        case("normal_gamma_2d_separated", DPMixture(Gamma(2.0, 1.0), ng),
             [[-2.0, -2.1], [-2.2, -1.8], [-1.9, -2.0], [2.1, 2.0], [1.9, 2.2], [2.0, 1.8], [0.1, 2.5]],
             "2-D (diagonal), two groups of 3 and a loner; alpha ~ Gamma(2, 1)"),
        case("dirichlet_multinomial_separated", DPMixture(1.0, fam.DirichletMultinomial(beta=0.5)),
             [[5, 0, 1], [6, 1, 0], [4, 0, 0], [0, 1, 6], [1, 0, 5], [0, 0, 7]],
             "counts over 3 categories, two groups with opposite profiles; alpha = 1"),
        case("dirichlet_multinomial_overlap",
             DPMixture(Gamma(1.0, 1.0), fam.DirichletMultinomial(beta=1.0)),
             [[2, 1, 1, 0], [1, 2, 0, 1], [1, 1, 2, 1], [0, 2, 1, 2], [2, 0, 1, 1], [1, 1, 1, 1],
              [3, 1, 0, 1]],
             "counts over 4 categories, similar profiles; alpha ~ Gamma(1, 1)"),
        case("beta_bernoulli_separated", DPMixture(1.0, fam.BetaBernoulli(a=0.5, b=0.5)),
             [[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 1],
              [0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0]],
             "6-D binary, two groups with complementary patterns; alpha = 1"),
        case("beta_bernoulli_overlap", DPMixture(Gamma(2.0, 2.0), fam.BetaBernoulli(a=1.0, b=1.0)),
             [[1, 0, 1, 0], [1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 1],
              [0, 1, 0, 1], [1, 1, 1, 0], [0, 0, 1, 1], [1, 0, 1, 1]],
             "4-D binary, 8 points with mixed patterns; alpha ~ Gamma(2, 2)"),
        case("pitman_yor_normal_known",
             PitmanYorMixture(0.3, 0.5, fam.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=2.0)),
             [[-1.2], [-0.8], [0.0], [0.9], [1.1]],
             "1-D, 5 points; Pitman-Yor(discount 0.3, alpha 0.5) (partition law tested)"),
    ]
