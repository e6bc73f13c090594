"""Stick-breaking priors on explicit labels (Porteous, Ihler, Smyth & Welling 2006): the
labelled law and eq. (6) against independent computations, and the footnote-1 check."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special

import dpppl
from dpppl.priors import PitmanYor, StickBreaking
from dpppl.testing import set_partitions
from dpppl.testing.labelled import stick_breaking_log_eppf
from tests.helpers.stick_breaking import FIG1_PRIOR


def _counts(parts, n):
    return (parts[:, :, None] == np.arange(n)).sum(axis=1)


# ---------------------------------------------------------------------------- the prior


@pytest.mark.parametrize("discount, alpha", [(0.0, 1.0), (0.0, 3.0), (0.1, 1.0)])
def test_labelled_law_summed_over_labellings_is_the_pitman_yor_eppf(discount, alpha):
    """StickBreaking(a = 1 - d, b = alpha + i d) summed over labellings = PY EPPF (Pitman 2006)."""
    counts = _counts(set_partitions(5), 5)
    log_w, _, bound = stick_breaking_log_eppf(StickBreaking.pitman_yor(discount, alpha), counts)
    want = jax.vmap(lambda c: PitmanYor(discount, alpha).log_eppf(c, alpha))(jnp.asarray(counts, float))
    assert bound < 1e-9
    np.testing.assert_allclose(log_w, want, atol=1e-9)
    # the paper's example (sec. 3.1): P(z_1 = z_2) = 1 / (1 + alpha) for a DP, summed over labels
    if discount == 0:
        pair = stick_breaking_log_eppf(StickBreaking(1.0, alpha), np.array([[2, 0]]))[0][0]
        assert np.exp(pair) == pytest.approx(1.0 / (1.0 + alpha), rel=1e-9)


def test_labelled_law_matches_integrals_over_the_sticks():
    """P(Z) = prod_i E[V_i^N_i (1 - V_i)^M_i], each expectation by quadrature (eqs. 8b, 8c)."""
    prior = StickBreaking(a=lambda i: 1.0 + 0.5 * i, b=lambda i: 2.0 / i)
    counts = np.array([2.0, 0.0, 3.0, 1.0, 0.0])
    a, b = prior.sticks(5)
    later = np.cumsum(counts[::-1])[::-1] - counts
    # the singular factor (1 - v)^(b - 1) (b < 1 here) is the quadrature weight (QAWS)
    quad = sum(np.log(integrate.quad(lambda v: v**(n + ai - 1) * (1 - v)**m / special.beta(ai, bi), 0, 1,
                                     weight="alg", wvar=(0.0, bi - 1.0), epsabs=0, epsrel=1e-12)[0])
               for n, m, ai, bi in zip(counts, later, a, b))
    assert float(prior.log_prob_labels(jnp.asarray(counts))) == pytest.approx(quad, rel=1e-9)


def test_expected_weights_are_the_prediction_rule_of_the_labelled_law():
    """Eq. (6): E[pi_i | Z] = P(Z + one point at i) / P(Z); with the rest past C they sum to 1."""
    prior = StickBreaking(*FIG1_PRIOR)
    counts = jnp.array([3.0, 0.0, 2.0, 0.0, 0.0, 0.0])
    log_w, log_rest = prior.log_expected_weights(counts)
    base = prior.log_prob_labels(counts)
    ratio = [float(prior.log_prob_labels(counts.at[k].add(1.0)) - base) for k in range(6)]
    np.testing.assert_allclose(log_w, ratio, atol=1e-12)
    assert float(jnp.exp(log_w).sum() + jnp.exp(log_rest)) == pytest.approx(1.0, abs=1e-12)


def test_pseudo_particles_give_eq_7():
    gamma = np.array([1.0, 0.5, 2.0])
    prior = StickBreaking.pseudo_particles(gamma)
    assert prior.num_sticks == 3
    counts = jnp.array([1.0, 3.0, 0.0, 0.0])
    log_w, log_rest = prior.log_expected_weights(counts)
    np.testing.assert_allclose(np.exp(log_w), np.r_[(gamma + counts[:3]) / (gamma.sum() + 4), 0.0], atol=1e-12)
    assert float(log_rest) == -np.inf
    assert float(prior.log_prob_labels(jnp.array([0.0, 0.0, 0.0, 1.0]))) == -np.inf  # past the last stick


@pytest.mark.parametrize("a, b, message", [
    ([1.0, 2.0], [1.0, 1.0], "must end with b_2 = 0"),
    (1.0, lambda i: i**2.0, "do not sum to one"),
    (1.0, "i^1.5", "do not sum to one"),
    (1.0, -1.0, "b_i must be non-negative"),
    (0.0, 1.0, "a_i must be positive"),
    ([1.0, 2.0], [1.0, 2.0, 0.0], "different lengths"),
    (1.0, "theta + i", "may use the stick index 'i' and numbers only"),
])
def test_prior_errors(a, b, message):
    with pytest.raises(dpppl.ModelError, match=message):
        StickBreaking(a, b)


def test_priors_whose_weights_sum_to_one_pass_the_check():
    StickBreaking.pitman_yor(0.99, 1.0)               # log(1 + a_i/b_i) ~ harmonic: diverges
    StickBreaking(a=1.0, b=lambda i: 0.5 * i)           # b_i linear in i: diverges
    StickBreaking(a="0.5", b="2 + sqrt(i)")             # an expression of i
    assert StickBreaking(a=[1.0, 1.0], b=[1.0, 0.0]).num_sticks == 2
    assert StickBreaking(a=1.0, b="3 - i").num_sticks == 3  # the first b_i = 0 ends the sticks



def test_initial_capacity_holds_the_labels_of_a_runs_fresh_draws():
    """A chain starts with the first C slots past which RUN_SWEEPS x n labels drawn afresh from the prior
    would land with probability below 1% (a union bound), so that a run rarely grows its slots (a
    recompilation), within max(8 n, 256)."""
    from dpppl.priors.stick_breaking import RUN_SWEEPS

    prior, n = StickBreaking.pitman_yor(0.25, 1.0), 300
    C = prior.initial_capacity(n)
    a, b = prior.sticks(C)
    log_past = np.log(RUN_SWEEPS * n) + np.cumsum(np.log(b / (a + b)))  # log of n R_L, L = 1..C
    assert log_past[C - 1] < np.log(0.01) <= log_past[C - 2]
    assert C > 2 * n + 8  # more than the cap of before, which made such runs grow
    heavy = StickBreaking.pitman_yor(0.4, 1.0)
    assert heavy.initial_capacity(4) == 256 and heavy.initial_capacity(100) == 800


@pytest.mark.parametrize("prior", [StickBreaking.pitman_yor(0.25, 1.0),
                                   StickBreaking.pseudo_particles([1.0, 0.5, 2.0, 0.3])],
                         ids=["pitman-yor", "finite"])
def test_prior_weights_from_the_host_are_the_expected_weights_of_no_points(prior):
    """`log_prior_weights` (numpy, on the host: constants of a program) is `log_expected_weights`
    of zero counts (jax.numpy, in a program), past the last stick of a finite prior too."""
    for n in (3, 4, 9):
        log_w, log_rest = prior.log_prior_weights(n)
        expected_w, expected_rest = prior.log_expected_weights(jnp.zeros(n))
        np.testing.assert_allclose(np.asarray(log_w), np.asarray(expected_w), rtol=1e-14)
        np.testing.assert_allclose(float(log_rest), float(expected_rest), rtol=1e-14)
    assert np.isneginf(np.asarray(prior.log_prior_weights(9)[0])).sum() == (5 if prior.num_sticks else 0)
