"""Checkpoints: a run stopped and continued with dpppl.resume is the run that was not stopped
(warmup, sampling, thinning, two chains, a capacity grown before the stop, a longer run); when
checkpoints are written; and every error before anything is sampled.

Every run here samples the conftest model and data with gibbs and two chains (the programs
tests/run/test_driver.py compiles), in chunks of one iteration so that a stop falls mid-run.
"""

import hashlib
import json
import os
import pickle
import zipfile

import jax
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


def _progress(t: int, model, x) -> Progress:
    """Two chains with no point seated: states of the right structure for gibbs on (model, x)."""
    state = model.bind(x).empty_state(8)
    return Progress(t, jax.tree.map(lambda a: np.stack([np.asarray(a)] * 2), state), np.zeros((2, 2), np.uint32), ())


@pytest.fixture
def no_sampling(monkeypatch):
    """Any attempt to sample fails the test: the errors below come before."""
    def refuse(*args, **kwargs):
        raise AssertionError("sampling started")
    monkeypatch.setattr(dpppl.run.driver, "continue_partition", refuse)
    monkeypatch.setattr(dpppl.run.driver, "BACKENDS", {"partition": refuse, "nuts": refuse})


def _contents(path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("checkpoint.json"))


def _rewritten(path, change, target) -> None:
    """Copy the checkpoint `path` to `target` with its checkpoint.json changed by `change(contents)`."""
    with zipfile.ZipFile(path) as archive, zipfile.ZipFile(target, "w") as out:
        for name in archive.namelist():
            data = archive.read(name)
            if name == "checkpoint.json":
                contents = json.loads(data)
                change(contents)
                data = json.dumps(contents)
            out.writestr(name, data)


def test_a_model_from_text_is_kept_as_its_text_and_any_other_as_its_description(niw_model, two_blobs, tmp_path):
    text = ("data x : real[N, D]\nz ~ CRP(0.5)\ntheta[k] ~ NormalInverseWishart(mu0 = mean(x), kappa0 = 0.1, "
            "nu0 = D + 2, psi0 = cov(x) / 10)\nx[i] ~ Normal(theta[z[i]])\n")
    parsed = dpppl.parse(text, source="mine.dp")
    sticks = dpppl.StickBreakingMixture(a=[1.0, 2.0, 1.0], b=[2.0, 1.0, 0.0], component=dpppl.NormalInverseWishart(
        mu0="mean(x)", kappa0=0.1, nu0=np.float32(4.0), psi0="cov(x) / 10"))
    for model, kept_as in ((parsed, "text"), (niw_model, "description"), (sticks, "description")):
        path = tmp_path / "run.ckpt"
        with CheckpointFile(path, _spec(model, two_blobs[0]), 60) as file:
            file.save(_progress(7, niw_model, two_blobs[0]))
        spec, progress, written_by = read_checkpoint(path)
        assert fingerprint(spec.model) == fingerprint(model)
        assert progress.t == 7 and written_by == dpppl.__version__
        np.testing.assert_array_equal(spec.data, two_blobs[0])
        assert list(_contents(path)["spec"]["model"]) == [kept_as] + (["path"] if kept_as == "text" else [])
        assert zipfile.is_zipfile(path) and os.listdir(tmp_path) == ["run.ckpt"]  # the lock is gone with the run


