"""dpppl.sample: the InferenceData contract, determinism, initialisation, capacity
growth, interruption, the NumPyro adapter, lp, and dpppl.log_joint."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

import dpppl
import dpppl.run.driver
from dpppl import kernels
from dpppl.diagnostics.arviz_compat import az, group, labels, partition_group
from dpppl.core.state import canonical_labels
from tests.helpers.stick_breaking import FIG1_PRIOR, NKC, X4

# the driver's tests run collapsed Gibbs, named (the default, kernel="auto", is tested in
# tests/kernels/test_auto.py and below where a test says so), on two chains: the conftest model
# and data then run the programs the `idata` fixture and tests/run/test_checkpoint.py compile
# (capacity 24 from sequential init, 16 from two clusters, 8 grown to 16)
RUN = dict(kernel="gibbs", num_warmup=5, num_samples=20, num_chains=2, progress_bar=False)
EIGHT_CLUSTERS = np.arange(30) % 8  # in 8 slots: the first new cluster grows them


@pytest.fixture(scope="module")
def idata(niw_model, two_blobs):
    x, _ = two_blobs
    return dpppl.sample(niw_model, x, seed=1, **RUN)


def test_inference_data_contract(idata, two_blobs):
    x, _ = two_blobs
    post, stats, obs = group(idata, "posterior"), group(idata, "sample_stats"), group(idata, "observed_data")
    part = partition_group(idata)
    assert part["z"].dims == ("chain", "draw", "point")
    assert part["z"].shape == (2, 20, 30) and part["z"].dtype == np.int32
    for name in ("num_clusters", "largest_cluster", "alpha"):
        assert post[name].shape == (2, 20)
    assert np.array_equal(obs["x"].values, x)
    assert stats["lp"].shape == (2, 20) and np.all(np.isfinite(stats["lp"]))
    z = part["z"].values
    k = np.array([[len(np.unique(z[c, d])) for d in range(20)] for c in range(2)])
    assert np.array_equal(k, post["num_clusters"].values)
    big = np.array([[np.bincount(z[c, d]).max() for d in range(20)] for c in range(2)])
    assert np.array_equal(big, post["largest_cluster"].values)
    assert post.attrs["kernel"] == post.attrs["kernel_requested"] == "gibbs" and post.attrs["exact"] == 1
    assert "kernel_reason" not in post.attrs  # a kernel that was named, not chosen
    assert "NormalInverseWishart" in post.attrs["model"]
    assert post.attrs["dpppl_version"] == dpppl.__version__


def test_lp_is_the_collapsed_log_joint(idata, niw_model, two_blobs):
    x, _ = two_blobs
    post, stats = group(idata, "posterior"), group(idata, "sample_stats")
    family = niw_model.bind(x).data_family  # the resolved family in the frame of x
    point_stats = family.point_stats(jnp.asarray(x))  # each point's, summed per cluster below (numpy)
    for c, d in [(0, 0), (1, 7), (0, 19)]:
        z = partition_group(idata)["z"].values[c, d]
        alpha = float(post["alpha"].values[c, d])
        # independent computation: EPPF of the CRP plus each cluster's marginal, plus the Gamma prior
        sizes = np.bincount(canonical_labels(z))
        eppf = (len(sizes) * np.log(alpha) + special.gammaln(alpha) - special.gammaln(alpha + len(z))
                + special.gammaln(sizes).sum())
        marg = sum(float(family.log_marginal(type(point_stats)(*[np.asarray(s)[z == k].sum(axis=0)
                                                                 for s in point_stats])))
                   for k in np.unique(z))
        prior_alpha = -alpha  # Gamma(1, 1) log density
        assert stats["lp"].values[c, d] == pytest.approx(eppf + marg + prior_alpha, rel=1e-9)


def test_arviz_functions_apply(idata, tmp_path):
    post = group(idata, "posterior")
    summary = az.summary(post[["num_clusters", "largest_cluster", "alpha"]].astype(float))
    assert list(summary.index) == ["num_clusters", "largest_cluster", "alpha"]
    import matplotlib

    matplotlib.use("Agg")
    az.plot_trace(idata, var_names=["num_clusters", "alpha"])
    az.plot_autocorr(idata, var_names=["num_clusters"])
    path = tmp_path / "run.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    assert np.array_equal(partition_group(back)["z"].values, partition_group(idata)["z"].values)


def test_same_seed_same_draws_and_other_seed_differs(niw_model, two_blobs):
    x, _ = two_blobs
    a = dpppl.sample(niw_model, x, seed=3, **RUN)
    b = dpppl.sample(niw_model, x, seed=3, **RUN)
    c = dpppl.sample(niw_model, x, seed=4, **RUN)
    za, zb, zc = (partition_group(i)["z"].values for i in (a, b, c))
    assert np.array_equal(za, zb)
    assert not np.array_equal(za, zc)


def test_capacity_growth_does_not_change_the_draws(niw_model, two_blobs):
    # eight clusters in eight slots: the first new cluster grows them to 16
    x, _ = two_blobs
    small = dpppl.sample(niw_model, x, init=EIGHT_CLUSTERS, capacity=8, seed=5, **RUN)
    large = dpppl.sample(niw_model, x, init=EIGHT_CLUSTERS, capacity=16, seed=5, **RUN)
    zs, zl = (partition_group(i)["z"].values for i in (small, large))
    assert group(small, "posterior").attrs["final_capacity"] == 16
    assert group(large, "posterior").attrs["final_capacity"] == 16  # the run it is compared with never grew
    # slots may be numbered differently only if growth reordered them; it must not
    assert np.array_equal(zs, zl)


@pytest.mark.parametrize("init", ["single", "sequential", "prior"])
def test_init_methods(niw_model, two_blobs, init):
    x, _ = two_blobs
    out = dpppl.sample(niw_model, x, init=init, capacity=24, log_likelihood=False,
                       **{**RUN, "num_warmup": 0, "num_samples": 2})
    assert partition_group(out)["z"].shape == (2, 2, 30)
    assert group(out, "posterior").attrs["init"] == init


def test_init_labels_and_their_errors(niw_model, two_blobs):
    x, truth = two_blobs
    out = dpppl.sample(niw_model, x, init=truth + 7, **{**RUN, "num_warmup": 0, "num_samples": 1})
    assert partition_group(out)["z"].shape == (2, 1, 30)
    with pytest.raises(dpppl.ArgumentError, match="shape"):
        dpppl.sample(niw_model, x, init=truth[:10], **RUN)
    with pytest.raises(dpppl.ArgumentError, match="integers"):
        dpppl.sample(niw_model, x, init=truth + 0.5, **RUN)
    with pytest.raises(ValueError, match="init must be one of"):
        dpppl.sample(niw_model, x, init="random", **RUN)


def test_thinning_and_fixed_alpha(run):
    model, x, _ = run  # the conftest's fixed-alpha run: its programs (tests/analysis/test_partitions.py)
    out = dpppl.sample(model, x, num_warmup=0, num_samples=10, num_chains=2, thinning=3, init="single",
                       progress_bar=False, log_likelihood=False)
    post = group(out, "posterior")
    assert partition_group(out)["z"].shape == (2, 3, 24)
    assert "alpha" not in post


def test_interrupted_run_keeps_its_draws(niw_model, two_blobs, monkeypatch):
    from dpppl.run import runner

    x, _ = two_blobs
    real = runner._chunk_function
    calls = {"n": 0}

    def flaky(*spec):
        fn = real(*spec)

        def wrapped(*args):
            calls["n"] += 1
            if calls["n"] == 2:  # the first chunk runs one iteration
                raise KeyboardInterrupt
            return fn(*args)
        return wrapped

    monkeypatch.setattr(runner, "_chunk_function", flaky)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        out = dpppl.sample(niw_model, x, **{**RUN, "num_warmup": 0, "num_samples": 50})
    post = group(out, "posterior")
    assert 0 < post.sizes["draw"] < 50
    assert post.attrs["interrupted"] == 1


def test_interrupt_during_warmup_reraises(niw_model, two_blobs, monkeypatch):
    from dpppl.run import runner

    def broken(*spec):
        def fn(*args):
            raise KeyboardInterrupt
        return fn

    monkeypatch.setattr(runner, "_chunk_function", broken)
    with pytest.raises(KeyboardInterrupt):
        dpppl.sample(niw_model, two_blobs[0], **RUN)


def test_registry_and_kernel_errors(niw_model, two_blobs):
    x, _ = two_blobs
    assert {"gibbs", "nuts"} <= set(kernels.available())
    assert kernels.entry("gibbs").exact
    with pytest.raises(dpppl.KernelError, match="did you mean 'gibbs'"):
        dpppl.sample(niw_model, x, **{**RUN, "kernel": "gibs"})
    with pytest.raises(dpppl.KernelError, match="unknown option"):
        dpppl.sample(niw_model, x, beam=3, **RUN)
    with pytest.raises(dpppl.KernelError, match="cannot be combined"):
        dpppl.sample(niw_model, x, **{**RUN, "kernel": "gibbs+nuts"})


def test_kernel_that_does_not_apply_is_refused_before_sampling(niw_model, two_blobs):
    kernels.register("rankings-only", lambda bm: None, exact=True,
                     applies=lambda model: "it samples ranking data only")
    try:
        with pytest.raises(dpppl.KernelError, match="does not apply to this model: it samples ranking"):
            dpppl.sample(niw_model, two_blobs[0], **{**RUN, "kernel": "rankings-only"})
    finally:
        kernels.base._REGISTRY.pop("rankings-only")


@pytest.mark.parametrize("bad, match", [
    (np.array([[0.0, np.nan]] * 3), "non-finite value .* row 0, column 1"),
    (np.array([[0.0, np.inf]] * 3), "non-finite"),
    (np.zeros((0, 2)), "empty"),
    (np.zeros((3, 2, 2)), "2-D array"),
    (np.array([["a", "b"]]), "numeric"),
    (np.zeros((5, 3)), "has shape \\(2,"),  # NIW hyperparameters fixed for D = 2
])
def test_bad_data_is_refused_before_sampling(niw_model, bad, match):
    with pytest.raises(dpppl.DataError, match=match):
        dpppl.sample(niw_model, bad, **RUN)


def test_bad_counts_and_binary_data():
    with pytest.raises(dpppl.DataError, match="row 1"):
        dpppl.sample(dpppl.DPMixture(1.0, dpppl.DirichletMultinomial()), np.array([[1, 2], [1.5, 0]]), **RUN)
    with pytest.raises(dpppl.DataError, match="row 0"):
        dpppl.sample(dpppl.DPMixture(1.0, dpppl.DirichletMultinomial()), np.array([[-1, 2], [1, 0]]), **RUN)
    with pytest.raises(dpppl.DataError):
        dpppl.sample(dpppl.DPMixture(1.0, dpppl.BetaBernoulli()), np.array([[0, 1], [2, 0]]), **RUN)


def test_bad_run_arguments(niw_model, two_blobs):
    x, _ = two_blobs
    for kwargs in ({"num_samples": 0}, {"num_chains": 0}, {"num_warmup": -1}, {"thinning": 0}):
        with pytest.raises(dpppl.ArgumentError):
            dpppl.sample(niw_model, x, **{**RUN, **kwargs})


@pytest.fixture
def no_sampling(monkeypatch):
    """Every backend fails the test if it is reached: the error must come before sampling."""
    def reached(*args, **kwargs):
        raise AssertionError("sampling started")
    monkeypatch.setattr(dpppl.run.driver, "BACKENDS", {name: reached for name in dpppl.run.driver.BACKENDS})


@pytest.mark.parametrize("seed, shown", [
    (1.5, "1.5 (float)"), (None, "None (NoneType)"), (True, "True (bool)"), ("3", "'3' (str)"),
    (-1, "got -1"), (2**63, f"got {2**63}"), (2**64, f"got {2**64}"), (2**70, f"got {2**70}"),
    (np.uint64(2**64 - 1), f"got {2**64 - 1}"),
])
def test_bad_seeds_are_refused_before_sampling(niw_model, two_blobs, no_sampling, seed, shown):
    with pytest.raises(dpppl.ArgumentError, match=r"seed must be an integer in \[0, 9223372036854775807\]") as e:
        dpppl.sample(niw_model, two_blobs[0], seed=seed, **RUN)
    assert shown in str(e.value)


@pytest.mark.parametrize("option, shown", [
    ({"progress_bar": "no"}, "progress_bar must be True or False, got 'no' (str)"),
    ({"progress_bar": 0}, "progress_bar must be True or False, got 0 (int)"),
    ({"capacity": 1}, "capacity must be an integer >= 2, got 1"),
    ({"capacity": 16.0}, "capacity must be an integer >= 2, got 16.0"),
    ({"truncation": 1}, "truncation must be an integer >= 2, got 1"),
    ({"truncation": "20"}, "truncation must be an integer >= 2, got '20'"),
    ({"init": "sequentail"}, "init must be one of ('sequential', 'single', 'prior', 'search'), a callable or an "
                             "array of labels, got 'sequentail'"),
])
def test_bad_run_options_are_argument_errors_before_sampling(niw_model, two_blobs, no_sampling, option, shown):
    """capacity, truncation and init errors were plain ValueErrors; progress_bar="no" was read as true."""
    with pytest.raises(dpppl.ArgumentError) as e:
        dpppl.sample(niw_model, two_blobs[0], **{**RUN, **option})
    assert str(e.value) == shown


def test_seed_range_ends_and_numpy_integers_are_accepted(niw_model, two_blobs):
    x = two_blobs[0]
    run = {**RUN, "num_warmup": 0, "num_samples": 1}
    for seed in (2**63 - 1, np.uint32(7)):
        assert group(dpppl.sample(niw_model, x, seed=seed, **run), "posterior").sizes["draw"] == 1


def test_thinning_larger_than_num_samples_is_refused_before_sampling(niw_model, two_blobs, no_sampling):
    with pytest.raises(dpppl.ArgumentError, match=r"thinning \(10\) is larger than num_samples \(5\): "
                       "no draw would be kept"):
        dpppl.sample(niw_model, two_blobs[0], num_warmup=0, num_samples=5, thinning=10, progress_bar=False)


def test_complex_and_masked_data_are_refused_before_sampling(niw_model, two_blobs, no_sampling):
    x = two_blobs[0]
    with pytest.raises(dpppl.DataError, match="data 'x' is complex .*complex128"):
        dpppl.sample(niw_model, x.astype(complex), **RUN)
    masked = np.ma.masked_array(x, mask=np.zeros_like(x, bool))
    masked[3, 1] = np.ma.masked
    with pytest.raises(dpppl.DataError, match=r"data 'x' is a masked array with 1 masked value\(s\), the first "
                       r"at row 3, column 1"):
        dpppl.sample(niw_model, masked, **RUN)


def test_numpyro_adapter_matches_across_chain_methods(niw_model, two_blobs):
    from numpyro.infer import MCMC, Predictive

    x, _ = two_blobs
    draws = []
    for method in ("sequential", "vectorized"):
        mcmc = MCMC(kernels.make("gibbs", niw_model, x), num_warmup=5, num_samples=10, num_chains=2,
                    chain_method=method, progress_bar=False)
        mcmc.run(jax.random.key(0), x, extra_fields=("potential_energy", "overflow"))
        draws.append(mcmc.get_extra_fields(group_by_chain=True)["labels"])  # the labels: a field of the state
        assert not np.any(mcmc.get_extra_fields()["overflow"])
    assert np.array_equal(draws[0], draws[1])
    assert set(mcmc.get_samples()) == {"num_clusters", "largest_cluster", "alpha"}  # no per-point labels
    idata = az.from_numpyro(mcmc)
    assert "lp" in group(idata, "sample_stats")
    assert group(idata, "posterior")["num_clusters"].shape == (2, 10)
    # dpppl's layout: labels in posterior_partition, the data in observed_data
    from dpppl.run.numpyro_output import from_numpyro

    ours = from_numpyro(mcmc)
    assert set(group(ours, "posterior")) == {"num_clusters", "largest_cluster", "entropy", "alpha", "lp"}
    assert labels(ours).shape == (2, 10, 30)
    np.testing.assert_array_equal(group(ours, "posterior")["num_clusters"], labels(ours).max(axis=-1) + 1)
    np.testing.assert_allclose(group(ours, "observed_data")["x"], x)
    # NumPyro's Predictive takes the adapter's samples (alpha, the one site of the compiled model among them)
    replicated = Predictive(niw_model.bind(x).numpyro_model(3), mcmc.get_samples())(jax.random.key(1), x)["x"]
    assert replicated.shape == (20,) + x.shape
    with pytest.raises(dpppl.DataError, match=r"data of mcmc.run have shape \(12, 2\), but the kernel was made for "
                                              r"data of shape \(30, 2\); make the kernel on these data"):
        mcmc.run(jax.random.key(0), x[:12])


def test_log_joint_function(niw_model, two_blobs):
    x, truth = two_blobs
    lp_true = dpppl.log_joint(niw_model, x, truth)
    assert lp_true == pytest.approx(dpppl.log_joint(niw_model, x, 5 - truth))  # labels do not matter
    assert lp_true > dpppl.log_joint(niw_model, x, np.zeros(30, int))
    with pytest.raises(dpppl.DataError):
        dpppl.log_joint(niw_model, x, truth[:3])


def test_lp_of_nuts_is_the_collapsed_log_joint():
    """``lp`` means log p(x, z) (marginals by quadrature) whichever kernel drew z: NUTS's
    (a few steps on 30 points) agrees with dpppl.log_joint of its labels. The partition
    kernels' lp is checked on their own runs (the sub-cluster sampler's on this family in
    tests/kernels/subcluster/test_sampler.py, the published-warmup test)."""
    x, _ = dpppl.datasets.gaussian_mixture(30, 2, 3, mean_scale=20.0, seed=4)
    model = dpppl.DPMixture(1.0, dpppl.NormalLogNormal())
    idata = dpppl.sample(model, x, kernel="nuts", num_samples=6, thinning=2, progress_bar=False, truncation=4,
                         num_warmup=5)
    # one thinning rule for every backend: num_samples iterations, every thinning-th kept
    assert group(idata, "posterior").sizes["draw"] == 3
    lp = group(idata, "sample_stats")["lp"].values[0, -1]
    z = partition_group(idata)["z"].values[0, -1]
    assert np.isfinite(lp) and len(np.unique(z)) > 1
    assert lp == pytest.approx(float(dpppl.log_joint(model, x, z)), rel=1e-9)


def test_nuts_draws_what_numpyros_mcmc_draws():
    """`kernel="nuts"` runs every chain in one compiled program (`dpppl.run.nuts.run_chains`), not
    NumPyro's `MCMC` loop, and draws what `MCMC(NUTS(model), chain_method="sequential")` draws for the
    same key: the same transitions (acceptance probabilities to the last bits that fused operations
    change) and the same kept draws under thinning (the run of `test_lp_of_nuts_is_the_collapsed_log_joint`)."""
    from numpyro.infer import MCMC, NUTS

    from dpppl.run.nuts import conditioned_model

    x, _ = dpppl.datasets.gaussian_mixture(30, 2, 3, mean_scale=20.0, seed=4)
    model = dpppl.DPMixture(1.0, dpppl.families.NormalLogNormal())
    idata = dpppl.sample(model, x, kernel="nuts", num_samples=6, thinning=2, progress_bar=False, truncation=4,
                         num_warmup=5)
    with dpppl.config.x64():
        mcmc = MCMC(NUTS(conditioned_model(4)), num_warmup=5, num_samples=6, thinning=2, progress_bar=False,
                    jit_model_args=True)
        mcmc.run(jax.random.key(0), model.bind(x), extra_fields=("accept_prob",))
    accept = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["accept_prob"])
    np.testing.assert_allclose(group(idata, "sample_stats")["acceptance_rate"].values, accept, rtol=1e-9)
    assignment = np.asarray(mcmc.get_samples(group_by_chain=True)["assignment"])[0]
    expected = np.stack([canonical_labels(row) for row in assignment])
    np.testing.assert_array_equal(partition_group(idata)["z"].values[0], expected)


def test_log_joint_is_labelled():
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    z = np.array([0, 0, 1, 1])
    swapped = 1 - z
    lj, ljs = dpppl.log_joint(model, X4, z), dpppl.log_joint(model, X4, swapped)
    prior = model.prior
    diff = float(prior.log_prob_labels(jnp.array([2.0, 2.0])) - prior.log_prob_labels(jnp.array([2.0, 2.0])))
    assert diff == 0.0 and lj == pytest.approx(ljs)  # equal sizes: swapping changes nothing
    lj3 = dpppl.log_joint(model, X4, np.array([0, 1, 1, 1]))
    lj3s = dpppl.log_joint(model, X4, np.array([1, 0, 0, 0]))
    want = float(prior.log_prob_labels(jnp.array([1.0, 3.0])) - prior.log_prob_labels(jnp.array([3.0, 1.0])))
    assert lj3 - lj3s == pytest.approx(want, abs=1e-10) and abs(want) > 0.1



def test_data_given_by_name_or_file_path(niw_model, tmp_path):
    """A string is what the CLI's --data takes: a data set name or a file."""
    run = dict(num_warmup=0, num_samples=2, progress_bar=False, log_likelihood=False)
    by_name = dpppl.sample(niw_model, "Faithful", **run)
    x = dpppl.datasets.load("faithful")[0]
    np.testing.assert_array_equal(group(by_name, "observed_data")["x"].values, x)
    np.testing.assert_array_equal(partition_group(by_name)["z"].values,
                                  partition_group(dpppl.sample(niw_model, x, **run))["z"].values)
    path = tmp_path / "v.csv"  # the same points (written exactly): the programs of the run above
    np.savetxt(path, x, delimiter=",", header="eruptions,waiting", comments="")
    for given in (path, str(path)):
        from_file = dpppl.sample(niw_model, given, **run)
        np.testing.assert_array_equal(group(from_file, "observed_data")["x"].values, x)
    with pytest.raises(dpppl.DataError, match=r"no file and no data set named 'faithfull'; did you mean "
                                              r"'faithful'\?.*Data sets: galaxies, faithful"):
        dpppl.sample(niw_model, "faithfull", **run)
    with pytest.raises(dpppl.DataError, match="no such file"):
        dpppl.sample(niw_model, str(tmp_path / "absent.csv"), **run)


