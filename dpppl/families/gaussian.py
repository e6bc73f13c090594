"""Pieces shared by the Gaussian families: statistics, Student-t and normal densities."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from dpppl.core import numerics_random as random
from dpppl.core.numerics import log_gamma_draw, normal_draw


class GaussianStats(NamedTuple):
    """Statistics of a set of points: `n`, `s1 = sum x` (D,), `s2 = sum x x^T` (D, D)."""

    n: jax.Array
    s1: jax.Array
    s2: jax.Array


def gaussian_point_stats(x):
    x = jnp.asarray(x)
    return GaussianStats(jnp.ones(x.shape[:-1], x.dtype), x, x[..., :, None] * x[..., None, :])


class StudentTParams(NamedTuple):
    """Multivariate Student-t: location, precision matrix (inverse scale), degrees of
    freedom and the log normalising constant (everything but the quadratic term)."""

    loc: jax.Array
    precision: jax.Array
    df: jax.Array
    log_norm: jax.Array


# Dense linear algebra in plain XLA operations. jaxlib's CPU LAPACK kernels split a batch
# of matrices over XLA's intra-op thread pool from inside a pool thread
# (jax::ParallelBatchMap) and wait for the pieces; when every pool thread does so at once
# nothing is left to run them and the process hangs at 0% CPU (seen here with gdb, batched
# Cholesky under vmap). The partition kernels factor many small (D x D) matrices per step,
# so they use these loops over D instead, which never leave the calling computation.

def cholesky(a):
    """Lower Cholesky factor of symmetric positive-definite matrices `a` (..., D, D),
    column by column: L[i, j] = (a[i, j] - sum_{k<j} L[i, k] L[j, k]) / L[j, j] for i >= j."""
    a = jnp.asarray(a)
    d = a.shape[-1]
    index = jnp.arange(d)

    def column(j, chol):
        v = a[..., :, j] - jnp.einsum("...ik,...k->...i", chol, chol[..., j, :])
        pivot = jnp.sqrt(v[..., j])
        return chol.at[..., :, j].set(jnp.where(index >= j, v / pivot[..., None], 0.0))

    return jax.lax.fori_loop(0, d, column, jnp.zeros_like(a))


def solve_lower(chol, b):
    """x with chol x = b for lower-triangular `chol` (..., D, D) and `b` (..., D, M),
    by forward substitution."""
    chol, b = jnp.asarray(chol), jnp.asarray(b)
    d = chol.shape[-1]

    def row(i, x):
        xi = (b[..., i, :] - jnp.einsum("...k,...km->...m", chol[..., i, :], x)) / chol[..., i, i, None]
        return x.at[..., i, :].set(xi)

    return jax.lax.fori_loop(0, d, row, jnp.zeros(jnp.broadcast_shapes(chol.shape[:-1], b.shape[:-2] + (d,))
                                                    + b.shape[-1:], b.dtype))


def logdet_pd(a):
    """log |a| of symmetric positive-definite matrices (..., D, D)."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(cholesky(a), axis1=-2, axis2=-1)), axis=-1)


def gamma_draw(rng_key, shape_param, shape, dtype=None):
    """Gamma(shape_param, 1) draws of shape `shape`: exp of
    [`log_gamma_draw`][dpppl.core.numerics.log_gamma_draw] (Marsaglia & Tsang's rejection method, all
    entries in one `while_loop`; exact like `jax.random.gamma`, whose per-element loop takes seconds
    to compile)."""
    return jnp.exp(log_gamma_draw(rng_key, shape_param, shape, dtype))


def bartlett_variates(rng_key, nu, D: int, shape):
    """The random numbers of [`inverse_wishart_bartlett`][dpppl.families.gaussian.inverse_wishart_bartlett]'s
    draws of shape `shape` in dimension D: the normals below the diagonal of A (shape + (D (D - 1) / 2,),
    in the order of `np.tril_indices(D, -1)`) and the chi-squares A_ii^2 ~ chi^2(nu - i) (shape + (D,))."""
    rows = D * (D - 1) // 2
    if isinstance(nu, (int, float)) and float(nu).is_integer() and nu <= 16:
        dofs = (nu - np.arange(D)).astype(int)
        normals = normal_draw(rng_key, shape + (rows + int(dofs.sum()),))
        below, cells = normals[..., :rows], normals[..., rows:]
        ends = np.cumsum(dofs)
        chi2 = jnp.stack([jnp.sum(cells[..., e - k:e] ** 2, axis=-1) for e, k in zip(ends, dofs)], axis=-1)
    else:
        k_diag, k_below = random.split(rng_key)
        below = normal_draw(k_below, shape + (rows,))
        chi2 = 2.0 * gamma_draw(k_diag, (jnp.asarray(nu)[..., None] - jnp.arange(D)) / 2.0, shape + (D,))
    return below, chi2


