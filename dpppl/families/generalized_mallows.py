"""Generalized Mallows (GM) components of top-t rankings with the conjugate prior P0.

Meilă & Chen (2010, sec. 2; Fligner & Verducci 1986; Meilă & Bao 2008). A top-t ranking
pi = (pi(1), ..., pi(t)) of n items lists t distinct items, most preferred first; t may
differ between rankings. For a central permutation sigma (sigma(l) is the rank of item l)
the *code* of pi is

    s_j(pi | sigma) = #{l not in {pi(1), ..., pi(j)} : sigma(l) < sigma(pi(j))},   s_j in 0..n-j,

the number of items not yet ranked at stage j that sigma puts ahead of pi(j); with the
positions p_j = sigma(pi(j)) (0-based) this is s_j = p_j - #{l < j : p_l < p_j}. The GM
model with dispersions theta_j >= 0 is

    GM(pi | sigma, theta) = exp(-sum_{j<=t} theta_j s_j) / prod_{j<=t} psi_{n-j}(theta_j),
    psi_m(theta) = sum_{k=0}^{m} e^{-k theta} = (1 - e^{-(m+1) theta}) / (1 - e^{-theta}).

Given pi and theta the code (s_1..s_t) and the order of the n - t unranked items determine
sigma and vice versa, so GM sums to one over the n!/(n-t)! top-t rankings. Stage n
(s_n = 0, psi_0 = 1) carries nothing: theta has n - 1 entries and t is capped at n - 1.

Conjugate prior (the paper's P0(sigma, theta | nu, r)): sigma uniform over the n!
permutations and, independently, theta_j with density proportional to
exp(-nu (theta_j r_j + ln psi_{n-j}(theta_j))) on [0, inf). Its posterior given the
rankings of a cluster is proportional to

    exp(-sum_j [theta_j (nu r_j + S_j(sigma)) + (nu + N_j) ln psi_{n-j}(theta_j)]),

with N_j the number of rankings of length >= j and S_j(sigma) = L_sigma(R_j) = sum_{a,b}
R_j[a, b] [sigma(b) < sigma(a)], where R_j[a, b] counts the rankings with pi(j) = a and b
not in {pi(1), ..., pi(j)}: the n x n sufficient statistics of stage j, additive over
rankings (adding or removing one ranking is an update).

One-dimensional integrals over theta_j use the paper's eq. (14),

    B~eta(a, c, m) = int_0^inf e^{-a theta} psi_m(theta)^{-c} d theta

(written with c = b - 1 in the paper's notation), computed by the trapezoid rule in
log theta (`log_tbeta`). Then

    p(pi_{1:N} | sigma) = prod_j B~eta(nu r_j + S_j(sigma), nu + N_j, n-j) / B~eta(nu r_j, nu, n-j),

and the marginal likelihood of a cluster sums this over the n! permutations (divided by
n!): [`GeneralizedMallows.log_marginal`][dpppl.families.generalized_mallows.GeneralizedMallows.log_marginal] does so
exactly for n <= 7 items and refuses
larger n, where no closed form exists (the paper's reason for its samplers). For a single
ranking the sum is (n - t)!/n! (Lemma 1): averaging over a uniform sigma makes every top-t
ranking equally likely, whatever theta.

Data layout: a (N, n) array of item indices 0..n-1, row i holding pi_i(1..t_i) followed by
-1 in positions t_i+1..n, stored as float64 like every data set (see
`dpppl.models.rankings.as_rankings`, which also reads lists of item names).

References
----------
M. Meilă and H. Chen, "Dirichlet process mixtures of generalized Mallows models", UAI 2010.
M. A. Fligner and J. S. Verducci, "Distance based ranking models", JRSS B 48(3), 1986.
M. Meilă and L. Bao, "Estimation and clustering with infinite rankings", UAI 2008.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from numpyro.distributions import constraints

from dpppl.core import numerics_random as random
from dpppl.core.numerics import sample_index
from dpppl.errors import DataError, ModelError
from dpppl.core.expressions import check_hyper, float_limits
from dpppl.families.base import Family, resolve_fields

MAX_ENUMERATED_ITEMS = 7
"""Largest n for which
[`GeneralizedMallows.log_marginal`][dpppl.families.generalized_mallows.GeneralizedMallows.log_marginal] sums over the n!
central
permutations (7! = 5040)."""

_TRAPEZOID_NODES = np.linspace(0.0, 1.0, 2048)
_TRAPEZOID_LOG_WEIGHTS = np.log(np.r_[0.5, np.ones(2046), 0.5] / 2047)


class RankingStats(NamedTuple):
    """Statistics of a set of top-t rankings of n items.

    - **n** - number of rankings (float).
    - **R** - (n-1, n, n): `R[j, a, b]` counts rankings with pi(j+1) = a and b not among
      their first j+1 items (0-based stage j).
    - **Nj** - (n-1,): number of rankings of length >= j+1 (capped at n - 1).
    """

    n: jax.Array
    R: jax.Array
    Nj: jax.Array


# ------------------------------------------------------------------------ primitives ---
def log_psi(theta, m):
    """log psi_m(theta) = log sum_{k=0}^m e^{-k theta} for theta >= 0 (broadcasting)."""
    theta = jnp.asarray(theta)
    small = theta < 1e-8
    th = jnp.where(small, 1.0, theta)
    value = jnp.log(-jnp.expm1(-(m + 1.0) * th)) - jnp.log(-jnp.expm1(-th))
    return jnp.where(small, jnp.log(m + 1.0) - 0.5 * m * theta, value)


def log_tbeta(a, c, m):
    """log B~eta: log int_0^inf e^{-a theta} psi_m(theta)^{-c} d theta (eq. 14), a, c > 0.

    Trapezoid rule in s = log(theta / theta*), theta* = log(1 + c / a) (the mode of the
    infinite-n form), on s in [-30, log(800 / (a theta*))] with 2048 nodes: the integrand
    in s is analytic and decays exponentially at both ends, so the rule converges
    geometrically (relative error below 1e-12 against adaptive quadrature over
    0.05 <= a <= 500, 0.5 <= c <= 5000, 1 <= m <= 50; tests/test_mallows.py).
    """
    a, c, m = jnp.asarray(a), jnp.asarray(c), jnp.asarray(m)
    mode = jnp.log1p(c / a)
    lo = -30.0
    hi = jnp.log(800.0 / (a * mode))
    s = lo + (hi - lo)[..., None] * jnp.asarray(_TRAPEZOID_NODES)
    theta = mode[..., None] * jnp.exp(s)
    vals = -a[..., None] * theta - c[..., None] * log_psi(theta, m[..., None]) + jnp.log(theta)
    vals = vals + jnp.asarray(_TRAPEZOID_LOG_WEIGHTS)
    return logsumexp(vals, axis=-1) + jnp.log(hi - lo)


# ------------------------------------------------------------- theta under P0 ---
def theta_log_density(theta, a, c, m):
    """log of the unnormalised theta_j density exp(-a theta - c ln psi_m(theta)) (eq. 10)."""
    return -a * theta - c * log_psi(theta, m)


def _dlog_psi(theta, m):
    """d/dtheta log psi_m(theta) = -E[k], k ~ P(k) ∝ e^{-k theta} on 0..m."""
    small = theta < 1e-6
    th = jnp.where(small, 1.0, theta)
    mean = 1.0 / jnp.expm1(th) - (m + 1.0) / jnp.expm1((m + 1.0) * th)
    return -jnp.where(small, 0.5 * m - m * (m + 2.0) * theta / 12.0, mean)


_GRID = np.linspace(-4.0, 4.0, 17)


def _trigamma(x):
    """psi_1(x) = d^2/dx^2 log Gamma(x) for x > 0, to about 1e-9 relative: the recurrence
    psi_1(x) = sum_{i<6} (x + i)^-2 + psi_1(x + 6), then the asymptotic series at x + 6. A few
    dozen operations where `jax.scipy.special.polygamma` compiles to hundreds (it only sets the
    spread of `theta_exact`'s envelope, which its exactness does not depend on)."""
    near = sum(1.0 / (x + i) ** 2 for i in range(6))
    y = x + 6.0
    inv2 = 1.0 / (y * y)
    return near + 1.0 / y + 0.5 * inv2 + inv2 / y * (1.0 / 6.0 - inv2 * (1.0 / 30.0 - inv2 / 42.0))


def theta_exact(rng_key, a, c, m, max_tries: int = 200):
    """One exact draw of theta with density ∝ exp(-a theta - c ln psi_m(theta)) on [0, inf)
    (scalars; a, c > 0), by rejection from a tangent envelope of the concave log density.

    Tangent points: theta* e^{tau g}, g in [-4, 4], with theta* = log(1 + c / a) and tau
    from the infinite-n Beta approximation's spread; the last point lies beyond the mode
    (the truncated geometric mean is below the untruncated one), so the tail is
    integrable. Correctness does not depend on these choices, only the acceptance rate
    (about 0.9 or more). After `max_tries` rejections the last proposal is kept
    (probability < 1e-20 in practice).
    """
    dtype = jnp.result_type(float)
    a, c, m = (jnp.asarray(v, dtype) for v in (a, c, m))
    mode = jnp.log1p(c / a)
    sd = jnp.sqrt(jnp.maximum(_trigamma(a) - _trigamma(a + c + 1.0), 1e-30))
    tau = jnp.clip(sd / mode, 0.05, 3.0)
    x = mode * jnp.exp(tau * _GRID)
    h = theta_log_density(x, a, c, m)
    d = -a - c * _dlog_psi(x, m)
    dd = d[:-1] - d[1:]
    z = (h[1:] - h[:-1] + d[:-1] * x[:-1] - d[1:] * x[1:]) / jnp.where(dd > 0, dd, 1.0)
    z = jnp.clip(jnp.where(dd > 0, z, x[:-1]), x[:-1], x[1:])
    lo = jnp.concatenate([jnp.zeros(1, dtype), z])
    hi = jnp.concatenate([z, jnp.full(1, jnp.inf, dtype)])
    width = hi - lo
    flat = jnp.abs(d) < 1e-12
    dsafe = jnp.where(flat, 1.0, d)
    ratio = jnp.where(flat, width, jnp.expm1(dsafe * width) / dsafe)     # int_0^width e^{d s} ds
    log_mass = h + d * (lo - x) + jnp.log(ratio)

    def propose(u):
        k = sample_index(log_mass, u[0])
        step = jnp.where(flat[k], u[1] * width[k], jnp.log1p(u[1] * jnp.expm1(dsafe[k] * width[k])) / dsafe[k])
        theta = lo[k] + step
        envelope = h[k] + d[k] * (theta - x[k])
        ok = jnp.log(u[2]) < theta_log_density(theta, a, c, m) - envelope
        return theta, ok

    def cond(carry):
        return ~carry[1] & (carry[2] < max_tries)

    def body(carry):  # try i: its piece, its point in the piece and its acceptance, from one draw of 3 uniforms
        _, _, i = carry
        theta, ok = propose(random.uniform(random.fold_in(rng_key, i), (3,), dtype))
        return theta, ok, i + 1

    return jax.lax.while_loop(cond, body, (mode, jnp.zeros((), bool), 0))[0]


def log_factorials(n: int) -> np.ndarray:
    """log k! for k = 0..n (n + 1,): the table `log_lemma1` reads."""
    return np.asarray([math.lgamma(k + 1.0) for k in range(n + 1)])


def log_lemma1(rankings) -> jax.Array:
    """log (n - t)!/n! (Lemma 1), the marginal likelihood of one top-t ranking, of each padded ranking
    of `rankings` (..., n): from a table of log k! (`log_factorials`; no log-gamma in a compiled program)."""
    n = rankings.shape[-1]
    table = jnp.asarray(log_factorials(n))
    return table[n - jnp.sum(rankings >= 0, axis=-1)] - table[n]


def stage_sizes(n_items: int) -> np.ndarray:
    """m_j = n - j for the stages j = 1..n-1 (the support of s_j is 0..m_j)."""
    return n_items - np.arange(1, n_items, dtype=float)


def ranking_lengths(x) -> jax.Array:
    """Effective length min(t, n - 1) of each ranking of a padded (..., n) array."""
    n = x.shape[-1]
    return jnp.minimum(jnp.sum(x >= 0, axis=-1), n - 1)


def codes(ranking, pos):
    """The code s_j(pi | sigma) of one padded ranking (n,) against positions `pos`
    (..., n) (`pos[l]` = sigma(l), 0-based): returns (..., n-1), zero past t."""
    n = ranking.shape[-1]
    valid = ranking >= 0
    p = jnp.take_along_axis(pos, jnp.broadcast_to(jnp.maximum(ranking, 0), pos.shape).astype(jnp.int32),
                            axis=-1)                                              # (..., n)
    earlier = jnp.tril(jnp.ones((n, n), bool), -1)                                # l < j
    ahead = (p[..., None, :] < p[..., :, None]) & earlier & valid[None, :]       # (..., j, l)
    s = p - jnp.sum(ahead, axis=-1)
    stage = jnp.arange(n - 1) < ranking_lengths(ranking)
    return jnp.where(stage, s[..., : n - 1], 0).astype(jnp.result_type(float))


def lsigma(R, pos):
    """S_j(sigma) = L_sigma(R_j) = sum_{a,b} R_j[a, b] [sigma(b) < sigma(a)]: R (..., n-1, n, n),
    pos (..., n) -> (..., n-1)."""
    before = (pos[..., None, :] < pos[..., :, None]).astype(R.dtype)             # [a, b]: b ahead of a
    return jnp.einsum("...jab,...ab->...j", R, before)


def after_mask(ranking):
    """A[j, b] = 1 when stage j+1 exists and item b is not among pi(1..j+1): (n-1, n)."""
    n = ranking.shape[-1]
    t = ranking_lengths(ranking)
    onehot = (ranking[:, None] == jnp.arange(n)[None, :]) & (ranking[:, None] >= 0)  # (pos, item)
    seen = jnp.cumsum(onehot, axis=0)[: n - 1] > 0                                   # among first j+1
    return ((~seen) & (jnp.arange(n - 1) < t)[:, None]).astype(jnp.result_type(float))


def point_stats_one(ranking) -> RankingStats:
    """Statistics of one padded ranking (n,)."""
    n = ranking.shape[-1]
    A = after_mask(ranking)
    first = jnp.maximum(ranking[: n - 1], 0).astype(jnp.int32)
    R = jnp.zeros((n - 1, n, n)).at[jnp.arange(n - 1), first].set(A)
    Nj = (jnp.arange(n - 1) < ranking_lengths(ranking)).astype(jnp.result_type(float))
    return RankingStats(jnp.ones(()), R, Nj)


def log_gm(ranking, pos, theta, m, log_psi_theta=None):
    """log GM(pi | sigma, theta) of one ranking against central positions `pos` (..., n)
    and dispersions `theta` (..., n-1); `m` = `stage_sizes`; `log_psi_theta`, when given, is
    `log_psi(theta, m)` (what a caller that keeps it passes, so it is not computed again)."""
    s = codes(ranking, pos)
    stage = jnp.arange(ranking.shape[-1] - 1) < ranking_lengths(ranking)
    lpsi = log_psi(theta, m) if log_psi_theta is None else log_psi_theta
    return -jnp.sum(theta * s + jnp.where(stage, lpsi, 0.0), axis=-1)


def all_permutations(n: int) -> np.ndarray:
    """The n! permutations of range(n) as positions (n!, n)."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int32)


# ---------------------------------------------------------------------------- family ---
@dataclasses.dataclass(frozen=True)
class GeneralizedMallows(Family):
    """Generalized Mallows components of top-t rankings with the conjugate prior P0.

    Parameters
    ----------
    n_items : int, optional
        Number of items n; default: the data's (the `of n` clause, or the width of the
        ranking array, or the number of item names).
    nu : float, default 1.0
        Prior strength (number of pseudo-rankings), > 0.
    r : float or array (n-1,), default 1.0
        Prior mean code per stage, > 0 (a scalar: every stage). With nu = r = 1 the prior
        of theta_j is proportional to e^{-theta_j} / psi_{n-j}(theta_j) (mode at
        theta_j = 0 for n >= 3, mean about 1.2 for large n; median e^{-theta} 0.5 in the
        infinite model).

    Notes
    -----
    No conjugate closed form integrates over (sigma, theta), so the collapsed kernels
    (gibbs, splitmerge, perm, nuts, map search) refuse this family; it is sampled by
    `mallows-slice` (exact) and `mallows-beta` (approximate).
    [`log_marginal`][dpppl.families.generalized_mallows.GeneralizedMallows.log_marginal] is
    exact for n <= 7 (enumeration of sigma, quadrature in theta) and is what the exactness
    harness uses.
    """

    n_items: Any = None
    nu: Any = None
    r: Any = None

    name = "GeneralizedMallows"
    data_kind = "ranking"
    observation = "GeneralizedMallows"
    defaults = {"n_items": None, "nu": 1.0, "r": 1.0}
    kernels = ("mallows-slice", "mallows-beta")
    """The kernels that can sample this family (the others need a closed-form marginal)."""

    def check_data(self, x):

        return check_ranking_array(x, self.n_items)

    def resolve(self, x: np.ndarray) -> "GeneralizedMallows":
        n = x.shape[1] if self.n_items is None else self.n_items
        if isinstance(n, bool) or not float(n).is_integer() or n < 2:
            raise DataError(f"{self.name}: n_items must be an integer >= 2, got {n!r}")
        n = int(n)
        if x.shape[1] != n:
            raise DataError(f"{self.name}: the rankings have {x.shape[1]} columns but n_items = {n}")
        v = resolve_fields(self, x, self.defaults)
        nu = check_hyper(self.name, "nu", v["nu"], shape=(), count=True)
        r = check_hyper(self.name, "r", v["r"], shape=(n - 1,), positive=True, at_most=(
            1 / float_limits().tiny, "beyond it the mode log(1 + 1 / r) of the integrals over theta (eq. 14) is "
            "below the smallest normal number and they are NaN"))
        return GeneralizedMallows(n_items=n, nu=float(nu), r=r)

    @property
    def dim(self) -> int:
        return int(self.n_items)

    @property
    def m(self) -> jax.Array:
        """m_j = n - j, j = 1..n-1."""
        return jnp.asarray(stage_sizes(int(self.n_items)))

    def empty_stats(self, shape=()) -> RankingStats:
        n = int(self.n_items)
        return RankingStats(jnp.zeros(shape), jnp.zeros(shape + (n - 1, n, n)), jnp.zeros(shape + (n - 1,)))

    def point_stats(self, x) -> RankingStats:
        x = jnp.asarray(x).astype(jnp.int32)
        flat = x.reshape((-1, x.shape[-1]))
        stats = jax.vmap(point_stats_one)(flat)
        return jax.tree.map(lambda s: s.reshape(x.shape[:-1] + s.shape[1:]), stats)

    def log_prior_theta_norm(self) -> jax.Array:
        """sum_j log B~eta(nu r_j, nu, n-j): the log normaliser of P0's theta part."""
        return jnp.sum(log_tbeta(self.nu * jnp.asarray(self.r), jnp.full(int(self.n_items) - 1, self.nu), self.m))

    def log_prior(self, pos, theta) -> jax.Array:
        """log P0(sigma, theta): uniform sigma (1/n!) times the normalised theta density."""
        n = int(self.n_items)
        return (-jnp.sum(self.nu * (theta * jnp.asarray(self.r) + log_psi(theta, self.m)), axis=-1)
                - self.log_prior_theta_norm() - math.lgamma(n + 1))

    def log_lik_given_sigma(self, stats: RankingStats, pos) -> jax.Array:
        """log p(pi_c | sigma) with theta integrated out exactly (quadrature), per stats row."""
        a = self.nu * jnp.asarray(self.r) + lsigma(stats.R, pos)
        post = log_tbeta(a, self.nu + stats.Nj, self.m)
        prior = log_tbeta(self.nu * jnp.asarray(self.r), jnp.full(int(self.n_items) - 1, self.nu), self.m)
        return jnp.sum(post - prior, axis=-1)

    def log_marginal(self, stats: RankingStats) -> jax.Array:
        """log p(pi_c): sum over the n! central permutations of
        [`log_lik_given_sigma`][dpppl.families.generalized_mallows.GeneralizedMallows.log_lik_given_sigma],
        divided by n!. Exact (up to quadrature error ~1e-12) for n <= 7; raises otherwise."""
        n = int(self.n_items)
        if n > MAX_ENUMERATED_ITEMS:
            raise ModelError(
                f"{self.name}: the marginal likelihood of a cluster has no closed form and is "
                f"enumerated over sigma only for n_items <= {MAX_ENUMERATED_ITEMS} (got {n}); "
                f"sample with kernel 'mallows-slice' or 'mallows-beta'")
        perms = jnp.asarray(all_permutations(n))
        per_sigma = jax.vmap(lambda p: self.log_lik_given_sigma(stats, p))(perms)   # (n!, ...)
        return logsumexp(per_sigma, axis=0) - math.lgamma(n + 1)

    def log_likelihood(self, params, x) -> jax.Array:
        """log GM(x_i | sigma_k, theta_k): `params = {"pos": (K, n), "theta": (K, n-1)}`,
        x (N, n) -> (N, K)."""
        x = jnp.asarray(x).astype(jnp.int32)
        return jax.vmap(lambda r: log_gm(r, params["pos"], params["theta"], self.m))(x)

    def sample_points(self, rng_key, params, labels, lengths=None) -> jax.Array:
        """Draw top-t rankings from GM(sigma_label, theta_label) (`lengths` default n - 1
        entries, i.e. full rankings), padded with -1: `labels.shape + (n,)`."""
        n = int(self.n_items)
        flat = jnp.ravel(labels)
        t = jnp.full(flat.shape, n - 1) if lengths is None else jnp.broadcast_to(lengths, flat.shape)
        keys = random.split(rng_key, flat.shape[0])
        out = jax.vmap(lambda k, c, tt: sample_gm(k, params["pos"][c], params["theta"][c], tt, self.m))(
            keys, flat, t)
        return out.reshape(jnp.shape(labels) + (n,)).astype(jnp.result_type(float))

    def numpyro_sample_params(self, num_components):
        """Inside a NumPyro model: `num_components` draws of P0 (sites `theta_pos`, the central
        permutation as positions, and `theta_dispersion`; `UniformPermutation`, `MallowsTheta`)."""
        import numpyro

        n = int(self.n_items)
        pos = numpyro.sample("theta_pos", UniformPermutation(n, (num_components,)))
        theta = numpyro.sample("theta_dispersion", MallowsTheta(
            self.nu * jnp.broadcast_to(jnp.asarray(self.r, jnp.result_type(float)), (n - 1,)), self.nu, self.m,
            (num_components,)))
        return {"pos": pos, "theta": theta}

    def predictive_params(self, stats):
        """Not closed-form for GM; only
        [`log_predictive`][dpppl.families.generalized_mallows.GeneralizedMallows.log_predictive]'s prior form is
        offered."""
        return stats.n

    def log_predictive(self, params, x) -> jax.Array:
        """The *prior* predictive (n - t)!/n! (Lemma 1) for every cluster.

        The GM posterior predictive has no closed form. The driver's `init="sequential"`
        seats points with this, which makes sequential initialisation a draw of the CRP
        prior partition (the paper initialises at random); no kernel uses it.
        """
        return jnp.zeros_like(params) + log_lemma1(x)