def test_a_checkpoint_is_replaced_whole_or_not_at_all(niw_model, two_blobs, tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    with CheckpointFile(path, _spec(niw_model, two_blobs[0]), 60) as file:
        file.save(_progress(7, niw_model, two_blobs[0]))
        before = path.read_bytes()

        def interrupted(src, dst):
            raise KeyboardInterrupt
        monkeypatch.setattr(os, "replace", interrupted)
        with pytest.raises(KeyboardInterrupt):
            file.save(_progress(8, niw_model, two_blobs[0]))
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["run.ckpt"]


def test_two_runs_cannot_save_to_one_checkpoint(niw_model, two_blobs, tmp_path, no_sampling):
    path = tmp_path / "run.ckpt"
    with CheckpointFile(path, _spec(niw_model, two_blobs[0]), 60) as first:
        first.save(_progress(7, niw_model, two_blobs[0]))
        with pytest.raises(dpppl.ArgumentError, match=r"run.ckpt: another run is saving to this file \(it holds "
                                                      r".*run.ckpt.lock\); give this run another checkpoint path"):
            dpppl.sample(niw_model, two_blobs[0], checkpoint=path, **RUN)
        with pytest.raises(dpppl.ArgumentError, match="another run is saving to this file"):
            dpppl.resume(path)
    with CheckpointFile(path, _spec(niw_model, two_blobs[0]), 60):  # free again once the first run is done
        pass


def test_unreadable_checkpoints_are_argument_errors_before_sampling(niw_model, two_blobs, tmp_path, no_sampling):
    good = tmp_path / "good.ckpt"
    with CheckpointFile(good, _spec(niw_model, two_blobs[0]), 60) as file:
        file.save(_progress(7, niw_model, two_blobs[0]))
    raw = good.read_bytes()
    member = raw.index(b"\x93NUMPY")  # the first array's bytes: a flipped bit there fails its CRC-32
    _rewritten(good, lambda c: c.update(version=99), tmp_path / "format.ckpt")
    cases = {"missing.ckpt": None, "points.csv": b"a,b\n1,2\n", "cut.ckpt": raw[:-40],
             "changed.ckpt": raw[:member + 200] + bytes([raw[member + 200] ^ 1]) + raw[member + 201:]}
    messages = {"missing.ckpt": "no such checkpoint file", "points.csv": "not a dpppl checkpoint",
                "cut.ckpt": "the checkpoint is damaged", "changed.ckpt": "the checkpoint is damaged",
                "format.ckpt": "a checkpoint in format 99"}
    for name, content in cases.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
    for name, message in messages.items():
        with pytest.raises(dpppl.ArgumentError, match=message):
            dpppl.resume(tmp_path / name)
    with pytest.raises(dpppl.ArgumentError, match="is a directory"):
        dpppl.resume(tmp_path)


class _RunsCode:
    """What a crafted pickle holds: unpickling it runs `os.system` (here, it creates a file)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_crafted_checkpoint_never_runs_code(niw_model, two_blobs, tmp_path, no_sampling):
    """Every format dpppl has read: format 1 (a header with a valid sha256, then a pickle), an .npz
    holding an object array (a pickle inside), and format 2 whose description names functions
    instead of classes, or a class that is not a model constructor, or leaves out a field. Each is
    an ArgumentError from dpppl.resume, and the code the file holds never runs."""
    marker = tmp_path / "ran"
    body = pickle.dumps({"spec": _RunsCode(marker), "progress": _RunsCode(marker)})
    (tmp_path / "pickle.ckpt").write_bytes(b"dpppl-checkpoint 1 0.1.0 %s\n" % hashlib.sha256(body).hexdigest().encode()
                                           + body)
    with open(tmp_path / "object.ckpt", "wb") as f:
        np.savez(f, **{"checkpoint.json": np.array([_RunsCode(marker)], dtype=object)})
    good = tmp_path / "good.ckpt"
    with CheckpointFile(good, _spec(niw_model, two_blobs[0]), 60) as file:
        file.save(_progress(7, niw_model, two_blobs[0]))
    system = {"fields": {"command": f"touch {marker}"}}
    tampered = {
        "dataclass": lambda c: c["spec"]["model"].update(description={"dataclass": "posix:system", **system}),
        "namedtuple": lambda c: c["spec"].update(options={"namedtuple": "os:system", **system}),
        "dpppl-function": lambda c: c["progress"].update(
            states={"namedtuple": "dpppl.run.checkpoint:write_atomically", **system}),
        "other-class": lambda c: c["spec"]["model"].update(description={
            "dataclass": "dpppl.run.checkpoint:RunSpec", "fields": {}}),
        "missing-field": lambda c: c["spec"].pop("seed"),
        "missing-model-field": lambda c: c["spec"]["model"]["description"]["fields"].pop("component"),
        "wrong-type": lambda c: c["spec"].update(num_chains="2"),
        "states": lambda c: c["progress"]["states"]["fields"].update(extras={"dict": {"beta": {"array": "a0"}}}),
        "state-fields": lambda c: c["progress"]["states"]["fields"].pop("alpha"),
    }
    for name, change in tampered.items():
        _rewritten(good, change, tmp_path / f"{name}.ckpt")
    messages = {"pickle": r"a checkpoint in format 1 \(written by dpppl 0.1.0\), a Python pickle; this dpppl .* never "
                          r"reads pickles",
                "object": "not a checkpoint this dpppl reads: Object arrays cannot be loaded",
                "dataclass": r"model: 'posix:system' is not a dpppl model constructor",
                "namedtuple": r"options: 'os:system' is not a class of dpppl",
                "dpppl-function": "states: 'dpppl.run.checkpoint:write_atomically' is not a named tuple of dpppl",
                "other-class": "'dpppl.run.checkpoint:RunSpec' is not a dpppl model constructor",
                "missing-field": "the run description has no 'seed'",
                "missing-model-field": r"model: DPMixture\b.*component|model: Model: .*component",
                "wrong-type": "num_chains is a str, not a int",
                "states": "the checkpoint's chain states do not fit kernel 'gibbs' on this model: they hold other",
                "state-fields": "states: the fields of PartitionState are z, stats, alpha, overflow, extras, hyper, "
                                "the file gives z, stats, overflow, extras, hyper"}
    for name, message in messages.items():
        with pytest.raises(dpppl.ArgumentError, match=message):
            dpppl.resume(tmp_path / f"{name}.ckpt")
    assert not marker.exists()


def test_a_run_cannot_be_shortened(niw_model, two_blobs, tmp_path, no_sampling):
    path = tmp_path / "run.ckpt"
    with CheckpointFile(path, _spec(niw_model, two_blobs[0]), 60) as file:
        file.save(_progress(15, niw_model, two_blobs[0]))  # 10 iterations after warmup
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
    with pytest.raises(dpppl.ArgumentError, match=r"cannot be saved in a checkpoint: options.schedule: a function "
                                                  r"\(test_runs_that_.*<lambda>\)\. A checkpoint holds plain data"):
        dpppl.sample(niw_model, x, checkpoint=tmp_path / "run.ckpt", schedule=lambda: 0)

    def sticks(i):
        return 1.0 + 0 * i
    with pytest.raises(dpppl.ArgumentError, match=r"cannot be saved in a checkpoint: model.prior.a: a function "
                                                  r"\(.*sticks\)"):
        dpppl.sample(dpppl.StickBreakingMixture(a=sticks, b=1.0, component=niw_model.component), x,
                     checkpoint=tmp_path / "run.ckpt")
    assert not (tmp_path / "run.ckpt").exists()


_KILLED_RUN = """
import os, signal, sys
import numpy as np
import dpppl
from dpppl.run import runner

x = np.load(sys.argv[1])
model = dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), dpppl.NormalInverseWishart(
    mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2)))
