"""Runs over several processes joined by `jax.distributed` (issue 34; docs/distributed.md).

- two local processes (gloo collectives on CPU), each giving `dpppl.sample` its own rows of three
  separated blobs, report the same posterior and sample statistics, the global run's, and labels of
  their own points that recover the blobs; `auto` picks the sub-cluster sampler;
- a kernel that cannot run over several processes is refused before anything is gathered or sampled,
  naming the kernels that can; so are a checkpoint, initial labels and data that are not an array.
The refusals run in this process with `jax.process_count` reporting two processes."""

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile

import jax
import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import to_arviz
from dpppl.errors import ArgumentError, DataError, KernelError
from dpppl.families import NormalInverseWishart
from dpppl.kernels.auto import choose
from dpppl.kernels.base import build
from dpppl.kernels.subcluster.sampler import block_size_for
from dpppl.run import distributed
from dpppl.run.distributed import local_size
from dpppl.run.checkpoint import (ProcessCheckpointFile, Progress, RunSpec, joined_points, read_checkpoint,
                                  read_shard)
from dpppl.run.output import pointwise_log_likelihood
from dpppl.testing import check_kernel_samples, exact_posterior
from tests.helpers.cases import CASES

WORKER = """
import json, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, process_id, num_processes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
init = sys.argv[4] if len(sys.argv) > 4 else "sequential"
if num_processes > 1:
    jax.distributed.initialize(f"localhost:{port}", num_processes=num_processes, process_id=process_id)
import numpy as np
import dpppl
from dpppl.families import NormalInverseWishart

rng = np.random.default_rng(0)
truth = rng.integers(0, 3, 301)
x = np.array([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0]])[truth] + rng.normal(size=(301, 2))
# unequal counts: padded in the gather
rows = slice(0, 301) if num_processes == 1 else slice(0, 140) if process_id == 0 else slice(140, 301)
# one compiled chunk (no published warmup step), no anchor-pair moves: the smallest sub-cluster program;
# collapsed_below=0: the sub-cluster step in one process too (below 3,000 points it would run collapsed Gibbs)
# auto picks subcluster in a multi-process run (one process on 301 points would take gibbs+splitmerge)
kernel = "auto" if num_processes > 1 else "subcluster"
idata = dpppl.sample(dpppl.DPMixture(1.0, NormalInverseWishart()), x[rows], kernel, num_warmup=4, num_samples=4,
                     warmup_variant=None, split_merge_pairs=0, collapsed_below=0, record_parameters=False,
                     progress_bar=False, seed=4, init=init)  # log_likelihood="auto": each process's own points'
log_likelihood = idata.log_likelihood["x"]
gathered = dpppl.run.distributed.gathered_log_likelihood(idata).log_likelihood["x"]  # every process's columns
z = idata.posterior_partition["z"].values
start = []  # the sequential start alone (its programs compiled by the run): the seatings, then the merge pass
if num_processes > 1 and init == "sequential":
    from dpppl.run.distributed import bound, merged_seating
    with dpppl.config.x64():
        target, _ = bound(dpppl.DPMixture(1.0, NormalInverseWishart()), x[rows])
        start = merged_seating(target, jax.random.split(jax.random.key(4), 1))[0].tolist()
print(json.dumps({"kernel": idata.attrs["kernel"], "num_clusters": idata.posterior["num_clusters"].values.tolist(),
                  "lp": idata.sample_stats["lp"].values.tolist(),
                  "points": idata.posterior_partition["point"].values.tolist(),
                  "observed": idata.observed_data["x"].values.tolist(), "z": z[0, -1].tolist(), "draws": z.tolist(),
                  "log_likelihood": log_likelihood.values.tolist(),
                  "log_likelihood_points": log_likelihood["point"].values.tolist(),
                  "gathered": gathered.values.tolist(), "gathered_points": gathered["point"].values.tolist(),
                  "truth": truth[rows].tolist(), "x": x[rows].tolist(), "start": start}))
"""

