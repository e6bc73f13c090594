"""Sufficient-statistic sums of dpppl.families.base."""


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
    by_sorting = segment_sums_by_sorting(lambda b, w: (family.weighted_stats(b, w), w @ b), xj, labels, 7, 256)
    direct = segment_sums(lambda p: (family.point_stats(p), p), xj, labels, 7)
    for got, want in zip(jax.tree.leaves(by_sorting), jax.tree.leaves(direct)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-9)
    assert float(by_sorting[0].n[3]) == 0.0 and float(by_sorting[0].n.sum()) == float((np.asarray(labels) < 7).sum())

