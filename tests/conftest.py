"""Shared fixtures: small data sets and models. JAX runs on the CPU in float64."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One compilation cache for the session's workers (and their subprocesses): tests that
# sample the same model on the same data compile it once.
os.environ.setdefault("DPPPL_COMPILATION_CACHE", os.path.join(tempfile.gettempdir(), "dpppl-test-xla-cache"))

import numpy as np
import pytest

import dpppl


@pytest.fixture(scope="session")
def two_blobs():
    """30 points in 2-D, two well separated groups, and their labels."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-3, 1, (15, 2)), rng.normal(3, 1, (15, 2))])
    return x, np.repeat([0, 1], 15)


@pytest.fixture(scope="session")
def niw_model():
    return dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), dpppl.NormalInverseWishart(
        mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2)))
