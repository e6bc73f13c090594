"""Prior simulation (dpppl.simulate) against its expectations and the EPPF."""


import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from scipy import stats

import dpppl
from dpppl.simulate import expected_num_clusters
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import canonical, set_partitions


# ------------------------------------------------------------ prior simulation ---
def _z_score(values, expected):
    return abs(values.mean() - expected) / (values.std(ddof=1) / np.sqrt(values.size))


def _rising(a, n):
    return np.prod(a + np.arange(n))


@pytest.mark.parametrize("discount, alpha, n", [(0.0, 1.5, 40), (0.5, 1.0, 30), (0.25, -0.2, 25)])
def test_prior_number_of_clusters_matches_its_expectation(discount, alpha, n):
    model = dpppl.PitmanYorMixture(discount, alpha, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=1.0))
    if discount == 0:
        closed = sum(alpha / (alpha + i - 1) for i in range(1, n + 1))
    else:   # Pitman (2006), eq. 3.13
        closed = alpha / discount * (_rising(alpha + discount, n) / _rising(alpha, n) - 1)
    assert expected_num_clusters(model.prior, n) == pytest.approx(closed, rel=1e-10)
    k = np.asarray(group(dpppl.sample_prior(model, n, num_samples=3000, seed=7), "prior")["num_clusters"])
    assert _z_score(k.ravel(), closed) < 4.0   # |z| > 4 has probability 6e-5 for a correct sampler


def test_prior_partition_law_matches_the_eppf():
    prior = dpppl.PitmanYor(0.3, 0.8)
    model = dpppl.PitmanYorMixture(0.3, 0.8, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=1.0))
    parts = set_partitions(4)
    counts = np.stack([np.bincount(p, minlength=4) for p in parts]).astype(float)
    p_exact = np.exp([float(prior.log_eppf(c, 0.8)) for c in counts])
    assert p_exact.sum() == pytest.approx(1.0)
    assert float(p_exact @ (counts > 0).sum(1)) == pytest.approx(expected_num_clusters(prior, 4))
    z = np.asarray(partition_group(dpppl.sample_prior(model, 4, num_samples=4000, seed=3), "prior")["z"])[0]
    observed = np.bincount(np.searchsorted(parts @ 4 ** np.arange(3, -1, -1),
                                           canonical(z) @ 4 ** np.arange(3, -1, -1)), minlength=len(parts))
    assert stats.chisquare(observed, p_exact * z.shape[0]).pvalue > 1e-4


def test_prior_with_random_alpha_and_simulated_data():
    model = dpppl.DPMixture(dpppl.Gamma(2.0, 1.0), dpppl.NormalKnownCov(sigma2=0.5, mu0=1.0, tau2=2.0))
    idata = dpppl.sample_prior(model, 20, num_samples=3000, seed=11, dim=2)
    prior, x = group(idata, "prior"), np.asarray(group(idata, "prior_predictive")["x"])
    assert x.shape == (1, 3000, 20, 2)
    assert _z_score(np.asarray(prior["alpha"]).ravel(), 2.0) < 4.0
    assert _z_score(np.asarray(prior["num_clusters"]).ravel(), expected_num_clusters(model.prior, 20)) < 4.0
    # each point is x = mu + e with mu ~ N(1, 2), e ~ N(0, 0.5): mean 1, variance 2.5
    first = x[0, :, 0, :].ravel()
    assert _z_score(first, 1.0) < 4.0
    assert abs(first.var() - 2.5) < 4 * 2.5 * np.sqrt(2 / first.size) * 1.5


def test_prior_needs_data_for_data_dependent_hyperparameters():
    model = dpppl.load("models/gaussian_niw.dp")
    assert "prior_predictive" not in dpppl.sample_prior(model, 5, num_samples=10).groups()
    with pytest.raises(dpppl.ModelError, match="depend on the data"):
        dpppl.sample_prior(model, 5, num_samples=10, dim=2)
    x, _ = dpppl.datasets.load("galaxies")
    idata = dpppl.sample_prior(model, 7, num_samples=10, data=x)
    assert np.asarray(group(idata, "prior_predictive")["x"]).shape == (1, 10, 7, 1)



def test_prior_data_of_a_non_conjugate_family_and_integer_counts():
    """NormalLogNormal draws (mu, log sigma) from its prior: x = mu + sigma e has mean m0 and
    variance s0^2 + E[sigma^2] = s0^2 + exp(2 l0 + 2 t0^2). Counts are stored as integers
    summing to the trials."""
    model = dpppl.DPMixture(1.0, dpppl.NormalLogNormal(m0=3.0, s0=1.0, l0=-0.5, t0=0.3))
    x = np.asarray(group(dpppl.sample_prior(model, 5, num_samples=4000, seed=2, dim=1), "prior_predictive")["x"])
    first = x[0, :, 0, 0]
    assert _z_score(first, 3.0) < 4.0
    variance = 1.0 + np.exp(-1.0 + 2 * 0.09)
    assert abs(first.var() - variance) < 4 * np.std((first - first.mean()) ** 2) / np.sqrt(first.size)
    counts = np.asarray(group(dpppl.sample_prior("models/multinomial.dp", 6, num_samples=5, num_trials=9,
                                                 data=np.eye(3) * 4), "prior_predictive")["x"])
    assert counts.dtype == np.int64 and np.all(counts.sum(-1) == 9)
