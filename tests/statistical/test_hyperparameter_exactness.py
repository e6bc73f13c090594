"""Random hyperparameters of the base measure against enumeration (issue 31, DESIGN.md section 6).

On five points the joint posterior of the partition and one or two random hyperparameters is known:
every set partition is enumerated and the hyperparameters integrated out by quadrature (a product grid
for two)
(`dpppl.testing.exact_posterior`). The kernels that sample such models (`HYPERPARAMETER_KERNELS`,
with the move of `dpppl.kernels.hyperparameters` appended: the slice update, the default, or
Escobar & West's conjugate route, `hyper_move="conjugate"`) must match P(K = k), the co-clustering, the
partition law and E[h] within Monte Carlo error; a run whose hyperprior is ignored (replaced by a
vague one) must be rejected.
"""

import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import check_kernel_samples, exact_posterior
from dpppl.testing.geweke import geweke_test

NUM_CHAINS, NUM_WARMUP, NUM_SAMPLES = 64, 100, 500
X = np.array([2.1, 2.5, 3.0, 4.4, 4.9])
TEMPLATE = """data x : real[N]
{priors}
z ~ CRP({alpha})
theta[k] ~ NormalInverseWishart(mu0 = {mu0}, kappa0 = {kappa0}, nu0 = 3, psi0 = {psi0})
x[i] ~ Normal(theta[z[i]])
"""
KNOWN = """data x : real[N]
{priors}
z ~ CRP({alpha})
theta[k] ~ Normal(mu0 = {mu0}, tau2 = 2)
x[i] ~ Normal(theta[z[i]], sigma2 = 0.5)
"""
CASES = {  # a random prior mean (real line) under a fixed alpha; a random kappa0 (log scale) beside alpha's move
    "mean": dict(priors="m ~ Normal(0, 1)", alpha="1.0", mu0="m", kappa0="0.5"),
    "kappa0": dict(priors="t ~ Gamma(2, 2)\nalpha ~ Gamma(1, 1)", alpha="alpha", mu0="3", kappa0="t"),
    # NormalKnownCov's mean (its Normal conditional given the clusters' means)
    "known": dict(priors="m ~ Normal(0, 1)\nalpha ~ Gamma(1, 1)", alpha="alpha", mu0="m"),
    # two at once: the prior mean and kappa0, integrated on a 201 x 201 grid
    "two": dict(priors="m ~ Normal(0, 1)\nt ~ Gamma(2, 2)", alpha="1.0", mu0="m", kappa0="t"),
    # the scale psi0 = s (the matrix s I) with a Gamma prior: its Gamma conditional given the Sigma_c
    "scale": dict(priors="s ~ Gamma(2, 2)", alpha="1.0", mu0="3", kappa0="0.5", psi0="s"),
}
NAMES = {"mean": ("m",), "kappa0": ("t",), "known": ("m",), "two": ("m", "t"), "scale": ("s",)}


def model(case: str, **change) -> dpppl.Model:
    return dpppl.parse((KNOWN if case == "known" else TEMPLATE).format(**{"psi0": "1", **CASES[case], **change}))


@pytest.fixture(scope="module")
def exact():
    cache = {}

    def get(case):
        if case not in cache:
            cache[case] = exact_posterior(model(case), X)
        return cache[case]
    return get


def check(kernel: str, case: str, exact_post, sampled: dpppl.Model = None, seed: int = 0, *, hyper_move: str):
    idata = dpppl.sample(sampled or model(case), X, kernel=kernel, num_warmup=0, num_samples=NUM_WARMUP + NUM_SAMPLES,
                         num_chains=NUM_CHAINS, seed=seed, init="prior", progress_bar=False,
                         log_likelihood=False, hyper_move=hyper_move)
    post = group(idata, "posterior")
    alpha = post["alpha"].values[:, NUM_WARMUP:] if "alpha" in post else None
    return check_kernel_samples(exact_post, partition_group(idata)["z"].values[:, NUM_WARMUP:], alpha=alpha,
                                hyper={name: post[name].values[:, NUM_WARMUP:] for name in NAMES[case]})


@pytest.mark.parametrize("kernel, case, hyper_move", [
    ("gibbs", "mean", "conjugate"),
    ("gibbs", "mean", "slice"),
    pytest.param("gibbs", "kappa0", "conjugate", marks=pytest.mark.slow),
    pytest.param("gibbs", "kappa0", "slice", marks=pytest.mark.slow),
    pytest.param("gibbs+splitmerge", "mean", "conjugate", marks=pytest.mark.slow),
    ("gibbs+splitmerge", "kappa0", "conjugate"),
    pytest.param("gibbs+splitmerge", "kappa0", "slice", marks=pytest.mark.slow),
    pytest.param("perm", "mean", "conjugate", marks=pytest.mark.slow),
    ("gibbs", "known", "conjugate"),
    pytest.param("gibbs", "known", "slice", marks=pytest.mark.slow),
    ("gibbs", "scale", "conjugate"),
    pytest.param("gibbs", "scale", "slice", marks=pytest.mark.slow),
    pytest.param("gibbs", "two", "slice", marks=pytest.mark.slow),
    pytest.param("gibbs", "two", "conjugate", marks=pytest.mark.slow),
    pytest.param("gibbs+splitmerge", "two", "slice", marks=pytest.mark.slow),
])
def test_kernels_with_random_hyperparameters_match_enumeration(kernel, case, hyper_move, exact):
    """The conjugate route (m's Normal, kappa0's and psi0's Gamma and NormalKnownCov's mean's Normal
    conditional) and the slice update both match the enumerated posterior."""
    result = check(kernel, case, exact(case), hyper_move=hyper_move)
    assert result.passed, result.report


