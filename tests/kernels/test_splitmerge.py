"""The split-merge kernel (SAMS and restricted Gibbs) and the random hybrid schedule.

(a) the proposal probability of a split equals a brute-force product of the sequential
allocation probabilities computed from marginal likelihoods, and the proposal
probabilities of every allocation sum to one; (b) a split and the merge proposed back with
the same pair and key have exactly reciprocal Metropolis-Hastings ratios; (c) statistics
after accepted moves equal a recomputation; (d) the native allocation pass proposes what the
JAX loop proposes, and padded points change no draw. Chains against the enumerated posterior are
in tests/statistical/test_splitmerge_exactness.py."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

import dpppl
from dpppl import kernels
from dpppl.families.base import segment_stats
from dpppl.kernels.splitmerge import (SplitMergeInfo, allocation_pass, build_splitmerge_kernel, choose_pair,
                                      propose)
from dpppl.core.state import grow
from dpppl.models.mixture import log_joint, state_from_labels
from tests.helpers.cases import CASES
from tests.helpers.perm import bound, explicit_log_marginal
from tests.helpers.splitmerge import METHODS


_JITTED = {}


def jitted(b, what, build):
    """One jitted function per bound model and purpose, shared by the tests (eagerly, every
    primitive of a state build or a log joint compiles on its own). The entry holds `b`, so
    that its id is not reused while the entry lives."""
    if (id(b), what) not in _JITTED:
        _JITTED[id(b), what] = (b, jax.jit(build()))
    return _JITTED[id(b), what][1]


def state_of(b, labels, capacity=None, alpha=None):
    capacity = capacity or b.num_points + 1
    build = jitted(b, ("state", capacity), lambda: lambda z, a: state_from_labels(b.family, jnp.asarray(b.x), z,
                                                                                  capacity, a))
    return build(jnp.asarray(labels, jnp.int32), b.prior.initial_alpha if alpha is None else alpha)


def joint(b, state):
    """The collapsed log joint of `state`, jitted."""
    return jitted(b, "log_joint", lambda: lambda st: log_joint(b.family, b.prior, st))(state)


def permutation(key, n):
    return jax.random.permutation(jax.random.fold_in(key, 1), n)


def propose_fn(b, method, native=False):
    """Jitted proposal for the pair (i, j); the permutation and the other auxiliary
    random numbers come from ``key``; ``native``: the allocation passes run natively."""
    x = jnp.asarray(b.x)
    return jitted(b, ("propose", method, native), lambda: lambda state, i, j, key: propose(
        b.family, b.prior, state, x, i, j, permutation(key, x.shape[0]), key, method=method, native=native))


def brute_force_sams_log_q(b, i, j, order, sides):
    """log q of SAMS: points ``order`` allocated in turn to {i} or {j}, point k to side
    ``sides[k]``, each with probability ∝ (|c| - d) m(x_{c + k}) / m(x_c), from the
    family's marginal likelihoods of explicit sums of point statistics."""
    d = b.prior.discount

    def log_m(members):
        return explicit_log_marginal(b, members)

    clusters = [[i], [j]]
    log_q = 0.0
    for k in order:
        w = np.array([math.log(len(c) - d) + log_m(c + [k]) - log_m(c) for c in clusters])
        log_q += w[sides[k]] - special.logsumexp(w)
        clusters[sides[k]].append(k)
    return log_q


def canonical(z):
    return dpppl.core.state.canonical_labels(np.asarray(z))


# ----- (a) proposal probabilities -------------------------------------------------------------

@pytest.mark.parametrize("native", [False, True], ids=["jax", "native"])
@pytest.mark.parametrize("name", ["niw_2d_overlap", "pitman_yor_normal_known"])
def test_sams_split_probability_matches_brute_force(name, native):
    b = bound(name)
    n = b.num_points
    merged = state_of(b, np.zeros(n, int))
    fn = propose_fn(b, "sams", native)
    for seed in range(4):
        prop = fn(merged, 0, 1, jax.random.key(seed))
        assert bool(prop.split) and int(prop.count) == n - 2
        order = [int(k) for k in np.asarray(prop.order)[: int(prop.count)]]
        assert sorted(order) == list(range(2, n))
        sides = np.asarray(prop.side)
        expected = brute_force_sams_log_q(b, 0, 1, order, sides)
        assert float(prop.log_q) == pytest.approx(expected, abs=1e-10)
        # the Metropolis-Hastings ratio: pi(split) / pi(merged) / q(split | merged)
        split = state_of(b, sides)
        log_pi = float(joint(b, split) - joint(b, merged))
        assert float(prop.log_accept) == pytest.approx(log_pi - expected, abs=1e-10)


