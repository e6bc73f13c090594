"""The label-swap move: the paper's closed-form acceptance holds for the pseudo-particle prior (eq. 7) only."""

import jax.numpy as jnp
import numpy as np
import pytest

from dpppl.kernels.stick_breaking.labelswap import swap_log_ratio_pseudo_particles
from dpppl.priors import StickBreaking
import dpppl
from tests.helpers.stick_breaking import FIG1_PRIOR, native_and_jax_steps
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



@pytest.mark.parametrize("name, prior", [
    ("labelswap", StickBreaking.pitman_yor(0.25, 1.0)),
    ("labelpermute", StickBreaking.pseudo_particles([1.0, 0.5, 2.0, 0.3, 0.2, 0.8]))], ids=["swap-pitman_yor",
                                                                                          "permute-finite"])
def test_native_and_jax_label_moves_make_the_same_draws(monkeypatch, name, prior):
    """The chunks of proposals accepted natively (DPPPL_NATIVE=1) and by the JAX loop (0) from the
    same keys: the same labels, counts and acceptance statistics after each step (vmapped over
    chains), and the moves did relabel (the test could fail)."""
    x, _ = dpppl.datasets.gaussian_mixture(90, 2, 4, mean_scale=4.0, seed=1)
    model = dpppl.StickBreakingMixture(prior.a, prior.b, component=dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=9.0))
    runs, start = native_and_jax_steps(monkeypatch, name, model.bind(x))
    for (z, n, info), (z_jax, n_jax, info_jax) in zip(runs["1"], runs["0"]):
        np.testing.assert_array_equal(z, z_jax)
        np.testing.assert_array_equal(n, n_jax)
        np.testing.assert_array_equal(info.accepted, info_jax.accepted)
        np.testing.assert_allclose(info.accept_prob, info_jax.accept_prob, rtol=1e-9)
    assert sum(int(step[2].accepted.sum()) for step in runs["1"]) > 0
    assert not np.array_equal(runs["1"][-1][0], start)


@pytest.mark.parametrize("path", ["native", "jax"])
def test_proposals_past_the_horizon_are_rejected_and_within_it_past_the_slots_overflow(path):
    """A relabelling proposal may reach labels up to the horizon 2 L + 1 (L the largest occupied
    slot) of the state it leaves and of the state it proposes: past either it is rejected (the
    reverse move could not be proposed), whatever label past the slots it drew; within the
    horizon but past the slots it asks for more slots (overflow). Natively and in JAX."""
    from dpppl.kernels.stick_breaking.labelswap import _accept_in_jax, horizon
    from dpppl.models.native_seating import native_relabel, use_native_sticks

    if path == "native" and not use_native_sticks():
        pytest.skip("the native library is not built here")
    accept = native_relabel if path == "native" else _accept_in_jax
    prior = StickBreaking.pitman_yor(0.25, 1.0)
    C = 8

    def run(counts, labels):
        counts = jnp.asarray(counts, jnp.float64)
        out = accept(prior, counts, jnp.arange(C, dtype=jnp.int32), jnp.asarray(labels, jnp.int32),
                     jnp.zeros((len(labels), 1)), jnp.zeros(len(labels)), len(labels), permute=False)
        slot_of, new_counts, acc_sum, accepted, overflow = (np.asarray(v) for v in out)
        return new_counts.tolist(), float(acc_sum), int(accepted), bool(overflow)

    assert int(horizon(jnp.asarray([3.0, 0, 2, 0, 0, 0, 0, 0]))) == 5
    # uniform 0: accepted whenever the acceptance probability is positive
    assert run([3, 0, 2, 0, 0, 0, 0, 0], [[0, 6]]) == ([3, 0, 2, 0, 0, 0, 0, 0], 0.0, 0, False)  # past H(Z) = 5
    new, acc, accepted, overflow = run([3, 0, 2, 0, 0, 0, 0, 0], [[0, 5]])   # within both horizons
    assert accepted == 1 and 0 < acc and new == [0, 0, 2, 0, 0, 3, 0, 0] and not overflow
    # Z' = label 1 only: H(Z') = 1 < 3, so the swap back could not be proposed: rejected
    assert run([0, 0, 0, 2, 0, 0, 0, 0], [[3, 0]]) == ([0, 0, 0, 2, 0, 0, 0, 0], 0.0, 0, False)
    # a label past the 8 slots: rejected when H(Z) < 8, else more slots are needed
    assert run([3, 0, 2, 0, 0, 0, 0, 0], [[0, C]]) == ([3, 0, 2, 0, 0, 0, 0, 0], 0.0, 0, False)
    assert run([3, 0, 2, 0, 0, 1, 0, 0], [[0, C]])[3]


@pytest.mark.parametrize("path", ["native", "jax"])
def test_permutations_of_more_labels_than_keys_are_rejected(path):
    """A labelpermute proposal permutes slots 0..m by m + 1 of its W keys (W = `permute_width(prior)`, a
    property of the prior, not of the slots): one with m >= W is rejected without asking for slots,
    one within the keys, the horizon and the slots is made. Natively and in JAX."""
    from dpppl.kernels.stick_breaking.labelswap import PERMUTE_KEYS, PERMUTE_TAIL, _accept_in_jax, permute_width
    from dpppl.models.native_seating import native_relabel, use_native_sticks

    if path == "native" and not use_native_sticks():
        pytest.skip("the native library is not built here")
    accept = native_relabel if path == "native" else _accept_in_jax
    prior = StickBreaking.pitman_yor(0.25, 1.0)
    counts = [0.0, 3, 2, 0, 0, 0, 0, 0]  # largest occupied slot 2: horizon 5

    def run(m, keys):
        out = accept(prior, jnp.asarray(counts), jnp.arange(8, dtype=jnp.int32), jnp.asarray([[m, m]], jnp.int32),
                     jnp.asarray([keys]), jnp.zeros(1), 1, permute=True)
        slot_of, new_counts, acc_sum, accepted, overflow = (np.asarray(v) for v in out)
        return new_counts.tolist(), int(accepted), bool(overflow)

    assert run(3, [0.9, 0.5, 0.1]) == (counts, 0, False)         # m = 3 >= W = 3 keys
    assert run(3, [0.9, 0.5, 0.1, 0.7]) == ([2, 3, 0, 0, 0, 0, 0, 0], 1, False)
    assert run(2, [0.9, 0.5, 0.1]) == ([2, 3, 0, 0, 0, 0, 0, 0], 1, False)
    width = permute_width(prior)
    low, high = PERMUTE_KEYS
    assert low <= width <= high
    log_w, log_rest = prior.log_prior_weights(width)
    assert float(jnp.exp(log_rest)) < PERMUTE_TAIL or width in (low, high)


def test_a_chunk_of_proposals_has_the_same_size_on_points_padded_to_their_class():
    """A chunk's random numbers are one draw with a row per proposal (`chunk_size` rows): N points and
    the same points padded to their shape class (`point_class`) draw the same chunks, so padding changes
    no proposal; the chunks stop at `CHUNK`."""
    from dpppl.kernels.stick_breaking.labelswap import CHUNK, chunk_size
    from dpppl.run.runner import PADDED_FROM, point_class

    for n in (PADDED_FROM, 70, 90, 100, 300, 600, 620, 5000):
        assert chunk_size(n) == chunk_size(point_class(n)) >= min(n, CHUNK)
    assert chunk_size(70) == 128 and chunk_size(10**5) == CHUNK
