"""Checkpoints: a run stopped and continued with dpppl.resume is the run that was not stopped
(warmup, sampling, thinning, two chains, a capacity grown before the stop, a longer run); when
checkpoints are written; and every error before anything is sampled.

Every run here samples the conftest model and data with gibbs and two chains (the programs
tests/run/test_driver.py compiles), in chunks of one iteration so that a stop falls mid-run.
"""

import os
import pickle

import numpy as np
import pytest

import dpppl
import dpppl.run.driver
from dpppl.core.fingerprint import fingerprint
from dpppl.diagnostics.arviz_compat import group
from dpppl.run import runner
from dpppl.run.checkpoint import CheckpointFile, Interrupted, Progress, RunSpec, read_checkpoint
from tests.run.runs import assert_same_run, stop_at_chunk

RUN = dict(kernel="gibbs", num_warmup=5, num_samples=20, num_chains=2, seed=4, progress_bar=False)
EIGHT_CLUSTERS = tuple(int(k) for k in np.arange(30) % 8)  # in 8 slots: the first new cluster grows them


@pytest.fixture(scope="module")
def uninterrupted(niw_model, two_blobs):
    """The runs that were not stopped, sampled once each (normal chunks)."""
    runs = {}

    def run(**options):
        key = tuple(sorted(options.items()))
        if key not in runs:
            runs[key] = dpppl.sample(niw_model, two_blobs[0], **{**RUN, **options})
        return runs[key]
    return run


@pytest.mark.parametrize("stop, options", [
    (3, {}),                                 # in warmup (iterations 0-4)
    (12, {}),                                # in sampling
    (12, {"thinning": 3}),
    (9, {"init": EIGHT_CLUSTERS, "capacity": 8}),  # after the capacity grew from 8 (to 16, the default)
], ids=["warmup", "sampling", "thinning", "grown"])
def test_a_stopped_run_resumed_is_the_run_that_was_not_stopped(stop, options, uninterrupted, niw_model, two_blobs,
                                                                tmp_path, monkeypatch):
    expected = uninterrupted(**options)
    path = tmp_path / "run.ckpt"
    stop_at_chunk(monkeypatch, stop)
    if stop <= RUN["num_warmup"]:
        with pytest.raises(Interrupted, match="before any draw was kept; the run is saved in") as caught:
            dpppl.sample(niw_model, two_blobs[0], checkpoint=path, **RUN, **options)
        assert caught.value.checkpoint == str(path) and caught.value.iteration == stop - 1
    else:
        with pytest.warns(RuntimeWarning, match=r"interrupted after .* the run is saved in .*dpppl\.resume"):
            stopped = dpppl.sample(niw_model, two_blobs[0], checkpoint=path, **RUN, **options)
        assert group(stopped, "posterior").attrs["interrupted"] == 1
    _, progress, _ = read_checkpoint(path)
    assert 0 < progress.t < RUN["num_warmup"] + RUN["num_samples"]
    if "capacity" in options:
        assert progress.states.stats.n.shape[-1] > options["capacity"]
    resumed = dpppl.resume(path, progress_bar=False)  # still in chunks of one iteration
    assert group(resumed, "posterior").attrs["interrupted"] == 0
    assert_same_run(resumed, expected)


def test_resume_extends_a_finished_run(uninterrupted, niw_model, two_blobs, tmp_path):
    path = tmp_path / "run.ckpt"
    dpppl.sample(niw_model, two_blobs[0], checkpoint=path, **{**RUN, "num_samples": 12})
    longer = dpppl.resume(path, num_samples=RUN["num_samples"], progress_bar=False)
    assert_same_run(longer, uninterrupted())
    assert_same_run(dpppl.resume(path, progress_bar=False), longer)  # the checkpoint now holds the longer run


