"""Gaussian clusters whose means are coupled over time slices (Porteous et al. 2006, sec. 5).

Cluster i has one mean mu_{i,t} per slice t = 1..T and either one covariance Sigma_{i,t}
per slice (`slice_covariances=True`, the default and the paper's model: eq. 11
conditions W(Sigma_{i,t}^-1) slice by slice, and sec. 6 models "the cluster covariances
using independent inverse Wishart distributions") or one covariance Sigma_i shared by its
slices (`slice_covariances=False`), with

    Sigma_{i,s} ~ IW(psi0, nu0)  independently,   s = t (per slice) or s = 1 (shared),
    vec(mu_i) ~ N(m, Gamma (x) I_D),   Gamma_{t,t'} = a exp(-beta |tau_t - tau_t'|^delta) (t != t'),
                                       Gamma_{t,t} = b                                    (eq. 12),
    x_n | z_n = i, slice t ~ N(mu_{i,t}, Sigma_{i,s(t)}),

where tau_t is the time of slice t and m is the same in every slice. The covariances
are stored with a slice axis of length S = T (per slice) or S = 1 (shared), which
broadcasts against the T slices of the means. The Gibbs conditionals of the parameters
given the labels (eq. 11) are conjugate:

    Sigma_{i,t} | mu_i, x ~ IW(psi0 + S_{i,t}(mu_{i,t}), nu0 + N_{i,t})                (per slice),
    Sigma_i | mu_i, x ~ IW(psi0 + sum_t S_{i,t}(mu_{i,t}), nu0 + N_i)                (shared),
        S_{i,t}(mu) = sum_{n in (i,t)} (x_n - mu)(x_n - mu)^T
                    = s2_{i,t} - s1_{i,t} mu^T - mu s1_{i,t}^T + N_{i,t} mu mu^T;
    vec(mu_i) | Sigma_i, x ~ N(P^-1 h, P^-1),
        P = Gamma^-1 (x) I_D + blockdiag_t(N_{i,t} Sigma_{i,s(t)}^-1),
        h = (Gamma^-1 (x) I_D) vec(m) + vec_t(Sigma_{i,s(t)}^-1 s1_{i,t}),

with N_{i,t}, s1_{i,t} = sum x, s2_{i,t} = sum x x^T the statistics of the points of
cluster i in slice t. The means' conditional is a dense (T D)-dimensional Gaussian, so a
draw costs O((T D)^3) per cluster: meant for tens of slices.

This is not a conjugate family in the sense of `Family`
(no marginal likelihood in closed form: the prior of (mu, Sigma) is not the NIW), so the
collapsed kernels do not apply; the DDP kernels (`dpppl.kernels.ddp`) instantiate
the parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import multigammaln

from dpppl.core import numerics_random as random
from dpppl.core.numerics import normal_draw
from dpppl.errors import DataError, HyperparameterError
from dpppl.core.expressions import check_hyper
from dpppl.families.base import Family, resolve_fields, scale_matrix
from dpppl.families.gaussian import (Whitening, cholesky, inverse_wishart_bartlett, solve_lower,
                                     whitened_log_likelihood_pairs, whitening_full)


def solve_upper_transposed(chol, b):
    """x with chol^T x = b for lower-triangular `chol` (..., M, M) and `b` (..., M, K):
    back substitution, written as forward substitution on the index-reversed system."""
    flipped = chol[..., ::-1, ::-1]
    return solve_lower(jnp.swapaxes(flipped, -1, -2), b[..., ::-1, :])[..., ::-1, :]


def _logdet_of_root(chol):
    """log |a| from the Cholesky factor `chol` (D, D) of a = chol chol^T."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(jnp.asarray(chol))))


def time_covariance(times, a: float, beta: float, delta: float, b: float) -> np.ndarray:
    """Gamma of eq. (12) over slice times `times` (T,): a exp(-beta |dt|^delta) off the
    diagonal, b on it (the identity over dimensions is implied)."""
    times = np.asarray(times, dtype=float)
    gap = np.abs(times[:, None] - times[None, :])
    cov = a * np.exp(-beta * gap ** delta)
    np.fill_diagonal(cov, b)
    return cov