def check_ranking_array(x, n_items=None, name: str = "x") -> np.ndarray:
    """Check a padded (N, n) ranking array; return it as float. Raises DataError naming
    the first bad row."""
    try:
        x = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"data '{name}': rankings must be numbers (item indices)") from None
    if x.ndim != 2 or x.shape[0] == 0:
        raise DataError(f"data '{name}': rankings must be a non-empty 2-D array, got shape {x.shape}")
    n = x.shape[1] if n_items is None else int(n_items)
    if x.shape[1] != n:
        raise DataError(f"data '{name}': {x.shape[1]} columns but {n} items")
    bad_value = ~np.isfinite(x) | (x != np.round(x)) | (x < -1) | (x >= n)
    if bad_value.any():
        i, j = np.argwhere(bad_value)[0]
        raise DataError(f"data '{name}': ranking {i} holds {x[i, j]:g} at position {j}, "
                        f"not an item index in 0..{n - 1} (or -1 for padding)")
    pad = x < 0
    after_pad = pad[:, :-1] & ~pad[:, 1:]
    if after_pad.any():
        i = int(np.argwhere(after_pad)[0][0])
        raise DataError(f"data '{name}': ranking {i} has an item after the -1 padding")
    empty = pad.all(axis=1)
    if empty.any():
        raise DataError(f"data '{name}': ranking {int(np.argmax(empty))} is empty")
    srt = np.sort(np.where(pad, -1 - np.arange(n)[None, :], x), axis=1)
    repeated = (srt[:, 1:] == srt[:, :-1]).any(axis=1)
    if repeated.any():
        i = int(np.argmax(repeated))
        vals, counts = np.unique(x[i][x[i] >= 0], return_counts=True)
        raise DataError(f"data '{name}': ranking {i} lists item {int(vals[counts > 1][0])} more than once")
    return x


