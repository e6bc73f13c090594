"""The parameter moves of dpppl.kernels.subcluster.parameter_moves: every move leaves
p(u | x_c) invariant (many independent chains against posterior moments by quadrature,
with Monte Carlo thresholds), and clear errors where the component or an option does not fit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpppl
from dpppl.errors import KernelError
from dpppl.kernels.subcluster.parameter_moves import build_parameter_update
from tests.helpers.nonconjugate import FAMILY, FAMILY_ALPHA, X_SMALL, _resolved, _stats

# 4,000 chains x 300 NUTS updates: run time, not compile time, dominates, so this program
# is compiled at XLA's default level rather than the suite's level 0 (tests/conftest.py):
# 45 s -> 17 s.
RUN_TIME_BOUND = {"xla_backend_optimization_level": 2}


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
    update = jax.jit(build_parameter_update(fam, method=method, steps=5, **options), compiler_options=RUN_TIME_BOUND)
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