@pytest.mark.parametrize("labels_before, labels_after", [
    ([0, 0, 0, 0, 1], [0, 2, 0, 2, 1]),   # K = 2: a cluster of 4 split into 2 + 2
    ([0, 0, 0, 0, 1], [0, 0, 2, 0, 1]),   # 4 -> 3 + 1
    ([0, 0, 0, 0, 0], [0, 1, 1, 1, 1]),   # K = 1: 5 -> 1 + 4
])
def test_pitman_yor_split_ratio_is_the_closed_form(labels_before, labels_after):
    """p(C_split) / p(C) = (alpha + K d) Gamma(a - d) Gamma(b - d) / (Gamma(1 - d) Gamma(a + b - d))."""
    b = bound("pitman_yor_normal_known")
    d, alpha = b.prior.discount, float(b.prior.alpha)
    before, after = state_of(b, labels_before), state_of(b, labels_after)
    K = len(set(labels_before))
    m = np.bincount(labels_before)[0]
    sizes = np.bincount(labels_after)
    a, c = sizes[0], sizes[2 if K == 2 else 1]
    closed = (math.log(alpha + K * d) + math.lgamma(a - d) + math.lgamma(c - d)
              - math.lgamma(1 - d) - math.lgamma(m - d))
    eppf = float(b.prior.log_eppf(after.stats.n, alpha) - b.prior.log_eppf(before.stats.n, alpha))
    assert eppf == pytest.approx(closed, abs=1e-12)
    # the merge back uses it: log_accept - log_q = log pi(C) - log pi(C_split)
    fn = propose_fn(b, "sams")
    i, j = 0, int(np.flatnonzero(np.asarray(labels_after) != 0)[0])
    merge = fn(after, i, j, jax.random.key(0))
    log_pi = float(joint(b, before) - joint(b, after))
    assert float(merge.log_accept) - float(merge.log_q) == pytest.approx(log_pi, abs=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_reverse_probabilities_of_all_splits_sum_to_one(method):
    """For one key (one order, one launch state), q(split | merged) summed over the
    2^(n-2) ways of splitting the cluster of i and j is 1, and the split sampled with
    that key has the probability the merge back reports as its reverse move."""
    b = bound("niw_2d_overlap")
    n = b.num_points
    fn = propose_fn(b, method)
    key = jax.random.key(7)
    total = 0.0
    log_q = {}
    for bits in itertools.product([0, 1], repeat=n - 2):
        labels = np.array([0, 1] + list(bits))
        prop = fn(state_of(b, labels), 0, 1, key)
        assert not bool(prop.split)
        log_q[tuple(labels)] = float(prop.log_q)
        total += math.exp(prop.log_q)
    assert total == pytest.approx(1.0, abs=1e-10)
    # the split sampled with this key has the probability the merge reports
    prop = fn(state_of(b, np.zeros(n, int)), 0, 1, key)
    sides = tuple(int(s) for s in np.asarray(prop.side))
    assert float(prop.log_q) == pytest.approx(log_q[sides], abs=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_sampled_splits_follow_their_proposal_probabilities(method):
    """Over many keys, the frequency of each split equals the mean over keys of its
    proposal probability (evaluated by the reverse move of the merge)."""
    b = bound("pitman_yor_normal_known")
    n = b.num_points
    keys = jax.random.split(jax.random.key(0), 4000)
    merged = state_of(b, np.zeros(n, int))
    fn = jax.vmap(propose_fn(b, method), in_axes=(None, None, None, 0))
    splits = np.asarray(fn(merged, 0, 1, keys).side)
    q_fn = jax.jit(lambda state: jnp.exp(fn(state, 0, 1, keys).log_q))
    freq, prob = [], []
    for bits in itertools.product([0, 1], repeat=n - 2):
        labels = np.array([0, 1] + list(bits))
        freq.append(np.mean(np.all(splits == labels, axis=1)))
        prob.append(float(np.mean(q_fn(state_of(b, labels)))))
    freq, prob = np.array(freq), np.array(prob)
    se = np.sqrt(prob * (1 - prob) / keys.shape[0])
    assert np.sum(prob) == pytest.approx(1.0, abs=1e-10)
    assert np.all(np.abs(freq - prob) < 5 * se + 1e-3), (freq, prob)


# ----- (b) reciprocity ------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ["niw_2d_overlap", "pitman_yor_normal_known",
                                  pytest.param("dirichlet_multinomial_overlap", marks=pytest.mark.slow)])
