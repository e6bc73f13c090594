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