HARNESS_WORKER = """
import json, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, process_id, num_processes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
jax.distributed.initialize(f"localhost:{port}", num_processes=num_processes, process_id=process_id)
import dpppl
from tests.helpers.cases import CASES
from tests.statistical.test_exactness import NUM_CHAINS, NUM_SAMPLES, NUM_WARMUP

case = CASES["niw_2d_overlap"]
rows = slice(0, 2) if process_id == 0 else slice(2, 5)
# the call of tests/statistical/test_exactness.py's subcluster-niw_2d_overlap, on this process's rows
idata = dpppl.sample(case.model, case.x[rows], kernel="subcluster", num_warmup=0,
                     num_samples=NUM_WARMUP + NUM_SAMPLES, num_chains=NUM_CHAINS, seed=0, init="prior",
                     progress_bar=False)
print(json.dumps({"z": idata.posterior_partition["z"].values[:, NUM_WARMUP:].tolist(),
                  "alpha": idata.posterior["alpha"].values[:, NUM_WARMUP:].tolist()}))
jax.distributed.shutdown()
"""

CHECKPOINT_WORKER = WORKER.split("idata = dpppl.sample(")[0] + """
path = sys.argv[4]
options = dict(warmup_variant=None, split_merge_pairs=0, record_parameters=False, log_likelihood=False,
               progress_bar=False, seed=3)
model = dpppl.DPMixture(1.0, NormalInverseWishart())
whole = dpppl.sample(model, x[rows], kernel, num_warmup=4, num_samples=8, **options)
dpppl.sample(model, x[rows], kernel, num_warmup=4, num_samples=4, checkpoint=path, **options)
resumed = dpppl.resume(path, num_samples=8, progress_bar=False)
print(json.dumps({run: {"num_clusters": idata.posterior["num_clusters"].values.tolist(),
                        "lp": idata.sample_stats["lp"].values.tolist(),
                        "z": idata.posterior_partition["z"].values.tolist()}
                  for run, idata in (("whole", whole), ("resumed", resumed))}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _run(num_processes: int, worker: str = WORKER, *args: str) -> list[dict]:
    """What `worker` (`WORKER` by default) reports from each of `num_processes` local processes, in process
    order; `args` follow the port, the process's index and the number of processes on its command line.
    Their output goes to files, not pipes: a process blocked writing a full pipe that is not read yet
    would hold the others up in `jax.distributed`'s shutdown barrier."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    port = str(_free_port())
    with contextlib.ExitStack() as files:
        outputs = [tuple(files.enter_context(tempfile.TemporaryFile("w+")) for _ in range(2))
                   for _ in range(num_processes)]
        workers = [subprocess.Popen([sys.executable, "-c", worker, port, str(p), str(num_processes), *args], env=env,
                                    stdout=out, stderr=err, text=True) for p, (out, err) in enumerate(outputs)]
        try:
            for w in workers:
                w.wait(timeout=840)
        finally:
            for w in workers:
                w.kill()
        texts = []
        for out, err in outputs:
            out.seek(0)
            err.seek(0)
            texts.append((out.read(), err.read()))
    for w, (_, err) in zip(workers, texts):
        assert w.returncode == 0, err[-3000:]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in texts]


