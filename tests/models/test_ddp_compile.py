"""The dependent DP compiled to NumPyro (dpppl.models.ddp_compile): its law, its density, Predictive
and `kernel="nuts"`."""

from pathlib import Path

import jax
import numpy as np
import pytest
from numpyro.infer import Predictive
from numpyro.infer.util import log_density
from scipy import special, stats

import dpppl
from dpppl.diagnostics.arviz_compat import group
from dpppl.kernels.auto import choose
from tests.helpers.ddp import small_model

ROOT = Path(__file__).resolve().parents[2]
A, BETA, B, PSI0 = 1.0, 0.5, 1.5, 0.5  # small_model's coupling (eq. 12) and inverse-Wishart scale
STICK_A, STICK_B = 1.0, 2.0  # its sticks, V ~ Beta(1, 2)


def gamma_matrix(times):
    """Gamma of eq. (12), written out: a exp(-beta |t - t'|) off the diagonal, b on it."""
    gap = np.abs(np.subtract.outer(times, times))
    return np.where(gap == 0, B, A * np.exp(-BETA * gap))


def stick_weights(v):
    """w_k = v_k prod_{j<k} (1 - v_j), the last stick taking the rest (rows of v)."""
    rest = np.cumprod(np.concatenate([np.ones(v.shape[:-1] + (1,)), 1 - v], axis=-1), axis=-1)
    return np.concatenate([v, np.ones(v.shape[:-1] + (1,))], axis=-1) * rest


def test_prior_simulation_has_the_closed_form_moments():
    """Points drawn by Predictive without data: mean m, variance b + E[Sigma] = b + psi0 / (nu0 - D - 1)
    per coordinate, and two points of slices t, t' share a label with probability
    sum_k E[w_k]^2 (t != t', independent sticks) or sum_k E[w_k^2] (t = t'), so
    Cov = Gamma[t, t'] times that; the labels' means have covariance Gamma over the slices.
    Thresholds: 5 standard errors of each Monte Carlo mean (nu0 = 8: the products have a variance)."""
    K, M, nu0 = 4, 6000, 8.0
    times = np.array([0.0, 0.0, 1.0, 3.0])
    bound = small_model(nu0=nu0).bind((np.zeros((4, 2)), times))
    draws = Predictive(bound.numpyro_model(K), num_samples=M)(jax.random.key(0))
    x, mu = np.asarray(draws["x"]), np.asarray(draws["theta_mu"])
    assert x.shape == (M, 4, 2) and mu.shape == (M, K, 3, 2)
    # E[w_k] and E[w_k^2] of K sticks V ~ Beta(1, 2), V_K = 1
    ev, ev2 = STICK_A / (STICK_A + STICK_B), STICK_A * (STICK_A + 1) / ((STICK_A + STICK_B) * (STICK_A + STICK_B + 1))
    e1v, e1v2 = 1 - ev, STICK_B * (STICK_B + 1) / ((STICK_A + STICK_B) * (STICK_A + STICK_B + 1))
    k = np.arange(K)
    w1 = np.where(k < K - 1, ev, 1.0) * e1v ** k
    w2 = np.where(k < K - 1, ev2, 1.0) * e1v2 ** k
    gamma = gamma_matrix(np.array([0.0, 1.0, 3.0]))
    slot = [0, 0, 1, 2]

    def check(products, want):
        mean, se = products.mean(axis=0), products.std(axis=0) / np.sqrt(products.shape[0])
        assert np.all(np.abs(mean - want) < 5 * se), (mean, want, se)

    check(x, 0.0)
    check(x ** 2, B + PSI0 / (nu0 - 2 - 1))
    for n, m in [(0, 1), (0, 2), (1, 3), (2, 3)]:
        same = np.sum(w2) if slot[n] == slot[m] else np.sum(w1 ** 2)
        check(x[:, n] * x[:, m], gamma[slot[n], slot[m]] * same)
    for s, u in [(0, 1), (0, 2), (1, 2), (2, 2)]:
        check((mu[:, :, s] * mu[:, :, u]).reshape(M, -1), gamma[s, u])