def _slice_conditionals(gamma) -> tuple[np.ndarray, np.ndarray]:
    """(gain (T, T), chol (T, T, T)): for every slice t, g_t = Gamma[:, t] / Gamma[t, t] and a
    Cholesky factor of the conditional covariance Gamma_{|t} given slice t (row and column
    t zero) - see [`CoupledGaussian.means_given_slice`][dpppl.families.coupled.CoupledGaussian.means_given_slice]."""
    T = gamma.shape[0]
    gain = (gamma / np.diag(gamma)[None, :]).T
    chol = np.zeros((T, T, T))
    for t in range(T):
        rest = np.arange(T) != t
        cond = gamma - np.outer(gamma[:, t], gamma[t, :]) / gamma[t, t]
        if T > 1:
            chol[t][np.ix_(rest, rest)] = np.linalg.cholesky(cond[np.ix_(rest, rest)])
    return gain, chol


def _root(psi) -> tuple[np.ndarray, np.ndarray]:
    """(U, U^-1) for psi = U U^T, U lower triangular (float64, on the host)."""
    chol = np.linalg.cholesky(np.asarray(psi, dtype=float))
    return chol, np.linalg.inv(chol)


@dataclasses.dataclass(frozen=True)
class CoupledGaussian(Family):
    """Gaussian clusters with time-coupled means and inverse-Wishart covariances (sec. 5).

    Parameters (defaults as in the paper's storm experiment, sec. 6, for data scaled to
    the unit square)
    ----------
    a : float, default 1.0
        Amplitude of the coupling of a cluster's means across slices (eq. 12).
    beta : float, default 0.005
        Decay rate of the coupling with the time gap |tau_t - tau_t'|.
    delta : float in (0, 2], default 1.0
        Exponent of the time gap (1: Ornstein-Uhlenbeck; 2: squared exponential).
    b : float, default a
        Prior variance of one slice's mean about `mu0` (the diagonal of Gamma); the
        mean's step from slice to slice has variance 2 (b - a exp(-beta dt^delta)) per
        dimension. Gamma must be positive definite (b >= a suffices for delta <= 2).
    mu0 : array (D,), default mean(x)
        Prior mean m of every slice's cluster mean (the paper: the data's sample mean).
    nu0 : float > D - 1, default D + 1
        Inverse-Wishart degrees of freedom.
    psi0 : array (D, D) or float, default 0.01 I
        Inverse-Wishart scale; a number s stands for s I (the identity scaled).
    slice_covariances : bool, default True
        One covariance per label and slice, Sigma_{i,t}, independent IW (the paper's
        eq. 11); False: one per label shared by its slices (fewer parameters for slices
        with few points, but a label swap over part of the slices then moves points onto
        another label's covariance and is rarely accepted).
    """

    a: Any = None
    beta: Any = None
    delta: Any = None
    b: Any = None
    mu0: Any = None
    nu0: Any = None
    psi0: Any = None
    slice_covariances: Any = None

    # set by resolve (attributes, not hyperparameters): the slice times, Gamma, its
    # Cholesky factor and its inverse, the factors of :meth:`means_given_slice`, and psi0's
    # Cholesky factor and its inverse (host-factored: no factorisation code in a program)
    times = gamma = gamma_chol = gamma_inv = slice_conditionals = psi0_root = None

    name = "CoupledGaussian"
    data_kind = "real"
    observation = "Normal"
    locations = ("mu0",)
    static_attributes = ("nu0",)  # an integer nu0 <= 16 fixes how many normals a covariance draw takes
    defaults = {"a": 1.0, "beta": 0.005, "delta": 1.0, "b": None, "mu0": "mean(x)", "nu0": "D + 1",
                "psi0": 0.01, "slice_covariances": 1}

    def resolve(self, x: np.ndarray, times=None) -> "CoupledGaussian":
        """Hyperparameters fitted to `x` (N, D) and the time covariance over the slice
        times `times` (T,) (sorted, distinct)."""
        if times is None:
            raise DataError("CoupledGaussian needs the slice times: bind it through a DDP model")
        b = self.b if self.b is not None else (self.a if self.a is not None else self.defaults["a"])
        v = resolve_fields(dataclasses.replace(self, b=b), x, self.defaults)
        D = x.shape[1]
        a = float(check_hyper(self.name, "a", v["a"], shape=(), positive=True))
        beta = float(check_hyper(self.name, "beta", v["beta"], shape=(), at_least=(0.0, "a decay rate")))
        delta = float(check_hyper(self.name, "delta", v["delta"], shape=(), positive=True,
                                  at_most=(2.0, "Gamma is a covariance only for delta in (0, 2]")))
        b = float(check_hyper(self.name, "b", v["b"], shape=(), positive=True))
        psi0 = scale_matrix(self.name, "psi0", v["psi0"], D)
        times = np.asarray(times, dtype=float)
        gamma = time_covariance(times, a, beta, delta, b)
        eig = np.linalg.eigvalsh(gamma)
        if eig.min() <= 1e-12 * eig.max():
            raise HyperparameterError(
                f"{self.name}: the time covariance Gamma (a={a:g}, beta={beta:g}, delta={delta:g}, b={b:g}) over the "
                f"{times.size} slice times is not positive definite (smallest eigenvalue {eig.min():.3g}); "
                "increase b or beta", owner=self.name, name="b")
        out = CoupledGaussian(
            a=a, beta=beta, delta=delta, b=b,
            mu0=check_hyper(self.name, "mu0", v["mu0"], shape=(D,)),
            nu0=float(check_hyper(self.name, "nu0", v["nu0"], shape=(), greater_than=D - 1, count=True)),
            psi0=check_hyper(self.name, "psi0", psi0, shape=(D, D), pos_def=True),
            slice_covariances=bool(check_hyper(self.name, "slice_covariances", v["slice_covariances"], shape=())))
        for name, value in (("times", times), ("gamma", gamma), ("gamma_chol", np.linalg.cholesky(gamma)),
                            ("gamma_inv", np.linalg.inv(gamma)), ("slice_conditionals", _slice_conditionals(gamma)),
                            ("psi0_root", _root(out.psi0))):
            object.__setattr__(out, name, value)
        return out

    @property
    def dim(self) -> int:
        return int(np.shape(self.mu0)[0])

    @property
    def num_slices(self) -> int:
        return int(np.shape(self.times)[0])

    @property
    def num_covariances(self) -> int:
        """S, the length of the covariances' slice axis: T per slice, 1 shared."""
        return self.num_slices if self.slice_covariances else 1

    def covariance_index(self, slices):
        """The covariance slot s(t) of slice indices `slices`: t per slice, 0 shared."""
        return slices if self.slice_covariances else jnp.zeros_like(slices)

    # ----- densities -------------------------------------------------------------------
    def log_normalisers(self):
        """The terms of [`log_prior_means`][dpppl.families.coupled.CoupledGaussian.log_prior_means] and
        [`log_prior_cov`][dpppl.families.coupled.CoupledGaussian.log_prior_cov] that do not depend on
        their argument: (-1/2 (D log|Gamma| + T D log 2 pi), nu0/2 log|psi0| - nu0 D/2 log 2 -
        log Gamma_D(nu0 / 2)), from the host's factors of Gamma and psi0."""
        T, D, nu = self.num_slices, self.dim, self.nu0
        means = -0.5 * (D * _logdet_of_root(self.gamma_chol) + T * D * np.log(2 * np.pi))
        cov = 0.5 * nu * _logdet_of_root(self.psi0_root[0]) - 0.5 * nu * D * np.log(2.0) - multigammaln(nu / 2, D)
        return means, cov

    def log_prior_means(self, mu):
        """log N(vec(mu); m, Gamma (x) I_D) for means `mu` (..., T, D)."""
        dev = mu - jnp.asarray(self.mu0)
        quad = jnp.einsum("...sd,st,...td->...", dev, jnp.asarray(self.gamma_inv), dev)
        return self.log_normalisers()[0] - 0.5 * quad

    @staticmethod
    def inverse_root(sigma):
        """(L^-1, log|Sigma|) for covariances `sigma` = L L^T (..., D, D), L lower triangular:
        the one factorisation that [`precision`][dpppl.families.coupled.CoupledGaussian.precision]
        and [`log_prior_cov`][dpppl.families.coupled.CoupledGaussian.log_prior_cov] need (pass it
        to both instead of factoring twice)."""
        chol = cholesky(sigma)
        inv_chol = solve_lower(chol, jnp.broadcast_to(jnp.eye(sigma.shape[-1], dtype=sigma.dtype), sigma.shape))
        return inv_chol, 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)

    def log_prior_cov(self, sigma, root=None):
        """log IW(sigma; psi0, nu0) for covariances `sigma` (..., D, D) (one value each);
        `root`: their [`inverse_root`][dpppl.families.coupled.CoupledGaussian.inverse_root]
        if the caller has it."""
        D, nu = self.dim, self.nu0
        inv_chol, logdet = self.inverse_root(sigma) if root is None else root
        trace = jnp.einsum("...ki,ij,...kj->...", inv_chol, jnp.asarray(self.psi0), inv_chol)
        return self.log_normalisers()[1] - 0.5 * (nu + D + 1) * logdet - 0.5 * trace

    def precision(self, sigma, root=None):
        """(Sigma^-1, log|Sigma|) for covariances (..., D, D); `root` as in
        [`log_prior_cov`][dpppl.families.coupled.CoupledGaussian.log_prior_cov]."""
        inv_chol, logdet = self.inverse_root(sigma) if root is None else root
        return jnp.einsum("...ki,...kj->...ij", inv_chol, inv_chol), logdet

    @staticmethod
    def scatter(n, s1, s2, mu):
        """S(mu) = sum (x - mu)(x - mu)^T from statistics n (...), s1 (..., D), s2 (..., D, D)."""
        cross = s1[..., :, None] * mu[..., None, :]
        return s2 - cross - jnp.swapaxes(cross, -1, -2) + n[..., None, None] * mu[..., :, None] * mu[..., None, :]

    def log_likelihood_stats(self, n, s1, s2, mu, prec, logdet):
        """sum over the points of log N(x; mu, Sigma) from their statistics (n, s1, s2)
        (leading axes ...), with the precision `prec` and `logdet` = log|Sigma|."""
        D = self.dim
        quad = jnp.sum(prec * self.scatter(n, s1, s2, mu), axis=(-2, -1))
        return -0.5 * (n * (D * np.log(2 * np.pi) + logdet) + quad)

    def log_joint_state(self, prior, state):
        """log p(x, z, theta_used) of a DDP state (the `lp` that [`dpppl.sample`][dpppl.sample] records).

        = sum_t log P(Z_t) (sticks integrated out, `dpppl.priors.ddp`) + sum over
        used labels i of [log N(vec mu_i; m, Gamma (x) I) + sum_s log IW(Sigma_{i,s})]
        + sum_n log N(x_n; mu_{z_n, t_n}, Sigma_{z_n, s(t_n)}), from the state's statistics
        (`stats.sigma` (C, S, D, D), see [`num_covariances`][dpppl.families.coupled.CoupledGaussian.num_covariances]).
        The
        parameters of unused labels are prior draws independent of the rest and integrate
        out. It is the log joint of the instantiated state, not of the partition alone,
        and it depends on the labels (they matter in the stick-breaking representation).
        """
        stats = state.stats
        used = stats.n > 0.5
        sticks = jnp.sum(prior.log_prob_labels(stats.nt.T))
        sigma = jnp.where(used[:, None, None, None], stats.sigma, jnp.eye(self.dim, dtype=stats.sigma.dtype))
        root = self.inverse_root(sigma)
        params = self.log_prior_means(stats.mu) + jnp.sum(self.log_prior_cov(sigma, root), axis=1)
        prec, logdet = self.precision(sigma, root)
        lik = self.log_likelihood_stats(stats.nt, stats.s1, stats.s2, stats.mu, prec, logdet)
        return sticks + jnp.sum(jnp.where(used, params + jnp.sum(lik, axis=1), 0.0))

    # ----- draws -----------------------------------------------------------------------
    def draw_prior(self, rng_key, shape=()):
        """(mu (shape, T, D), sigma (shape, S, D, D)) from the prior."""
        T, D = self.num_slices, self.dim
        k_mu, k_cov = random.split(rng_key)
        eps = normal_draw(k_mu, shape + (T, D))
        mu = jnp.asarray(self.mu0) + jnp.einsum("st,...td->...sd", jnp.asarray(self.gamma_chol), eps)
        return mu, self.draw_prior_cov(k_cov, shape + (self.num_covariances,))[0]

    def draw_prior_cov(self, rng_key, shape=()):
        """(Sigma, Sigma^-1, log|Sigma|) for Sigma ~ IW(psi0, nu0), of shape `shape`
        (`dpppl.families.gaussian.inverse_wishart_bartlett`)."""
        root = tuple(jnp.asarray(v) for v in self.psi0_root)
        return inverse_wishart_bartlett(rng_key, jnp.asarray(self.psi0), self.nu0, shape, root)

    def means_given_slice(self, t, mu_t, eps):
        """A prior draw of all T means of a label given its mean `mu_t` (..., D) in slice
        `t`: vec(mu) | mu_t ~ N(m + g_t (mu_t - m), Gamma_{|t} (x) I_D) with
        g_t = Gamma[:, t] / Gamma[t, t] and Gamma_{|t} = Gamma - Gamma[:, t] Gamma[t, :] / Gamma[t, t],
        from standard normals `eps` (..., T, D). Row t of the result is mu_t; drawing
        mu_t ~ N(m, Gamma[t, t] I) and then this is a draw of vec(mu) from its prior."""
        m = jnp.asarray(self.mu0)
        gain, chol = (jnp.asarray(v)[t] for v in self.slice_conditionals)
        return m + gain[:, None] * (mu_t - m)[..., None, :] + jnp.einsum("st,...td->...sd", chol, eps)

    def draw_cov(self, rng_key, n, s1, s2, mu):
        """Sigma_{i,s} | mu_i, x (eq. 11) for every cluster (see the module docstring):
        statistics n (C, T), s1 (C, T, D), s2 (C, T, D, D) and means mu (C, T, D); returns
        (Sigma, Sigma^-1, log|Sigma|), (C, S, D, D), (C, S, D, D) and (C, S), by
        `dpppl.families.gaussian.inverse_wishart_bartlett` (the precision
        from the draw's own factors, not by factoring Sigma again)."""
        scatter = self.scatter(n, s1, s2, mu)
        if not self.slice_covariances:
            scatter, n = jnp.sum(scatter, axis=1, keepdims=True), jnp.sum(n, axis=1, keepdims=True)
        return inverse_wishart_bartlett(rng_key, jnp.asarray(self.psi0) + scatter, self.nu0 + n, n.shape)

    def draw_means(self, rng_key, n, s1, prec):
        """vec(mu_i) | Sigma_i, x (eq. 11) for every cluster: statistics n (C, T),
        s1 (C, T, D) and the precisions `prec` (C, S, D, D) of the covariances."""
        T, D = self.num_slices, self.dim
        C = n.shape[0]
        g_inv = jnp.asarray(self.gamma_inv)
        eye = jnp.eye(D, dtype=prec.dtype)
        prec = jnp.broadcast_to(prec, (C, T, D, D))
        # P[c, (t, d), (t', d')] = Gamma^-1[t, t'] I[d, d'] + [t = t'] N[c, t] prec[c, t, d, d']
        block = (g_inv[None, :, None, :, None] * eye[None, None, :, None, :]
                 + jnp.eye(T)[None, :, None, :, None] * (n[:, :, None, None] * prec)[:, :, :, None, :])
        precision = block.reshape(C, T * D, T * D)
        prior_h = (g_inv.sum(axis=1)[:, None] * jnp.asarray(self.mu0)[None, :])  # (T, D)
        h = (prior_h[None] + jnp.einsum("ctde,cte->ctd", prec, s1)).reshape(C, T * D, 1)
        chol = cholesky(precision)
        mean = solve_upper_transposed(chol, solve_lower(chol, h))[..., 0]
        eps = normal_draw(rng_key, (C, T * D, 1), prec.dtype)
        return (mean + solve_upper_transposed(chol, eps)[..., 0]).reshape(C, T, D)

    # ----- NumPyro side (the truncated model, `dpppl.models.ddp_compile`) ---------------
    def numpyro_sample_params(self, num_components):
        """Inside a NumPyro model: `num_components` labels' parameters from the prior, the
        sites `theta_mu` (K, T, D), vec(mu_k) ~ N(m, Gamma (x) I_D) (eq. 12: a matrix normal
        with row covariance Gamma and column covariance I_D), and `theta_cov` (K, S, D, D),
        Sigma_{k,s} ~ IW(psi0, nu0) independently (S = T per slice, 1 shared)."""
        import numpyro
        import numpyro.distributions as dist

        T, D = self.num_slices, self.dim
        gamma_chol = jnp.asarray(self.gamma_chol)
        # the arguments are valid by construction (`resolve` checks psi0 and Gamma): NumPyro's
        # checks of them would only run dozens of small eager programs at every trace
        with numpyro.validation_enabled(False), numpyro.plate("component", num_components):
            mu = numpyro.sample("theta_mu", dist.MatrixNormal(
                jnp.broadcast_to(jnp.asarray(self.mu0), (T, D)), gamma_chol, jnp.eye(D, dtype=gamma_chol.dtype)))
            cov = numpyro.sample("theta_cov", dist.InverseWishart(self.nu0, scale_matrix=jnp.asarray(self.psi0))
                                 .expand((self.num_covariances,)).to_event(1))
        return {"mu": mu, "cov": cov}

    def at_slices(self, slices) -> "AtSlices":
        """The likelihood of points in slices `slices` (N,) in the form the compiled model's
        mixture (`dpppl.models.compile.FamilyMixture`) takes."""
        return AtSlices(self, jnp.asarray(slices))