@pytest.mark.timeout(900)  # two processes compiling on a loaded machine (docs/distributed.md has the times)
def test_two_processes_report_the_global_run_and_their_own_points():
    """Two processes, 140 and 161 rows of three separated blobs: both report the same `num_clusters`
    and `lp` draws (the global run's), their `posterior_partition` and `observed_data` hold their own
    points (global indices 0-139 and 140-300), and their labels put together are one partition of all
    the points: no cluster holds points of two blobs (a process that sampled its rows alone would
    give cluster numbers that mean other clusters on the other process) and every blob is found. Eight
    exact steps from sequential seating may leave a blob in two clusters, and in about one chain in 32 a
    cluster across two blobs (one process, these options, seeds 0-15: 1 of 32 chains, before and after the
    NIW parameter draws changed; seed 3 drew one such chain at P = 2 then, seed 4 does not). The start
    (`merged_seating`: each process seats its own rows, then the processes' clusters are merged) gives
    each blob one label on both processes: the processes' copies of a blob are merged (here process 0's
    seating put two blobs in one cluster and process 1's made 4 clusters: 6 in all, 2 after the merge
    pass, which joins clusters and never splits one; the exact steps split it). Each process's
    `log_likelihood` group holds its own points' columns (140 and 161), computed against every process's
    clusters at each kept draw: put together, they are what one process holding the 301 points writes for
    the same draws (`dpppl.run.output.pointwise_log_likelihood`, evaluated here), up to the rounding of
    statistics summed across processes. `gathered_log_likelihood` gives every process all 301 columns."""
    first, second = _run(2)
    start, blobs = np.concatenate([first["start"], second["start"]]), np.concatenate([first["truth"],
                                                                                     second["truth"]])
    assert [len(np.unique(start[blobs == b])) for b in range(3)] == [1, 1, 1], start
    assert first["kernel"] == second["kernel"] == "subcluster"
    assert first["num_clusters"] == second["num_clusters"]
    np.testing.assert_array_equal(first["lp"], second["lp"])
    assert first["points"] == list(range(140)) and second["points"] == list(range(140, 301))
    for result in (first, second):
        np.testing.assert_array_equal(result["observed"], result["x"])
    z = np.concatenate([first["z"], second["z"]])
    truth = np.concatenate([first["truth"], second["truth"]])
    assert len(np.unique(z)) == first["num_clusters"][0][-1]
    blobs_of_each_cluster = [np.unique(truth[z == k]) for k in np.unique(z)]
    assert all(len(blobs) == 1 for blobs in blobs_of_each_cluster), blobs_of_each_cluster
    assert sorted({int(blobs[0]) for blobs in blobs_of_each_cluster}) == [0, 1, 2]
    assert np.shape(first["log_likelihood"]) == (1, 4, 140) and np.shape(second["log_likelihood"]) == (1, 4, 161)
    assert first["log_likelihood_points"] == first["points"] and second["log_likelihood_points"] == second["points"]
    columns = np.concatenate([first["log_likelihood"], second["log_likelihood"]], axis=2)
    for result in (first, second):
        np.testing.assert_array_equal(result["gathered"], columns)
        assert result["gathered_points"] == list(range(301))
    draws = np.concatenate([first["draws"], second["draws"]], axis=2)
    with dpppl.config.x64():
        one_process = pointwise_log_likelihood(dpppl.DPMixture(1.0, NormalInverseWishart()).bind(
            np.concatenate([first["x"], second["x"]])), draws, np.ones(draws.shape[:2]), {})
    np.testing.assert_allclose(columns, one_process, rtol=1e-9)


@pytest.mark.slow  # 64 chains x 600 steps compiled by two processes: 372 s on two cores at load 11
@pytest.mark.timeout(1800)
def test_two_processes_sample_the_exact_posterior():
    """The enumeration harness at P = 2 (issue 34 item 3): the sub-cluster sampler's call of
    `tests/statistical/test_exactness.py` on `niw_2d_overlap` (64 chains from prior draws, 100 dropped,
    500 kept), its 5 points held 2 and 3 by two processes; the labels of both put together pass
    `check_kernel_samples` against the enumerated posterior, with the harness's own thresholds
    (family-wise level 1e-3)."""
    from tests.statistical.test_exactness import NUM_SAMPLES

    first, second = _run(2, HARNESS_WORKER)
    z = np.concatenate([np.asarray(first["z"]), np.asarray(second["z"])], axis=2)
    assert z.shape == (64, NUM_SAMPLES, 5)
    np.testing.assert_array_equal(first["alpha"], second["alpha"])
    case = CASES["niw_2d_overlap"]
    result = check_kernel_samples(exact_posterior(case.model, case.x), z, alpha=np.asarray(first["alpha"]))
    assert result.passed, result.report


@pytest.fixture
def two_processes(monkeypatch):
    """`jax.process_count()` reporting two processes (what `jax.distributed.initialize` makes it)."""
    monkeypatch.setattr(jax, "process_count", lambda: 2)


@pytest.mark.parametrize("kernel", ["gibbs", "gibbs+splitmerge", "perm"])
def test_a_sequential_kernel_is_refused_naming_the_kernels_that_can(two_processes, kernel):
    case = CASES["niw_2d_separated"]
    with pytest.raises(KernelError, match=r"cannot run over the 2 processes of this jax\.distributed run: 'gibbs'"
                                          r".*seat points one at a time.*The kernels that run multi-process: "
                                          r"subcluster \(kernel='auto' picks it\)"):
        dpppl.sample(case.model, case.x, kernel=kernel, progress_bar=False)


def test_auto_picks_the_sub_cluster_sampler_whatever_the_number_of_points(two_processes):
    case = CASES["niw_2d_separated"]
    choice = choose(case.model, 50, 2)
    assert choice.spec == "subcluster" and "a run over 2 processes on 50 points" in choice.reason


