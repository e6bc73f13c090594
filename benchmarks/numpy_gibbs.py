"""A plain per-point NumPy collapsed Gibbs sampler: the reference the JAX kernel must beat.

This is the straightforward implementation a user would write by hand (Neal 2000,
algorithm 3): loop over the points in Python; for each, remove it from its cluster's
sufficient statistics, refresh that cluster's posterior-predictive parameters, evaluate
the predictive of the point under every occupied cluster and the prior predictive for a
new cluster with vectorised NumPy, draw a label, add the point back and refresh the
receiving cluster. Statistics are updated incrementally, never recomputed, so a sweep
costs O(N K D^2) array work plus a few dozen NumPy calls per point; at small K and D the
per-call overhead dominates, which is what the JAX kernel's compiled loop removes.

Two families are implemented, with the same hyperparameters (and so the same target)
as dpppl's: Normal-Inverse-Wishart (Student-t predictive) and NormalKnownCov (diagonal
normal predictive). Only the CRP (Dirichlet process) prior with fixed alpha is covered.
"""

from __future__ import annotations

import math

import numpy as np


class _NIW:
    """Per-slot statistics n, s1 (D,), s2 (D, D) and cached Student-t predictive params."""

    def __init__(self, family, capacity):
        self.mu0 = np.asarray(family.mu0, float)
        self.kappa0 = float(family.kappa0)
        self.nu0 = float(family.nu0)
        self.psi0 = np.asarray(family.psi0, float)
        D = self.mu0.shape[0]
        self.D = D
        self.base = self.psi0 + self.kappa0 * np.outer(self.mu0, self.mu0)
        self.n = np.zeros(capacity)
        self.s1 = np.zeros((capacity, D))
        self.s2 = np.zeros((capacity, D, D))
        self.loc = np.zeros((capacity, D))
        self.prec = np.zeros((capacity, D, D))
        self.df = np.ones(capacity)
        self.log_norm = np.zeros(capacity)
        self.prior = self._params(0.0, np.zeros(D), np.zeros((D, D)))

    def grow(self, capacity):
        extra = capacity - self.n.shape[0]
        self.n = np.concatenate([self.n, np.zeros(extra)])
        for name in ("s1", "s2", "loc", "prec", "log_norm"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros((extra,) + a.shape[1:])]))
        self.df = np.concatenate([self.df, np.ones(extra)])

    def _params(self, n, s1, s2):
        D = self.D
        kn = self.kappa0 + n
        mun = (self.kappa0 * self.mu0 + s1) / kn
        psin = self.base + s2 - kn * np.outer(mun, mun)
        df = self.nu0 + n - D + 1
        scale = psin * ((kn + 1) / (kn * df))
        _, logdet = np.linalg.slogdet(scale)
        log_norm = (math.lgamma((df + D) / 2) - math.lgamma(df / 2)
                    - 0.5 * D * math.log(df * math.pi) - 0.5 * logdet)
        return mun, np.linalg.inv(scale), df, log_norm

    def refresh(self, k):
        self.loc[k], self.prec[k], self.df[k], self.log_norm[k] = self._params(self.n[k], self.s1[k], self.s2[k])

    def add(self, k, x, xx, sign):
        self.n[k] += sign
        self.s1[k] += sign * x
        self.s2[k] += sign * xx

    def log_predictive(self, x, slots):
        d = x - self.loc[slots]
        q = np.einsum("ki,kij,kj->k", d, self.prec[slots], d)
        df = self.df[slots]
        return self.log_norm[slots] - 0.5 * (df + self.D) * np.log1p(q / df)

    def log_prior_predictive(self, x):
        loc, prec, df, log_norm = self.prior
        d = x - loc
        return log_norm - 0.5 * (df + self.D) * math.log1p(float(d @ prec @ d) / df)