def test_checkpoints_are_written_at_the_end_of_warmup_at_the_end_and_every_interval(niw_model, two_blobs, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setattr(runner, "CHUNK_SECONDS", 0.0)
    written = []
    save = CheckpointFile.save
    monkeypatch.setattr(CheckpointFile, "save", lambda self, progress: (written.append(progress.t),
                                                                         save(self, progress)))
    run = {**RUN, "num_samples": 6}
    dpppl.sample(niw_model, two_blobs[0], checkpoint=tmp_path / "a.ckpt", checkpoint_every=1e9, **run)
    assert written == [5, 11]
    written.clear()
    dpppl.sample(niw_model, two_blobs[0], checkpoint=tmp_path / "b.ckpt", checkpoint_every=1e-9, **run)
    assert written == list(range(1, 12))


# ------------------------------------------------------------------- the file, without sampling


def _spec(model, x, **changes) -> RunSpec:
    fields = dict(model=model, data=x, kernel="gibbs", options={}, seed=4, init="sequential", num_warmup=5,
                  num_samples=20, num_chains=2, thinning=1)
    return RunSpec(**{**fields, **changes})


def _progress(t: int) -> Progress:
    return Progress(t, {"z": np.zeros((2, 30), np.int32)}, np.zeros((2, 2), np.uint32), ())


@pytest.fixture
def no_sampling(monkeypatch):
    """Any attempt to sample fails the test: the errors below come before."""
    def refuse(*args, **kwargs):
        raise AssertionError("sampling started")
    monkeypatch.setattr(dpppl.run.driver, "continue_partition", refuse)
    monkeypatch.setattr(dpppl.run.driver, "BACKENDS", {"partition": refuse, "nuts": refuse})


def test_a_model_from_text_is_kept_as_its_text_and_any_other_pickled(niw_model, two_blobs, tmp_path):
    text = ("data x : real[N, D]\nz ~ CRP(0.5)\ntheta[k] ~ NormalInverseWishart(mu0 = mean(x), kappa0 = 0.1, "
            "nu0 = D + 2, psi0 = cov(x) / 10)\nx[i] ~ Normal(theta[z[i]])\n")
    parsed = dpppl.parse(text, source="mine.dp")
    for model, kept_as in ((parsed, dict), (niw_model, dpppl.Model)):
        path = tmp_path / "run.ckpt"
        CheckpointFile(path, _spec(model, two_blobs[0]), 60).save(_progress(7))
        spec, progress, written_by = read_checkpoint(path)
        assert fingerprint(spec.model) == fingerprint(model)
        assert progress.t == 7 and written_by == dpppl.__version__
        np.testing.assert_array_equal(spec.data, two_blobs[0])
        body = path.read_bytes().split(b"\n", 1)[1]
        assert isinstance(pickle.loads(pickle.loads(body)["spec"])["model"], kept_as)


def test_a_checkpoint_is_replaced_whole_or_not_at_all(niw_model, two_blobs, tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    file = CheckpointFile(path, _spec(niw_model, two_blobs[0]), 60)
    file.save(_progress(7))
    before = path.read_bytes()

    def interrupted(src, dst):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        file.save(_progress(8))
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["run.ckpt"]


def test_unreadable_checkpoints_are_argument_errors_before_sampling(niw_model, two_blobs, tmp_path, no_sampling):
    good = tmp_path / "good.ckpt"
    CheckpointFile(good, _spec(niw_model, two_blobs[0]), 60).save(_progress(7))
    raw = good.read_bytes()
    header, body = raw.split(b"\n", 1)
    cases = {"missing.ckpt": None, "points.csv": b"a,b\n1,2\n", "cut.ckpt": raw[:-40],
             "changed.ckpt": header + b"\n" + body[:-1] + bytes([body[-1] ^ 1]),
             "format.ckpt": header.replace(b"dpppl-checkpoint 1 ", b"dpppl-checkpoint 99 ") + b"\n" + body}
    messages = {"missing.ckpt": "no such checkpoint file", "points.csv": "not a dpppl checkpoint",
                "cut.ckpt": "the checkpoint is damaged", "changed.ckpt": "the checkpoint is damaged",
                "format.ckpt": "a checkpoint in format 99"}
    for name, content in cases.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
        with pytest.raises(dpppl.ArgumentError, match=messages[name]):
            dpppl.resume(tmp_path / name)
    with pytest.raises(dpppl.ArgumentError, match="is a directory"):
        dpppl.resume(tmp_path)


def test_a_run_cannot_be_shortened(niw_model, two_blobs, tmp_path, no_sampling):
    path = tmp_path / "run.ckpt"
    CheckpointFile(path, _spec(niw_model, two_blobs[0]), 60).save(_progress(15))  # 10 iterations after warmup
    with pytest.raises(dpppl.ArgumentError, match=r"num_samples \(8\) is smaller than the 10 iterations"):
        dpppl.resume(path, num_samples=8)
    with pytest.raises(dpppl.ArgumentError, match="num_samples must be an integer"):
        dpppl.resume(path, num_samples=0)
    with pytest.raises(dpppl.ArgumentError, match="checkpoint_every must be a positive number"):
        dpppl.resume(path, checkpoint_every=0)


def test_runs_that_cannot_be_checkpointed_are_refused_before_sampling(niw_model, two_blobs, tmp_path, no_sampling):
    x = two_blobs[0]
    with pytest.raises(dpppl.ArgumentError, match=r"kernel 'nuts' cannot save a checkpoint: the partition "
                                                  r"kernels \(.*gibbs.*\) and their hybrids can"):
        dpppl.sample(niw_model, x, kernel="nuts", checkpoint=tmp_path / "run.ckpt")
    with pytest.raises(dpppl.ArgumentError, match="checkpoint .*: the directory .* does not exist"):
        dpppl.sample(niw_model, x, checkpoint=tmp_path / "no" / "run.ckpt")
    with pytest.raises(dpppl.ArgumentError, match="checkpoint_every must be a positive number"):
        dpppl.sample(niw_model, x, checkpoint=tmp_path / "run.ckpt", checkpoint_every=-1)
    with pytest.raises(dpppl.ArgumentError, match="cannot be saved in a checkpoint"):
        dpppl.sample(niw_model, x, checkpoint=tmp_path / "run.ckpt", schedule=lambda: 0)
    assert not (tmp_path / "run.ckpt").exists()
