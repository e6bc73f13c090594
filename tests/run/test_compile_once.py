"""Compile once per model structure (issue 35): data and resolved hyperparameters are arguments of
the compiled programs, so a run on new data of the same shape, or with other hyperparameters of
the same shapes, lowers no new program. Counted with `jax_log_compiles`, which logs every
lowering (a program taken from the persistent cache is lowered too, so the count does not
depend on that cache)."""

import contextlib
import logging

import jax
import numpy as np
import pytest

import dpppl
from dpppl.datasets.synthetic import moving_blobs
from dpppl.run import runner
from tests.run.runs import assert_same_run


class _Lowerings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.programs: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Compiling "):
            self.programs.append(message.split(" ")[1])


@contextlib.contextmanager
def lowerings():
    """The names of the programs lowered inside the block."""
    handler, logger = _Lowerings(), logging.getLogger("jax")
    logger.addHandler(handler)
    with jax.log_compiles(True):
        try:
            yield handler.programs
        finally:
            logger.removeHandler(handler)


def _points(seed):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-3, 1, (15, 2)), rng.normal(3, 1, (15, 2))])


def _rankings(seed):
    """Top-3 rankings of 5 items, padded with -1."""
    rng = np.random.default_rng(seed)
    return np.stack([np.r_[rng.permutation(5)[:3], -1, -1] for _ in range(30)])


def _slices(seed):
    return moving_blobs(3, 2, 5, spread=0.05, seed=seed)[0]


CASES = {
    "gibbs": ("models/gaussian_niw.dp", _points),
    "gibbs+splitmerge": ("models/gaussian_niw.dp", _points),
    "subcluster": ("models/gaussian_niw.dp", _points),
    "gibbs+perm": ("models/gaussian_niw.dp", _points),
    "sbgibbs+labelswap+labelpermute": ("models/stick_breaking.dp", _points),
    "mallows-slice": ("models/rankings.dp", _rankings),
    "ddp+ddpswap": ("examples/ddp.dp", _slices),
}


# the CRP Gibbs kernels in the default run; the others' first runs compile 13-32 s each on a 2-core
# machine (their own programs, shared with no other test), so they run with -m slow
_DEFAULT_RUN = ("gibbs", "gibbs+splitmerge")


@pytest.mark.parametrize("kernel", [k if k in _DEFAULT_RUN else pytest.param(k, marks=pytest.mark.slow)
                                    for k in CASES])
def test_new_data_of_the_same_shape_compile_nothing(kernel):
    """`models/gaussian_niw.dp` resolves mu0 = mean(x) and psi0 = cov(x) / 10 from the data: each
    data set has other hyperparameters as well as other points."""
    path, data = CASES[kernel]
    run = dict(kernel=kernel, num_warmup=3, num_samples=3, num_chains=2, progress_bar=False)
    first = dpppl.sample(path, data(0), **run)
    with lowerings() as programs:
        second = dpppl.sample(path, data(1), **run)
    assert programs == []
    assert not np.array_equal(first.posterior["lp"].values, second.posterior["lp"].values)  # other data, other run


def test_other_hyperparameters_of_the_same_shapes_compile_nothing(niw_model, two_blobs):
    run = dict(kernel="gibbs", num_warmup=3, num_samples=3, num_chains=2, progress_bar=False)
    dpppl.sample(niw_model, two_blobs[0], **run)
    other = dpppl.DPMixture(niw_model.prior.alpha, dpppl.NormalInverseWishart(
        mu0=np.ones(2), kappa0=0.5, nu0=5.0, psi0=2 * np.eye(2)))
    with lowerings() as programs:
        dpppl.sample(other, two_blobs[0], **run)
    assert programs == []


@pytest.mark.parametrize("alphas", [(1.0, 0.7), (dpppl.priors.Gamma(1.0, 1.0), dpppl.priors.Gamma(2.0, 0.5))],
                         ids=["fixed", "gamma"])
def test_another_concentration_compiles_nothing(niw_model, two_blobs, alphas):
    """The prior's alpha (or its Gamma prior's shape and rate) is a leaf of the bound model, an
    argument of the compiled programs: a run at another value lowers nothing, and runs at it."""
    run = dict(kernel="gibbs", num_warmup=3, num_samples=3, num_chains=2, progress_bar=False)
    component = niw_model.component
    first = dpppl.sample(dpppl.DPMixture(alphas[0], component), two_blobs[0], **run)
    with lowerings() as programs:
        second = dpppl.sample(dpppl.DPMixture(alphas[1], component), two_blobs[0], **run)
    assert programs == []
    if isinstance(alphas[1], float):  # the recorded log joint is that of the labels at alpha 0.7
        bound = dpppl.DPMixture(alphas[1], component).bind(two_blobs[0])
        z = second.posterior_partition["z"].values[0, -1]
        assert float(second.posterior["lp"].values[0, -1]) == pytest.approx(
            float(bound.log_joint_of_labels(z)), rel=1e-9)
    assert not np.array_equal(first.posterior["lp"].values, second.posterior["lp"].values)


