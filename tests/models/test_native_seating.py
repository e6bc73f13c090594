"""The native Gibbs sweep (dpppl.models.native_seating) makes the draws of the JAX loop, and
the choice between them is explicit: forced either way, or a clear fallback. Their laws are
tested against enumeration and by Geweke in tests/statistical."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl.core import native
from dpppl.diagnostics.arviz_compat import partition_group
from dpppl.models.init import initial_states
from dpppl.models.native_seating import covers, threefry_words, use_native, use_native_sticks
from dpppl.models.seating import seat_points, sweep_draws, visiting_order

NIW = dpppl.NormalInverseWishart(mu0=[0.0, 0.0], kappa0=0.1, nu0=4.0, psi0=[[0.5, 0.0], [0.0, 0.5]])
X, _ = dpppl.datasets.gaussian_mixture(60, 2, 3, mean_scale=3.0, seed=2)
# no pointwise log likelihood: the tests compare draws, and each model would compile a program for it
RUN = dict(kernel="gibbs", num_warmup=10, num_samples=30, seed=3, progress_bar=False, init="prior",
           log_likelihood=False)


@pytest.mark.parametrize("model, num_chains", [
    (dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), NIW), 1), (dpppl.PitmanYorMixture(0.4, 0.8, NIW), 3),
    (dpppl.PitmanYorMixture(0.2, dpppl.Gamma(1.0, 1.0), dpppl.NormalKnownCov(sigma2=0.5, mu0=0.0, tau2=9.0)), 2)],
    ids=["niw-dp-unbatched", "niw-pitman_yor-vmapped", "normal_known-pitman_yor-vmapped"])
def test_native_and_jax_sweeps_make_the_same_draws(model, num_chains):
    """Same seed, same labels at every draw (the draws differ only where a uniform falls within
    rounding of a CDF boundary), and log joints equal to rounding."""
    runs = [dpppl.sample(model, X, num_chains=num_chains, native=flag, **RUN) for flag in (True, False)]
    z = [np.asarray(partition_group(r)["z"].values) for r in runs]
    np.testing.assert_array_equal(z[0], z[1])
    assert len(np.unique(z[0][:, -1])) > 1  # the chains moved: the test could fail
    lp = [np.asarray(r.sample_stats["lp"].values) for r in runs]
    np.testing.assert_allclose(lp[0], lp[1], rtol=1e-10)


def test_native_sequential_seating_matches_the_jax_loop():
    """The pass without removals (init="sequential") and a sweep from it, both paths."""
    bound = dpppl.PitmanYorMixture(0.3, 1.0, NIW).bind(X)
    empty = jax.tree.map(lambda a: a[0], initial_states(bound, "single", jax.random.split(jax.random.key(0), 1), 64))
    empty = empty._replace(stats=jax.tree.map(jnp.zeros_like, empty.stats))
    shuffle, uniforms = sweep_draws(jax.random.key(5), jnp.asarray(bound.x))
    out = {}
    for flag in (True, False):
        seated = jax.jit(lambda s: seat_points(bound.family, bound.prior, jnp.asarray(bound.x), shuffle, uniforms,
                                               s, remove_first=False, native=flag))(empty)
        out[flag] = seated
    np.testing.assert_array_equal(np.asarray(out[True].z), np.asarray(out[False].z))
    for a, b in zip(out[True].stats, out[False].stats):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)
    assert np.asarray(out[True].stats.n).sum() == len(X)


def test_visiting_order_is_a_permutation_drawn_by_the_uniforms():
    order = np.asarray(visiting_order(jnp.asarray(np.random.default_rng(0).uniform(size=50))))
    assert sorted(order) == list(range(50))
    # u -> 0 picks r_j = 0 at every j: the shuffle is the rotation (1, 2, ..., N-1, 0)
    np.testing.assert_array_equal(np.asarray(visiting_order(jnp.zeros(5))), [1, 2, 3, 4, 0])


def test_native_threads_do_not_change_the_draws(monkeypatch):
    """Chains of one call run on threads when the work is large enough; which thread runs a
    chain never changes its draws."""
    from dpppl.models import native_seating

    model = dpppl.DPMixture(1.0, NIW)
    monkeypatch.setattr(native_seating, "THREAD_WORK", 1)  # threads even for this small problem
    monkeypatch.setenv("DPPPL_NATIVE_THREADS", "2")
    threaded = dpppl.sample(model, X[:40], num_chains=3, native=True, **{**RUN, "seed": 8})
    jax_run = dpppl.sample(model, X[:40], num_chains=3, native=False, **{**RUN, "seed": 8})
    np.testing.assert_array_equal(partition_group(threaded)["z"].values, partition_group(jax_run)["z"].values)


def test_native_true_refuses_a_model_it_does_not_cover():
    model = dpppl.DPMixture(1.0, dpppl.NormalGamma(mu0=0.0, kappa0=0.2, a0=3.0, b0=1.0))
    assert covers(model.component, model.prior) is not None
    with pytest.raises(dpppl.KernelError, match="native=True: the native sweep covers NormalInverseWishart and "
                                                "NormalKnownCov components, not NormalGamma"):
        dpppl.sample(model, X, native=True, **RUN)
    dpppl.sample(model, X, native=None, **{**RUN, "num_samples": 2})  # auto: the JAX loop


def test_a_failed_build_warns_once_and_falls_back(tmp_path, monkeypatch):
    """A source that does not compile: one warning and False (the JAX path), or an error
    when the native path was required."""
    monkeypatch.setenv("DPPPL_NATIVE_CACHE", str(tmp_path / "cache"))
    broken = tmp_path / "broken.cc"
    broken.write_text("this is not C++\n")
    with pytest.warns(RuntimeWarning, match="could not be built or loaded, so the JAX path runs"):
        assert native.load(broken, {"dpppl_test_broken": "Nothing"}, required=False) is False
    assert native.load(broken, {"dpppl_test_broken": "Nothing"}, required=False) is False  # no second warning
    with pytest.raises(dpppl.KernelError, match="broken.cc was requested"):
        native.load(broken, {"dpppl_test_broken": "Nothing"}, required=True)


def test_dpppl_native_environment_variable(monkeypatch):
    for value, expected in [("0", False), ("off", False), ("1", True), ("on", True)]:
        monkeypatch.setenv("DPPPL_NATIVE", value)
        assert native.wanted(None) is expected
        assert native.wanted(not expected) is (not expected)  # the kernel option wins
    monkeypatch.setenv("DPPPL_NATIVE", "1")  # wherever covered: another family runs the JAX loop, no error
    ng = dpppl.DPMixture(1.0, dpppl.NormalGamma(mu0=0.0, kappa0=0.2, a0=3.0, b0=1.0))
    assert use_native(ng.component, ng.prior, None) is False
    monkeypatch.setenv("DPPPL_NATIVE", "sometimes")
    with pytest.raises(dpppl.KernelError, match="DPPPL_NATIVE must be auto"):
        native.wanted(None)


def test_the_library_is_cached_by_source_and_versions(tmp_path, monkeypatch):
    """A one-line source (the seating source takes seconds to compile; the runs above load it
    from the default cache): built once into DPPPL_NATIVE_CACHE, another text another library."""
    monkeypatch.setenv("DPPPL_NATIVE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "tiny.cc"
    source.write_text('extern "C" int dpppl_test_tiny() { return 1; }\n')
    first = native._build(source)
    assert first.parent == tmp_path / "cache" and first.exists()
    mtime = first.stat().st_mtime_ns
    assert native._build(source) == first and first.stat().st_mtime_ns == mtime  # not rebuilt
    source.write_text('extern "C" int dpppl_test_tiny() { return 2; }\n')
    assert native._build(source) != first


def test_the_native_split_merge_step_draws_from_threefry_keys_only():
    """The native SAMS step computes its allocation uniforms from a proposal's key as JAX's threefry
    does: it takes the key's words for a threefry key (typed or raw), and none of another
    implementation (the step then runs the native pass per proposal, with uniforms drawn in JAX)."""
    key = jax.random.key(3)
    np.testing.assert_array_equal(threefry_words(key), jax.random.key_data(key))
    np.testing.assert_array_equal(threefry_words(jax.random.PRNGKey(3)), jax.random.PRNGKey(3))
    assert threefry_words(jax.random.key(3, impl="rbg")) is None



# ----------------------------------------------------------------------------- the DDP's moves

def _ddp_target(slice_covariances: bool):
    """A small DDP target padded to a shape class (40 points in 3 slices, 48 rows) and a state of it
    after a sequential start and one JAX sweep."""
    from tests.helpers.ddp import small_model

    rng = np.random.default_rng(4)
    t = np.repeat([0.0, 1.0, 2.5], [14, 13, 13])
    x = np.concatenate([rng.normal(c, 0.4, (n, 2)) for c, n in (((-2, 0), 14), ((2, 1), 13), ((0, -2), 13))])
    return small_model(slice_covariances=slice_covariances, sticks=(1.0, 1.0)).bind((x, t)).padded(48)


def _ddp_seat(bound, key, state, remove_first, native):
    from dpppl.models.ddp_state import seat

    return jax.jit(lambda k, s: seat(bound.family, bound.prior, jnp.asarray(bound.x), jnp.asarray(bound.slices), k, s,
                                     remove_first=remove_first, num_aux=4, num_valid=bound.num_valid,
                                     native=native))(key, state)


@pytest.mark.parametrize("slice_covariances", [True, False])
def test_native_and_jax_ddp_sweeps_make_the_same_draws(slice_covariances):
    """The DDP's assignment loop (`dpppl.models.ddp_state.seat`), natively and in JAX from the same key:
    the same labels and counts, and the same parameters for the labels opened (to rounding), both for
    the sequential start (no removal) and for a Gibbs sweep from it; padded points keep the label -1.
    Then the parameter update (`update_parameters`, eq. 11) both ways: the same draws to rounding; and
    the recorded log joint with its labels' terms native (`DDPBound.lp`) and in JAX."""
    from dpppl.models.ddp_state import update_parameters, with_statistics

    bound = _ddp_target(slice_covariances)
    x, slices = jnp.asarray(bound.x), jnp.asarray(bound.slices)
    state = bound.empty_state(16)
    for remove_first, key in ((False, 1), (True, 2)):
        out = [_ddp_seat(bound, jax.random.key(key), state, remove_first, flag) for flag in (True, False)]
        np.testing.assert_array_equal(np.asarray(out[0].z), np.asarray(out[1].z))
        used = np.asarray(out[0].stats.n) > 0.5
        for a, b in zip(out[0].stats, out[1].stats):
            np.testing.assert_allclose(np.asarray(a)[used], np.asarray(b)[used], rtol=1e-10, atol=1e-12)
        assert not bool(out[0].overflow) and not bool(out[1].overflow)
        assert used.sum() > 1 and (np.asarray(out[0].z)[40:] == -1).all()  # it seated: the test could fail
        state = with_statistics(out[1], x, slices)
    assert (np.asarray(state.z) != np.asarray(_ddp_seat(bound, jax.random.key(1), bound.empty_state(16), False,
                                                         True).z)).any()  # the sweep moved points
    updated = [jax.jit(lambda k, s, flag=flag: update_parameters(bound.family, k, s, native=flag))(
        jax.random.key(3), state) for flag in (True, False)]
    used = np.asarray(state.stats.n) > 0.5
    for a, b, before in zip(updated[0].stats, updated[1].stats, state.stats):
        np.testing.assert_allclose(np.asarray(a)[used], np.asarray(b)[used], rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(a)[~used], np.asarray(before)[~used])  # unused: as they were
    assert not np.allclose(np.asarray(updated[0].stats.mu)[used], np.asarray(state.stats.mu)[used])  # it drew
    from dpppl.models.native_seating import native_ddp_label_log_joints

    native_lp = jax.jit(lambda s: jnp.sum(bound.prior.log_prob_labels(s.stats.nt.T))
                        + jnp.sum(native_ddp_label_log_joints(bound.family, s.stats)))(updated[0])
    jax_lp = jax.jit(lambda s: bound.family.log_joint_state(bound.prior, s))(updated[0])
    np.testing.assert_allclose(float(native_lp), float(jax_lp), rtol=1e-10)