def test_auto_refuses_a_model_no_multi_process_kernel_samples(two_processes):
    model = dpppl.PitmanYorMixture(0.3, 1.0, dpppl.families.NormalInverseWishart())
    with pytest.raises(KernelError, match=r"kernel='auto' found no kernel that runs over 2 processes for a .*"
                                          r"subcluster: .*Pitman-Yor prior .*collapsed Gibbs is sequential"):
        choose(model, 500, 2)


def test_initial_labels_are_refused(two_processes):
    case = CASES["niw_2d_separated"]
    with pytest.raises(ArgumentError, match="initial labels given as an array are not taken by a run over 2"):
        dpppl.sample(case.model, case.x, kernel="subcluster", init=np.zeros(len(case.x), int), progress_bar=False)


def test_data_that_are_not_this_process_rows_are_refused(two_processes):
    case = CASES["niw_2d_separated"]
    with pytest.raises(ArgumentError, match="data= must be this process's own rows as an array, got 'galaxies'"):
        dpppl.sample(case.model, "galaxies", kernel="subcluster", progress_bar=False)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_processes_draw_what_one_process_draws():
    """P = 2 against P = 1 on the same rows, seed and options, both from the same prior draw of the 301
    points' partition (`init="prior"`; from `init="sequential"` each process seats its own rows, a start of
    its own): the same number of clusters at every draw and the same labels; `lp` equal up to the rounding
    of statistics summed across two devices (issue 34 item 3: each point's uniforms come from its index in
    the global data set, whatever process and row hold it)."""
    (one,), two = _run(1, WORKER, "prior"), _run(2, WORKER, "prior")
    assert two[0]["num_clusters"] == one["num_clusters"]
    np.testing.assert_allclose(two[0]["lp"], one["lp"], rtol=1e-9)
    np.testing.assert_array_equal(np.concatenate([two[0]["z"], two[1]["z"]]), one["z"])
    np.testing.assert_allclose(np.concatenate([two[0]["log_likelihood"], two[1]["log_likelihood"]], axis=2),
                               one["log_likelihood"], rtol=1e-9)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_processes_resumed_from_their_checkpoint_draw_what_they_draw_unstopped(tmp_path):
    """P = 2 (issue 34 item 4): a run of 4 kept draws saved to a checkpoint (process 0 writes the run's
    file, each process its part) and extended to 8 by `dpppl.resume` on both processes draws on each
    process what the run asked for 8 from the start draws, bit for bit."""
    path = tmp_path / "run.ckpt"
    for result in _run(2, CHECKPOINT_WORKER, str(path)):
        assert result["resumed"] == result["whole"]
    assert {p.name for p in tmp_path.iterdir()} == {"run.ckpt", "run.ckpt.process-0", "run.ckpt.process-1"}


def _two_process_checkpoint(model, x, path, t: int = 7):
    """The files of a two-process gibbs run on `x` (12 rows on process 0, the rest on process 1) saved at
    iteration `t`, written here as each process would write them: the run's file and the two parts."""
    state = jax.tree.map(lambda a: np.stack([np.asarray(a)] * 2), model.bind(x).empty_state(8))
    z = np.tile(np.arange(len(x)) % 3, (2, 1)).astype(np.int32)
    progress = Progress(t, state._replace(z=z), np.zeros((2, 2), np.uint32),
                        ({"lp": np.zeros((2, 3)), "z": np.stack([z] * 3, axis=1)},))
    spec = RunSpec(model, x, "subcluster", {}, 4, "sequential", 5, 20, 2, 1)
    counts = np.array([12, len(x) - 12])
    for process, rows in enumerate((slice(0, 12), slice(12, len(x)))):
        with ProcessCheckpointFile(path, spec, 60.0, process, counts, rows) as saved:
            saved.save(progress)
    return progress


