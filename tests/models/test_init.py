"""Init strategies and the one capacity rule, shared by dpppl.sample and the NumPyro adapter."""

import jax
import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group
from dpppl.models.init import (check_labels, grown_slots, initial_slots, initial_states, merged_labels, reassigned,
                               resolve_init, sequential, states_from_labels)
from tests.helpers.stick_breaking import FIG1_PRIOR, NKC


def test_capacity_rule(niw_model, two_blobs):
    target = niw_model.bind(two_blobs[0])  # 30 points: at most 31 slots
    assert initial_slots(target, 1) == 16
    assert initial_slots(target, 8) == 24
    assert initial_slots(target, 20) == 31
    assert initial_slots(target, 3, requested=5) == 5
    assert initial_slots(target, 9, requested=5) == 9  # never fewer than the labels in use
    assert initial_slots(target, 1, growable=False) == 31
    assert grown_slots(target, 16) == 31
    for bad in (1, 2.5, True, "16"):
        with pytest.raises(dpppl.ArgumentError, match=rf"^capacity must be an integer >= 2, got {bad!r}$"):
            initial_slots(target, 1, requested=bad)


def test_a_seating_that_fills_every_slot_is_grown_once_more():
    """A seating with no empty slot left would make the first chunk overflow at once (and
    compile again): it leaves with `grown_slots` of its capacity; a capacity asked for is kept."""
    x = np.linspace(-30.0, 30.0, 24)[:, None]  # far apart under a tiny component scale: 24 clusters
    model = dpppl.DPMixture(50.0, dpppl.NormalKnownCov(sigma2=1e-4, mu0=0.0, tau2=100.0))
    target = model.bind(x)
    keys = jax.random.split(jax.random.key(1), 2)
    states = sequential(target, keys)
    first = initial_slots(target, 8)  # the seating's own capacity: 24, every slot used
    assert (np.asarray(states.stats.n)[:, :first] > 0).all()
    assert states.stats.n.shape[-1] == grown_slots(target, first) > first
    assert not np.asarray(states.overflow).any()
    asked = sequential(target, keys, capacity=first)
    assert asked.stats.n.shape[-1] == first
    np.testing.assert_array_equal(asked.z, states.z)  # room never changes the seating


def test_a_labelled_prior_starts_with_room_for_its_tail():
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    target = model.bind(np.linspace(-1, 1, 10))
    assert initial_slots(target, 1) >= target.prior.initial_capacity(10)
    assert target.max_slots() > 11  # labels may lie past N + 1


def test_init_strategies_by_name_callable_and_labels(niw_model, two_blobs):
    x, truth = two_blobs
    target = niw_model.bind(x)
    keys = jax.random.split(jax.random.key(0), 2)
    assert resolve_init("sequential") == (sequential, "sequential")
    assert resolve_init(sequential) == (sequential, "sequential")
    states = initial_states(target, truth + 5, keys)  # relabelled 0..K-1 by first appearance
    assert np.array_equal(np.asarray(states.z), np.stack([truth, truth]))

    def halves(target, keys, capacity):
        return initial_states(target, np.repeat([0, 1, 2], 10), keys, capacity)

    # gibbs on two chains in 16 slots: the program tests/run/test_driver.py compiles for this model and data
    idata = dpppl.sample(niw_model, x, kernel="gibbs", init=halves, num_warmup=0, num_samples=1, num_chains=2,
                         seed=np.int64(2), progress_bar=False)
    assert group(idata, "posterior").attrs["init"] == "callable"
    seed = group(idata, "posterior").attrs["seed"]  # a NumPy seed is recorded as the int, not as "2"
    assert seed == 2 and type(seed) is int
    with pytest.raises(dpppl.ArgumentError, match="^init must be one of .'sequential', 'single', 'prior'"):
        resolve_init("sequentail")
    with pytest.raises(dpppl.ArgumentError, match=r"^init labels must have shape \(30,\) or \(2, 30\), got \(29,\)$"):
        check_labels(target, np.zeros(29, int), 2)


