"""Pieces shared by the Gaussian families: statistics, Student-t and normal densities."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln


class GaussianStats(NamedTuple):
    """Statistics of a set of points: ``n``, ``s1 = sum x`` (D,), ``s2 = sum x x^T`` (D, D)."""

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


def student_t_params(df, loc, scale):
    D = loc.shape[-1]
    chol = jnp.linalg.cholesky(scale)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    eye = jnp.broadcast_to(jnp.eye(D, dtype=scale.dtype), scale.shape)
    precision = jax.scipy.linalg.cho_solve((chol, True), eye)
    log_norm = (gammaln((df + D) / 2) - gammaln(df / 2) - 0.5 * D * jnp.log(df * jnp.pi)
                - 0.5 * logdet)
    return StudentTParams(loc, precision, df, log_norm)


def student_t_logpdf(params: StudentTParams, x):
    """log t(x) for one point ``x`` (D,) against every leading row of ``params``."""
    D = params.loc.shape[-1]
    d = x - params.loc
    q = jnp.einsum("...i,...ij,...j->...", d, params.precision, d)
    return params.log_norm - 0.5 * (params.df + D) * jnp.log1p(q / params.df)


def mvn_log_likelihood(mu, cov, x):
    """log N(x_i | mu_k, cov_k) for x (N, D), mu (K, D), cov (K, D, D) -> (N, K)."""
    D = x.shape[-1]
    chol = jnp.linalg.cholesky(cov)
    d = x[:, None, :] - mu[None, :, :]
    sol = jax.scipy.linalg.solve_triangular(
        jnp.broadcast_to(chol, (x.shape[0],) + chol.shape), d[..., None], lower=True)[..., 0]
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * (D * jnp.log(2 * jnp.pi) + logdet[None, :] + jnp.sum(sol**2, axis=-1))
