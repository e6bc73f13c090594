"""Compilation of models to NumPyro (dpppl.models.compile)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from scipy import stats

import dpppl
from tests.helpers.stick_breaking import NKC, X4


def test_compiled_numpyro_model_has_beta_a_i_b_i_sticks():
    model = dpppl.StickBreakingMixture(a=lambda i: 1.0 + 0.0 * i, b="2 + i", component=NKC)
    fn = model.bind(X4).numpyro_model(6)
    v = np.array([0.3, 0.5, 0.2, 0.7, 0.1])

    def log_prob_of_sticks(v):  # one compiled program, not the model's ops one by one
        seeded = numpyro.handlers.seed(fn, 0)
        trace = numpyro.handlers.trace(numpyro.handlers.substitute(seeded, {"v": v})).get_trace(X4[:, None])
        return trace["v"]["fn"].log_prob(v)

    want = stats.beta.logpdf(v, 1.0, 2.0 + np.arange(1, 6)).sum()
    assert float(jax.jit(log_prob_of_sticks)(jnp.asarray(v))) == pytest.approx(want, rel=1e-10)
    finite = dpppl.PseudoParticleMixture([1.0, 0.5, 2.0], NKC).bind(X4).numpyro_model(20)
    assert finite.truncation == 3  # V_3 = 1: three sticks are the exact model


def test_a_dps_sticks_and_an_exponential_alpha_have_numpyros_densities():
    """`StickBeta` (Beta(1, b)) and `ExponentialGamma` (Gamma(1, rate)) write the log density without
    log-gamma functions: the values and gradients of `dist.Beta` and `dist.Gamma`, and scipy's."""
    from numpyro import distributions as dist

    from dpppl.models.compile import ExponentialGamma, StickBeta

    v, b = jnp.asarray([1e-6, 0.3, 0.5, 0.999]), jnp.asarray([0.2, 1.0, 2.5, 40.0])
    assert np.allclose(StickBeta(b).log_prob(v), stats.beta.logpdf(v, 1.0, b), rtol=1e-12, atol=0)
    for ours, theirs in ((StickBeta, lambda b: dist.Beta(1.0, b)), (ExponentialGamma, lambda r: dist.Gamma(1.0, r))):
        grads = [jax.grad(lambda v, b: f(b).log_prob(v).sum(), argnums=(0, 1))(v, b) for f in (ours, theirs)]
        for got, want in zip(*grads):
            np.testing.assert_allclose(got, want, rtol=1e-9)
    assert np.allclose(ExponentialGamma(b).log_prob(v), stats.gamma.logpdf(v, 1.0, scale=1 / b), rtol=1e-12, atol=0)



def test_real_n_models_take_n_or_n_by_1_data_and_name_the_site_of_other_shapes():
    """`real[N]` data as (N,) or (N, 1): the same density and gradient (what NUTS runs on), the site
    holding the shape given, and `Predictive` at draws on (N,) data; other shapes a DataError."""
    from numpyro.infer import Predictive
    from numpyro.infer.util import log_density

    model = dpppl.load("models/galaxies.dp")
    x = np.asarray(dpppl.datasets.load("galaxies")[0], float)[:12]
    fn = model.bind(x).numpyro_model(4)
    draws = Predictive(fn, num_samples=2)(jax.random.key(0), x[:, 0])
    assert draws["x"].shape == (2, 12)
    params = {k: v[0] for k, v in draws.items() if k in ("alpha", "v", "theta_mu", "theta_cov_tril", "m", "tau")}

    @jax.jit
    def density_and_gradient(data, params):
        return jax.value_and_grad(lambda p: log_density(fn, (data,), {}, p)[0])(params)

    flat, column = density_and_gradient(x[:, 0], params), density_and_gradient(x, params)
    assert np.isfinite(float(flat[0])) and float(flat[0]) == pytest.approx(float(column[0]), rel=1e-12)
    for a, b in zip(jax.tree.leaves(flat[1]), jax.tree.leaves(column[1])):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    with pytest.raises(dpppl.DataError, match=r"site 'x': the data have shape \(12, 2\), the model's points are "
                                              r"1-dimensional: expected shape \(N,\) or \(N, 1\)"):
        numpyro.handlers.seed(fn, 0)(np.zeros((12, 2)))


