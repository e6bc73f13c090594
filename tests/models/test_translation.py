"""Translation: a model whose law is invariant under x -> x + c gives the same answers on
shifted data (issue 20, item 1; `docs/numerics.md`).

`models/gaussian_niw.dp` (mu0 = mean(x), psi0 = cov(x) / 10) is such a model. A bound model
works on x - mean(x) with the family's locations translated with it
(`dpppl.models.mixture.BoundModel`), so `dpppl.log_joint`, the recorded `lp` and the chains
on x + 1e6 agree with those on x up to the rounding of the data themselves.

Tolerances (float64). The data x + c are rounded to the float64 grid at c = 1e6, half an
ulp: 2^-34 = 5.8e-11 per coordinate, and centring rounds once more at the same scale, so
the two bound data sets differ by |dx| <= 1.2e-10 per coordinate. lp moves by
sum_i grad_i . dx_i with |grad_i| = |Sigma_c^-1 (x_i - mu_c)| of a few units for points
within a few standard deviations of unit-scale clusters (here at most ~10 in either
coordinate): at most N D 10 |dx| = 10^5 * 2 * 10 * 1.2e-10 = 2.4e-4 nats, and the float64
evaluation itself (|lp| ~ 5e5, sums of 10^5 statistics) adds ~1e-6. `LP_TOL = 1e-3` nats.

In float32 (`DPPPL_X64=0`) the data are centred in float64 and then cast, so x and x + 1e3
give bit-identical float32 data and chains; what differs from float64 is float32 arithmetic
(`float32_tolerance`).
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import numpyro
import pytest

import dpppl
from dpppl.core.pytrees import structure_key
from dpppl.diagnostics.arviz_compat import group, partition_group

MODEL = dpppl.load(os.path.join(os.path.dirname(__file__), "..", "..", "models", "gaussian_niw.dp"))
SHIFT = 1e6
LP_TOL = 1e-3
KERNELS = ("gibbs", "splitmerge", "perm-move", "subcluster")
KERNEL_OPTIONS = {"perm-move": {"beam_epsilon": 1e-32, "beam_width": 16}}  # O(N W); the default DP is O(N^2)


def four_clusters(n: int, seed: int = 0) -> np.ndarray:
    """Four unit-scale 2-D Gaussian clusters 6 apart, centred near the origin."""
    rng = np.random.default_rng(seed)
    centres = np.array([[-6.0, 0.0], [6.0, 0.0], [0.0, 6.0], [0.0, -6.0]])
    return centres[rng.integers(0, 4, n)] + rng.normal(size=(n, 2))


def true_labels(x: np.ndarray) -> np.ndarray:
    """The clusters of `four_clusters` by the nearest centre."""
    centres = np.array([[-6.0, 0.0], [6.0, 0.0], [0.0, 6.0], [0.0, -6.0]])
    return np.argmin(((x[:, None] - centres) ** 2).sum(axis=-1), axis=1)


def test_bound_model_works_on_centred_data_and_shows_the_data_as_given():
    x = four_clusters(1000) + SHIFT
    bound = MODEL.bind(x)
    np.testing.assert_array_equal(bound.shift, x.mean(axis=0))
    np.testing.assert_array_equal(bound.x, x - x.mean(axis=0))
    assert np.abs(bound.family.mu0).max() < 1e-9                      # mu0 = mean(x), translated
    np.testing.assert_allclose(bound.data_family.mu0, x.mean(axis=0), rtol=1e-15)
    np.testing.assert_array_equal(bound.observed()["x"], x)           # the user's data, bit for bit
    np.testing.assert_array_equal(bound.translate(x[:3]), bound.x[:3])
    # one compiled program serves both frames: the shift and the translated hyperparameters are its arguments
    assert structure_key(bound) == structure_key(MODEL.bind(x - SHIFT))
    idata = dpppl.sample(MODEL, x[:50], num_warmup=0, num_samples=2, progress_bar=False)
    np.testing.assert_array_equal(group(idata, "observed_data")["x"].values, x[:50])
    for fn in (bound.numpyro_model(3), MODEL.numpyro_model(3)):  # NumPyro models take the data as given
        def prior_mean(key, fn=fn):  # traced once, not run op by op
            return numpyro.handlers.trace(numpyro.handlers.seed(fn, key)).get_trace(x)["theta_mu"]["fn"].loc[0]

        np.testing.assert_allclose(jax.jit(prior_mean)(jax.random.key(0)), x.mean(axis=0), rtol=1e-15)


def test_log_joint_of_shifted_data_equals_the_unshifted():
    """dpppl.log_joint at 10^5 points: each partition's value and the differences between
    partitions agree on x and x + 1e6 within LP_TOL (module docstring); before the
    translation they differed by 228-245 nats."""
    x = four_clusters(100_000)
    truth = true_labels(x)
    partitions = [truth, np.where(truth == 3, 2, truth), np.zeros_like(truth)]
    plain = np.array([dpppl.log_joint(MODEL, x, z) for z in partitions])
    shifted = np.array([dpppl.log_joint(MODEL, x + SHIFT, z) for z in partitions])
    np.testing.assert_allclose(shifted, plain, rtol=0, atol=LP_TOL)
    np.testing.assert_allclose(np.diff(shifted), np.diff(plain), rtol=0, atol=LP_TOL)
    assert plain[0] > plain[1] > plain[2]


@pytest.mark.slow
def test_log_joint_of_a_million_shifted_points():
    """10^6 points: the bound of the module docstring grows with N (2.4e-3 nats)."""
    x = four_clusters(1_000_000)
    z = true_labels(x)
    assert dpppl.log_joint(MODEL, x + SHIFT, z) == pytest.approx(dpppl.log_joint(MODEL, x, z), abs=10 * LP_TOL)


def _sample(x, kernel):
    idata = dpppl.sample(MODEL, x, kernel=kernel, num_warmup=0, num_samples=3, seed=0, progress_bar=False,
                         **KERNEL_OPTIONS.get(kernel, {}))
    return (partition_group(idata)["z"].values[0], group(idata, "posterior")["alpha"].values[0],
            group(idata, "sample_stats")["lp"].values[0], idata)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernels_run_the_same_chain_on_shifted_data(kernel):
    """10^5 points, three iterations from the sequential start, the same seed on x and on
    x + 1e6: the same partitions and alphas draw by draw, and the recorded lp equal within
    LP_TOL (before the translation: another chain, lp off by 158 nats (gibbs) and 75
    (subcluster)). The sub-cluster kernel's recorded means are in the data's frame."""
    x = four_clusters(100_000)
    z0, alpha0, lp0, plain = _sample(x, kernel)
    z1, alpha1, lp1, shifted = _sample(x + SHIFT, kernel)
    np.testing.assert_array_equal(z1, z0)
    np.testing.assert_allclose(alpha1, alpha0, rtol=1e-12)
    np.testing.assert_allclose(lp1, lp0, rtol=0, atol=LP_TOL)
    if kernel == "subcluster":
        mu0, mu1 = (partition_group(idata)["theta_mu"].values[0] for idata in (plain, shifted))
        drawn = np.isfinite(mu0)
        np.testing.assert_array_equal(np.isfinite(mu1), drawn)
        np.testing.assert_allclose(mu1[drawn] - SHIFT, mu0[drawn], rtol=0, atol=1e-6)


FLOAT32_RUN = r"""
import json, sys
import jax.numpy as jnp
import numpy as np
import dpppl
from dpppl.diagnostics.arviz_compat import group, partition_group
model, x, z, options = dpppl.load(sys.argv[1]), np.load(sys.argv[2]), np.load(sys.argv[3]), json.loads(sys.argv[4])
with dpppl.config.x64():  # dpppl's programs' precision (DPPPL_X64=0: float32, whatever the process's mode)
    out = {"dtype": str(jnp.zeros(()).dtype), "log_joint": dpppl.log_joint(model, x, z)}
