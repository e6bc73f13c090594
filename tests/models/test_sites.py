"""The partition and collapsed-mixture sites (dpppl.models.sites): densities against the
dpppl model's own log joint and the EPPF summed over every partition, gradients, prior
simulation, and the errors a user meets."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.distributions import constraints
from numpyro.infer import Predictive
from scipy import special, stats

import dpppl
from dpppl.errors import HyperparameterError, ModelError
from dpppl.models.sites import dp_sites
from dpppl.priors.hyperpriors import Hyperprior
from dpppl.testing import set_partitions

NKC = dpppl.NormalKnownCov(sigma2=0.5, mu0=0.0, tau2=4.0)
FAMILIES = {
    "normal_known": (NKC, None),
    "niw": (dpppl.NormalInverseWishart(mu0=[0.0, 0.0], kappa0=0.5, nu0=4.0, psi0=np.eye(2)), 2),
    "normal_gamma": (dpppl.NormalGamma(mu0=0.0, kappa0=0.5, a0=2.0, b0=1.0), 2),
    "dirichlet_multinomial": (dpppl.DirichletMultinomial(beta=0.5), 3),
    "beta_bernoulli": (dpppl.BetaBernoulli(a=0.5, b=1.5), 3),
}
LABELS = np.array([0, 0, 1, 1, 2, 0])


@pytest.mark.parametrize("prior", [dpppl.CRP(alpha=1.3), dpppl.PitmanYor(discount=0.3, alpha=0.8)],
                         ids=["crp", "pitman_yor"])
def test_partition_density_is_the_eppf_and_sums_to_one(prior):
    site = dpppl.Partition(prior, 5)
    parts = jnp.asarray(set_partitions(5))
    log_p = np.asarray(jax.jit(jax.vmap(site.log_prob))(parts))
    log_prob = jax.jit(site.log_prob)
    assert float(np.exp(special.logsumexp(log_p))) == pytest.approx(1.0, abs=1e-10)
    counts = np.stack([np.bincount(p, minlength=5) for p in set_partitions(5)]).astype(float)
    np.testing.assert_allclose(log_p, jax.jit(jax.vmap(lambda c: prior.log_eppf(c, prior.alpha)))(counts), rtol=1e-12)
    # relabelling a partition leaves its probability unchanged
    assert float(log_prob(jnp.array([2, 2, 0, 1, 0]))) == pytest.approx(float(log_prob(jnp.array([0, 0, 1, 2, 1]))))


def test_partition_draws_follow_the_eppf():
    site = dpppl.Partition(dpppl.CRP(alpha=0.7), 4)
    draws = np.asarray(jax.jit(lambda k: site.sample(k, (20000,)))(jax.random.key(0)))
    assert draws.shape == (20000, 4)
    first_seen = np.array([np.array_equal(dpppl.testing.canonical(d), d) for d in draws[:200]])
    assert first_seen.all()  # canonical labels
    index = dpppl.testing.partition_index(draws, 4)
    freq = np.bincount(index, minlength=15) / draws.shape[0]
    prob = np.exp(np.asarray(jax.jit(jax.vmap(site.log_prob))(jnp.asarray(set_partitions(4)))))
    se = np.sqrt(prob * (1 - prob) / draws.shape[0])
    assert np.all(np.abs(freq - prob) < 5 * se)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_collapsed_density_is_the_model_log_joint_less_the_eppf(name):
    family, dim = FAMILIES[name]
    site = dpppl.CollapsedMixture(family, jnp.asarray(LABELS), dim=dim,
                                  num_trials=4 if name == "dirichlet_multinomial" else None)
    values = jax.jit(site.sample)(jax.random.key(1))
    assert values.shape == site.event_shape == ((6,) if dim is None else (6, dim))
    model = dpppl.DPMixture(1.0, family)
    points = np.asarray(values).reshape(6, -1)
    bound = model.bind(points if family.data_kind == "real" else np.rint(points))
    eppf = float(jax.jit(dpppl.Partition(model, 6).log_prob)(jnp.asarray(LABELS)))
    expected = float(bound.log_joint_of_labels(LABELS)) - eppf
    assert float(jax.jit(site.log_prob)(values)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("name", ["normal_known", "niw", "normal_gamma"])
def test_collapsed_density_is_differentiable_in_the_values(name):
    family, dim = FAMILIES[name]
    site = dpppl.CollapsedMixture(family, jnp.asarray(LABELS), dim=dim)
    values = jax.jit(site.sample)(jax.random.key(2))
    direction = jax.random.normal(jax.random.key(3), values.shape)
    h = 1e-6

    @jax.jit
    def derivatives(values):
        numeric = (site.log_prob(values + h * direction) - site.log_prob(values - h * direction)) / (2 * h)
        return jnp.sum(jax.grad(site.log_prob)(values) * direction), numeric

    analytic, numeric = derivatives(values)
    assert float(analytic) == pytest.approx(float(numeric), rel=1e-5)


def test_data_dependent_hyperparameters_are_refused_by_name():
    with pytest.raises(HyperparameterError, match=r"sigma2 \(default 'var\(x\) / 10'\).*give sigma2, tau2"):
        dpppl.CollapsedMixture(dpppl.NormalKnownCov(mu0=0.0), jnp.zeros(4, jnp.int32))


def test_priors_a_partition_site_cannot_take():
    with pytest.raises(ModelError, match="explicit labels"):
        dpppl.Partition(dpppl.StickBreaking(a=1.0, b=1.0), 4)
    with pytest.raises(ModelError, match="alpha=alpha"):
        dpppl.Partition(dpppl.CRP(alpha=dpppl.Gamma(1.0, 1.0)), 4)
    with pytest.raises(ModelError, match="conjugate"):
        dpppl.CollapsedMixture(dpppl.NormalLogNormal(m0=0.0, s0=1.0, l0=0.0), jnp.zeros(4, jnp.int32))


def _regression(x, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0))
    mixture = dpppl.DPMixture(dpppl.Gamma(2.0, 1.0), NKC)
    return dpppl.dp_mixture("resid", mixture, obs=None if y is None else y - x * beta, num_points=x.shape[0])


def test_dp_mixture_sites_and_their_pairing():
    x = jnp.linspace(-1.0, 1.0, 7)
    tr = numpyro.handlers.trace(numpyro.handlers.seed(_regression, 0)).get_trace(x, x)
    assert [name for name, site in tr.items() if site["type"] == "sample"] == ["beta", "resid_alpha",
                                                                                "resid_labels", "resid"]
    assert isinstance(tr["resid_labels"]["fn"], dpppl.Partition)
    assert tr["resid"]["is_observed"] and not tr["resid_alpha"]["is_observed"]
    (site,) = dp_sites(tr)
    assert (site.labels, site.values) == ("resid_labels", "resid")
    assert float(site.partition.alpha) == float(tr["resid_alpha"]["value"])


def test_predictive_simulates_every_site():
    draws = Predictive(_regression, num_samples=50)(jax.random.key(4), jnp.linspace(-1.0, 1.0, 7))
    assert draws["resid"].shape == (50, 7) and draws["resid_labels"].shape == (50, 7)
    assert np.all(np.asarray(draws["resid_alpha"]) > 0)
    # points of one cluster share a mean: within-cluster spread is sigma2, across clusters tau2 more
    same = np.asarray(draws["resid_labels"])[:, 0] == np.asarray(draws["resid_labels"])[:, 1]
    assert same.any() and (~same).any()


def test_two_mixtures_pair_with_their_own_partitions():
    def model(x):
        dpppl.dp_mixture("a", dpppl.DPMixture(1.0, NKC), obs=x)
        labels = numpyro.sample("z", dpppl.Partition(dpppl.PitmanYor(0.2, 1.0), 3))
        numpyro.sample("b", dpppl.CollapsedMixture(NKC, labels), obs=x[:3] + 1.0)

    tr = numpyro.handlers.trace(numpyro.handlers.seed(model, 0)).get_trace(jnp.zeros(5))
    assert [(s.labels, s.values) for s in dp_sites(tr)] == [("a_labels", "a"), ("z", "b")]


def test_a_partition_without_its_collapsed_mixture_is_refused():
    def model():
        numpyro.sample("z", dpppl.Partition(dpppl.CRP(1.0), 3))

    tr = numpyro.handlers.trace(numpyro.handlers.seed(model, 0)).get_trace()
    with pytest.raises(ModelError, match="exactly one CollapsedMixture"):
        dp_sites(tr)


HYPER = dpppl.Model(dpppl.CRP(1.0), dpppl.NormalKnownCov(sigma2=0.5, mu0="m", tau2="t"),
                    hyperpriors={"m": Hyperprior("Normal", (0.0, 3.0)), "t": Hyperprior("Gamma", (2.0, 1.0))})


def test_random_hyperparameters_are_sites_and_the_mixture_is_at_their_values():
    """`{name}_{h}` with h's prior (support and density); the collapsed density is the fixed family's at
    the drawn values; a CollapsedMixture of such a model without their values, and PartitionGibbs (whose
    partition kernel runs at one family), are refused."""
    y = jnp.array([0.3, 0.5, 2.0, 2.2])

    def model(y):
        dpppl.dp_mixture("r", HYPER, obs=y)

    values = {"r_m": 1.2, "r_t": 0.7, "r_labels": jnp.array([0, 0, 1, 1])}
    fixed = dpppl.CollapsedMixture(dpppl.NormalKnownCov(sigma2=0.5, mu0=1.2, tau2=0.7), values["r_labels"])
    found = {}

    def densities(y):  # traced once, not op by op
        tr = numpyro.handlers.trace(numpyro.handlers.substitute(numpyro.handlers.seed(model, 0), data=values)
                                    ).get_trace(y)
        found.update(trace=tr, supports=(tr["r_m"]["fn"].support, tr["r_t"]["fn"].support))
        return tr["r_t"]["fn"].log_prob(0.7), tr["r"]["fn"].log_prob(y), fixed.log_prob(y)

    log_t, log_y, log_fixed = jax.jit(densities)(y)
    assert found["supports"] == (constraints.real, constraints.positive)
    assert float(log_t) == pytest.approx(float(stats.gamma(2.0).logpdf(0.7)), rel=1e-12)
    assert float(log_y) == pytest.approx(float(log_fixed), rel=1e-12)
    with pytest.raises(ModelError, match=r"CollapsedMixture: the model has random hyperparameters \(m, t\); sample "
                                         r"them as sites and pass their values \(hyperparameters=\{'m': \.\.\.\}\)"):
        dpppl.CollapsedMixture(HYPER, values["r_labels"])
    with pytest.raises(ModelError, match=r"partition site 'r_labels': the family of 'r' is at random "
                                         r"hyperparameters \(m, t\), which PartitionGibbs does not follow yet"):
        dp_sites(found["trace"])


@pytest.mark.parametrize("obs, message", [
    (np.zeros(5), r"dp_mixture 'r': the values have shape \(5,\), but NormalInverseWishart's hyperparameters are "
                  r"2-dimensional: expected shape \(5, 2\)"),
    (np.zeros((5, 3)), r"dp_mixture 'r': the values have shape \(5, 3\): NormalInverseWishart: hyperparameter mu0 "
                       r"has shape \(2,\)"),
    (np.zeros((5, 2, 1)), r"dp_mixture 'r': the values must be \(N,\) or \(N, D\), got shape \(5, 2, 1\)"),
])
def test_values_of_the_wrong_shape_are_a_data_error_naming_the_site(obs, message):
    mixture = dpppl.DPMixture(1.0, FAMILIES["niw"][0])
    with pytest.raises(dpppl.DataError, match=message):
        numpyro.handlers.seed(lambda: dpppl.dp_mixture("r", mixture, obs=obs), 0)()