def test_split_then_merge_has_reciprocal_ratio(method, name):
    b = bound(name)
    n = b.num_points
    fn = propose_fn(b, method)
    start = state_of(b, np.r_[np.zeros(n - 1, int), 1])
    for seed in range(3):
        key = jax.random.key(seed)
        split = fn(start, 0, 1, key)
        assert bool(split.split)
        after = start._replace(z=split.z, stats=split.stats)
        merge = fn(after, 0, 1, key)
        assert not bool(merge.split)
        assert float(merge.log_q) == pytest.approx(float(split.log_q), abs=1e-9)
        assert float(merge.log_accept) == pytest.approx(-float(split.log_accept), abs=1e-9)
        assert np.array_equal(canonical(merge.z), canonical(start.z))
        for a, c in zip(merge.stats, start.stats):
            np.testing.assert_allclose(np.asarray(a), np.asarray(c), atol=1e-9)


# ----- (c) statistics, slots and capacity -----------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_statistics_after_accepted_moves_equal_a_recomputation(method):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(-2, 1, (20, 2)), rng.normal(2, 1, (20, 2))])
    model = dpppl.DPMixture(1.0, dpppl.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0,
                                                            psi0=np.eye(2)))
    b = model.bind(x)
    kern = build_splitmerge_kernel(b, method=method, num_proposals=5)
    step = jax.jit(kern.step)
    state = state_of(b, rng.integers(0, 3, 40), capacity=41)
    accepted = {"split_accepted": 0, "merge_accepted": 0}
    for t in range(40):
        state, info = step(jax.random.key(t), state, jnp.asarray(b.x))  # the bound model's frame
        assert isinstance(info, SplitMergeInfo)
        for k in accepted:
            accepted[k] += int(info._asdict()[k])
        fresh = segment_stats(b.family, jnp.asarray(b.x), state.z, 41)
        for a, c in zip(state.stats, fresh):
            np.testing.assert_allclose(np.asarray(a), np.asarray(c), atol=1e-9)
        empty = np.asarray(state.stats.n) == 0
        assert all(np.all(np.asarray(s)[empty] == 0) for s in state.stats)  # exact zeros
    assert accepted["split_accepted"] > 0 and accepted["merge_accepted"] > 0, accepted


def test_split_without_an_empty_slot_sets_overflow_and_is_rejected():
    b = bound("niw_2d_overlap")
    fn = propose_fn(b, "sams")
    full = state_of(b, [0, 0, 0, 1, 1], capacity=2)
    prop = fn(full, 0, 1, jax.random.key(0))       # same cluster: a split, no free slot
    assert bool(prop.split) and bool(prop.overflow) and float(prop.log_accept) == -np.inf
    prop = fn(full, 0, 3, jax.random.key(0))       # a merge needs no slot
    assert not bool(prop.split) and not bool(prop.overflow) and np.isfinite(float(prop.log_accept))
    single = state_of(b, np.zeros(5, int), capacity=1)  # every pair proposes a split
    kern = build_splitmerge_kernel(b, num_proposals=20)
    state, info = jax.jit(kern.step)(jax.random.key(1), single, jnp.asarray(b.x))
    assert int(info.split_proposed) == 20 and int(info.split_accepted) == 0
    assert float(info.accept_prob) == 0.0
    assert bool(state.overflow) and np.array_equal(np.asarray(state.z), np.zeros(5))