runner.CHUNK_SECONDS = 0.0  # chunks of one iteration, a checkpoint after each
real, calls = runner._chunk_function, [0]

def killing(*spec):
    fn = real(*spec)
    def chunk(*args):
        calls[0] += 1
        if calls[0] == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)  # no Python cleanup: the lock, a temporary file are left
        return fn(*args)
    return chunk

runner._chunk_function = killing
dpppl.sample(model, x, checkpoint=sys.argv[2], checkpoint_every=1e-9, kernel="gibbs", num_warmup=5,
             num_samples=20, num_chains=2, seed=4, progress_bar=False)
"""


def test_a_run_killed_with_sigkill_resumes_bit_identically(uninterrupted, niw_model, two_blobs, tmp_path):
    """kill -9 in another process mid-run (after 11 of 25 iterations): `dpppl.resume` in this one
    makes the draws of the run that was not stopped, bit for bit (the same seed gives the same
    draws across processes), with no code of the file run and the dead run's lock gone."""
    import signal
    import subprocess
    import sys

    np.save(tmp_path / "x.npy", two_blobs[0])
    path = tmp_path / "run.ckpt"
    done = subprocess.run([sys.executable, "-c", _KILLED_RUN, str(tmp_path / "x.npy"), str(path), "12"],
                          capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    _, progress, _ = read_checkpoint(path)
    assert progress.t == 11
    assert_same_run(dpppl.resume(path, progress_bar=False), uninterrupted())


def test_typed_extras_are_plain_data_a_checkpoint_reads_back():
    """A chain state carrying typed extras (a hybrid's `HybridExtras` of `PermExtras`, the
    sub-cluster sampler's `SubclusterExtras` with its theta dict and absent non-conjugate fields)
    is written by class name and read back as the same classes and values, running nothing."""
    from dpppl.core.state import HybridExtras, NoExtras, PartitionState
    from dpppl.kernels.perm.sampler import PermExtras
    from dpppl.kernels.subcluster.sampler import SubclusterExtras, SubclusterSlots
    from dpppl.run.portable import Reader, Writer

    slots = SubclusterSlots(sub_stats=(np.zeros((3, 2)),), x_sum=np.ones((3, 2)), age=np.arange(3, dtype=np.int32),
                            weights=np.full(3, 0.5), theta={"mu": np.zeros((3, 2))})
    extras = HybridExtras((NoExtras(), PermExtras(np.float64(2.0), np.float64(3.0)),
                           SubclusterExtras(np.zeros(4, np.int32), slots)))
    state = PartitionState(np.zeros(4, np.int32), (np.zeros(3),), np.float64(1.0), np.bool_(False), extras)
    writer = Writer()
    back = Reader(writer.arrays).value(json.loads(json.dumps(writer.describe(state, "states"))), "states")
    assert jax.tree.structure(back) == jax.tree.structure(state)
    assert type(back.extras.parts[2].slots) is SubclusterSlots and back.extras.parts[2].slots.u is None
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(state)):
        np.testing.assert_array_equal(a, b)


def test_a_padded_run_stopped_and_resumed_is_the_run_that_was_not_stopped(niw_model, tmp_path, monkeypatch):
    """70 points run padded to 80 rows (`runner.point_class`); the checkpoint holds the 70 real labels
    and the resumed run pads them again: the draws of the run that was not stopped."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(-3, 1, (35, 2)), rng.normal(3, 1, (35, 2))])
    run = {**RUN, "kernel": "gibbs+splitmerge"}
    expected = dpppl.sample(niw_model, x, **run)
    path = tmp_path / "run.ckpt"
    stop_at_chunk(monkeypatch, 12)
    with pytest.warns(RuntimeWarning, match="interrupted after"):
        dpppl.sample(niw_model, x, checkpoint=path, **run)
    _, progress, _ = read_checkpoint(path)
    assert progress.states.z.shape == (2, 70)
    assert_same_run(dpppl.resume(path, progress_bar=False), expected)
