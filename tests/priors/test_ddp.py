"""The dependent-DP prior (Porteous et al. 2006, sec. 5): the stick formulas against the
chain rule and the paper's P(z1 = z2)."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl.models.ddp import DDPMixture
from tests.helpers.ddp import MODEL_TEXT


# ----------------------------------------------------------------------------- priors


@pytest.mark.parametrize("sticks", [(1.0, 1.0), (5.0, 0.1), (0.75, lambda i: 0.5 + 0.25 * i), (1.0, [2.0, 1.0, 0.0])])
def test_labelled_partition_of_every_slice_is_the_product_of_the_prediction_rule(sticks):
    """P(Z_t) (eq. 5 integrated) equals the chain rule of E[pi_{t,i} | Z_t] (eq. 6), slice by
    slice when the counts have a leading axis of slices (as the DDP kernels use them)."""
    prior = dpppl.DDP(*sticks)
    C, T = 12, 3
    top = 6 if prior.num_sticks is None else prior.num_sticks
    rng = np.random.default_rng(1)
    log_expected_weights = jax.jit(prior.log_expected_weights)  # one program each, not op by op
    counts = np.zeros((T, C))
    chain = np.zeros(T)
    for t in range(T):
        for lab in rng.integers(0, top, size=9):
            log_w, _ = log_expected_weights(counts)
            chain[t] += float(log_w[t, lab])
            counts[t, lab] += 1.0
    np.testing.assert_allclose(np.asarray(jax.jit(prior.log_prob_labels)(counts)), chain, atol=1e-10)


def test_stick_weights_sum_to_one_with_the_tail():
    prior = dpppl.DDP(1.0, 3.0)
    counts = jnp.asarray([[0, 4, 0, 2, 1, 0, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0, 0, 0, 0, 1]], float)
    log_w, log_tail = jax.jit(prior.log_expected_weights)(counts)
    np.testing.assert_allclose(np.exp(log_w).sum(axis=1) + np.exp(log_tail), 1.0, atol=1e-12)
    log_prior, log_rest = jax.jit(prior.log_prior_weights, static_argnums=0)(200)
    assert float(jnp.exp(log_prior).sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(jnp.exp(log_prior[0])) == pytest.approx(0.25) and float(log_rest) < -50


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_two_points_share_a_label_with_the_crp_probability(alpha):
    """The paper's example (sec. 3.1): summing over labels, P(z1 = z2) = 1 / (1 + alpha)."""
    C = 400
    counts = 2.0 * np.eye(C)
    same = jax.jit(lambda c: jnp.exp(dpppl.DDP(1.0, alpha).log_prob_labels(c)).sum())(counts)
    assert float(same) == pytest.approx(1.0 / (1.0 + alpha), abs=1e-9)


def test_sticks_take_the_forms_of_stick_breaking_and_bad_ones_raise():
    d, theta = 0.3, 1.5
    pitman_yor = dpppl.StickBreaking.pitman_yor(d, theta)
    by_expression = dpppl.DDP(a=1 - d, b=f"{theta} + i * {d}")
    counts = jnp.asarray([[3.0, 0.0, 2.0, 1.0], [0.0, 1.0, 0.0, 5.0]])
    np.testing.assert_allclose(np.asarray(jax.jit(by_expression.log_prob_labels)(counts)),
                               np.asarray(jax.jit(pitman_yor.log_prob_labels)(counts)), rtol=1e-12)
    assert DDPMixture(sticks=pitman_yor).prior == dpppl.DDP(a=pitman_yor.a, b=pitman_yor.b)
    with pytest.raises(dpppl.ModelError, match="a_3 = -1"):
        dpppl.DDP(a=[1.0, 1.0, -1.0], b=[1.0, 1.0, 0.0])
    with pytest.raises(dpppl.ModelError, match="must end with b_2 = 0"):
        dpppl.DDP(a=1.0, b=[1.0, 1.0])
    with pytest.raises(dpppl.ModelError, match="do not sum to one"):
        dpppl.DDP(a=1.0, b=lambda i: i ** 2.0)
    with pytest.raises(dpppl.ModelError, match="pair"):
        DDPMixture(sticks=(1.0, 1.0, 1.0))
    model = dpppl.parse(MODEL_TEXT.replace("DDP(a = 1, b = 2)", f"DDP(a = 1 - {d}, b = {theta} + i * {d})"))
    assert model.prior == by_expression

