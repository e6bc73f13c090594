"""A random Pitman-Yor discount (issue 31): the EPPF at a traced discount, the collapsed `lp` at the
state's d, the moves a kernel appends, and the kernels that refuse it. Enumeration checks are in
tests/statistical/test_discount_exactness.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from numpyro.infer import Predictive

import dpppl
from dpppl.diagnostics.arviz_compat import group
from dpppl.errors import ArgumentError, KernelError
from dpppl.priors import PitmanYor
from dpppl.run.portable import Reader, Writer
from dpppl.simulate import expected_num_clusters

X = np.array([[0.3, 1.0], [0.5, 1.4], [2.0, -1.0], [2.2, -0.7], [4.0, 0.1]])
RANDOM = """data x : real[N, D]
d ~ Beta(2, 3)
alpha ~ Gamma(1, 1)
z ~ PitmanYor(discount = d, alpha = alpha)
theta[k] ~ NormalInverseWishart(mu0 = 0, kappa0 = 0.3, nu0 = 4, psi0 = 1)
x[i] ~ Normal(theta[z[i]])
"""


@pytest.mark.parametrize("d", [0.0, 0.3, 0.9])
def test_the_eppf_at_a_traced_discount_is_the_eppf_at_that_number(d):
    """The term-by-term product of (alpha + j d) used at a traced discount equals the closed form of a
    fixed one (gammaln(alpha / d + K)), and `log_eppf_change` equals the difference of two EPPFs."""
    counts = jnp.array([3.0, 0.0, 1.0, 2.0, 0.0, 1.0])
    new = jnp.array([3.0, 0.0, 1.0, 0.0, 2.0, 1.0])  # one cluster moved: K the same
    merged = jnp.array([4.0, 0.0, 0.0, 2.0, 0.0, 1.0])  # two merged: K - 1
    random = PitmanYor(discount="d", alpha=1.5)
    traced = jax.jit(lambda v, c: random.at_discount(v).log_eppf(c, 1.5))
    fixed = PitmanYor(discount=d, alpha=1.5)
    assert random.at_discount(d).random_discount == "d"
    np.testing.assert_allclose(traced(jnp.asarray(d), counts), fixed.log_eppf(counts, 1.5), rtol=1e-12)
    for rows in (new, merged):
        change = jax.jit(lambda v: random.at_discount(v).log_eppf_change(counts, rows, counts, 1.5))(jnp.asarray(d))
        np.testing.assert_allclose(change, fixed.log_eppf(rows, 1.5) - fixed.log_eppf(counts, 1.5), atol=1e-12)


def test_the_eppf_at_a_tiny_traced_discount_keeps_its_digits():
    """At d = 1e-12 the EPPF is the DP's to within 1e-10 (it differs by O(d)); the closed form
    gammaln(alpha / d + K) - gammaln(alpha / d + 1) of a fixed d loses those digits (the slice move
    visits such values under a Beta prior, so the traced form sums the logs)."""
    counts = jnp.array([3.0, 0.0, 1.0, 2.0, 0.0, 1.0])
    tiny = PitmanYor(discount="d", alpha=1.5).at_discount(jnp.asarray(1e-12)).log_eppf(counts, 1.5)
    np.testing.assert_allclose(tiny, PitmanYor(discount=0.0, alpha=1.5).log_eppf(counts, 1.5), atol=1e-10)


def test_lp_at_a_discount_is_the_fixed_models_lp_plus_the_prior_density():
    """`lp` of a state whose d is 0.4 is the model with discount 0.4 fixed plus log Beta(0.4; 2, 3); the
    kernel appends alpha's move, then d's, then the hyperparameter move that records d."""
    model = dpppl.parse(RANDOM)
    assert model.prior.random_discount == "d" and list(model.hyperpriors) == ["d"]
    bound = model.bind(X)
    assert float(bound.prior.discount) == pytest.approx(stats.beta(2, 3).median())  # the chains' start
    fixed = dpppl.parse(RANDOM.replace("discount = d", "discount = 0.4").replace("d ~ Beta(2, 3)\n", "")).bind(X)
    labels = np.array([0, 0, 1, 1, 2])
    state = bound.state_from_labels(None, labels, 6)
    state = state._replace(hyper={"d": jnp.asarray(0.4)}, alpha=jnp.asarray(0.7))
    # each lp one compiled program, as a kernel runs it (op by op, a fresh process compiles ~50 small ones each)
    expected = jax.jit(fixed.lp)(fixed.state_from_labels(None, labels, 6)._replace(alpha=jnp.asarray(0.7)))
    np.testing.assert_allclose(jax.jit(bound.lp)(state), expected + stats.beta(2, 3).logpdf(0.4), rtol=1e-12)
    kernel = dpppl.kernels.build("gibbs+splitmerge", bound)
    assert [part.name for part in kernel.parts][-3:] == ["alpha", "discount", "hyperparameters"]


@pytest.mark.parametrize("kernel, part", [("perm", "perm-every"), ("gibbs+perm-move", "perm-move"),
                                          ("subcluster", "subcluster")])
def test_kernels_that_run_at_a_fixed_discount_refuse_a_random_one(kernel, part):
    with pytest.raises(KernelError, match=f"kernel '{part}' does not apply to this model: the random discount 'd' is "
                                          r"sampled beside gibbs and splitmerge \(their hybrids too\) or by nuts; "
                                          f"{part} runs at a fixed discount"):
        dpppl.kernels.build(kernel, dpppl.parse(RANDOM).bind(X))


def test_the_compiled_model_draws_the_discount_and_the_sticks_at_it():
    """`Predictive` of the compiled model draws d from its prior and the sticks v_k ~ Beta(1 - d, alpha + k d)
    at the drawn d: E[v_1] = (1 - E[d]) / (1 + alpha) within 4 standard errors, and v_1 falls as d grows
    (cov(d, v_1) = -var(d) / (1 + alpha)); a checkpoint's plain data
    give the model back with its random discount."""
    model = dpppl.parse(RANDOM.replace("alpha = alpha", "alpha = 1.5").replace("alpha ~ Gamma(1, 1)\n", ""))
    num = 2000
    draws = Predictive(model.numpyro_model(3), num_samples=num)(jax.random.key(3), None, num_points=2, dim=2)
    d, v1 = np.asarray(draws["d"]), np.asarray(draws["v"])[:, 0]
    law = stats.beta(2, 3)
    assert abs(d.mean() - law.mean()) < 4 * law.std() / np.sqrt(num)
    assert abs(v1.mean() - (1 - law.mean()) / 2.5) < 4 * v1.std() / np.sqrt(num)
    assert np.corrcoef(d, v1)[0, 1] < -0.15  # about -0.32 at the drawn d; 0 (+- 0.02) at a fixed one
    writer = Writer()
    back = Reader(writer.arrays).value(writer.describe(model))
    assert back.prior.random_discount == "d" and back.hyperpriors == model.hyperpriors


def test_sample_prior_draws_the_discount_and_the_partition_at_it():
    """`dpppl.sample_prior` records d under its name, drawn from its prior (mean within 4 standard errors),
    and draws each partition at its own d: K grows with d (a correlation near 0.6 at these sizes; near 0,
    +- 0.03, were the partitions drawn at one d)."""
    num = 1000
    prior = group(dpppl.sample_prior(dpppl.parse(RANDOM), 30, num_samples=num, dim=2), "prior")
    d, k = prior["d"].values.ravel(), prior["num_clusters"].values.ravel()
    law = stats.beta(2, 3)
    assert abs(d.mean() - law.mean()) < 4 * law.std() / np.sqrt(num)
    assert np.corrcoef(d, k)[0, 1] > 0.3


def test_the_expected_number_of_clusters_needs_a_value_of_a_random_discount():
    prior = dpppl.parse(RANDOM).prior
    with pytest.raises(ArgumentError, match=r"expected_num_clusters: the discount 'd' of PitmanYor\(discount=d, "
                                            r"alpha=Gamma\(shape=1.0, rate=1.0\)\) is random; give the prior at a "
                                            r"value of it, prior.at_discount\(d\)"):
        expected_num_clusters(prior, 10)
    assert expected_num_clusters(prior.at_discount(0.0), 10) == pytest.approx(
        expected_num_clusters(PitmanYor(discount=0.0, alpha=prior.alpha), 10))
