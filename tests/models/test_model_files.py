"""Every model file in models/ and examples/ compiles to NumPyro: prior simulation of data under
`numpyro.infer.Predictive` (bound, and unbound by the rule of `dpppl.models.compile.prior_family`),
and `kernel="nuts"` for every model whose parameters are continuous (all but rankings.dp)."""

from pathlib import Path

import jax
import numpy as np
import numpyro
import pytest
from numpyro.infer import Predictive

import dpppl
from dpppl.dsl.parser import bind_data
from dpppl.diagnostics.arviz_compat import group

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(str(p.relative_to(ROOT)) for p in [*ROOT.glob("models/*.dp"), *ROOT.glob("examples/*.dp")])
RNG = np.random.default_rng(0)
RANKINGS = dpppl.rankings([[0, 1, 2], [1, 0], [2], [0, 2, 1], [1, 2, 0], [0, 1], [3, 0], [2, 3, 1]], n_items=4)
DATA = {  # small data of each file's kind; None: the data the file names
    "models/bernoulli.dp": RNG.integers(0, 2, (8, 3)),
    "models/galaxies.dp": None,
    "models/galaxies_fixed.dp": None,
    "models/dpdensity.dp": None,
    "models/multinomial.dp": RNG.integers(0, 5, (8, 4)),
    "models/rankings.dp": RANKINGS,
    "examples/ddp.dp": (RNG.normal(size=(9, 2)), np.repeat([0.0, 1.0, 2.0], 3)),
}
NUM_TRIALS = 7
# unbound, without data: what prior simulation needs (the dimension), or the hyperparameters that
# depend on the data, named in the error
UNBOUND = {
    "models/bernoulli.dp": {"dim": 3}, "models/gaussian_known.dp": {"dim": 2},
    "models/multinomial.dp": {"dim": 4, "num_trials": NUM_TRIALS}, "models/rankings.dp": {"dim": 4},
    "models/galaxies.dp": {},
    "models/galaxies_fixed.dp": {}, "models/dpdensity.dp": {},
    "models/gaussian_diag.dp": "mu0, b0", "models/gaussian_lognormal.dp": "m0, s0, l0",
    "models/gaussian_niw.dp": "mu0, psi0", "models/pitman_yor.dp": "mu0, psi0",
    "models/pseudo_particles.dp": "mu0, psi0", "models/stick_breaking.dp": "mu0, psi0",
    "examples/ddp.dp": "mu0",
}
M, N = 3, 5  # prior draws, simulated points
RANDOM = ["models/dpdensity.dp", "models/galaxies.dp"]
"""The model files with random hyperparameters of the base measure."""
COMPILED = FILES


def data_of(path):
    return DATA.get(path, RNG.normal(size=(8, 2)))


def bound_model(path):
    data = data_of(path)
    return dpppl.load(path, data=data) if data is not None else bind_data(dpppl.load(path))[1]


def check_simulated(path, x, dim):
    """Simulated points of the file's kind: shape (M, N, dim), finite, and binary, counts summing
    to the trials, or rankings (distinct items then -1 padding) as the kind says."""
    x = np.asarray(x)
    assert x.shape == (M, N, dim) and np.all(np.isfinite(x))
    kind = dpppl.load(path).data.kind
    if kind == "binary":
        assert set(np.unique(x)) <= {0.0, 1.0}
    if kind == "count":
        np.testing.assert_array_equal(x.sum(axis=-1), NUM_TRIALS)
    if kind == "ranking":
        for row in x.reshape(-1, dim).astype(int):
            items = row[row >= 0]
            assert len(set(items)) == len(items) and np.all(row[len(items):] == -1) and len(items) == dim - 1


def test_every_model_file_is_covered():
    assert set(FILES) == set(UNBOUND), "add the new model file to DATA / UNBOUND"


@pytest.mark.parametrize("path", COMPILED)
def test_predictive_simulates_data_from_the_prior(path):
    bound = bound_model(path)
    fn = bound.numpyro_model(3)
    name = bound.model.data.name
    if path == "examples/ddp.dp":
        t = np.array([0.0, 2.0, 1.0, 1.0, 0.0])
        args, kwargs = (None, t), {}
    else:
        args, kwargs = (None,), {"num_points": N}
        if bound.model.data.kind == "count":
            kwargs["num_trials"] = NUM_TRIALS
    draws = Predictive(fn, num_samples=M)(jax.random.key(1), *args, **kwargs)
    check_simulated(path, draws[name], bound.observed_x.shape[1])
    for hyperparameter in bound.model.hyperpriors:  # a site each, drawn from its prior
        assert np.asarray(draws[hyperparameter]).shape == (M,)
    assert np.asarray(draws["assignment"]).shape == (M, N) and int(np.max(draws["assignment"])) < 3
    # conditioned on the data, the data site holds them as given
    observed = (bound.observed_x, bound.t) if path == "examples/ddp.dp" else (bound.observed_x,)

    def observed_value(key):  # traced once, not run op by op; the data site is all it returns
        site = numpyro.handlers.trace(numpyro.handlers.seed(fn, key)).get_trace(*observed)[name]
        assert site["is_observed"]
        return site["value"]

    np.testing.assert_array_equal(jax.jit(observed_value)(jax.random.key(2)), bound.observed_x)