@pytest.mark.parametrize("labels, shown", [
    (-np.ones(30, int), "got -1 at point 0 (30 negative in all)"),
    (np.r_[np.zeros(7, int), -3, np.ones(22, int)], "got -3 at point 7 (1 negative in all)"),
    (np.stack([np.zeros(30), np.r_[np.zeros(29), -1.0]]), "got -1 at chain 1, point 29 (1 negative in all)")])
def test_negative_init_labels_are_refused_with_their_position(niw_model, two_blobs, labels, shown):
    """All -1 labels used to be accepted (renumbered as one cluster)."""
    target = niw_model.bind(two_blobs[0])
    with pytest.raises(dpppl.ArgumentError, match="^init labels must be non-negative integers .cluster numbers.,") as e:
        check_labels(target, labels, 2)
    assert str(e.value).endswith(shown)


def test_prior_init_draws_partitions_from_the_prior(niw_model, two_blobs):
    target = niw_model.bind(two_blobs[0])
    states = initial_states(target, "prior", jax.random.split(jax.random.key(1), 200))
    k = np.asarray((states.stats.n > 0).sum(axis=1))
    # CRP(alpha = E[alpha] = 1) on 30 points: E[K] = sum_i 1 / i = 3.99, sd about 1.4
    expected = dpppl.simulate.expected_num_clusters(dpppl.CRP(1.0), 30)
    assert abs(k.mean() - expected) < 4 * 1.4 / np.sqrt(200)


def test_the_merge_pass_joins_the_pieces_of_each_group_and_no_two_groups(niw_model, two_blobs):
    """`merged_labels` (the multi-process start's merge of the processes' clusters, run here on one
    process's statistics): each blob cut in pieces, as P processes' seatings leave it (with empty slots
    between, as after a process's seating), comes back as one cluster per blob, numbered in the order
    of their lowest slots; the blobs stay apart, and the pass stops where no merge raises the log joint."""
    x, truth = two_blobs
    target = niw_model.bind(x)
    pieces = np.stack([np.where(truth == 0, 5 - np.arange(30) % 3, np.arange(30) % 2 * 2),  # slots 0, 2 / 3, 4, 5
                       np.where(truth == 0, 1, 3 + np.arange(30) % 3)])  # slot 1 / 3, 4, 5
    keys = jax.random.split(jax.random.key(0), 2)
    with dpppl.config.x64():
        states = states_from_labels(target, keys, pieces, 8)
        merged = np.take_along_axis(merged_labels(target, states.stats), pieces, axis=1)
        np.testing.assert_array_equal(merged, [1 - truth, truth])
        joined = float(target.log_joint_of_labels(truth))
        assert joined > max(float(target.log_joint_of_labels(row)) for row in pieces)
        assert joined > float(target.log_joint_of_labels(np.zeros(30, int)))  # the two blobs merged


def test_reassigned_points_leave_a_cluster_spanning_two_groups_for_those_of_their_own(niw_model, two_blobs):
    """`reassigned` (the multi-process start's hard assignment against every process's clusters): with one
    cluster holding a third of each blob, and one cluster for the rest of each blob, the points leave the
    spanning cluster for their own blob's within three rounds (each round's statistics those of the last
    round's labels), all but those it keeps to itself (its statistics include theirs: a point alone in it
    stays), and the merge pass after them gives one cluster per blob, as the start does."""
    x, truth = two_blobs
    target = niw_model.bind(x)
    spanning = np.arange(30) % 3 == 0
    labels = np.where(spanning, 0, truth + 1)[None]
    with dpppl.config.x64():
        stats = states_from_labels(target, jax.random.split(jax.random.key(0), 1), labels, 8).stats
        for _ in range(3):
            labels, stats = reassigned(target, stats)
        assert set(truth[labels[0] == 0]) != {0, 1} and np.sum(labels[0] == 0) < np.sum(spanning)
        np.testing.assert_array_equal(labels[0][labels[0] != 0], (truth + 1)[labels[0] != 0])
        merged = merged_labels(target, stats)[0][labels[0]]
    assert [len(np.unique(merged[truth == b])) for b in (0, 1)] == [1, 1] and merged[0] != merged[-1]