@pytest.mark.parametrize("slice_covariances, pairs", [(True, "uniform"), (False, "prior")])
def test_native_and_jax_ddp_swaps_make_the_same_decisions(slice_covariances, pairs):
    """One `ddpswap` step's proposals, natively and in JAX, from the same key: the same labels, the
    same statistics and parameters after it, and the same acceptance counts and probabilities."""
    from dpppl.kernels.ddp.swap import build_ddpswap_kernel

    bound = _ddp_target(slice_covariances)
    x = jnp.asarray(bound.x)
    from dpppl.models.ddp_state import with_statistics

    state = with_statistics(_ddp_seat(bound, jax.random.key(1), bound.empty_state(16), False, True), x,
                            jnp.asarray(bound.slices))
    out = []
    for flag in (True, False):
        kernel = build_ddpswap_kernel(bound, num_swaps=200, pairs=pairs, native=flag)
        out.append(jax.jit(lambda k, s, kernel=kernel: kernel.step(k, s, x))(jax.random.key(3), state))
    (a, info_a), (b, info_b) = out
    np.testing.assert_array_equal(np.asarray(a.z), np.asarray(b.z))
    for u, v in zip(a.stats, b.stats):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-10, atol=1e-12)
    for u, v in zip(info_a, info_b):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-9)
    assert int(info_a.accepted) > 0 and (np.asarray(a.z) != np.asarray(state.z)).any()  # the test could fail