for kernel, kernel_options in options.items():
    idata = dpppl.sample(model, x, kernel=kernel, num_warmup=0, num_samples=3, seed=0, progress_bar=False,
                         **kernel_options)
    out[kernel] = {"z": partition_group(idata)["z"].values[0].tolist(),
                   "alpha": group(idata, "posterior")["alpha"].values[0].tolist(),
                   "lp": group(idata, "sample_stats")["lp"].values[0].tolist()}
print(json.dumps(out))
"""


def float32_tolerance(n: int) -> float:
    """|lp_float32 - lp_float64| allowed for `four_clusters(n)` (K = 4 clusters of n_c = n / 4
    points, D = 2, means at distance L = 6 from the data mean, unit spread).

    A cluster's scatter sum (x - c)(x - c)^T - n_c xbar xbar^T cancels a factor
    kappa = (L^2 + 1) / 1 = 37 of its size, and float32 sums of n_c terms carry a relative
    error of about eps32 sqrt(n_c) (eps32 = 2^-24, rounding errors of random sign), so the
    scatter's relative error is delta = kappa eps32 sqrt(n_c); the cluster's log marginal
    moves by nu_n / 2 times the log-determinant's error D delta, about (n_c / 2) D delta.
    Summed with the same sign over the K clusters: K (n_c / 2) D kappa eps32 sqrt(n_c),
    0.10 nats at n = 2,000 and 35 nats at n = 10^5 (measured: at most 0.017 and 5.7;
    docs/numerics.md). The float32 evaluation of the other terms (|lp| eps32, 0.03 nats at
    10^5) is far below it."""
    k, dim, kappa, eps32 = 4, 2, 37.0, 2.0 ** -24
    n_c = n / k
    return k * (n_c / 2) * dim * kappa * eps32 * np.sqrt(n_c)


def reference_lp(target, z, alpha):
    """The float64 lp of the state with labels `z` and concentration `alpha`."""
    import jax.numpy as jnp

    z = np.asarray(z)
    state = target.state_from_labels(None, jnp.asarray(z), int(z.max()) + 1)
    return float(target.lp(state._replace(alpha=jnp.asarray(alpha, state.alpha.dtype))))


@pytest.mark.slow
@pytest.mark.parametrize("n", [2_000, 100_000])
def test_float32_agrees_with_float64(n, tmp_path):
    """32-bit mode (DPPPL_X64=0, a subprocess) on x + 1e3: every kernel's recorded lp and
    dpppl.log_joint agree with the float64 lp of the same state on x within
    `float32_tolerance(n)`; no NaN and no collapse into one cluster (before the translation,
    2,000 points: lp all NaN, every point in one cluster)."""
    x = four_clusters(n)
    z = true_labels(x)
    np.save(tmp_path / "x.npy", x + 1e3)
    np.save(tmp_path / "z.npy", z)
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    child = subprocess.run(
        [sys.executable, "-c", FLOAT32_RUN, os.path.join(root, "models", "gaussian_niw.dp"),
         str(tmp_path / "x.npy"), str(tmp_path / "z.npy"),
         json.dumps({kernel: KERNEL_OPTIONS.get(kernel, {}) for kernel in KERNELS})],
        env=dict(os.environ, DPPPL_X64="0", PYTHONPATH=os.path.abspath(root)), capture_output=True, text=True,
        check=True)
    result = json.loads(child.stdout.splitlines()[-1])
    assert result["dtype"] == "float32"
    target, tol = MODEL.bind(x), float32_tolerance(n)
    assert abs(result["log_joint"] - dpppl.log_joint(MODEL, x, z)) <= tol
    for kernel in KERNELS:
        run = result[kernel]
        errors = [abs(lp - reference_lp(target, zs, a)) for zs, a, lp in zip(run["z"], run["alpha"], run["lp"])]
        assert max(errors) <= tol, (kernel, errors)
        assert max(run["z"][-1]) >= 3, kernel  # the four clusters are found
