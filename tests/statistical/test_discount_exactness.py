"""A random Pitman-Yor discount against enumeration (issue 31, DESIGN.md section 6).

On five points the joint posterior of the partition and the discount d is known: every set partition
is enumerated and d integrated out of the EPPF on a grid (`dpppl.testing.exact_posterior`). The
kernels that run at a random discount (`DISCOUNT_KERNELS`, with the discount move of
`dpppl.kernels.discount` appended) must match P(K = k), the co-clustering, the partition law and E[d]
within Monte Carlo error; a run whose discount prior is ignored (replaced by a flat one) must be
rejected.
"""

import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import check_kernel_samples, exact_posterior

NUM_CHAINS, NUM_WARMUP, NUM_SAMPLES = 64, 100, 500
X = np.array([2.1, 2.5, 3.0, 4.4, 4.9])
MODEL = """data x : real[N]
d ~ {prior}
z ~ PitmanYor(discount = d, alpha = 0.5)
theta[k] ~ NormalInverseWishart(mu0 = 3, kappa0 = 0.5, nu0 = 3, psi0 = 1)
x[i] ~ Normal(theta[z[i]])
"""
PRIOR = "Beta(1, 4)"
"""d's prior: mean 0.2, so a flat prior's draws (mean near 0.5) are far from it."""


@pytest.fixture(scope="module")
def exact():
    return exact_posterior(dpppl.parse(MODEL.format(prior=PRIOR)), X)


def check(kernel: str, exact_post, prior: str = PRIOR, seed: int = 0):
    idata = dpppl.sample(dpppl.parse(MODEL.format(prior=prior)), X, kernel=kernel, num_warmup=0,
                         num_samples=NUM_WARMUP + NUM_SAMPLES, num_chains=NUM_CHAINS, seed=seed, init="prior",
                         progress_bar=False, log_likelihood=False)
    post = group(idata, "posterior")
    return check_kernel_samples(exact_post, partition_group(idata)["z"].values[:, NUM_WARMUP:],
                                hyper={"d": post["d"].values[:, NUM_WARMUP:]})


@pytest.mark.parametrize("kernel", ["gibbs", pytest.param("gibbs+splitmerge", marks=pytest.mark.slow)])
def test_kernels_with_a_random_discount_match_enumeration(kernel, exact):
    result = check(kernel, exact)
    assert result.passed, result.report


@pytest.mark.slow
def test_a_run_that_ignores_the_discount_prior_is_rejected(exact):
    """The power check: gibbs on the model with d's Beta(1, 4) prior replaced by Uniform(0, 1) (what a
    move that leaves d's prior out of its target samples) is rejected against the exact posterior under
    Beta(1, 4), and the mean of d is what fails."""
    result = check("gibbs", exact, prior="Uniform(0, 1)")
    assert not result.passed, result.report
    assert "E[d]" in {c.name for c in result.checks if not c.passed}, result.report


JOINT = MODEL.replace("z ~", "alpha ~ Gamma(2, 4)\nz ~").replace("alpha = 0.5", "alpha = alpha")
"""The model with alpha random beside d: alpha's slice update conditions on the state's d."""


@pytest.mark.slow  # the enumeration integrates alpha at each of 201 values of d (about 30 s), then 64 chains
def test_a_random_discount_beside_a_random_alpha_matches_enumeration():
    """gibbs with alpha's move (the slice update on log alpha at the state's d) and d's move matches P(K),
    the partition law, E[alpha] and E[d] of the enumeration, where alpha is integrated per K at each d."""
    model = dpppl.parse(JOINT.format(prior=PRIOR))
    idata = dpppl.sample(model, X, kernel="gibbs", num_warmup=0, num_samples=NUM_WARMUP + NUM_SAMPLES,
                         num_chains=NUM_CHAINS, seed=0, init="prior", progress_bar=False, log_likelihood=False)
    post = group(idata, "posterior")
    result = check_kernel_samples(exact_posterior(model, X), partition_group(idata)["z"].values[:, NUM_WARMUP:],
                                  alpha=post["alpha"].values[:, NUM_WARMUP:],
                                  hyper={"d": post["d"].values[:, NUM_WARMUP:]})
    assert result.passed, result.report


@pytest.mark.slow  # about a minute: alpha's integrals at each d, twice
def test_the_joint_integral_of_alpha_and_d_reduces_to_the_fixed_alpha_one():
    """With alpha's prior a near point mass at 0.5 (Gamma(4 10^4, 8 10^4)), the enumeration that integrates
    alpha at each d gives the posterior of the model with alpha = 0.5: P(K) and E[d] within what alpha's
    spread moves them, and E[alpha] = 0.5."""
    near = exact_posterior(dpppl.parse(JOINT.format(prior=PRIOR).replace("Gamma(2, 4)", "Gamma(40000, 80000)")), X)
    fixed = exact_posterior(dpppl.parse(MODEL.format(prior=PRIOR)), X)
    np.testing.assert_allclose(near.p_num_clusters, fixed.p_num_clusters, atol=1e-4)
    assert near.hyper_mean["d"] == pytest.approx(fixed.hyper_mean["d"], abs=1e-4)
    assert near.alpha_mean == pytest.approx(0.5, abs=1e-3)


def test_enumeration_refuses_a_random_discount_beside_a_random_alpha_and_another_hyperparameter():
    three = dpppl.parse(JOINT.format(prior=PRIOR).replace("mu0 = 3", "mu0 = m").replace("z ~", "m ~ Normal(3, 1)\nz ~"))
    with pytest.raises(ValueError, match="exact_posterior: integrates a random discount beside a random alpha only "
                                         "when the discount is the model's one random hyperparameter"):
        exact_posterior(three, X)