@pytest.mark.parametrize("path", COMPILED)
def test_unbound_models_simulate_by_the_documented_rule(path):
    """The file's own data (galaxies.dp, galaxies_fixed.dp), else numeric hyperparameters and a dimension; a
    hyperparameter that depends on the data is a ModelError naming it."""
    model = dpppl.load(path)
    fn = model.numpyro_model(3)
    expected = UNBOUND[path]
    args = (None, np.array([0.0, 1.0, 1.0, 2.0, 0.0])) if path == "examples/ddp.dp" else (None,)
    kwargs = {} if path == "examples/ddp.dp" else {"num_points": N}
    if isinstance(expected, str):
        with pytest.raises(dpppl.ModelError, match=f"{path}: .*hyperparameter\\(s\\) {expected} depend on the data"):
            Predictive(fn, num_samples=M)(jax.random.key(0), *args, **kwargs)
        return
    draws = Predictive(fn, num_samples=M)(jax.random.key(0), *args, **kwargs, **expected)
    dim = expected.get("dim", 1)
    check_simulated(path, draws[model.data.name], dim)
    if path == "models/galaxies_fixed.dp":  # hyperparameters from the carried velocities (km/s): draws of that size
        assert 1e3 < np.median(np.abs(draws["x"])) < 1e5


def test_unbound_prior_simulation_errors_name_what_is_missing():
    with pytest.raises(dpppl.DataError, match=r"dimension of 'x' is not declared \(real\[N, D\]\): give dim"):
        Predictive(dpppl.load("models/gaussian_known.dp").numpyro_model(3), num_samples=1)(
            jax.random.key(0), None, num_points=N)
    with pytest.raises(dpppl.DataError, match="needs their totals: give num_trials"):
        Predictive(dpppl.load("models/multinomial.dp").numpyro_model(3), num_samples=1)(
            jax.random.key(0), None, num_points=N, dim=4)
    with pytest.raises(dpppl.DataError, match="num_trials is the total of simulated count vectors"):
        Predictive(dpppl.load("models/bernoulli.dp").numpyro_model(3), num_samples=1)(
            jax.random.key(0), None, num_points=N, dim=2, num_trials=3)
    with pytest.raises(dpppl.DataError, match="give the times t"):
        Predictive(dpppl.load("examples/ddp.dp").numpyro_model(3), num_samples=1)(jax.random.key(0))


@pytest.mark.parametrize("path", RANDOM)
def test_models_with_random_hyperparameters_build_their_kernels(path):
    """Bound to the data they name, their default kernel builds with the hyperparameter move and their
    log joint at the chains' start is finite (nothing compiled: `dpppl sample` runs galaxies.dp in
    tests/test_cli.py)."""
    target = bound_model(path)
    kernel = dpppl.kernels.build("gibbs+splitmerge", target)
    assert [part.name for part in kernel.parts][-1] == "hyperparameters" and kernel.exact
    state = target.state_from_labels(None, np.zeros(target.num_points, np.int32), 2)
    assert np.isfinite(float(target.lp(state)))


@pytest.mark.slow
@pytest.mark.parametrize("path", COMPILED)
def test_nuts_runs_on_every_model_with_continuous_parameters(path):
    """A tiny NUTS run (a few warmup steps and draws; seconds to a minute each, mostly
    compilation); the rankings model's central permutations are discrete, so NUTS refuses it."""
    data = data_of(path)
    if path == "models/rankings.dp":
        with pytest.raises(dpppl.KernelError, match="mallows-slice"):
            dpppl.sample(path, data, kernel="nuts", num_warmup=2, num_samples=2, truncation=3, progress_bar=False)
        return
    idata = dpppl.sample(path, data, kernel="nuts", num_warmup=3, num_samples=3, truncation=3, progress_bar=False)
    posterior = group(idata, "posterior")
    assert np.asarray(posterior["num_clusters"]).shape == (1, 3)
    for name in dpppl.load(path).hyperpriors:  # recorded as the partition kernels record them
        assert np.asarray(posterior[name]).shape == (1, 3)
    assert np.all(np.isfinite(np.asarray(group(idata, "sample_stats")["lp"])))
