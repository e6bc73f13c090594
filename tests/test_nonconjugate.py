"""Non-conjugate components: the NormalLogNormal family, the parameter moves of
dpppl.kernels.subcluster.parameter_moves, and kernel="subcluster" with the first expression of eq. (21).

- the family's closed forms (prior, likelihood from statistics, proposal) against direct
  sums and scipy, its numerical marginal against a 2-D quadrature by scipy and against
  importance sampling with its own proposal;
- every parameter move leaves p(u | x_c) invariant: many independent chains (the rows of
  one update) against posterior moments by quadrature, with Monte Carlo thresholds;
- the exact variant matches the enumerated partition posterior (marginals by quadrature);
- clear errors where the component or an option does not fit.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import dpppl
from dpppl.diagnostics.arviz_compat import group
from dpppl.errors import KernelError
from dpppl.kernels.subcluster.parameter_moves import build_parameter_update
from dpppl.testing import check_kernel_samples, exact_posterior

X_SMALL = np.array([[-1.0], [-0.6], [0.1], [0.4], [1.2]])
FAMILY = dpppl.NormalLogNormal(m0=0.0, s0=2.0, l0=float(np.log(0.5)), t0=0.5)
FAMILY_ALPHA = 1e-3  # false-alarm rate of each test's group of checks


def _resolved(x=X_SMALL):
    return FAMILY.resolve(np.asarray(x, float))


def _stats(fam, x):
    return jax.tree.map(lambda p: jnp.sum(p, axis=0), fam.point_stats(jnp.asarray(x, float)))


def test_closed_forms_match_direct_sums():
    fam = _resolved()
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 0.7, size=(40, 3))
    fam3 = dpppl.NormalLogNormal(m0=0.1, s0=[1.0, 2.0, 3.0], l0=-0.5, t0=0.8).resolve(x)
    u = jnp.asarray(rng.normal(size=(4, 6)))
    params = fam3.params_of(u)
    direct = np.asarray(fam3.log_likelihood(params, jnp.asarray(x))).sum(axis=0)
    from_stats = np.asarray(fam3.log_likelihood_of_stats(u, _stats(fam3, x)))
    np.testing.assert_allclose(from_stats, direct, rtol=1e-10)
    mu, log_sd = np.asarray(u[:, :3]), np.asarray(u[:, 3:])
    prior = (stats.norm.logpdf(mu, 0.1, [1.0, 2.0, 3.0]) + stats.norm.logpdf(log_sd, -0.5, 0.8)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(fam3.log_prior(u)), prior, rtol=1e-10)
    # the proposal of an empty cluster is the prior
    loc, scale = fam.proposal(fam.empty_stats())
    np.testing.assert_allclose(np.asarray(loc), [0.0, np.log(0.5)])
    np.testing.assert_allclose(np.asarray(scale), [2.0, 0.5])


def test_numerical_marginal_matches_scipy():
    fam = _resolved()
    x = X_SMALL[:3, 0]

    def integrand(mu, log_sd):
        return np.exp(stats.norm.logpdf(x, mu, np.exp(log_sd)).sum() + stats.norm.logpdf(mu, 0.0, 2.0)
                      + stats.norm.logpdf(log_sd, np.log(0.5), 0.5))

    reference, _ = integrate.dblquad(integrand, np.log(0.5) - 6, np.log(0.5) + 6, -10, 10, epsabs=1e-13)
    assert abs(float(fam.log_marginal_numerical(_stats(fam, X_SMALL[:3]))) - np.log(reference)) < 1e-6


@pytest.mark.parametrize("n", [3, 2000])
def test_numerical_marginal_matches_importance_sampling(n):
    """E_q[p(x, u) / q(u)] = p(x): the proposal's density, the prior, the likelihood from
    statistics and the quadrature agree, for a few points and for many (where the
    posterior of log sigma is far narrower than its prior)."""
    x = np.random.default_rng(2).normal(0.3, 0.8, size=(n, 2))
    fam = dpppl.NormalLogNormal(m0=0.0, s0=2.0, l0=float(np.log(0.5)), t0=0.5).resolve(x)
    s = _stats(fam, x)
    numerical = float(fam.log_marginal_numerical(s))
    draws = 200_000
    u = fam.draw_proposal(jax.random.key(0), jax.tree.map(lambda a: jnp.broadcast_to(a, (draws,) + a.shape), s))
    log_w = np.asarray(fam.log_prior(u) + fam.log_likelihood_of_stats(u, s) - fam.log_proposal(u, s))
    w = np.exp(log_w - log_w.max())
    estimate = np.log(w.mean()) + log_w.max()
    standard_error = w.std() / w.mean() / np.sqrt(draws)  # of the log, by the delta method
    assert abs(estimate - numerical) < stats.norm.isf(FAMILY_ALPHA / 2) * standard_error + 1e-9


def test_lp_is_the_collapsed_log_joint_for_every_kernel():
    """``lp`` means log p(x, z) (marginals by quadrature) whichever kernel drew z: the
    sub-cluster sampler's and NUTS's agree with dpppl.log_joint of their labels."""
    x, _ = dpppl.datasets.gaussian_mixture(300, 2, 3, mean_scale=20.0, seed=4)
    model = dpppl.DPMixture(1.0, dpppl.NormalLogNormal())
    for kernel in ("subcluster", "nuts"):
        idata = dpppl.sample(model, x, kernel=kernel, num_warmup=20, num_samples=5, progress_bar=False,
                             **({"truncation": 8} if kernel == "nuts" else {}))
        lp = group(idata, "sample_stats")["lp"].values[0, -1]
        z = group(idata, "posterior")["z"].values[0, -1]
        assert np.isfinite(lp)
        assert lp == pytest.approx(float(dpppl.log_joint(model, x, z)), rel=1e-9), kernel


def _posterior_moments(fam, x):
    """E and Var of (mu, log sigma) under p(mu, log sigma | x) for 1-D x, by quadrature."""
    mu = np.linspace(-6, 6, 1201)
    log_sd = np.linspace(np.log(0.5) - 4, np.log(0.5) + 4, 801)
    M, L = np.meshgrid(mu, log_sd, indexing="ij")
    log_p = (stats.norm.logpdf(x[:, None, None], M, np.exp(L)).sum(axis=0) + stats.norm.logpdf(M, 0.0, 2.0)
             + stats.norm.logpdf(L, np.log(0.5), 0.5))
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    return np.array([(p * M).sum(), (p * L).sum()]), np.array([(p * M * M).sum(), (p * L * L).sum()])


@pytest.mark.parametrize("method, options", [
    ("mh", {}),
    ("mh", {"proposal": "user"}),
    ("nuts", {}),
])
def test_parameter_moves_leave_the_posterior_invariant(method, options):
    """R independent chains (the rows of one update, all with the statistics of the same 5
    points) run from the prior; after burn-in their states are R draws of p(u | x), whose
    means and second moments are tested against quadrature at a Bonferroni-corrected level."""
    fam = _resolved()
    if options.get("proposal") == "user":
        def user_walk(rng_key, u, stats):  # a symmetric random walk: log q ratio 0
            return u + 0.3 * jax.random.normal(rng_key, u.shape, u.dtype), jnp.zeros(u.shape[0])
        options = {"proposal": user_walk}
    update = jax.jit(build_parameter_update(fam, method=method, steps=5, **options))
    chains = 4000
    s = jax.tree.map(lambda a: jnp.broadcast_to(a, (chains,) + a.shape), _stats(fam, X_SMALL))
    u = fam.prior_draw(jax.random.key(1), (chains,))
    for t in range(60):
        u, acceptance = update(jax.random.key(100 + t), u, s)
    u = np.asarray(u)
    assert 0.05 < float(acceptance) <= 1.0
    mean, second = _posterior_moments(fam, X_SMALL[:, 0])
    z_crit = stats.norm.isf(FAMILY_ALPHA / (2 * 4))
    checks = [(u[:, j], mean[j]) for j in range(2)] + [(u[:, j] ** 2, second[j]) for j in range(2)]
    for j, (values, expected) in enumerate(checks):
        standard_error = values.std(ddof=1) / np.sqrt(chains)
        assert abs(values.mean() - expected) < z_crit * standard_error, (method, j, values.mean(), expected)


@pytest.mark.parametrize("param_update", ["mh", pytest.param("nuts", marks=pytest.mark.slow)])
def test_exact_variant_matches_enumeration(param_update):
    """Restricted Gibbs with parameters moved by MH (or NUTS) and data-independent random
    splits / merges whose new parameters come from the proposal (eq. 21, first
    expression): exact, against the partition posterior with marginals by quadrature."""
    model = dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), FAMILY)
    burn_in, draws = 100, 500
    idata = dpppl.sample(model, X_SMALL, kernel="subcluster", variant="exact", param_update=param_update,
                         num_warmup=0, num_samples=burn_in + draws, num_chains=64, seed=5, init="prior",
                         progress_bar=False)
    post = group(idata, "posterior")
    result = check_kernel_samples(exact_posterior(model, X_SMALL), post["z"].values[:, burn_in:],
                                  alpha=post["alpha"].values[:, burn_in:])
    assert result.passed, result.report
    assert "subcluster_param_accept_rate" in group(idata, "sample_stats")
    assert idata.attrs["exact"] == 1


def test_published_variant_finds_separated_clusters():
    x, y = dpppl.datasets.gaussian_mixture(4000, 2, 4, mean_scale=25.0, seed=3)
    model = dpppl.DPMixture(1.0, dpppl.NormalLogNormal())
    idata = dpppl.sample(model, x, kernel="subcluster", num_warmup=0, num_samples=60, progress_bar=False, seed=1)
    post = group(idata, "posterior")
    z = post["z"].values[0, -1]
    assert dpppl.metrics.normalized_mutual_information(z, y) > 0.95
    assert np.isfinite(group(idata, "sample_stats")["lp"].values).all()


def test_errors_name_the_problem():
    model = dpppl.DPMixture(1.0, FAMILY)
    with pytest.raises(KernelError, match="no closed-form marginal likelihood; use one of subcluster"):
        dpppl.sample(model, X_SMALL, kernel="gibbs", progress_bar=False)
    with pytest.raises(KernelError, match="param_update must be one of"):
        dpppl.sample(model, X_SMALL, kernel="subcluster", param_update="hmc", progress_bar=False)
    with pytest.raises(KernelError, match="apply to non-conjugate components"):
        dpppl.sample(dpppl.DPMixture(1.0, dpppl.NormalGamma()), X_SMALL, kernel="subcluster",
                     param_update="nuts", progress_bar=False)
    with pytest.raises(KernelError, match="user proposal is used by param_update='mh'"):
        dpppl.sample(model, X_SMALL, kernel="subcluster", param_update="nuts", proposal=lambda *a: a,
                     progress_bar=False)


def test_model_language_declares_it():
    model = dpppl.parse("""
        data x : real[N, D]
        z ~ CRP(1.0)
        theta[k] ~ NormalLogNormal(m0 = mean(x), s0 = 2, l0 = log(0.5), t0 = 0.5)
        x[i] ~ Normal(theta[z[i]])
    """)
    bound = model.bind(X_SMALL)
    assert isinstance(bound.family, dpppl.NormalLogNormal)
    np.testing.assert_allclose(np.asarray(bound.family.l0), [np.log(0.5)])