@pytest.mark.parametrize("slice_covariances", [True, False])
def test_log_density_and_lp_of_a_draw_equal_direct_computations(slice_covariances):
    """The compiled log density of given sticks and parameters (labels summed out), and the `lp`
    `kernel="nuts"` records for a draw, against scipy on 5 points in 3 slices with K = 3."""
    K, nu0 = 3, 4.0
    times = np.array([0.0, 2.0, 2.0, 5.0, 0.0])
    x = np.array([[0.3, -0.2], [1.1, 0.4], [-0.9, 0.8], [0.2, 0.1], [-0.7, -1.1]])
    x = x - x.mean(axis=0)  # data in the kernels' frame already (their shift is 0)
    bound = small_model(nu0=nu0, slice_covariances=slice_covariances).bind((x, times))
    S = 3 if slice_covariances else 1
    rng = np.random.default_rng(1)
    v = rng.uniform(0.2, 0.8, (3, K - 1))
    mu = rng.normal(size=(K, 3, 2))
    root = rng.normal(size=(K, S, 2, 2))
    cov = root @ np.swapaxes(root, -1, -2) + 0.3 * np.eye(2)
    fn = bound.numpyro_model(K)
    got = jax.jit(lambda p: log_density(fn, (x, times), {}, p)[0])({"v": v, "theta_mu": mu, "theta_cov": cov})

    gamma = gamma_matrix(np.unique(times))
    slices = np.searchsorted(np.unique(times), times)
    cov_of = slices if slice_covariances else np.zeros_like(slices)
    w = stick_weights(v)
    params = [stats.multivariate_normal.logpdf(mu[k].ravel(), np.zeros(6), np.kron(gamma, np.eye(2)))
              + sum(stats.invwishart.logpdf(cov[k, s], nu0, PSI0 * np.eye(2)) for s in range(S)) for k in range(K)]
    lik = [[np.log(w[slices[n], k]) + stats.multivariate_normal.logpdf(x[n], mu[k, slices[n]], cov[k, cov_of[n]])
            for k in range(K)] for n in range(5)]
    want = stats.beta.logpdf(v, STICK_A, STICK_B).sum() + sum(params) + special.logsumexp(lik, axis=1).sum()
    assert float(got) == pytest.approx(want, rel=1e-9)

    z = np.array([0, 2, 0, 0, 0])  # labels 0 and 2 in use, label 1 not
    sticks = 0.0
    for t in range(3):
        counts = np.bincount(z[slices == t], minlength=K)
        later = counts[::-1].cumsum()[::-1] - counts
        sticks += sum(special.betaln(STICK_A + counts[i], STICK_B + later[i]) - special.betaln(STICK_A, STICK_B)
                      for i in range(K) if counts[i] + later[i] > 0)
    own = [stats.multivariate_normal.logpdf(x[n], mu[z[n], slices[n]], cov[z[n], cov_of[n]]) for n in range(5)]
    lp = jax.jit(bound.lp_of_draw, static_argnums=2)(z, {"theta_mu": mu, "theta_cov": cov}, K)
    assert float(lp) == pytest.approx(sticks + params[0] + params[2] + sum(own), rel=1e-9)


def test_predictive_with_and_without_data_and_bad_times():
    x, _ = dpppl.datasets.load("blobs", num_slices=3, num_clusters=2, points_per_blob=4, seed=5)
    model = dpppl.load(ROOT / "examples/ddp.dp")
    points, t = x[:, :-1], x[:, -1]
    bound = model.bind(x)
    fn = bound.numpyro_model(5)
    assert fn.truncation == 5
    prior = Predictive(fn, num_samples=3)(jax.random.key(0))  # simulates at the data's times
    assert prior["x"].shape == (3, 24, 2) and prior["weights"].shape == (3, 3, 5)
    np.testing.assert_allclose(prior["weights"].sum(axis=-1), 1.0, rtol=1e-12)
    # at other times than the data's (as many points, so the programs above are reused)
    elsewhere = Predictive(fn, num_samples=3)(jax.random.key(0), None, t[::-1])
    assert elsewhere["x"].shape == (3, 24, 2)
    assert not np.allclose(elsewhere["x"], prior["x"])
    given = Predictive(fn, num_samples=3)(jax.random.key(0), points, t)
    np.testing.assert_array_equal(given["x"], np.broadcast_to(points, (3, 24, 2)))  # conditioned: the data as given
    assert given["assignment"].shape == (3, 24) and int(given["assignment"].max()) < 5
    # the unbound model takes its hyperparameters and slices from the data it is called with: it is
    # the bound model there
    unbound = Predictive(model.numpyro_model(5), num_samples=3)(jax.random.key(0), points, t)
    assert set(unbound) == set(given)
    for name, value in given.items():
        np.testing.assert_array_equal(unbound[name], value, err_msg=name)
    with pytest.raises(dpppl.DataError, match="give the times t"):
        Predictive(model.numpyro_model(5), num_samples=1)(jax.random.key(0))
    with pytest.raises(dpppl.ModelError, match="hyperparameter\\(s\\) mu0 depend on the data"):  # unbound: mean(x)
        Predictive(model.numpyro_model(5), num_samples=1)(jax.random.key(0), None, t)
    with pytest.raises(dpppl.DataError, match=r"time 1.5 \(point 1\) is not one of the model's 3 slice times"):
        Predictive(fn, num_samples=1)(jax.random.key(0), None, np.array([0.0, 1.5]))
    with pytest.raises(dpppl.DataError, match="x has 24 points but t has 2"):
        Predictive(fn, num_samples=1)(jax.random.key(0), points, np.array([0.0, 1.0]))
    with pytest.raises(dpppl.ArgumentError, match="truncation must be an integer >= 2"):
        model.numpyro_model(1)


def test_auto_still_chooses_the_ddp_kernels():
    assert choose(dpppl.load(ROOT / "examples/ddp.dp"), 16, 2).spec == "ddp+ddpswap"


@pytest.mark.slow
def test_sample_with_nuts():
    """NUTS on the DDP model (mostly compilation); the default run checks its `lp_of_draw`
    (test_log_density_and_lp_of_a_draw_equal_direct_computations) and NUTS on other models."""
    x, _ = dpppl.datasets.load("blobs", num_slices=2, num_clusters=2, points_per_blob=4, seed=5)
    model = dpppl.load(ROOT / "examples/ddp.dp")
    idata = dpppl.sample(model, x, kernel="nuts", truncation=3, num_warmup=10, num_samples=5, seed=3,
                         progress_bar=False)
    post = group(idata, "posterior")
    assert post.attrs["kernel"] == "nuts" and post.attrs["exact"] == 0
    assert post["num_clusters"].shape == (1, 5) and 1 <= int(post["num_clusters"].min()) <= 3
    assert np.isfinite(group(idata, "sample_stats")["lp"].values).all()
    observed = group(idata, "observed_data")
    np.testing.assert_array_equal(observed["t"].values, x[:, -1])
