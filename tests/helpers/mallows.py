"""Generalized Mallows helpers shared by the family, draws, rankings and exactness tests."""


import numpy as np

from dpppl.families.generalized_mallows import (GeneralizedMallows)
MODEL_TEXT = """
data r : ranking[N] of n
alpha = 1.0
z ~ CRP(alpha)
theta[k] ~ MallowsPrior(nu = 1, r = 1)
r[i] ~ GeneralizedMallows(theta[z[i]])
"""


def np_log_psi(theta, m):
    """log psi_m(theta) in numpy, for scipy integrands (the JAX one is tested against it)."""
    return np.log(np.sum(np.exp(-theta * np.arange(m + 1))))


def family(n, nu=1.0, r=1.0):
    return GeneralizedMallows(n, nu, r).resolve(np.zeros((1, n)))


def padded(rows, n):
    return np.array([list(r) + [-1] * (n - len(r)) for r in rows], dtype=float)