def test_a_checkpoint_is_saved_by_process_and_put_together_again(niw_model, two_blobs, tmp_path, two_processes):
    """Each process's part holds its own rows and its points' labels (in the chain states and the kept draws);
    the run's file holds none; every process's part, joined in process order, gives the saved labels back."""
    x = two_blobs[0]
    path = tmp_path / "run.ckpt"
    progress = _two_process_checkpoint(niw_model, x, path)
    spec, shared, _ = read_checkpoint(path)
    np.testing.assert_array_equal(spec.data, [12, 18])
    assert shared.states.z.shape == (2, 0) and shared.kept[0]["z"].shape == (2, 3, 0)
    parts = [read_shard(path, process, 7) for process in (0, 1)]
    np.testing.assert_array_equal(parts[0][0], x[:12])
    np.testing.assert_array_equal(parts[1][0], x[12:])
    assert parts[1][1][".z"].shape == (2, 18)
    first, second = parts[0][1], parts[1][1]
    key_of = {id(value): key for key, value in first.items()}
    joined = joined_points(shared, first, lambda own: np.concatenate([own, second[key_of[id(own)]]], axis=-1))
    np.testing.assert_array_equal(joined.states.z, progress.states.z)
    np.testing.assert_array_equal(joined.kept[0]["z"], progress.kept[0]["z"])


def test_a_two_process_checkpoint_is_refused_by_one_process(niw_model, two_blobs, tmp_path):
    path = tmp_path / "run.ckpt"
    _two_process_checkpoint(niw_model, two_blobs[0], path)
    with pytest.raises(ArgumentError, match=r"run\.ckpt: the checkpoint of a run over 2 process\(es\) "
                                            r"\(jax\.distributed\); this run has 1: continue it with "
                                            r"dpppl\.resume on 2 processes"):
        dpppl.resume(path, progress_bar=False)


def test_parts_saved_at_different_iterations_are_refused(niw_model, two_blobs, tmp_path):
    """A process stopped between the run's file and its part: the pair is refused, naming both iterations."""
    path = tmp_path / "run.ckpt"
    _two_process_checkpoint(niw_model, two_blobs[0], path)
    with pytest.raises(ArgumentError, match=r"run\.ckpt\.process-1 was saved at iteration 7 and .*run\.ckpt at "
                                            r"iteration 9: a process stopped between the two writes"):
        read_shard(path, 1, 9)


def test_the_command_line_refuses_a_malformed_distributed_value(capsys):
    from dpppl.cli import main

    assert main(["sample", "models/gaussian_niw.dp", "--data", "galaxies", "--distributed", "localhost:1,2"]) == 2
    assert ("--distributed 'localhost:1,2': expected ADDRESS:PORT,NUM_PROCESSES,PROCESS_ID such as "
            "'localhost:12345,2,0'") in capsys.readouterr().err


def test_the_command_line_resume_refuses_a_malformed_distributed_value(capsys):
    from dpppl.cli import main

    assert main(["resume", "run.ckpt", "--distributed", "localhost:1,2,x"]) == 2
    assert ("--distributed 'localhost:1,2,x': expected ADDRESS:PORT,NUM_PROCESSES,PROCESS_ID such as "
            "'localhost:12345,2,0'") in capsys.readouterr().err


def test_the_command_line_resume_joins_the_run_and_writes_this_process_s_own_file(monkeypatch):
    """`dpppl resume --distributed` joins the processes as `dpppl sample --distributed` does (the cluster
    detected when no value is given) and a '{process}' in --out becomes this process's index."""
    from dpppl import cli

    joined = []
    monkeypatch.setattr(cli, "initialize", joined.append)
    monkeypatch.setattr(jax, "process_index", lambda: 1)
    for given, expected in ((["--distributed"], None), (["--distributed", "localhost:5,2,1"], "localhost:5,2,1")):
        args = cli._parser().parse_args(["resume", "run.ckpt", "--out", "run-{process}.nc", *given])
        cli._join(args)
        assert joined[-1] == expected and args.out == "run-1.nc" and args.checkpoint == "run.ckpt"