@pytest.mark.parametrize("method", METHODS)
def test_draws_do_not_depend_on_the_capacity(method):
    b = bound("normal_known_1d_overlap")
    n = b.num_points
    kern = build_splitmerge_kernel(b, method=method, num_proposals=4)
    small = state_of(b, np.zeros(n, int), capacity=n + 1)
    large = grow(small, 3 * n)
    step = jax.jit(kern.step)
    x = jnp.asarray(b.x)
    for t in range(30):
        key = jax.random.key(t)
        small, info_s = step(key, small, x)
        large, info_l = step(key, large, x)
        assert np.array_equal(np.asarray(small.z), np.asarray(large.z))
        assert [float(v) for v in info_s] == [float(v) for v in info_l]
    assert len(np.unique(np.asarray(small.z))) > 1


def test_pairs_are_distinct_and_uniform():
    pairs = np.asarray(jnp.stack(choose_pair(jax.random.uniform(jax.random.key(0), (24000, 2)), 4), axis=1))
    assert np.all(pairs[:, 0] != pairs[:, 1])
    counts = np.bincount(pairs[:, 0] * 4 + pairs[:, 1], minlength=16).reshape(4, 4)
    assert np.all(np.diag(counts) == 0)
    off = counts[~np.eye(4, dtype=bool)]
    assert np.all(np.abs(off - 2000) < 5 * np.sqrt(2000))


def test_allocation_pass_forced_matches_sampled_probability():
    """Forcing the sides a pass sampled gives back the same log probability."""
    b = bound("normal_gamma_1d_overlap")
    n = b.num_points
    x = jnp.asarray(b.x)
    stats2 = b.family.point_stats(x[jnp.array([0, 1])])
    order = jnp.arange(2, n).tolist() + [0, 1]
    u = jax.random.uniform(jax.random.key(0), (n,), dtype=x.dtype)
    run = jax.jit(lambda force, target: allocation_pass(b.family, b.prior, x, 1.0, stats2, jnp.zeros(n, jnp.int32),
                                                        jnp.asarray(order), n - 2, u, force, target, reseat=False))
    _, side, log_q = run(False, jnp.zeros(n, jnp.int32))
    _, side2, log_q2 = run(True, side)
    assert np.array_equal(np.asarray(side), np.asarray(side2))
    assert float(log_q) == pytest.approx(float(log_q2), abs=1e-12)


# ----- (d) the native allocation pass and padded points --------------------------------------

NATIVE_MODELS = {
    "niw-dp": dpppl.DPMixture(1.0, dpppl.NormalInverseWishart(mu0=[0.0, 0.0], kappa0=0.1, nu0=4.0,
                                                              psi0=[[0.5, 0.0], [0.0, 0.5]])),
    "normal_known-pitman_yor": dpppl.PitmanYorMixture(0.2, 1.0, dpppl.NormalKnownCov(sigma2=0.5, mu0=0.0, tau2=9.0))}