def code_logits_given_theta(theta, m, n):
    """logits[j, k] = -theta_j k for k <= m_j (exact sigma | theta, pi)."""
    k = jnp.arange(n)
    return jnp.where(k[None, :] <= m[:, None], -theta[:, None] * k[None, :], -jnp.inf)


def sample_gm(rng_key, pos, theta, t, m):
    """Draw a top-t ranking from GM(sigma, theta): at stage j take the (s_j + 1)-th item, in
    sigma's order, of those not yet ranked, s_j ~ P(k) ∝ e^{-theta_j k}, k = 0..m_j.
    Returns the padded ranking (n,) (int32)."""
    n = pos.shape[-1]
    order = jnp.argsort(pos).astype(jnp.int32)
    logits = code_logits_given_theta(theta, m, n)
    u = random.uniform(rng_key, (n - 1,), theta.dtype)

    def body(j, carry):
        remaining, out = carry
        s = sample_index(logits[j], u[j])
        slot = jnp.argmax(remaining & (jnp.cumsum(remaining) == s + 1))
        take = j < t
        return (jnp.where(take, remaining.at[slot].set(False), remaining),
                out.at[j].set(jnp.where(take, order[slot], -1)))

    _, out = jax.lax.fori_loop(0, n - 1, body, (jnp.ones(n, bool), jnp.full(n, -1, jnp.int32)))
    return out