def test_misspelt_kernel_option_gets_a_suggestion(niw_model, two_blobs):
    with pytest.raises(dpppl.KernelError, match=r"'num_proposal': did you mean 'num_proposals'\?"):
        dpppl.sample(niw_model, two_blobs[0], num_proposal=3, **{**RUN, "kernel": "gibbs+splitmerge"})
    with pytest.raises(dpppl.KernelError) as caught:
        dpppl.sample(niw_model, two_blobs[0], zzz=3, **RUN)
    assert "did you mean" not in str(caught.value)


def test_non_finite_data_named_by_row_and_column_from_zero(niw_model):
    x = np.zeros((4, 2))
    x[3, 0] = np.nan
    with pytest.raises(dpppl.DataError, match=r"^data 'x' has a non-finite value \(nan\) at row 3, column 0 "
                                              r"\(x\[3, 0\]; 1 in all\)$"):
        dpppl.sample(niw_model, x, **RUN)


@pytest.mark.parametrize("alpha, sigma2", [(1e-320, 1.0), (1.0, 1e-320)],  # lp NaN, lp -inf
                         ids=["alpha-underflows", "variance-underflows"])
def test_a_non_finite_log_joint_stops_the_run_naming_kernel_and_iteration(monkeypatch, alpha, sigma2):
    """Model.bind refuses these hyperparameters (tests/models/test_mixture.py); bound without that
    check, the run stops at the first non-finite log joint."""
    model = dpppl.DPMixture(alpha, dpppl.NormalKnownCov(sigma2=sigma2, mu0=0.0, tau2=1.0))
    x = np.random.default_rng(0).normal(size=(20, 1))
    unchecked = dpppl.BoundModel(model, x, dpppl.NormalKnownCov(sigma2=np.full(1, sigma2), mu0=np.zeros(1),
                                                                tau2=np.ones(1)), None, x)
    monkeypatch.setattr(dpppl.Model, "bind", lambda self, data: unchecked)
    with pytest.raises(dpppl.KernelError, match=r"log joint became (nan|-inf) at warmup iteration 0 of chain 0 "
                                                r"under kernel 'gibbs\+splitmerge'"):  # what kernel="auto" chose
        dpppl.sample(model, x, num_warmup=2, num_samples=3, progress_bar=False)