def inverse_wishart_bartlett(rng_key, psi, nu, shape, root=None):
    """(Sigma, Sigma^-1, log|Sigma|) for Sigma ~ IW(psi, nu) of shape `shape`: scale matrices `psi`
    (..., D, D) and degrees of freedom `nu` (a number, or an array (...)) broadcast to `shape`.

    The Bartlett decomposition: psi = U U^T, A lower triangular with A_ii^2 ~ chi^2(nu - i) and
    A_ij ~ N(0, 1) below the diagonal; then Sigma^-1 = (U^-T A)(U^-T A)^T ~ Wishart(nu, psi^-1),
    Sigma = (U A^-T)(U A^-T)^T and log|Sigma| = 2 sum_i (log U_ii - log A_ii): the precision and the
    log determinant come from the draw's factors, with no factorisation of Sigma. The normals are
    `normal_draw`s (Box-Muller); with a number nu that is an integer <= 16 the chi-squares are sums
    of nu - i squared normals drawn in the same call as those below the diagonal (no rejection
    loop), otherwise `gamma_draw`s (`bartlett_variates`). `root`: (U, U^-1) when the caller has them
    (a prior's fixed psi, factored on the host), else psi is factored here.
    """
    D = psi.shape[-1]
    rows, cols = np.tril_indices(D, -1)
    below, chi2 = bartlett_variates(rng_key, nu, D, shape)
    eye = jnp.eye(D, dtype=psi.dtype)
    bartlett = jnp.zeros(shape + (D, D), psi.dtype).at[..., rows, cols].set(below) + jnp.sqrt(chi2)[..., None] * eye
    if root is None:
        chol_psi = cholesky(psi)
        inv_chol_psi = solve_lower(chol_psi, jnp.broadcast_to(eye, chol_psi.shape))
    else:
        chol_psi, inv_chol_psi = root
    prec_root = jnp.einsum("...ji,...jk->...ik", inv_chol_psi, bartlett)  # U^-T A
    cov_root = jnp.einsum("...ij,...kj->...ik", chol_psi,
                          solve_lower(bartlett, jnp.broadcast_to(eye, bartlett.shape)))  # U A^-T
    logdet = 2.0 * (jnp.sum(jnp.log(jnp.diagonal(chol_psi, axis1=-2, axis2=-1)), axis=-1)
                    - 0.5 * jnp.sum(jnp.log(chi2), axis=-1))
    return (jnp.einsum("...ik,...jk->...ij", cov_root, cov_root),
            jnp.einsum("...ik,...jk->...ij", prec_root, prec_root), logdet)


def student_t_params(df, loc, scale):
    D = loc.shape[-1]
    chol = cholesky(scale)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    eye = jnp.broadcast_to(jnp.eye(D, dtype=scale.dtype), scale.shape)
    inverse_chol = solve_lower(chol, eye)
    precision = jnp.einsum("...ki,...kj->...ij", inverse_chol, inverse_chol)
    log_norm = (gammaln((df + D) / 2) - gammaln(df / 2) - 0.5 * D * jnp.log(df * jnp.pi)
                - 0.5 * logdet)
    return StudentTParams(loc, precision, df, log_norm)


def student_t_logpdf(params: StudentTParams, x):
    """log t(x) for one point `x` (D,) against every leading row of `params`."""
    D = params.loc.shape[-1]
    d = x - params.loc
    q = jnp.einsum("...i,...ij,...j->...", d, params.precision, d)
    return params.log_norm - 0.5 * (params.df + D) * jnp.log1p(q / params.df)


def mvn_log_likelihood(mu, cov, x):
    """log N(x_i | mu_k, cov_k) for x (N, D), mu (K, D), cov (K, D, D) -> (N, K); see
    `whitened_log_likelihood_rows` for how it is computed."""
    return whitened_log_likelihood_rows(whitening_full(mu, cov), x).T