# ------------------------------------------------------- P0 as NumPyro distributions ---
# What the compiled NumPyro model (`dpppl.models.compile`) draws a rankings model's components
# from: sigma uniform over the n! permutations and, independently, each theta_j with density
# exp(-a_j theta_j - c ln psi_{m_j}(theta_j)) / B~eta(a_j, c, m_j), a_j = nu r_j, c = nu (eq. 14).
# `Predictive` draws them exactly (`theta_exact`); sigma is discrete, so NUTS cannot move it.


class UniformPermutation(dist.Distribution):
    """sigma uniform over the permutations of `n` items, as the position vector `pos`
    (`pos[l]` = sigma(l), the 0-based rank of item l): log p = -log n!."""

    def __init__(self, n: int, batch_shape=(), *, validate_args=None):
        self.n = int(n)
        super().__init__(batch_shape=tuple(batch_shape), event_shape=(self.n,), validate_args=validate_args)

    @property
    def support(self):
        return constraints.independent(constraints.integer_interval(0, self.n - 1), 1)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        size = math.prod(shape)
        keys = random.split(key, size)
        pos = jax.vmap(lambda k: jax.random.permutation(k, self.n))(keys)
        return pos.reshape(shape + (self.n,)).astype(jnp.int32)

    def log_prob(self, value):
        return jnp.full(jnp.shape(value)[:-1], -math.lgamma(self.n + 1.0))


