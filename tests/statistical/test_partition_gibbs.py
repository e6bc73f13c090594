"""The composed kernel (dpppl.PartitionGibbs: NUTS on a regression coefficient, a dpppl
partition kernel on the partition of its DP-mixture errors) against the exact joint posterior
of (beta, partition), and Geweke joint-distribution tests with deliberately wrong kernels
rejected (dpppl.testing.composed).

The exact answer is closed form (beta and every cluster mean integrate out of a Gaussian
model), computed over every set partition; the densities the kernel runs on are checked
against it by quadrature over beta. Draws of independent chains (NumPyro's MCMC vectorised
over chains) are compared with it at thresholds from the across-chain Monte Carlo error
(DESIGN.md sec. 6), family-wise false-alarm rate 1e-3.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import log_density

import dpppl
from dpppl.testing import scale_concentration
from dpppl.testing.composed import (check_regression_samples, exact_regression_posterior, geweke_regression,
                                    regression_model)

NKC = dpppl.NormalKnownCov(sigma2=0.3, mu0=0.0, tau2=2.0)
BETA_SD = 1.5
# x, y: two groups of residuals around y = 1.5 x, so the partition posterior is spread over K = 1..4
CASES = {
    "dp_5": (dpppl.DPMixture(1.0, NKC), np.array([-1.2, -0.4, 0.3, 0.9, 1.6]), np.array([-2.9, -1.3, 1.4, 0.3, 3.3])),
    "dp_6": (dpppl.DPMixture(1.0, NKC), np.array([-1.2, -0.5, 0.3, 0.8, 1.5, 2.0]),
             np.array([-2.9, -1.1, 1.4, 0.4, 1.2, 3.9])),
    "pitman_yor_6": (dpppl.PitmanYorMixture(0.25, 0.8, NKC), np.array([-1.2, -0.5, 0.3, 0.8, 1.5, 2.0]),
                     np.array([-2.9, -1.1, 1.4, 0.4, 1.2, 3.9])),
}


def test_the_densities_integrate_to_the_closed_form():
    """Quadrature over beta of the model's log density (Partition + CollapsedMixture sites) gives
    the closed-form p(C | y) and E[beta | y]."""
    mixture, x, y = CASES["dp_6"]
    exact = exact_regression_posterior(mixture, BETA_SD, x, y)
    model = regression_model(mixture, BETA_SD)
    sd = np.sqrt(exact.beta_var)
    grid = jnp.linspace(exact.beta_mean - 12 * sd, exact.beta_mean + 12 * sd, 4001)
    args = (jnp.asarray(x), jnp.asarray(y))
    dens = jax.jit(jax.vmap(jax.vmap(lambda b, z: log_density(model, args, {}, {"beta": b, "resid_labels": z})[0],
                                     (0, None)), (None, 0)))(grid, jnp.asarray(exact.partition.partitions))
    log_p = jax.scipy.special.logsumexp(dens, axis=1)
    np.testing.assert_allclose(log_p - jax.scipy.special.logsumexp(log_p), exact.partition.log_prob, atol=1e-9)
    weights = np.exp(np.asarray(dens - jax.scipy.special.logsumexp(dens))).sum(axis=0)
    assert float(weights @ np.asarray(grid)) == pytest.approx(exact.beta_mean, abs=1e-9)


def _draws(case, kernel, *, num_chains, num_warmup, num_samples, seed=0, **options):
    mixture, x, y = CASES[case]
    composed = dpppl.PartitionGibbs(NUTS(regression_model(mixture, BETA_SD)), kernel, **options)
    mcmc = MCMC(composed, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                chain_method=jax.vmap, progress_bar=False)
    mcmc.run(jax.random.key(seed), jnp.asarray(x), jnp.asarray(y))
    labels = mcmc.get_extra_fields(group_by_chain=True)["labels"]  # the labels: a field of the state
    return np.asarray(labels["resid_labels"]), np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])


# the default run: 24 chains x 400 draws give ESS about 2,000 for beta's checks and 8,000 for the
# partition law (most of its time is compiling NUTS)
@pytest.mark.parametrize("case, kernel, num_chains, num_samples", [
    ("dp_5", "gibbs", 24, 400),
    pytest.param("dp_6", "gibbs+splitmerge", 32, 800, marks=pytest.mark.slow),
    pytest.param("dp_6", "subcluster", 32, 800, marks=pytest.mark.slow),
    pytest.param("pitman_yor_6", "gibbs+splitmerge", 32, 800, marks=pytest.mark.slow),
])
def test_composed_kernel_matches_the_exact_joint_posterior(case, kernel, num_chains, num_samples):
    mixture, x, y = CASES[case]
    exact = exact_regression_posterior(mixture, BETA_SD, x, y)
    labels, beta = _draws(case, kernel, num_chains=num_chains, num_warmup=100, num_samples=num_samples)
    result = check_regression_samples(exact, labels, beta)
    assert result.passed, result.report
    # the check has power: it rejects the coefficient's draws shifted by 0.3 posterior sd
    shifted = check_regression_samples(exact, labels, beta + 3 * np.sqrt(exact.beta_var) / 10)
    assert not shifted.passed, shifted.report


MIXTURE = dpppl.DPMixture(1.0, dpppl.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0))
X = np.linspace(-1.5, 1.5, 8)


def test_geweke_composed_kernel_leaves_the_joint_invariant():
    result = geweke_regression(MIXTURE, 1.0, X, "gibbs", seed=1)
    assert result.passed, result.report


@pytest.mark.slow
@pytest.mark.parametrize("kernel, mixture", [
    ("gibbs+splitmerge", MIXTURE),
    ("gibbs", dpppl.DPMixture(dpppl.Gamma(2.0, 2.0), MIXTURE.component)),  # alpha moved by NUTS
])
def test_geweke_other_composed_kernels(kernel, mixture):
    result = geweke_regression(mixture, 1.0, X, kernel, seed=2)
    assert result.passed, result.report


@pytest.mark.parametrize("wrong", [
    {"kernel_mixture": scale_concentration(MIXTURE, 1.5)},   # the partition step's EPPF
    pytest.param({"kernel_beta_sd": 1.5}, marks=pytest.mark.slow),  # NUTS on a wrong potential
], ids=["wrong_partition_step", "wrong_nuts_potential"])
def test_geweke_rejects_a_wrong_composed_kernel(wrong):
    result = geweke_regression(MIXTURE, 1.0, X, "gibbs", seed=1, **wrong)
    assert not result.passed, result.report