@pytest.mark.parametrize("name, method", [("niw-dp", "sams"), ("normal_known-pitman_yor", "restricted_gibbs")])
def test_native_and_jax_proposals_agree(name, method):
    """With the same pair, permutation and key the native allocation pass proposes what the JAX
    loop proposes: the same sides and labels, statistics and Metropolis-Hastings ratios equal to
    rounding, for splits and merges alike (one batch of keys, so the call runs under vmap). Both
    families, and passes with and without reseating (SAMS on NormalKnownCov and restricted Gibbs
    on NormalInverseWishart run natively in the other tests here and against enumeration)."""
    x, _ = dpppl.datasets.gaussian_mixture(60, 2, 3, mean_scale=3.0, seed=2)
    b = NATIVE_MODELS[name].bind(x)
    state = state_of(b, np.random.default_rng(0).integers(0, 3, 60), capacity=8)
    keys = jax.random.split(jax.random.key(1), 64)

    def proposals(native):
        def one(key):
            i, j = choose_pair(jax.random.uniform(jax.random.fold_in(key, 2), (2,)), 60)
            return propose(b.family, b.prior, state, jnp.asarray(b.x), i, j, permutation(key, 60), key,
                           method=method, native=native)
        return jax.jit(jax.vmap(one))(keys)

    native, plain = proposals(True), proposals(False)
    split = np.asarray(plain.split)
    assert 0 < split.sum() < len(split)  # splits and merges both
    np.testing.assert_array_equal(np.asarray(native.split), split)
    np.testing.assert_array_equal(np.asarray(native.z), np.asarray(plain.z))
    for a, c in zip(native.stats, plain.stats):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(np.asarray(native.log_q), np.asarray(plain.log_q), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(np.asarray(native.log_accept), np.asarray(plain.log_accept), rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("name", sorted(NATIVE_MODELS))
def test_native_and_jax_sams_steps_make_the_same_draws(name):
    """A SAMS step runs as one native call (pairs, allocations, marginals, acceptance) where the model
    is covered: from the same state and keys it makes the JAX step's draws (labels, statistics and
    statistics of the step equal to rounding), on the points as they are and padded to more rows
    (label -1, never chosen or counted). From random labels splits and merges are accepted; from
    three well separated clusters (their true labels, the blobs moved 30 apart) most merges pair two
    of them, with acceptance probabilities far below 1e-12, whose passes the native step stops
    early, rejecting them as the whole pass does."""
    x, labels = dpppl.datasets.gaussian_mixture(60, 2, 3, mean_scale=3.0, seed=2)
    keys = jax.random.split(jax.random.key(1), 32)
    separated = x + 30.0 * labels[:, None]
    for points, start in ((x, np.random.default_rng(0).integers(0, 3, 60)), (separated, labels)):
        b = NATIVE_MODELS[name].bind(points if name == "niw-dp" else points[:, 0])
        state = state_of(b, start, capacity=8)
        padded_state = state._replace(z=jnp.concatenate([state.z, jnp.full(4, -1, jnp.int32)]))
        runs = {}
        for native in (True, False):
            for target, first in ((b, state), (b.padded(64), padded_state)):
                kern = build_splitmerge_kernel(target, native=native)
                runs[native, target is b] = jax.jit(jax.vmap(kern.step, in_axes=(0, None, None)))(
                    keys, first, jnp.asarray(target.x))
        (plain, plain_info) = runs[False, True]
        for (native, unpadded), (out, info) in runs.items():
            np.testing.assert_array_equal(np.asarray(out.z)[:, :60], np.asarray(plain.z))
            assert np.all(np.asarray(out.z)[:, 60:] == -1)
            for a, c in zip(out.stats, plain.stats):
                np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-12, atol=1e-9)
            np.testing.assert_array_equal(np.asarray(out.overflow), np.asarray(plain.overflow))
            # a merge stopped early counts the bound it reached (below 1e-12), not its exact probability
            np.testing.assert_allclose(np.asarray(info.accept_prob), np.asarray(plain_info.accept_prob), rtol=1e-9,
                                       atol=2e-12)
            for field in ("split_proposed", "split_accepted", "merge_proposed", "merge_accepted"):
                np.testing.assert_array_equal(np.asarray(getattr(info, field)), np.asarray(getattr(plain_info, field)))
        if points is separated:
            assert plain_info.merge_proposed.sum() > 100 + plain_info.merge_accepted.sum()  # most rejected
        else:
            assert plain_info.split_accepted.sum() > 0 and plain_info.merge_accepted.sum() > 0


def test_native_option_is_checked():
    b = bound("normal_gamma_1d_overlap")
    with pytest.raises(dpppl.KernelError, match="native=True: the native split-merge covers NormalInverseWishart "
                                                "and NormalKnownCov components, not NormalGamma"):
        build_splitmerge_kernel(b, native=True)
    assert build_splitmerge_kernel(b).name == "splitmerge"  # auto: the JAX loop
    with pytest.raises(dpppl.ArgumentError, match=r"option native of kernel 'splitmerge' must be True, False or "
                                                  r"None, got 'yes' \(str\)"):
        kernels.build("splitmerge", b, native="yes")


@pytest.mark.parametrize("native", [True, False], ids=["native", "jax"])
def test_restricted_gibbs_draws_do_not_depend_on_padding(native):
    """Restricted Gibbs takes masked points: with the points padded to more rows (label -1) a
    step makes the draws of the unpadded step, the padded points never placed or counted."""
    b = bound("pitman_yor_normal_known")
    n = b.num_points
    labels = np.r_[np.zeros(n - 2, int), 1, 1]
    start = state_of(b, labels, capacity=n + 1)
    padded_start = start._replace(z=jnp.concatenate([start.z, jnp.full(3, -1, jnp.int32)]))
    keys = jax.random.split(jax.random.key(3), 32)
    runs = []
    for target, state in ((b, start), (b.padded(n + 3), padded_start)):
        kern = build_splitmerge_kernel(target, method="restricted_gibbs", num_proposals=4, native=native)
        assert kern.masked_points
        runs.append(jax.jit(jax.vmap(kern.step, in_axes=(0, None, None)))(keys, state, jnp.asarray(target.x)))
    (plain, plain_info), (padded, padded_info) = runs
    np.testing.assert_array_equal(np.asarray(padded.z)[:, :n], np.asarray(plain.z))
    assert np.all(np.asarray(padded.z)[:, n:] == -1)
    assert len({tuple(z) for z in np.asarray(plain.z)}) > 1  # the keys moved the chains apart
    for a, c in zip(padded.stats, plain.stats):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-12, atol=1e-12)
    for a, c in zip(padded_info, plain_info):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(c))