class MallowsTheta(dist.Distribution):
    """The dispersions theta (n-1,) of P0: independent, theta_j with density
    exp(-a_j theta_j - c ln psi_{m_j}(theta_j)) / B~eta(a_j, c, m_j) (eq. 14)."""

    support = constraints.independent(constraints.positive, 1)

    def __init__(self, a, c, m, batch_shape=(), *, validate_args=None):
        self.a, self.m = jnp.asarray(a), jnp.asarray(m)
        self.c = jnp.broadcast_to(jnp.asarray(c, self.a.dtype), self.a.shape)
        super().__init__(batch_shape=tuple(batch_shape), event_shape=self.a.shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape + self.event_shape
        a, c, m = (jnp.broadcast_to(v, shape).ravel() for v in (self.a, self.c, self.m))
        keys = random.split(key, a.shape[0])
        return jax.vmap(theta_exact)(keys, a, c, m).reshape(shape)

    def log_prob(self, value):
        return jnp.sum(theta_log_density(value, self.a, self.c, self.m) - log_tbeta(self.a, self.c, self.m), axis=-1)


__all__ = ["GeneralizedMallows", "MallowsTheta", "UniformPermutation", "theta_exact", "theta_log_density",
           "code_logits_given_theta", "sample_gm", "RankingStats", "log_psi", "log_tbeta", "codes", "lsigma", "log_gm",
           "MAX_ENUMERATED_ITEMS"]
