"""Sufficient-statistic sums and translations of dpppl.families.base."""


import dataclasses

import numpy as np
import pytest

import dpppl
from dpppl.families.base import segment_sums


@pytest.mark.parametrize("component, dim", [(dpppl.NormalInverseWishart(), 12), (dpppl.NormalGamma(), 3)])
def test_sums_by_sorting_equal_segment_sums(component, dim):
    """The sorted, block-product sums (used above SMALL_DIM dimensions) equal the per-point
    segment sums: N not a multiple of the block, empty segments, dropped labels (>= S),
    and the family's weighted_stats (NIW: matrix products) or the generic one."""
    import jax
    import jax.numpy as jnp

    from dpppl.families.base import segment_sums_by_sorting

    rng = np.random.default_rng(1)
    x = rng.normal(loc=3.0, size=(2_500, dim))
    labels = jnp.asarray(rng.choice([0, 1, 2, 4, 6, 7], size=len(x)))  # 3 and 5 empty, 7 dropped
    family = dpppl.DPMixture(1.0, component).bind(x).family
    xj = jnp.asarray(x)
    by_sorting, direct = jax.jit(lambda xj, labels: (  # one program: eagerly, every primitive compiles on its own
        segment_sums_by_sorting(lambda b, w: (family.weighted_stats(b, w), w @ b), xj, labels, 7, 256),
        segment_sums(lambda p: (family.point_stats(p), p), xj, labels, 7)))(xj, labels)
    for got, want in zip(jax.tree.leaves(by_sorting), jax.tree.leaves(direct)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-9)
    assert float(by_sorting[0].n[3]) == 0.0 and float(by_sorting[0].n.sum()) == float((np.asarray(labels) < 7).sum())



@pytest.mark.parametrize("component", [
    dpppl.NormalInverseWishart(mu0=[1.0, -2.0], kappa0=0.3, nu0=4.0, psi0=[[1.0, 0.2], [0.2, 0.5]]),
    dpppl.NormalGamma(mu0=[1.0, -2.0], kappa0=0.3, a0=2.0, b0=[0.5, 1.5]),
    dpppl.NormalKnownCov(sigma2=[0.5, 2.0], mu0=[1.0, -2.0], tau2=3.0),
    dpppl.NormalLogNormal(m0=[1.0, -2.0], s0=2.0, l0=0.0, t0=1.0),
], ids=["niw", "normal_gamma", "normal_known", "normal_lognormal"])
def test_translated_family_of_translated_data_has_the_same_densities(component):
    """p(x - c | m - c) = p(x | m) for a location family (families.base.translated): the
    marginal (numerical for NormalLogNormal), the predictive, the likelihood of drawn
    parameters moved back by translated_params, all to float64 rounding; the locations
    moved are the family's declared ones, and the rest of the family is unchanged."""
    import jax
    import jax.numpy as jnp

    from dpppl.families.base import cluster_log_marginals, translated, translated_params

    rng = np.random.default_rng(4)
    x = rng.normal(loc=[3.0, 1.0], size=(7, 2))
    c = np.array([2.5, -40.0])
    family = component.resolve(x)
    moved = translated(family, c)
    for name in family.locations:
        np.testing.assert_array_equal(getattr(moved, name), np.asarray(getattr(family, name)) - c)
    assert [f for f in dataclasses.fields(family) if f.name not in family.locations and not np.array_equal(
        getattr(family, f.name), getattr(moved, f.name))] == []
    point = rng.normal(size=2)

    @jax.jit  # one program: eagerly, every primitive compiles on its own
    def densities(x, point):
        """Pairs (of the family at x, of the moved family at x - c) that must agree."""
        whole = [jax.tree.map(lambda p: p.sum(axis=0), f.point_stats(d)) for f, d in ((family, x), (moved, x - c))]
        pairs = [(cluster_log_marginals(family, whole[0]), cluster_log_marginals(moved, whole[1]))]
        if family.conjugate:
            pairs.append((family.log_predictive(family.predictive_params(whole[0]), point),
                          moved.log_predictive(moved.predictive_params(whole[1]), point - c)))
            draws = moved.posterior_draw(jax.random.key(0), whole[1])
            back = translated_params(family, draws, c)
            pairs.append((family.log_likelihood(jax.tree.map(lambda p: p[None], back), x),
                          moved.log_likelihood(jax.tree.map(lambda p: p[None], draws), x - c)))
        return pairs

    for want, got in densities(jnp.asarray(x), jnp.asarray(point)):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    assert translated(family, None) is family


def test_families_without_locations_are_not_translated():
    """Counts, binary data and rankings have no location: no shift, the family itself."""
    from dpppl.families.base import translated
    from dpppl.models.mixture import data_shift

    for component, x in [(dpppl.DirichletMultinomial(), np.array([[1, 2], [0, 3]])),
                         (dpppl.BetaBernoulli(), np.array([[1, 0], [0, 1]]))]:
        family = component.resolve(x.astype(float))
        assert family.locations == () and data_shift(family, x) is None
        assert translated(family, np.ones(2)) is family


@pytest.mark.parametrize("psi0, expected", [(2.0, 2.0 * np.eye(2)), ("3 / 2", 1.5 * np.eye(2)),
                                            ([0.5], 0.5 * np.eye(2)),
                                            ([[1.0, 0.2], [0.2, 0.5]], [[1.0, 0.2], [0.2, 0.5]])])
def test_a_scalar_scale_matrix_is_the_identity_scaled(psi0, expected):
    """`psi0 = s` means s I for every family with a matrix hyperparameter (NIW and the DDP's CoupledGaussian)."""
    x = np.random.default_rng(0).normal(size=(12, 2))
    np.testing.assert_array_equal(dpppl.NormalInverseWishart(psi0=psi0).resolve(x).psi0, expected)
    np.testing.assert_array_equal(dpppl.families.CoupledGaussian(psi0=psi0).resolve(x, np.arange(3.0)).psi0, expected)


def test_a_vector_for_a_scale_matrix_says_to_write_diag():
    text = ("data x : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NormalInverseWishart(psi0 = [1, 1])\n"
            "x[i] ~ Normal(theta[z[i]])\n")
    with pytest.raises(dpppl.errors.HyperparameterError) as info:
        dpppl.parse(text).bind(np.random.default_rng(0).normal(size=(12, 2)))
    assert (info.value.line, info.value.column) == (3, 40)
    assert info.value.bare_message == (
        "NormalInverseWishart: hyperparameter psi0 is a (2, 2) matrix, got a vector of shape (2,) (the expression "
        "'[1, 1]' produced it); write diag(...) for a diagonal matrix, or a number s for s times the identity")