def test_stick_breaking_weights_are_the_products_of_the_sticks():
    """w_k = v_k prod_{j<k} (1 - v_j), w_T = prod_{j<T} (1 - v_j): the weights sum to one, for a batch too."""
    from dpppl.models.compile import stick_breaking_weights

    v = np.random.default_rng(0).uniform(0.01, 0.99, (3, 7))
    rest = np.cumprod(1 - v, axis=-1)
    want = np.concatenate([v, np.ones((3, 1))], -1) * np.concatenate([np.ones((3, 1)), rest], -1)
    got = np.asarray(stick_breaking_weights(jnp.asarray(v)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-12)


def test_niw_components_drawn_as_cholesky_factors_have_the_potential_of_inverse_wishart_covariances(monkeypatch):
    """The NIW family's compiled components (`theta_cov_tril`, the covariance's Cholesky factor, then
    `theta_cov` = L L^T) give NUTS the potential energy, and its gradient, that an `InverseWishart` site
    `theta_cov` with the mean's prior on the covariance gives at the same unconstrained values (its
    support transform is the factor's, then L L^T); the deterministic `theta_cov` is L L^T."""
    import numpyro.distributions as dist
    from numpyro.infer.util import potential_energy

    from dpppl.families.niw import NormalInverseWishart

    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(-2, 1, (20, 2)), rng.normal(3, 0.5, (20, 2))])
    bound = dpppl.load("models/gaussian_niw.dp").bind(x)
    unconstrained = {"alpha": jnp.asarray(0.3), "v": jnp.asarray(rng.normal(size=4)),
                     "theta_mu": jnp.asarray(rng.normal(size=(5, 2))), "cov": jnp.asarray(rng.normal(size=(5, 3)))}

    def energy_and_gradient(cov_site):
        fn = bound.numpyro_model(5)
        params = {**{k: v for k, v in unconstrained.items() if k != "cov"}, cov_site: unconstrained["cov"]}
        return jax.jit(jax.value_and_grad(lambda p: potential_energy(fn, (x,), {}, p)))(params)

    ours, ours_grad = energy_and_gradient("theta_cov_tril")

    def inverse_wishart_site(self, num_components):  # the parametrisation before: Sigma drawn as a matrix
        with numpyro.plate("component", num_components):
            cov = numpyro.sample("theta_cov", dist.InverseWishart(self.nu0, scale_matrix=jnp.asarray(self.psi0)))
            mu = numpyro.sample("theta_mu", dist.MultivariateNormal(jnp.asarray(self.mu0),
                                                                     covariance_matrix=cov / self.kappa0))
        return {"mu": mu, "cov": cov}

    monkeypatch.setattr(NormalInverseWishart, "numpyro_sample_params", inverse_wishart_site)
    theirs, theirs_grad = energy_and_gradient("theta_cov")
    assert float(ours) == pytest.approx(float(theirs), rel=1e-10)
    np.testing.assert_allclose(ours_grad["theta_cov_tril"], theirs_grad["theta_cov"], rtol=1e-8, atol=1e-10)
    for name in ("alpha", "v", "theta_mu"):
        np.testing.assert_allclose(ours_grad[name], theirs_grad[name], rtol=1e-8, atol=1e-10)
    monkeypatch.undo()
    prior = numpyro.infer.Predictive(bound.numpyro_model(5), num_samples=1)
    draw = jax.jit(lambda key: prior(key, x))(jax.random.key(0))
    tril = draw["theta_cov_tril"][0]
    np.testing.assert_allclose(draw["theta_cov"][0], tril @ np.swapaxes(tril, -1, -2), rtol=1e-12)
    assert np.all(np.triu(tril, 1) == 0) and np.all(np.diagonal(tril, axis1=-2, axis2=-1) > 0)