def _blobs(n, seed):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-3, 1, (n // 2, 2)), rng.normal(3, 1, (n - n // 2, 2))])


@pytest.mark.parametrize("kernel", ["gibbs", "gibbs+splitmerge", pytest.param("subcluster", marks=pytest.mark.slow),
                                    pytest.param("gibbs+perm", marks=pytest.mark.slow)])
def test_another_number_of_points_in_the_same_class_compiles_nothing(kernel):
    """70 and 75 points are both padded to 80 rows (`point_class`): one program serves both."""
    assert runner.point_class(70) == runner.point_class(75) == 80
    run = dict(kernel=kernel, num_warmup=3, num_samples=3, num_chains=2, progress_bar=False)
    dpppl.sample("models/gaussian_niw.dp", _blobs(70, 0), **run)
    with lowerings() as programs:
        idata = dpppl.sample("models/gaussian_niw.dp", _blobs(75, 1), **run)
    assert programs == []
    assert idata.posterior_partition["z"].shape == (2, 3, 75)


@pytest.mark.parametrize("kernel, options", [
    ("gibbs", {"native": True}), ("gibbs", {"native": False}), ("gibbs+splitmerge", {}),
    # perm's steps on padded points without sampling: tests/kernels/perm/test_sampler.py; subcluster: one variant
    # in warmup and after it, one program per run, not two
    pytest.param("gibbs+perm", {}, marks=pytest.mark.slow),
    pytest.param("subcluster", {"warmup_variant": None}, marks=pytest.mark.slow),
    # the sub-cluster moves at every size: the published warmup, then the exact step's anchor pairs
    pytest.param("subcluster", {"collapsed_below": 0}, marks=pytest.mark.slow),
    pytest.param("subcluster", {"variant": "paper", "warmup_variant": None},
                 marks=[pytest.mark.slow, pytest.mark.filterwarnings("ignore:subcluster. variant='paper'")])])
def test_padding_never_changes_a_draw(kernel, options, monkeypatch):
    """The same seed gives the same draws whether the 70 points run padded to 80 rows or as they
    are: padded points are never seated, counted or visited, and every random draw has the shape
    of the padded points' prefix (partitionable threefry)."""
    runs = {}
    for padded in (True, False):
        monkeypatch.setattr(runner, "PADDED_FROM", 64 if padded else 10**9)
        runs[padded] = dpppl.sample("models/gaussian_niw.dp", _blobs(70, 2), kernel=kernel, num_warmup=4,
                                    num_samples=6, num_chains=2, seed=7, progress_bar=False, **options)
    assert_same_run(runs[True], runs[False])


@pytest.mark.slow
def test_nuts_on_new_data_of_the_same_shape_compiles_nothing():
    """`kernel="nuts"` runs one program (`dpppl.run.nuts.run_chains`) of which the data and the
    hyperparameters they resolve are arguments, so a new data set of the same shape lowers no program
    (NumPyro's own `MCMC` lowered its sampling loop again on every run, programs the persistent cache
    then served)."""
    run = dict(kernel="nuts", num_warmup=3, num_samples=3, truncation=3, progress_bar=False)
    first = dpppl.sample("models/gaussian_niw.dp", _points(0), **run)
    with lowerings() as programs:
        second = dpppl.sample("models/gaussian_niw.dp", _points(1), **run)
    assert programs == []
    assert not np.array_equal(first.posterior["lp"].values, second.posterior["lp"].values)  # other data, other run


def _ranked(n, seed):
    """n top-3 rankings of 5 items, padded with -1."""
    rng = np.random.default_rng(seed)
    return np.stack([np.r_[rng.permutation(5)[:3], -1, -1] for _ in range(n)])


def _timed(n, seed):
    """The first n of 80 points drifting over 5 time slices (16 a slice: every slice has points
    for n > 64), with their times in the last column."""
    return moving_blobs(5, 2, 8, spread=0.05, seed=seed)[0][:n]


# the kernels on explicit labels and instantiated parameters, with options that keep a step cheap;
# their programs compile 30-200 s on a 2-core machine, shared with no default-run test: -m slow
MASKED = {
    "sbgibbs+labelswap+labelpermute": ("models/stick_breaking.dp", _blobs, {}),
    "mallows-slice": ("models/rankings.dp", _ranked, {"num_gibbs": 2, "num_slices": 1}),
    "ddp+ddpswap": ("examples/ddp.dp", _timed, {"num_swaps": 5}),
}


@pytest.mark.slow
@pytest.mark.parametrize("kernel", list(MASKED))
def test_padding_never_changes_a_draw_on_labels_and_parameters(kernel, monkeypatch):
    """As `test_padding_never_changes_a_draw`, for the stick-breaking, Mallows and DDP kernels:
    the padded points (label -1; for the DDP in no time slice either) are never visited or
    counted, the orders are `permutation_of_first` (`jax.random.permutation`'s for the real
    points) and every per-point draw is the unpadded run's prefix."""
    path, data, options = MASKED[kernel]
    runs = {}
    for padded in (True, False):
        monkeypatch.setattr(runner, "PADDED_FROM", 64 if padded else 10**9)
        runs[padded] = dpppl.sample(path, data(70, 2), kernel=kernel, num_warmup=4, num_samples=6, num_chains=2,
                                    seed=7, progress_bar=False, **options)
    assert_same_run(runs[True], runs[False])


@pytest.mark.slow
@pytest.mark.parametrize("kernel", list(MASKED))
def test_another_number_of_points_in_the_same_class_compiles_nothing_on_labels_and_parameters(kernel):
    """70 and 75 points (75 rankings, 75 points in the same 5 time slices) run one program."""
    path, data, options = MASKED[kernel]
    run = dict(kernel=kernel, num_warmup=3, num_samples=3, num_chains=2, progress_bar=False, **options)
    dpppl.sample(path, data(70, 0), **run)
    with lowerings() as programs:
        idata = dpppl.sample(path, data(75, 1), **run)
    assert programs == []
    assert idata.posterior_partition["z"].shape == (2, 3, 75)