class _KnownCov:
    """Per-slot statistics n, s1 (D,) and cached diagonal-normal predictive params."""

    def __init__(self, family, capacity):
        self.mu0 = np.asarray(family.mu0, float)
        self.sigma2 = np.asarray(family.sigma2, float)
        self.tau2 = np.asarray(family.tau2, float)
        D = self.mu0.shape[0]
        self.n = np.zeros(capacity)
        self.s1 = np.zeros((capacity, D))
        self.loc = np.zeros((capacity, D))
        self.prec = np.ones((capacity, D))
        self.log_norm = np.zeros(capacity)
        self.prior = self._params(0.0, np.zeros(D))

    def grow(self, capacity):
        extra = capacity - self.n.shape[0]
        self.n = np.concatenate([self.n, np.zeros(extra)])
        for name in ("s1", "loc", "log_norm"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros((extra,) + a.shape[1:])]))
        self.prec = np.concatenate([self.prec, np.ones((extra, self.prec.shape[1]))])

    def _params(self, n, s1):
        vn = 1.0 / (1.0 / self.tau2 + n / self.sigma2)
        mun = vn * (self.mu0 / self.tau2 + s1 / self.sigma2)
        var = vn + self.sigma2
        return mun, 1.0 / var, -0.5 * float(np.sum(np.log(2 * np.pi * var)))

    def refresh(self, k):
        self.loc[k], self.prec[k], self.log_norm[k] = self._params(self.n[k], self.s1[k])

    def add(self, k, x, xx, sign):
        self.n[k] += sign
        self.s1[k] += sign * x

    def log_predictive(self, x, slots):
        d = x - self.loc[slots]
        return self.log_norm[slots] - 0.5 * np.sum(self.prec[slots] * d * d, axis=1)

    def log_prior_predictive(self, x):
        loc, prec, log_norm = self.prior
        d = x - loc
        return log_norm - 0.5 * float(np.sum(prec * d * d))


class NumpyGibbs:
    """Collapsed Gibbs for a DP(alpha) mixture, one point at a time, in NumPy.

    Parameters
    ----------
    bound : dpppl.models.mixture.BoundModel
        A model bound to its data; its resolved family (``NormalInverseWishart`` or
        ``NormalKnownCov``) gives the hyperparameters, so the target is dpppl's.
    labels : array of int (N,)
        Initial labels.
    seed : int
        Seed of the NumPy generator (visiting order and uniforms).
    """

    def __init__(self, bound, labels, seed=0):
        fam = bound.family
        name = type(fam).__name__
        if bound.prior.discount != 0 or bound.prior.alpha_is_random:
            raise ValueError("the NumPy reference covers the DP with a fixed alpha only")
        self.alpha = float(bound.prior.initial_alpha)
        self.x = np.asarray(bound.x, float)
        self.xx = self.x[:, :, None] * self.x[:, None, :] if name == "NormalInverseWishart" else None
        self.rng = np.random.default_rng(seed)
        _, z = np.unique(np.asarray(labels), return_inverse=True)
        capacity = int(z.max()) + 9
        if name == "NormalInverseWishart":
            self.fam = _NIW(fam, capacity)
        elif name == "NormalKnownCov":
            self.fam = _KnownCov(fam, capacity)
        else:
            raise ValueError(f"no NumPy reference for {name}")
        self.z = z.astype(np.int64)
        for i in range(self.x.shape[0]):
            self.fam.add(self.z[i], self.x[i], None if self.xx is None else self.xx[i], 1.0)
        for k in range(capacity):
            self.fam.refresh(k)

    def sweep(self):
        """One pass over all points in a fresh random order."""
        fam, x, xx, z = self.fam, self.x, self.xx, self.z
        log_alpha = math.log(self.alpha)
        order = self.rng.permutation(x.shape[0])
        uniforms = self.rng.random(x.shape[0])
        for t, i in enumerate(order):
            xi = x[i]
            xxi = None if xx is None else xx[i]
            old = z[i]
            fam.add(old, xi, xxi, -1.0)
            fam.refresh(old)
            occupied = np.flatnonzero(fam.n > 0.5)
            logits = np.empty(occupied.size + 1)
            logits[:-1] = np.log(fam.n[occupied]) + fam.log_predictive(xi, occupied)
            logits[-1] = log_alpha + fam.log_prior_predictive(xi)
            p = np.exp(logits - logits.max())
            c = np.cumsum(p)
            j = int(np.searchsorted(c, uniforms[t] * c[-1], side="right"))
            if j < occupied.size:
                k = occupied[j]
            else:
                empty = np.flatnonzero(fam.n < 0.5)
                if empty.size == 0:
                    fam.grow(2 * fam.n.shape[0])
                    empty = np.flatnonzero(fam.n < 0.5)
                k = empty[0]
            fam.add(k, xi, xxi, 1.0)
            fam.refresh(k)
            z[i] = k
        return z

    @property
    def num_clusters(self) -> int:
        return int(np.sum(self.fam.n > 0.5))
