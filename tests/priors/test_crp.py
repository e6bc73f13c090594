"""The CRP / Pitman-Yor prior's EPPF pieces."""

import jax
import numpy as np
import pytest

from dpppl.priors.crp import PitmanYor


@pytest.mark.parametrize("discount", [0.0, 0.3])
def test_the_change_of_the_eppf_is_the_difference_of_the_eppfs(discount):
    """`log_eppf_change` (split-merge's prior ratio from the two slots it changes) against the
    difference of the full `log_eppf`s, for splits, merges and moves between two clusters."""
    prior = PitmanYor(alpha=1.7, discount=discount)
    rng = np.random.default_rng(0)
    for _ in range(20):
        counts = rng.integers(0, 6, 8).astype(float)
        a, b = rng.choice(8, 2, replace=False)
        new = counts.copy()
        total = counts[a] + counts[b]
        new[a] = rng.integers(0, total + 1)
        new[b] = total - new[a]
        if counts.sum() == 0:
            continue
        change = prior.log_eppf_change(counts[[a, b]], new[[a, b]], counts, 1.7)
        expected = prior.log_eppf(new, 1.7) - prior.log_eppf(counts, 1.7)
        np.testing.assert_allclose(float(change), float(expected), rtol=1e-10, atol=1e-10)
    assert jax.numpy.isfinite(change)