@pytest.mark.parametrize("hyper_move", ["conjugate", pytest.param("slice", marks=pytest.mark.slow)])
def test_a_run_that_ignores_the_hyperprior_is_rejected(hyper_move, exact):
    """The power check: the same kernel on the model with m's Normal(0, 1) prior replaced by a vague
    Normal(0, 1000) (what a move that leaves the hyperprior out of its target samples) is rejected
    against the exact posterior under Normal(0, 1), and the mean of m is what fails."""
    result = check("gibbs", "mean", exact("mean"), sampled=model("mean", priors="m ~ Normal(0, 1000)"),
                   hyper_move=hyper_move)
    assert not result.passed, result.report
    failed = {c.name for c in result.checks if not c.passed}
    assert "E[m]" in failed, result.report


VECTOR = """data x : real[N, 2]
m1 ~ Normal(0, 2)
m2 ~ Normal(1, 3)
z ~ CRP(1.0)
theta[k] ~ NormalInverseWishart(mu0 = [m1, m2], kappa0 = 0.5, nu0 = 4, psi0 = 1)
x[i] ~ Normal(theta[z[i]])
"""
X2 = np.array([[0.3, 1.0], [0.5, 1.4], [2.0, -1.0], [2.2, -0.7], [4.0, 0.1]])


@pytest.mark.parametrize("hyper_move", ["conjugate", pytest.param("slice", marks=pytest.mark.slow)])
def test_a_vector_mean_matches_enumeration_on_two_dimensional_data(hyper_move):
    """A vector prior mean `mu0 = [m1, m2]` of per-dimension Normal hyperparameters on five 2-D points:
    Escobar & West's route draws (m1, m2) jointly from their bivariate Normal conditional given the
    clusters' means, the slice update moves each in turn; both match P(K), the partition law and
    E[m1], E[m2] of the enumeration (the two integrated on a 201 x 201 grid)."""
    model_2d = dpppl.parse(VECTOR)
    idata = dpppl.sample(model_2d, X2, kernel="gibbs", num_warmup=0, num_samples=NUM_WARMUP + NUM_SAMPLES,
                         num_chains=NUM_CHAINS, seed=0, init="prior", progress_bar=False,
                         log_likelihood=False, hyper_move=hyper_move)
    post = group(idata, "posterior")
    result = check_kernel_samples(exact_posterior(model_2d, X2), partition_group(idata)["z"].values[:, NUM_WARMUP:],
                                  hyper={name: post[name].values[:, NUM_WARMUP:] for name in ("m1", "m2")})
    assert result.passed, result.report


GEWEKE = """data x : real[N]
m ~ Normal(0, 1)
t ~ Gamma(2, 2)
z ~ CRP(1.0)
theta[k] ~ NormalInverseWishart(mu0 = m, kappa0 = t, nu0 = 3, psi0 = 1)
x[i] ~ Normal(theta[z[i]])
"""


@pytest.mark.slow  # about a minute each; the enumeration tests above check the move by default
@pytest.mark.parametrize("hyper_move", ["conjugate", "slice"])
@pytest.mark.parametrize("wrong", [False, True], ids=["move", "power"])
def test_geweke_joint_distribution_of_the_hyperparameter_move(wrong, hyper_move):
    """Geweke's test on twelve points with m and t random: forward draws of (m, t, z, x) against chains
    of gibbs with the hyperparameter move (Escobar & West's conjugate route or the slice update), the
    data redrawn at the state's m and t (`dpppl.testing.geweke`). With
    the move built on a model whose m prior is Normal(0, 1000) instead (a move that ignores m's prior)
    the test fails: m wanders in both directions (its chains' mean stays near 0, with a spread a hundred
    times the forward draws'), so its square fails, and often the data's location, which follows m."""
    model = dpppl.parse(GEWEKE)
    kernel_model = dpppl.parse(GEWEKE.replace("m ~ Normal(0, 1)", "m ~ Normal(0, 1000)")) if wrong else None
    result = geweke_test(model, "gibbs", 12, 1, seed=3, kernel_model=kernel_model, hyper_move=hyper_move)
    if not wrong:
        assert result.passed, result.report
        assert "h:m" in result.names and "h:t" in result.names
    else:
        assert not result.passed, result.report
        failed = {name for name, t in zip(result.names, result.t) if abs(t) > result.threshold}
        assert failed & {"h:m^2", "positive_share", "tanh_mean"}, result.report


def test_enumeration_integrates_one_or_two_random_hyperparameters():
    """On the product grid, a second hyperparameter whose prior is a near point mass (t ~ Gamma(10^4, 2 10^4):
    mean 0.5, sd 0.005) gives the posterior of the model with t fixed at 0.5 (the "mean" case, one grid):
    P(K) and E[m] within what t's spread moves them, and E[t] its prior's mean. Three are refused."""
    near = exact_posterior(model("two", priors="m ~ Normal(0, 1)\nt ~ Gamma(10000, 20000)"), X)
    one = exact_posterior(model("mean"), X)
    np.testing.assert_allclose(near.p_num_clusters, one.p_num_clusters, atol=1e-4)
    assert near.hyper_mean["m"] == pytest.approx(one.hyper_mean["m"], abs=1e-3)
    assert near.hyper_mean["t"] == pytest.approx(0.5, abs=1e-3) and near.hyper_sd["t"] < 0.01
    three = model("two", priors="m ~ Normal(0, 1)\nt ~ Gamma(2, 2)\ns ~ Gamma(2, 2)", kappa0="t * s")
    with pytest.raises(ValueError, match="exact_posterior: integrates one or two random hyperparameters, the model "
                                         "has 3"):
        exact_posterior(three, X)
