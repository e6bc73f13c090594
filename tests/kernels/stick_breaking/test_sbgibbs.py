"""The stick-breaking kernels (sbgibbs, labelswap, labelpermute): which priors they
accept, and draws that do not depend on the number of slots."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl import kernels
from tests.helpers.stick_breaking import FIG1_PRIOR, NKC, X4


# ---------------------------------------------------------------------------- kernels


def test_kernels_refuse_the_wrong_prior():
    sb = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    dp = dpppl.DPMixture(1.0, NKC)
    for name in ("gibbs", "splitmerge", "perm-move", "perm", "gibbs+splitmerge"):
        with pytest.raises(dpppl.KernelError, match="does not apply"):
            kernels.check_applies(name, sb)
    for name in ("sbgibbs", "labelswap", "labelpermute"):
        with pytest.raises(dpppl.KernelError, match="stick-breaking prior"):
            kernels.check_applies(name, dp)
    with pytest.raises(dpppl.KernelError, match="swap_prob"):
        dpppl.sample(sb, X4, kernel="sbgibbs+labelswap", swap_prob=1.5)


def test_draws_do_not_depend_on_the_number_of_slots():
    """The kernels' random numbers do not depend on the capacity C, so a chain that needs a
    label past C is re-run by the driver with more slots and makes the same draws (what
    keeps sampling on the unbounded label space exact)."""
    from dpppl.models.mixture import state_from_labels

    x = np.array([-2.0, -1.8, -1.5, 0.1, 1.7, 2.0])[:, None]
    bound = dpppl.StickBreakingMixture(1.0, 1.0, component=NKC).bind(x)
    kern = kernels.build("sbgibbs+labelswap+labelpermute", bound)
    step = jax.jit(kern.step)
    small, big = (state_from_labels(bound.family, x, np.zeros(6, int), c, 0.0) for c in (10, 40))
    compared = 0
    for t in range(40):
        key = jax.random.key(t)
        small, big = step(key, small, jnp.asarray(x))[0], step(key, big, jnp.asarray(x))[0]
        if bool(small.overflow):
            break
        np.testing.assert_array_equal(small.z, big.z)
        compared += 1
    assert compared >= 5 and int(big.z.max()) >= 2  # labels past the first two were visited



@pytest.mark.parametrize("prior, component", [
    ((0.75, "1 + i * 0.25"),
     dpppl.NormalInverseWishart(mu0=[0.0, 0.0], kappa0=0.1, nu0=4.0, psi0=[[1.0, 0.0], [0.0, 1.0]])),
    (([1.0, 0.5, 2.0, 0.3, 0.2, 0.8], [3.8, 3.3, 1.3, 1.0, 0.8, 0.0]),
     dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=9.0))],
    ids=["niw-pitman_yor", "normal_known-finite"])
def test_native_and_jax_sweeps_make_the_same_draws(monkeypatch, prior, component):
    """The native sweep (DPPPL_NATIVE=1) and the JAX loop (0) from the same keys, vmapped over
    chains: the same labels and counts after each sweep, and the sweeps moved points (the test
    could fail)."""
    from tests.helpers.stick_breaking import native_and_jax_steps

    x, _ = dpppl.datasets.gaussian_mixture(90, 2, 4, mean_scale=4.0, seed=1)
    runs, start = native_and_jax_steps(monkeypatch, "sbgibbs", dpppl.StickBreakingMixture(*prior, component=component)
                                       .bind(x))
    for (z, n, _), (z_jax, n_jax, _) in zip(runs["1"], runs["0"]):
        np.testing.assert_array_equal(z, z_jax)
        np.testing.assert_array_equal(n, n_jax)
    assert not np.array_equal(runs["1"][-1][0], start)


def test_native_sweep_draws_new_labels_past_the_largest_occupied_one_as_the_jax_loop(monkeypatch):
    """Points far apart, each preferring a cluster of its own, take new labels from the lumped tail past
    the largest occupied label: the native sweep continues the CDF's inversion along the prior's terms
    from there, the JAX loop inverts over all C + 1 cells; the same labels after each sweep, and labels
    past the previous sweep's largest were drawn (the test could fail)."""
    from tests.helpers.stick_breaking import native_and_jax_steps

    x = (np.arange(12.0) * 20.0)[:, None]
    model = dpppl.StickBreakingMixture(0.75, "1 + i * 0.25",
                                       component=dpppl.NormalKnownCov(sigma2=0.05, mu0=0.0, tau2=1e4))
    runs, start = native_and_jax_steps(monkeypatch, "sbgibbs", model.bind(x))
    for (z, n, _), (z_jax, n_jax, _) in zip(runs["1"], runs["0"]):
        np.testing.assert_array_equal(z, z_jax)
        np.testing.assert_array_equal(n, n_jax)
    tops = np.stack([start.max(axis=1)] + [z.max(axis=1) for z, _, _ in runs["1"]])
    assert (tops[1:] > tops[:-1]).any()