# ----- diagonal Gaussian families (NormalKnownCov, NormalGamma) -------------------------

class DiagonalStats(NamedTuple):
    """Statistics of a set of points: `n`, `s1 = sum x` (D,), `s2 = sum x**2` (D,)."""

    n: jax.Array
    s1: jax.Array
    s2: jax.Array


def diagonal_empty_stats(shape, dim):
    """Zero diagonal statistics with leading `shape` for `dim` dimensions."""
    return DiagonalStats(jnp.zeros(shape), jnp.zeros(shape + (dim,)), jnp.zeros(shape + (dim,)))


def diagonal_point_stats(x):
    """Statistics of each point of `x` (..., D): `(1, x, x**2)`."""
    x = jnp.asarray(x)
    return DiagonalStats(jnp.ones(x.shape[:-1], x.dtype), x, x * x)


def centered_sums(stats: DiagonalStats, mu0):
    """Per-dimension sums about `mu0`: `S = sum (x - mu0)` and `Q = sum (x - mu0)**2`.

    Written with the additive statistics as `S = s1 - n mu0` and
    `Q = s2 - 2 mu0 s1 + n mu0**2`; both are zero for empty rows.
    """
    n = stats.n[..., None]
    return stats.s1 - n * mu0, stats.s2 - 2.0 * mu0 * stats.s1 + n * mu0 * mu0


class DiagonalNormalParams(NamedTuple):
    """Product of univariate normals: location, precision (1 / variance) and the log
    normalising constant `-1/2 sum_d log(2 pi var_d)`."""

    loc: jax.Array
    precision: jax.Array
    log_norm: jax.Array


def diagonal_normal_params(loc, var):
    """`DiagonalNormalParams` of N(loc, diag(var)), for every leading row."""
    return DiagonalNormalParams(loc, 1.0 / var, -0.5 * jnp.sum(jnp.log(2 * jnp.pi * var), axis=-1))


def diagonal_normal_logpdf(params: DiagonalNormalParams, x):
    """log prod_d N(x_d | loc_d, var_d) for one point `x` (D,) against every row: O(rows D)."""
    d = x - params.loc
    return params.log_norm - 0.5 * jnp.sum(params.precision * d * d, axis=-1)


class DiagonalStudentTParams(NamedTuple):
    """Product of univariate Student-t densities t_nu(x_d | loc_d, scale_d^2).

    `weight = 1 / (nu scale^2)`, `power = (nu + 1) / 2` and `log_norm` the sum over
    dimensions of `log Gamma((nu+1)/2) - log Gamma(nu/2) - 1/2 log(nu pi scale^2)`.
    """

    loc: jax.Array
    weight: jax.Array
    power: jax.Array
    log_norm: jax.Array


def diagonal_student_t_params(df, loc, scale2):
    """`DiagonalStudentTParams` of prod_d t_df(loc_d, scale2_d), for every leading row."""
    log_norm = jnp.sum(gammaln((df + 1) / 2) - gammaln(df / 2) - 0.5 * jnp.log(df * jnp.pi * scale2),
                       axis=-1)
    return DiagonalStudentTParams(loc, 1.0 / (df * scale2), (df + 1) / 2, log_norm)


def diagonal_student_t_logpdf(params: DiagonalStudentTParams, x):
    """log prod_d t(x_d) for one point `x` (D,) against every row of `params`: O(rows D)."""
    d = x - params.loc
    return params.log_norm - jnp.sum(params.power * jnp.log1p(params.weight * d * d), axis=-1)


def diagonal_normal_log_likelihood(mu, var, x, center):
    """log prod_d N(x_id | mu_kd, var_kd) for x (N, D), mu (K, D), var (D,) or (K, D) -> (N, K).

    Expands the square into matrix products, `sum_d (x - mu)^2 / var = x^2 . (1/var)
    - 2 x . (mu/var) + sum_d mu^2/var`, so no (N, K, D) array is formed. `x` and `mu`
    are first shifted by `center` (the prior mean: any constant gives the same value)
    so that the expansion does not cancel digits when the data sit far from the origin.
    """
    x = x - center
    mu = mu - center
    prec = jnp.broadcast_to(1.0 / var, mu.shape)
    quad = (x * x) @ prec.T - 2.0 * x @ (mu * prec).T + jnp.sum(mu * mu * prec, axis=-1)
    log_norm = jnp.sum(jnp.log(2 * jnp.pi / prec), axis=-1)
    return -0.5 * (quad + log_norm)


