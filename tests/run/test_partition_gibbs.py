"""dpppl.sample of a NumPyro model function (dpppl.run.partition_gibbs.sample_model): what the
InferenceData holds, and the errors given before anything is sampled."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import NUTS

import dpppl
from dpppl.diagnostics.arviz_compat import arviz, group, labels
from dpppl.errors import ArgumentError, KernelError
from dpppl.run.nuts import init_in_one_program

MIXTURE = dpppl.DPMixture(dpppl.Gamma(2.0, 2.0), dpppl.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0))
RNG = np.random.default_rng(0)
X = jnp.asarray(RNG.normal(size=12))
Y = 1.5 * X + jnp.asarray(np.where(RNG.random(12) < 0.5, -2.0, 2.0) + 0.3 * RNG.normal(size=12))


def regression(x, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 2.0))
    numpyro.deterministic("twice_beta", 2 * beta)
    dpppl.dp_mixture("resid", MIXTURE, obs=y - x * beta)


def test_sample_of_a_numpyro_model_function():
    idata = dpppl.sample(regression, model_args=(X, Y), kernel="gibbs", num_warmup=30, num_samples=40,
                         thinning=2, seed=3, progress_bar=False, sweeps=2)
    post = group(idata, "posterior")  # the one thinning rule: 40 iterations, every 2nd kept
    for name in ("beta", "twice_beta", "resid_alpha", "num_clusters", "largest_cluster", "entropy", "lp"):
        assert post[name].shape == (1, 20), name
    assert "resid_labels" not in post
    z = labels(idata)
    assert z.shape == (1, 20, 12)
    np.testing.assert_array_equal(post["num_clusters"], z.max(axis=-1) + 1)  # canonical labels
    np.testing.assert_allclose(post["twice_beta"], 2 * post["beta"])
    stats = group(idata, "sample_stats")
    assert {"lp", "diverging", "acceptance_rate", "overflow"} <= set(stats)
    np.testing.assert_array_equal(group(idata, "observed_data")["resid"], Y)  # the data, not y - x beta
    const = group(idata, "constant_data")
    np.testing.assert_array_equal(const["x"], X)
    np.testing.assert_array_equal(const["y"], Y)
    assert idata.posterior.attrs["observed_arguments"] == '{"resid": "y"}'
    assert idata.posterior.attrs["model_function"] == f"{__name__}:regression"
    ll = group(idata, "log_likelihood")["resid"]
    assert ll.shape == (1, 20, 12) and np.all(np.isfinite(ll.values))
    assert arviz().loo(idata).n_data_points == 12
    assert idata.posterior.attrs["kernel"] == "resid_labels: gibbs"
    assert idata.posterior.attrs["exact"] == 1 and idata.posterior.attrs["sweeps"] == 2
    assert dpppl.point_estimate(idata).shape == (12,)


def test_inputs_are_checked_before_sampling():
    with pytest.raises(ArgumentError, match="model_args"):
        dpppl.sample(regression, np.zeros(3))
    with pytest.raises(ArgumentError, match="checkpoint"):
        dpppl.sample(regression, model_args=(X, Y), checkpoint="run.ckpt")
    with pytest.raises(ArgumentError, match="model_args and model_kwargs"):
        dpppl.sample(MIXTURE, np.zeros((5, 1)), model_args=(X,))
    with pytest.raises(KernelError, match="unknown kernel 'gibs'"):
        dpppl.PartitionGibbs(NUTS(regression), "gibs")
    with pytest.raises(ArgumentError, match="inner_kernel"):
        dpppl.sample(regression, model_args=(X, Y), inner_kernel=NUTS(lambda x, y: None))
    with pytest.raises(ArgumentError, match="sweeps"):
        dpppl.PartitionGibbs(NUTS(regression), sweeps=0)
    with pytest.raises(ArgumentError, match="log_likelihood must be True, False or 'auto', got 1"):
        dpppl.sample(regression, model_args=(X, Y), log_likelihood=1)


def _staged_init(kernel, programs=None):
    """`kernel`'s init as `init_in_one_program` runs it (the state of a NumPyro HMC is itself)."""
    return lambda key, *args: init_in_one_program(kernel.init, lambda state: state, key, *args, programs=programs)


def test_nuts_first_state_in_one_program_is_numpyros():
    """`init_in_one_program` (PartitionGibbs around NumPyro's NUTS) gives NumPyro's own eager init
    state (the same draws; floats to the last bits, which fused operations may change: here the
    gradient's), and NumPyro's error when no valid initial parameters exist."""

    def model(y):
        scale = numpyro.sample("scale", dist.LogNormal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(0.0, scale), obs=y)

    key, y = jax.random.key(5), jnp.asarray([0.3, -1.2])
    eager = NUTS(model).init(key, 10, None, (y,), {})
    staged = _staged_init(NUTS(model))(key, 10, None, (y,), {})
    assert jax.tree.structure(staged) == jax.tree.structure(eager)
    for a, b in zip(jax.tree.leaves(staged), jax.tree.leaves(eager)):
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)
    with pytest.raises(RuntimeError, match="Cannot find valid initial parameters"):
        _staged_init(NUTS(model))(key, 10, None, (jnp.asarray([np.inf]),), {})