# ----- options and schedules ------------------------------------------------------------------

def test_options_are_checked():
    case = CASES["niw_2d_overlap"]
    run = dict(num_warmup=0, num_samples=1, progress_bar=False)
    with pytest.raises(dpppl.KernelError, match="method"):
        dpppl.sample(case.model, case.x, kernel="splitmerge", method="smart", **run)
    with pytest.raises(dpppl.KernelError, match="num_proposals"):
        dpppl.sample(case.model, case.x, kernel="splitmerge", num_proposals=0, **run)
    with pytest.raises(dpppl.KernelError, match="restricted_gibbs"):
        dpppl.sample(case.model, case.x, kernel="splitmerge", num_restricted_scans=3, **run)
    with pytest.raises(dpppl.KernelError, match="schedule"):
        dpppl.sample(case.model, case.x, kernel="gibbs+splitmerge", schedule="cyclic", **run)
    with pytest.raises(dpppl.KernelError, match="one entry per part"):
        dpppl.sample(case.model, case.x, kernel="gibbs+splitmerge", schedule="random", weights=[1.0], **run)
    with pytest.raises(dpppl.KernelError, match="not all zero"):
        dpppl.sample(case.model, case.x, kernel="gibbs+splitmerge", schedule="random", weights=[0, 0], **run)
    with pytest.raises(dpppl.KernelError, match="schedule='random'"):
        dpppl.sample(case.model, case.x, kernel="gibbs+splitmerge", weights=[1, 1], **run)
    assert kernels.entry("splitmerge").exact
    assert set(kernels.entry("splitmerge").options) == {"method", "num_proposals", "num_restricted_scans", "native"}


def test_schedules_info_and_choice():
    b = bound("niw_2d_overlap")  # alpha ~ Gamma: the alpha move is appended
    seq = kernels.build("gibbs+splitmerge", b)
    assert seq.info_names == tuple(f"splitmerge_{k}" for k in SplitMergeInfo._fields)
    rnd = kernels.build("gibbs+splitmerge", b, schedule="random", weights=[1.0, 3.0])
    assert rnd.exact and rnd.info_names == seq.info_names + ("move",)
    step = jax.jit(jax.vmap(rnd.step, in_axes=(0, None, None)))
    state = state_of(b, [0, 0, 1, 1, 2])
    keys = jax.random.split(jax.random.key(0), 2000)
    new, info = step(keys, state, jnp.asarray(b.x))
    info = rnd.info_dict(info)
    assert tuple(info) == rnd.info_names
    move = np.asarray(info["move"])
    assert abs(move.mean() - 0.75) < 0.05
    proposed = np.asarray(info["splitmerge_split_proposed"]) + np.asarray(info["splitmerge_merge_proposed"])
    assert np.all(proposed[move == 0] == 0) and np.all(proposed[move == 1] > 0)
    # alpha changes whichever part ran: the alpha move runs after it every iteration
    assert np.all(np.asarray(new.alpha) != float(state.alpha))
    one = kernels.build("splitmerge", b, schedule="random")
    assert one.info_names == tuple(f"splitmerge_{k}" for k in SplitMergeInfo._fields)