@dataclasses.dataclass(frozen=True)
class AtSlices:
    """A resolved [`CoupledGaussian`][dpppl.families.coupled.CoupledGaussian] observing N points whose
    slices are `slices` (N,): point n of label k is N(mu_{k,t_n}, Sigma_{k,s(t_n)}), with the
    parameters `{"mu": (K, T, D), "cov": (K, S, D, D)}` of `numpyro_sample_params`."""

    family: CoupledGaussian
    slices: Any

    @property
    def dim(self) -> int:
        return self.family.dim

    def log_likelihood(self, params, x):
        """log N(x_n; mu_{k,t_n}, Sigma_{k,s(t_n)}) for the N points `x` (N, D) -> (N, K): each
        covariance factored once, then taken by every point of its slice."""
        white = whitening_full(params["mu"], params["cov"])  # loc (K, T, D); white, log_norm (K, S, ...)
        cov = self.family.covariance_index(self.slices)
        return whitened_log_likelihood_pairs(Whitening(jnp.swapaxes(white.loc[:, self.slices], 0, 1),
                                                       jnp.swapaxes(white.white[:, cov], 0, 1),
                                                       white.log_norm[:, cov].T), x)

    def sample_points(self, rng_key, params, labels):
        """One point per label of `labels` (N,), point n from N(mu_{z_n,t_n}, Sigma_{z_n,s(t_n)})."""
        mu = params["mu"][labels, self.slices]
        cov = params["cov"][labels, self.family.covariance_index(self.slices)]
        eps = random.normal(rng_key, mu.shape, mu.dtype)
        return mu + jnp.einsum("...ij,...j->...i", cholesky(cov), eps)


__all__ = ["AtSlices", "CoupledGaussian", "time_covariance", "solve_upper_transposed"]
