"""The DDP swap move: its acceptance ratio against the brute-force ratio of joints."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpppl.models.ddp_state import DDPSlots, slot_statistics
from dpppl.kernels.ddp.swap import swap_log_ratio
from dpppl.core.state import PartitionState
from tests.helpers.ddp import small_model


# ----------------------------------------------------------------------------- the swap


def _random_state(model, x, t, labels, capacity, key):
    bound = model.bind((x, t))
    return bound, jax.jit(bound.state_from_labels, static_argnums=2)(key, jnp.asarray(labels), capacity)


def _joint_fn(bound, C):
    """Augmented log joint of (z, mu, sigma), the parameters of the unused labels among
    ``pair`` counted as prior draws; one jit for all cases."""
    fam, prior, T = bound.family, bound.prior, bound.num_slices

    @jax.jit
    def joint(z, mu, sigma, pair):
        n, nt, s1, s2 = slot_statistics(jnp.asarray(bound.x), jnp.asarray(bound.slices), z, C, T)
        st = PartitionState(z, DDPSlots(n, nt, s1, s2, mu, sigma), jnp.zeros(()), jnp.zeros((), bool))
        unused = jnp.zeros(C, bool).at[pair].set(True) & (n < 0.5)
        extra = jnp.where(unused, fam.log_prior_means(mu) + fam.log_prior_cov(sigma).sum(axis=1), 0.0)  # augmented
        return fam.log_joint_state(prior, st) + jnp.sum(extra)

    return joint


def _slice_counts(z, slices, T, C):
    """N_{t,i}: (T, C) counts of the labels ``z`` in every slice."""
    return np.stack([np.bincount(z[slices == t], minlength=C) for t in range(T)]).astype(float)


def _brute_swap(bound, joint, state, i, j, t1, t2, aug_i, aug_j):
    """The augmented log joint ratio after/before the swap, built from scratch; the labels
    after, and labels i and j's means after and before."""
    T = bound.num_slices
    inside = (np.arange(T) >= t1) & (np.arange(T) <= t2)
    full = bool(inside.all())
    used = np.asarray(state.stats.n) > 0.5
    mu, sigma = np.array(state.stats.mu), np.array(state.stats.sigma)
    for k, aug in ((i, aug_i), (j, aug_j)):
        if not used[k]:
            mu[k], sigma[k] = aug
    z = np.array(state.z)
    moved = inside[bound.slices]
    z_new = z.copy()
    z_new[moved & (z == i)] = j
    z_new[moved & (z == j)] = i
    mu_new, sigma_new = mu.copy(), sigma.copy()
    mu_new[i, inside], mu_new[j, inside] = mu[j, inside], mu[i, inside]
    if bound.family.slice_covariances:  # the covariances of the interval's slices go with the means
        sigma_new[i, inside], sigma_new[j, inside] = sigma[j, inside], sigma[i, inside]
    elif full:
        sigma_new[i], sigma_new[j] = sigma[j], sigma[i]
    pair = jnp.asarray([i, j])
    return float(joint(z_new, mu_new, sigma_new, pair) - joint(z, mu, sigma, pair)), z_new, mu_new[[i, j]], mu[[i, j]]


@pytest.mark.parametrize("slice_covariances", [False, True])
def test_swap_ratio_equals_the_brute_force_ratio_of_joints(slice_covariances):
    rng = np.random.default_rng(3)
    T = 4
    t = np.repeat(np.arange(T), 3).astype(float)
    x = rng.normal(size=(12, 2))
    labels = np.array([0, 0, 1, 0, 2, 1, 2, 2, 4, 0, 1, 4])
    model = small_model(slice_covariances=slice_covariances)
    bound, state = _random_state(model, x, t, labels, 8, jax.random.key(0))
    mus, sigmas = jax.jit(lambda k: bound.family.draw_prior(k, (2,)))(jax.random.key(5))
    aug = [(mus[0], sigmas[0]), (mus[1], sigmas[1])]
    cases = list(itertools.product([(0, 1), (2, 4), (1, 3), (5, 0)], [(0, 0), (1, 2), (0, T - 1), (3, 3)]))
    joint = _joint_fn(bound, 8)
    ratio_fn = jax.jit(lambda i, j, inside, full: swap_log_ratio(bound.family, bound.prior, state.stats, i, j,
                                                                inside, full, aug[0], aug[1]))
    # the paper's rule's two terms, each one program (eagerly, one per primitive)
    stick_sum = jax.jit(lambda counts: bound.prior.log_prob_labels(counts).sum())
    means_sum = jax.jit(lambda mu: bound.family.log_prior_means(mu).sum())
    for (i, j), (t1, t2) in cases:
        inside = (jnp.arange(T) >= t1) & (jnp.arange(T) <= t2)
        ratio, new_i, new_j = ratio_fn(i, j, inside, (t1 == 0) & (t2 == T - 1))
        expected, z_new, mu_new, mu_old = _brute_swap(bound, joint, state, i, j, t1, t2, aug[0], aug[1])
        assert float(ratio) == pytest.approx(expected, rel=1e-9, abs=1e-9), (i, j, t1, t2)
        n_new = np.bincount(z_new, minlength=8)
        assert float(new_i[0].sum()) == n_new[i] and float(new_j[0].sum()) == n_new[j]
        if slice_covariances:  # the paper's rule (sec. 5): only P(Z) and the means' prior change
            sticks = sum(float(stick_sum(jnp.asarray(_slice_counts(zz, bound.slices, T, 8)))) * sign
                         for zz, sign in ((z_new, 1), (np.asarray(state.z), -1)))
            means = float(means_sum(mu_new)) - float(means_sum(mu_old))
            assert float(ratio) == pytest.approx(sticks + means, rel=1e-9, abs=1e-9), (i, j, t1, t2)

