"""The label-swap move: the paper's closed-form acceptance holds for the pseudo-particle prior (eq. 7) only."""

import jax.numpy as jnp
import numpy as np
import pytest

from dpppl.kernels.stick_breaking.labelswap import swap_log_ratio_pseudo_particles
from dpppl.priors import StickBreaking
from tests.helpers.stick_breaking import FIG1_PRIOR
RNG = np.random.default_rng(0)


def test_label_swap_ratio_closed_form_holds_for_eq_7_only():
    """The paper's closed-form swap acceptance equals the ratio of labelled laws for the
    pseudo-particle prior; for general (a_i, b_i), such as the Fig. 1 prior, it does not,
    and the kernels use the general ratio."""
    gamma = np.array([1.3, 0.4, 2.0, 0.7, 0.2])
    pp = StickBreaking.pseudo_particles(gamma)
    general = StickBreaking(*FIG1_PRIOR)
    wrong = []
    for _ in range(20):
        counts = RNG.integers(0, 5, size=5).astype(float)
        i, j = RNG.choice(5, size=2, replace=False)
        swapped = counts.copy()
        swapped[[i, j]] = counts[[j, i]]
        closed = float(swap_log_ratio_pseudo_particles(gamma[i], gamma[j], counts[i], counts[j]))
        exact = float(pp.log_prob_labels(jnp.asarray(swapped)) - pp.log_prob_labels(jnp.asarray(counts)))
        assert closed == pytest.approx(exact, abs=1e-10)
        a = general.sticks(5)[0]
        closed_general = float(swap_log_ratio_pseudo_particles(a[i], a[j], counts[i], counts[j]))
        exact_general = float(general.log_prob_labels(jnp.asarray(swapped))
                              - general.log_prob_labels(jnp.asarray(counts)))
        wrong.append(abs(closed_general - exact_general) > 1e-3)
    assert sum(wrong) >= 10