# ------------------------------------------------------------------ memory (issue 30)

MEMORY_REFUSED = (r"this run would hold about [\d.e+]+ GB in memory \(kept draws [\d.e+]+ GB, .*\), more than the "
                  r"{limit}: lower num_chains, or keep fewer draws \(num_samples, or a larger thinning\); "
                  r"DPPPL_MEMORY_LIMIT sets the limit")


@pytest.mark.parametrize("kernel", ["gibbs", "nuts"])
def test_a_billion_chains_are_refused_before_anything_is_allocated(kernel, niw_model, two_blobs, no_sampling,
                                                                   monkeypatch):
    """`num_chains=10**9` was accepted and the kernel's out-of-memory killer ended the process."""
    monkeypatch.delenv("DPPPL_MEMORY_LIMIT", raising=False)
    with pytest.raises(dpppl.ArgumentError, match=MEMORY_REFUSED.format(limit=r"[\d.]+ GB available on this machine")):
        dpppl.sample(niw_model, two_blobs[0], kernel=kernel, num_chains=10**9, progress_bar=False)


def test_a_w3_sized_run_with_default_settings_is_accepted(niw_model, monkeypatch):
    """W3 (10^6 x 2 points, kernel="auto", 1,000 draws of one chain) runs today: its estimate, not
    a product of chains, capacity, points and dimensions, fits 16 GB (nothing is run here)."""
    from dpppl.kernels.auto import dim_of, resolve
    from dpppl.run.memory import check_memory, run_bytes

    target = niw_model.bind(np.random.default_rng(0).normal(size=(10**6, 2)))
    spec, options, _ = resolve("auto", niw_model, target.num_points, dim_of(target), {})
    parts = run_bytes(target, spec, options, "partition", num_chains=1, num_samples=1000, thinning=1, capacity=None,
                      truncation=20)
    monkeypatch.setenv("DPPPL_MEMORY_LIMIT", "16G")
    check_memory(parts)
    monkeypatch.setenv("DPPPL_MEMORY_LIMIT", "4G")  # the labels kept alone are 4 GB
    with pytest.raises(dpppl.ArgumentError, match=MEMORY_REFUSED.format(limit=r"4.29 GB DPPPL_MEMORY_LIMIT=4G")):
        check_memory(parts)
    monkeypatch.setenv("DPPPL_MEMORY_LIMIT", "lots")
    with pytest.raises(dpppl.ArgumentError, match="DPPPL_MEMORY_LIMIT='lots' is not a size: give bytes or a number "
                                                  "with a unit, e.g. 16G or 500M"):
        check_memory(parts)


def test_numpyro_adapter_takes_n_data_of_a_one_dimensional_model():
    """What `mcmc.run(key, x)` hands the adapter's steps: (N,) and (N, 1) data alike for 1-D points;
    other shapes a DataError naming both (checked in `init`, before anything runs)."""
    model = dpppl.DPMixture(1.0, dpppl.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0))
    x = np.linspace(-1.0, 1.0, 8)
    kernel = kernels.make("gibbs", model, x)
    np.testing.assert_array_equal(kernel._data((x,)), kernel._data((x[:, None],)))
    assert kernel._data((x,)).shape == (8, 1)
    with pytest.raises(dpppl.DataError, match=r"data of mcmc.run have shape \(8, 2\), but the kernel was made for "
                                              r"data of shape \(8, 1\) \(or \(N,\)\)"):
        kernel.init(jax.random.key(0), 0, None, (np.zeros((8, 2)),), {})