@pytest.mark.parametrize("a, b, capacity", [(0.75, "1 + i * 0.25", 64), ([1.0] * 6, [2.0] * 5 + [0.0], 64),
                                             (1.0, 1.0, 3)], ids=["pitman_yor-sticks", "finite", "overflow"])
def test_native_stick_breaking_sequential_seating_matches_the_jax_loop(a, b, capacity):
    """init="sequential" under a stick-breaking prior (a new cluster at the first empty label with
    the weight of every empty one) seats as one native call: the JAX loop's labels, statistics and
    overflow, on points padded to a shape class (whose padded rows are never seated)."""
    target = dpppl.StickBreakingMixture(a=a, b=b, component=NIW).bind(X).padded(len(X) + 7)
    assert use_native_sticks(target.family)
    x = jnp.asarray(target.x)
    shuffle, uniforms = sweep_draws(jax.random.key(5), x)
    out = {}
    for flag in (None, False):  # None: native where covered; False: the JAX loop
        out[flag] = jax.jit(lambda t, flag=flag: seat_points(t.family, t.prior, x, shuffle, uniforms,
                                                             t.empty_state(capacity), remove_first=False,
                                                             native=flag, num_valid=t.num_valid))(target)
    np.testing.assert_array_equal(np.asarray(out[None].z), np.asarray(out[False].z))
    assert bool(out[None].overflow) == bool(out[False].overflow) == (capacity == 3)
    for p, q in zip(out[None].stats, out[False].stats):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=1e-12, atol=1e-12)
    assert np.asarray(out[None].stats.n).sum() == len(X)
    np.testing.assert_array_equal(np.asarray(out[None].z)[len(X):], -1)
    assert np.sum(np.asarray(out[None].stats.n) > 0) > 1  # several clusters: the test could fail