SEGMENTED_READS = """
import json
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from dpppl.core.points import real_index, uniforms_at
from dpppl.kernels.subcluster.sampler import _Setup

# four processes' worth of points on four devices: 8 rows each (2 blocks of 4), 5, 7, 8 and 6 of them real
counts = np.array([5, 7, 8, 6], np.int32)
mesh = Mesh(np.asarray(jax.devices()), ("points",))
setup = _Setup(family=None, use_sub=False, conjugate=True, whitened=False, super_clusters=False, a_merge=1.0,
               ll_dtype=jnp.float64, n=32, dim=2, block=4, num_blocks=8, blocks_per_shard=2, pad=0, mesh=mesh,
               num_valid=counts)
x = np.arange(64.0).reshape(8, 4, 2)
rows = np.array([0, 9, 31, 17, 9])
on_devices = jax.device_put(x, NamedSharding(mesh, P("points")))
read = jax.jit(setup.rows_at)(on_devices, rows)
key = jax.random.key(7)
u = jax.jit(lambda k: setup.point_uniforms(k, (3,)))(key)
expected_u = uniforms_at(key, real_index(counts, 32), (3,), jnp.float64).reshape(8, 4, 3)
print(json.dumps({"read": np.asarray(read).tolist(), "expected": x.reshape(32, 2)[rows].tolist(),
                  "uniforms_by_point": bool(np.array_equal(np.asarray(u), np.asarray(expected_u))),
                  "first_point_of_process_1": float(np.asarray(u)[2, 0, 0]),
                  "point_5_of_one_draw": float(jax.random.uniform(key, (40, 3), jnp.float64)[5, 0])}))
"""


def test_points_in_segments_are_read_across_devices_and_draw_by_their_index():
    """Four processes' worth of points in segments on four host devices (one process): the anchor pairs'
    reads of single rows (`_Setup.rows_at`, a psum of each device's reads) give the rows themselves, and
    each real point's uniforms are those of its index among the real points (the first point of the second
    segment, row 8, is point 5: it draws what point 5 of one draw of every point draws)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()}
    done = subprocess.run([sys.executable, "-c", SEGMENTED_READS], env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["read"] == result["expected"]
    assert result["uniforms_by_point"] and result["first_point_of_process_1"] == result["point_5_of_one_draw"]


def test_a_block_size_that_splits_a_process_s_rows_is_refused(niw_model, two_blobs):
    """In segments (one count per process), each device's rows are whole blocks of the sampler."""
    program = dataclasses.replace(niw_model.bind(two_blobs[0]), num_valid=np.array([20, 10], np.int32))
    with pytest.raises(KernelError, match=r"subcluster: block_size=7 does not divide the 30 rows each of the 1 "
                                          r"devices of this multi-process run holds; leave block_size out"):
        build("subcluster", program, block_size=7)


def test_the_size_of_each_process_s_rows_is_whole_blocks_of_its_devices():
    for largest, devices in ((161, 1), (2_500_000, 1), (1000, 4), (37, 2)):
        size = local_size(largest, devices, 2)
        share = size // devices
        assert size % devices == 0 and share >= -(-largest // devices)
        assert share % block_size_for(share, 2) == 0, (largest, devices, size)


def test_a_start_that_needs_every_process_s_rows_is_refused(two_processes):
    case = CASES["niw_2d_separated"]
    with pytest.raises(ArgumentError, match=r"init: init='search' is not taken by a run over 2 processes \(each "
                                            r"process holds its own rows only\); use init='sequential', 'single' "
                                            r"or 'prior'"):
        dpppl.sample(case.model, case.x, kernel="subcluster", init="search", progress_bar=False)


def test_the_pointwise_log_likelihood_over_processes_numbers_the_clusters_as_one_process_does():
    """`distributed.pointwise_log_likelihood` in a run of one process (its all-gathers of one) on labels in
    scattered slots (2, 5, 9; 0, 3, 6, 9), random `alpha`: what `pointwise_log_likelihood` of the same
    draws gives (the draws' clusters numbered in the order of their slots, as `compact_labels` does)."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 301)
    x = np.array([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0]])[truth] + rng.normal(size=(301, 2))
    z = np.stack([np.array([5, 2, 9])[truth], np.arange(301) % 4 * 3])
    z, alpha = np.stack([z, z[::-1]]), rng.gamma(1.0, size=(2, 2))
    with dpppl.config.x64():
        target = dpppl.DPMixture(1.0, NormalInverseWishart()).bind(x)
        np.testing.assert_array_equal(distributed.pointwise_log_likelihood(target, z, alpha, {}),
                                      pointwise_log_likelihood(target, z, alpha, {}))


def test_gathering_a_run_without_a_pointwise_log_likelihood_is_refused():
    idata = to_arviz({"posterior": {"num_clusters": np.ones((1, 3), int)}})
    with pytest.raises(DataError, match=r"the InferenceData has no 'log_likelihood' group to gather across "
                                        r"processes: sample with log_likelihood=True"):
        distributed.gathered_log_likelihood(idata)