# ----- whitened Gaussian likelihoods (the parallel samplers' inner loop) -----------------

class Whitening(NamedTuple):
    """Gaussian components in whitened form: log N(x | theta_k) = log_norm_k - |W_k (x - loc_k)|^2 / 2.

    `white` is (K, D, D) lower triangular (W = L^-1 for cov = L L^T) or (K, D) for
    diagonal covariances (W = diag(1 / sd)); `log_norm = -D/2 log 2 pi + log |W|`.
    """

    loc: jax.Array
    white: jax.Array
    log_norm: jax.Array


def whitening_full(mu, cov):
    """`Whitening` of N(mu_k, cov_k) with full covariances."""
    return whitening_cholesky(mu, cholesky(cov))


def whitening_cholesky(mu, chol):
    """`Whitening` of N(mu_k, L_k L_k^T) from the lower Cholesky factors `chol` (..., D, D) of the
    covariances: `white` = L_k^-1, `log_norm` = -D/2 log(2 pi) - sum_d log L_k[d, d]."""
    D = mu.shape[-1]
    white = solve_lower(chol, jnp.broadcast_to(jnp.eye(D, dtype=chol.dtype), chol.shape))
    log_norm = -0.5 * D * jnp.log(2 * jnp.pi) - jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return Whitening(mu, white, log_norm)


class DiagonalGaussianParams:
    """Methods shared by the families whose drawn parameters are `{"mu": (..., D),
    "var": (..., D)}` ([`NormalGamma`][dpppl.families.NormalGamma],
    [`NormalLogNormal`][dpppl.families.NormalLogNormal])."""

    def whitening(self, params):
        """Parameters in the whitened form of `Whitening`."""
        return whitening_diagonal(params["mu"], params["var"])

    def sample_points(self, rng_key, params, labels):
        mu, var = params["mu"][labels], params["var"][labels]
        return mu + jnp.sqrt(var) * random.normal(rng_key, mu.shape, mu.dtype)


def whitening_diagonal(mu, var):
    """`Whitening` of N(mu_k, diag(var_k)); `var` broadcasts against `mu`."""
    var = jnp.broadcast_to(var, mu.shape)
    return Whitening(mu, 1.0 / jnp.sqrt(var), -0.5 * jnp.sum(jnp.log(2 * jnp.pi * var), axis=-1))


SMALL_DIM = 8  # up to this D the quadratic form is unrolled into element-wise operations


def whitened_log_likelihood_rows(w: Whitening, x):
    """log N(x_b | theta_k) for points `x` (B, D) -> (K, B), components along rows.

    For D <= `SMALL_DIM` the D(D+1)/2 products of the quadratic form are unrolled
    over (K, B) arrays, which XLA fuses into one loop (a matrix product with a contraction
    of length 2 runs far slower on CPU); above it, one matrix product W x per block.
    Differences x - loc are formed before whitening, so float32 stays accurate.
    """
    K, D = w.loc.shape
    diagonal = w.white.ndim == 2
    if D <= SMALL_DIM:
        diffs = [x[None, :, d] - w.loc[:, d, None] for d in range(D)]
        if diagonal:
            q = sum((w.white[:, d, None] * diffs[d]) ** 2 for d in range(D))
        else:
            q = sum(sum(w.white[:, j, d, None] * diffs[d] for d in range(j + 1)) ** 2 for j in range(D))
    elif diagonal:
        q = jnp.sum(((x[None] - w.loc[:, None]) * w.white[:, None]) ** 2, axis=-1)
    else:
        y = jnp.einsum("kjd,bd->kjb", w.white, x) - jnp.einsum("kjd,kd->kj", w.white, w.loc)[..., None]
        q = jnp.sum(y * y, axis=1)
    return w.log_norm[:, None] - 0.5 * q


def whitened_log_likelihood_pairs(w: Whitening, x):
    """log N(x_b | theta_bs) with per-point components (leading axes (B, S)) -> (B, S)."""
    d = x[:, None, :] - w.loc
    if w.white.ndim == w.loc.ndim:  # diagonal
        y = w.white * d
    else:
        y = jnp.einsum("bsjd,bsd->bsj", w.white, d)
    return w.log_norm - 0.5 * jnp.sum(y * y, axis=-1)