def test_a_later_chain_runs_the_first_chains_init_program():
    """NumPyro inits each chain of a sequential run with the same kernel: the second init runs the
    first one's program (kept in the kernel's `programs`; the model is not traced again) and gives
    NumPyro's eager state for its key."""
    traces = []

    def model(y):
        traces.append(1)
        scale = numpyro.sample("scale", dist.LogNormal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(0.0, scale), obs=y)

    first_key, second_key = jax.random.split(jax.random.key(7))
    y, kernel = jnp.asarray([0.3, -1.2]), _staged_init(NUTS(model), programs={})
    kernel(first_key, 10, None, (y,), {})
    traced = len(traces)
    assert traced > 0
    second = kernel(second_key, 10, None, (y + 0.5,), {})
    assert len(traces) == traced, "the second chain's init traced the model again"
    eager = NUTS(model).init(second_key, 10, None, (y + 0.5,), {})
    for a, b in zip(jax.tree.leaves(second), jax.tree.leaves(eager)):
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)


def test_observed_data_are_the_argument_a_site_observes_shifted():
    """Without sampling: a site observing y - x beta records y (the argument it observes shifted by
    the parameters); a site observing y / scale (not a shift, and it moves with the draw) is left
    out of observed_data, and posterior predictive replicates of it are refused with the reason."""
    from dpppl.analysis.ppc import site_predictive
    from dpppl.run.partition_gibbs import observed_data

    def scaled(x, y):
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        dpppl.dp_mixture("resid", MIXTURE, obs=y / scale)

    observed, shifted = observed_data(regression, (X, Y), {})
    assert shifted == {"resid": "y"}
    np.testing.assert_array_equal(observed["resid"], Y)
    assert observed_data(scaled, (X, Y), {}) == ({}, {})
    samples = {"scale": np.ones(2), "resid_alpha": np.ones(2), "resid_labels": np.zeros((2, 12), np.int32)}
    with pytest.raises(dpppl.DataError, match="the observed site 'resid' is not a model argument shifted by the "
                                              "parameters"):
        site_predictive(scaled, samples, (X, Y))
def test_numpyro_shows_summaries_not_labels_and_from_numpyro_builds_dpppl_sample_layout(capsys):
    """In NumPyro's own outputs the labels are a field of the state, not sites: print_summary and
    get_samples show the label-invariant summaries; from_numpyro gives dpppl.sample's layout.
    Two chains vectorized (a vmapped outer step)."""
    from numpyro.infer import MCMC

    from dpppl.diagnostics.summaries import label_summaries
    from dpppl.run.numpyro_output import from_numpyro, labels_of

    mcmc = MCMC(dpppl.PartitionGibbs(NUTS(regression), "gibbs"), num_warmup=10, num_samples=12, num_chains=2,
                chain_method="vectorized", progress_bar=False)
    with pytest.raises(ArgumentError, match="from_numpyro: the MCMC has not run yet"):
        from_numpyro(mcmc)
    mcmc.run(jax.random.key(1), X, Y)
    mcmc.print_summary()
    shown = capsys.readouterr().out
    assert "resid_labels" not in shown
    for name in ("beta", "resid_alpha", "resid_num_clusters", "resid_largest_cluster", "resid_entropy"):
        assert name in shown, name
    samples = mcmc.get_samples(group_by_chain=True)
    assert "resid_labels" not in samples
    z = labels_of(mcmc, group_by_chain=True)["resid_labels"]
    assert z.shape == (2, 12, 12)
    expected = label_summaries(np.asarray(z))
    for name in ("num_clusters", "largest_cluster"):
        np.testing.assert_array_equal(samples["resid_" + name], expected[name])
    np.testing.assert_allclose(samples["resid_entropy"], expected["entropy"], rtol=1e-10)
    idata = from_numpyro(mcmc)
    post = group(idata, "posterior")
    assert set(post) == {"beta", "twice_beta", "resid_alpha", "num_clusters", "largest_cluster", "entropy", "lp"}
    np.testing.assert_array_equal(labels(idata), z)
    np.testing.assert_array_equal(post["num_clusters"], expected["num_clusters"])
    assert {"lp", "overflow", "diverging", "acceptance_rate"} <= set(group(idata, "sample_stats"))
    assert idata.posterior.attrs["kernel"] == "resid_labels: gibbs"


def test_from_numpyro_refuses_other_kernels():
    from numpyro.infer import MCMC

    from dpppl.run.numpyro_output import from_numpyro

    with pytest.raises(ArgumentError, match=r"from_numpyro takes a numpyro.infer.MCMC of dpppl.PartitionGibbs or "
                                            r"of a kernel from dpppl.kernels.make, got an MCMC of NUTS \(use "
                                            r"arviz.from_numpyro"):
        from_numpyro(MCMC(NUTS(regression), num_warmup=1, num_samples=1))
