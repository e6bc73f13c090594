"""`dpppl.sample` over several local processes joined by `jax.distributed` (issue 34, docs/distributed.md).

Data (`--data`), split in P contiguous parts, one per process:

- `six` (default), the run of the issue: 2 x 10^5 points in 2-D from 6 Gaussian clusters
  (`dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25, covariance="random", seed=3)`, the data of
  `bench_subcluster.py`'s `six` part); every process draws the whole set and keeps its part;
- `w3`: W3 (`dpppl.datasets.load("w3")`, 10^6 x 2, 20 clusters), likewise;
- `per-process`: `--n` points of W3's mixture, generated per process, never whole in one: the mixture
  is W3's 20 clusters as estimated from 20,000 of its points (weights, means, covariances, the same on
  every process), and process p draws its own n / P points from it with its own seed.

Every process calls `dpppl.sample(dpppl.load("models/gaussian_niw.dp"), its_rows, kernel="auto", ...)`
twice: once with one warmup and one kept iteration, which compiles every program the run needs, then
the timed run (`--warmup` + `--samples` iterations), which compiles nothing. It reports the kernel auto
chose, its `num_clusters` draws, a digest of its `posterior` and `sample_stats`, the NMI of its own
points' last labels against the truth, the compiling call's and the timed run's wall seconds, seconds
per iteration (the timed run over its iterations, its chains' start included), its peak resident memory
(and, with the compiles left out, the timed run's: the high-water mark reset before it, Linux
`/proc/self/clear_refs`; and its resident memory with its rows before the first call),
and the collectives of its compiled step: those in the optimised HLO of the largest chunk program
(all-reduce, all-gather, collective-permute, all-to-all, reduce-scatter: count and bytes of their results;
each runs once per iteration; process 0 compiles without the persistent cache, with
`XLA_FLAGS=--xla_dump_to`; `loop_collectives`) and the seconds they take replayed alone (float64
all-gathers and psums of the same sizes across the processes, one after the other, timed over 20
repetitions): their share of an iteration is the communication share. The parent checks
that every process reports the same posterior and writes `benchmarks/results/distributed-<name>.{json,md}`.
The runs have no `log_likelihood` group; with `--pointwise` every process then computes its points' pointwise
log likelihood of the timed run's kept draws against every process's clusters
(`dpppl.run.distributed.pointwise_log_likelihood`), reported with its seconds (its compiles included) and peak
resident memory.

    nice -n 10 python benchmarks/bench_distributed.py --processes 1 2 --seeds 0 1 2 --no-dump --name start
    nice -n 10 python benchmarks/bench_distributed.py --processes 1 2 4 --data w3 --warmup 40 --samples 10
    nice -n 10 python benchmarks/bench_distributed.py --processes 4 --data per-process --n 10000000 ...

Each process runs on one CPU device with gloo collectives; `--processes 1` runs the same job in one
process for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

RESULTS = pathlib.Path(__file__).resolve().parent / "results"

WORKER = r"""
import glob, hashlib, json, os, resource, sys, time
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, pid, nproc, n, warmup, samples, seed = sys.argv[1], *map(int, sys.argv[2:8])
data, dump, kernel, labels_out, pointwise = sys.argv[8], sys.argv[9], sys.argv[10], sys.argv[11], sys.argv[12] == "1"
if nproc > 1:
    jax.distributed.initialize(f"localhost:{port}", num_processes=nproc, process_id=pid)
import numpy as np
import dpppl

if data == "per-process":  # W3's mixture, this process's points only
    sample_x, sample_y = dpppl.datasets.load("w3", n=20_000)
    labels = np.unique(sample_y)
    weights = np.array([np.mean(sample_y == k) for k in labels])
    means = np.array([sample_x[sample_y == k].mean(axis=0) for k in labels])
    roots = np.array([np.linalg.cholesky(np.cov(sample_x[sample_y == k], rowvar=False)) for k in labels])
    rng = np.random.default_rng([seed, pid])
    y = rng.choice(len(labels), size=n // nproc + (pid < n % nproc), p=weights)  # this process's share of n
    x = means[y] + np.einsum("nij,nj->ni", roots[y], rng.standard_normal((len(y), 2)))
else:
    x, y = (dpppl.datasets.load("w3") if data == "w3"
            else dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25.0, covariance="random", seed=3))
    rows = np.array_split(np.arange(len(x)), nproc)[pid]
    x, y = x[rows], y[rows]  # this process's rows only from here on
    del rows
model = dpppl.load("models/gaussian_niw.dp")
rss_with_rows_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # jax, dpppl and this process's rows
def run(num_warmup, num_samples):
    tic = time.perf_counter()
    idata = dpppl.sample(model, x, kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=1, seed=seed,
                         progress_bar=False, log_likelihood=False)  # timed apart (--pointwise)
    return idata, time.perf_counter() - tic
def status_mb(field):  # a field of /proc/self/status (Linux), in MB
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field)) / 1024
_, compiling = run(1, 1)
open("/proc/self/clear_refs", "w").write("5")  # the peak from here on: the timed run's, the compiles' left out
rss_before_timed_mb = status_mb("VmRSS:")
idata, timed = run(warmup, samples)
timed_peak_rss_mb = status_mb("VmHWM:")
digest = hashlib.sha256()
for group in ("posterior", "sample_stats"):
    for name in sorted(idata[group].data_vars):
        digest.update(np.ascontiguousarray(idata[group][name].values).tobytes())
z = idata.posterior_partition["z"].values[0, -1]
if labels_out != "-":  # this process's points' last labels and true labels, for the global partition
    np.save(labels_out, np.stack([z, y]))
measured = {}
if pointwise:  # the pointwise log likelihood of the timed run's kept draws, its two programs compiled in it
    from dpppl.run.distributed import bound, pointwise_log_likelihood
    with dpppl.config.x64():
        target, _ = bound(model, x)
        post = idata.posterior
        alpha = post["alpha"].values if "alpha" in post else np.full(post["lp"].shape, target.prior.initial_alpha)
        open("/proc/self/clear_refs", "w").write("5")
        tic = time.perf_counter()
        values = pointwise_log_likelihood(target, idata.posterior_partition["z"].values, alpha,
                                          {k: post[k].values for k in model.hyperpriors})
        measured = {"pointwise_s": time.perf_counter() - tic, "pointwise_peak_rss_mb": status_mb("VmHWM:"),
                    "pointwise_finite": bool(np.isfinite(values).all()), "pointwise_mean": float(values.mean())}
start = {}
if data == "six":  # a start as the run's (another key): K of each process's seating, and after the merge
    from dpppl.models.init import initial_states
    keys = jax.random.split(jax.random.key(seed + 1000), 1)
    with dpppl.config.x64():
        if nproc > 1:
            from jax.experimental import multihost_utils
            from dpppl.run.distributed import bound, merged_seating
            target, _ = bound(model, x)
            seated = np.asarray(initial_states(target, "sequential", keys).z)[0]
            merged = merged_seating(target, keys)[0]
            start = {"seated_k": len(np.unique(seated)), "merged_k": int(np.max(multihost_utils.process_allgather(
                np.asarray(merged.max() + 1, np.int64))))}
        else:
            start = {"seated_k": len(np.unique(np.asarray(initial_states(model.bind(x), "sequential", keys).z)[0]))}
# bytes of each collective of an iteration of the largest chunk program (process 0 dumped it), by kind
sizes, collectives, replayed, failure = [], {}, 0.0, None
try:
    if nproc > 1:
        from jax.experimental import multihost_utils
        from jax.sharding import Mesh, PartitionSpec as P
        multihost_utils.sync_global_devices("dumped")
        from benchmarks.bench_distributed import loop_collectives
        chunks = [f for f in glob.glob(os.path.join(dump, "*after_optimizations.txt")) if "chunk" in f]
        collectives = loop_collectives(open(max(chunks, key=os.path.getsize)).read()) if chunks else {}
        replayed_kinds = [kind for kind, sizes_of in collectives.items() for _ in sizes_of]
        sizes = [b for sizes_of in collectives.values() for b in sizes_of]
        mesh = Mesh(np.asarray(jax.devices()), ("p",))
        def replay(*parts):
            out = []
            for kind, a in zip(replayed_kinds, parts):  # one after the other, each input depending on the last
                a = a + (out[-1].sum() * 0 if out else 0)
                # an all-gather of its result's size (each process's part of it); anything else as a psum
                out.append(jax.lax.all_gather(a, "p", tiled=True) if kind == "all-gather" else jax.lax.psum(a, "p"))
            return out
        replay_fn = jax.jit(jax.shard_map(replay, mesh=mesh, in_specs=P("p"), out_specs=P(), check_vma=False))
        arrays = [multihost_utils.host_local_array_to_global_array(
            np.ones((1, max(1, b // 8 // (nproc if kind == "all-gather" else 1)))), mesh, P("p"))
            for kind, b in zip(replayed_kinds, sizes)]
        if arrays:
            jax.block_until_ready(replay_fn(*arrays))
            tic = time.perf_counter()
            for _ in range(20):
                jax.block_until_ready(replay_fn(*arrays))
            replayed = (time.perf_counter() - tic) / 20
except Exception as e:  # the run's figures are worth more than these
    failure = f"{type(e).__name__}: {e}"[:300]
print(json.dumps({"process": pid, "kernel": idata.attrs["kernel"], "rows": int(len(x)), "start": start, **measured,
                  "num_clusters": idata.posterior["num_clusters"].values[0].tolist(),
                  "digest": digest.hexdigest(), "nmi": float(dpppl.metrics.normalized_mutual_information(z, y)),
                  "compiling_call_s": compiling, "timed_call_s": timed, "s_per_iteration": timed / (warmup + samples),
                  "collectives": {k: [len(v), int(sum(v))] for k, v in collectives.items()},
                  "collective_count": len(sizes), "collective_bytes": int(sum(sizes)), "replayed_s": replayed,
                  "communication_share": replayed / (timed / (warmup + samples)), "collectives_failure": failure,
                  "rows_mb": x.nbytes / 2**20, "rss_with_rows_mb": rss_with_rows_mb,
                  "rss_before_timed_mb": rss_before_timed_mb, "timed_peak_rss_mb": timed_peak_rss_mb,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


COLLECTIVES = ("all-reduce", "all-gather", "collective-permute", "all-to-all", "reduce-scatter")
WIDTH = {"f64": 8, "s64": 8, "u64": 8, "f32": 4, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1}


def loop_collectives(hlo: str) -> dict[str, list[int]]:
    """The collectives of one iteration of a chunk program, from its optimised HLO text: those in the
    computations reachable from the body of a `while` of the entry computation (the chunk's loop over
    iterations), by kind, each as the bytes of its result. One in a loop nested in the iteration
    counts once (a lower bound); those outside the loop (once per chunk) are left out."""
    calls, lines, entry, current = {}, {}, None, None
    for line in hlo.splitlines():
        head = re.match(r"^(ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head:
            current = head.group(2)
            entry = current if head.group(1) else entry
            calls[current], lines[current] = set(), []
            continue
        if current is None:
            continue
        lines[current].append(line)
        for group in re.findall(r"(?:body|condition|to_apply|calls|branch_computations)=\{?([%\w.\-, ]+)\}?", line):
            calls[current].update(name.strip().lstrip("%") for name in group.split(","))
    bodies = [m.group(1) for line in lines.get(entry, []) for m in [re.search(r" while\(.*body=%?([\w.\-]+)", line)]
              if m]
    seen, stack = set(), list(bodies)
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(calls.get(name, ()))
    out: dict[str, list[int]] = {}
    for name in seen:
        for line in lines.get(name, []):
            kind = next((k for k in COLLECTIVES if f" {k}(" in line), None)
            if kind is None or "=" not in line.split(f" {kind}(")[0]:
                continue
            shapes = re.findall(r"(\w+)\[([\d,]*)\]", line.split(f" {kind}(")[0].split("=", 1)[1])
            out.setdefault(kind, []).append(sum(WIDTH.get(t, 8) * int(np.prod([int(d) for d in dims.split(",") if d]
                                                                                 or [1])) for t, dims in shapes))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(processes: int, n: int, warmup: int, samples: int, seed: int, data: str,
           dump_hlo: bool = True, kernel: str = "auto", pointwise: bool = False) -> list[dict]:
    """Run the worker on `processes` local processes; their reports, in process order, each with
    `partition`: its points' last labels and true labels ((2, rows), read back from the file the
    worker saved). Without `dump_hlo` no process dumps its HLO (no collectives are reported) and all
    use the persistent compilation cache. With `pointwise` every process also computes its points' pointwise
    log likelihood of the timed run's kept draws (`dpppl.run.distributed.pointwise_log_likelihood`; the
    runs themselves have none), timed with its peak memory."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    port = str(_free_port())
    dump = tempfile.mkdtemp(prefix="dpppl-hlo-")
    # process 0 compiles (no persistent cache, which would skip the compile and its dump) and dumps its HLO
    dumping = {**env, "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text", "DPPPL_COMPILATION_CACHE": "off"}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, port, str(p), str(processes), str(n), str(warmup),
                                 str(samples), str(seed), data, dump, kernel, os.path.join(dump, f"labels-{p}.npy"),
                                 str(int(pointwise))],
                                env=dumping if p == 0 and dump_hlo else env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=pathlib.Path(__file__).resolve().parent.parent)
               for p in range(processes)]
    reports = []
    for p, w in enumerate(workers):
        out, err = w.communicate()
        if w.returncode != 0:
            raise SystemExit(f"process {p} failed:\n{err[-4000:]}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
        reports[-1]["partition"] = np.load(os.path.join(dump, f"labels-{p}.npy"))
    shutil.rmtree(dump, ignore_errors=True)  # hundreds of MB of HLO text
    return reports


def ceiling(x: np.ndarray, y: np.ndarray, seed: int = 0) -> dict:
    """What labels given the true clusters' parameters score against the truth `y` on `x`: each
    cluster's weight, mean and covariance those of its points (at 2 x 10^5 points, the generator's up to
    sampling error); `draw`, the NMI of labels drawn from each point's posterior over the clusters (what
    a sampler at the truth's parameters draws); `most_probable`, that of each point's most probable
    cluster."""
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal

    from dpppl.metrics import normalized_mutual_information

    logp = np.stack([np.log(np.mean(y == k)) + multivariate_normal(x[y == k].mean(0), np.cov(x[y == k].T)).logpdf(x)
                     for k in np.unique(y)], axis=1)
    p = np.exp(logp - logsumexp(logp, axis=1, keepdims=True))
    u = np.random.default_rng(seed).random(len(x))
    drawn = np.minimum((np.cumsum(p, axis=1) < u[:, None]).sum(axis=1), p.shape[1] - 1)
    return {"draw": float(normalized_mutual_information(drawn, y)),
            "most_probable": float(normalized_mutual_information(np.argmax(p, axis=1), y))}


def partition(reports: list[dict]) -> dict:
    """The global run's last partition from every process's part (`launch`'s `partition`, popped from
    the reports): K, the NMI of all points against the truth, and for each cluster how many points of
    each true cluster it holds."""
    from dpppl.metrics import normalized_mutual_information

    z, y = np.concatenate([r.pop("partition") for r in reports], axis=1)
    held = {int(c): np.bincount(y[z == c], minlength=int(y.max()) + 1).tolist() for c in np.unique(z)}
    return {"k": len(held), "nmi": float(normalized_mutual_information(z, y)), "held": held}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, nargs="+", default=[2])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed (and process count)")
    ap.add_argument("--kernel", default="auto")
    ap.add_argument("--data", choices=["six", "w3", "per-process"], default="six")
    ap.add_argument("--name", default=None, help="results file stem after 'distributed-' (default: the data)")
    ap.add_argument("--quick", action="store_true", help="10^4 points, 20 + 10 iterations")
    ap.add_argument("--no-dump", action="store_true", help="no HLO dump: no collectives reported, less memory")
    ap.add_argument("--pointwise", action="store_true",
                    help="time each process's pointwise log likelihood of the kept draws after the timed run")
    args = ap.parse_args()
    if args.quick:
        args.n, args.warmup, args.samples = 10_000, 20, 10
    if args.data == "w3":
        args.n = 1_000_000
    results = []
    for processes in args.processes:
        for seed in args.seeds:
            tic = time.perf_counter()
            reports = launch(processes, args.n, args.warmup, args.samples, seed, args.data, not args.no_dump,
                             args.kernel, args.pointwise)
            same = len({r["digest"] for r in reports}) == 1
            results.append({"processes": processes, "seed": seed, "wall_s": time.perf_counter() - tic,
                            "same_posterior": same, "partition": partition(reports), "reports": reports})
            print(json.dumps(results[-1]), flush=True)
    load = os.getloadavg()
    clusters = 6 if args.data == "six" else 20
    meta = {"data": args.data, "n": args.n, "dim": 2, "clusters": clusters, "warmup": args.warmup,
            "samples": args.samples, "seeds": args.seeds, "kernel": args.kernel, "load_average": load,
            "cpus": os.cpu_count(), "results": results}
    if args.data == "six":
        import dpppl

        meta["ceiling"] = ceiling(*dpppl.datasets.gaussian_mixture(args.n, 2, 6, mean_scale=25.0,
                                                                   covariance="random", seed=3))
    stem = f"distributed-{args.name or ('quick' if args.quick else args.data)}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(meta, indent=1) + "\n")
    lines = ["# `dpppl.sample` over local processes (`benchmarks/bench_distributed.py`)", "",
             f"{args.data}: {args.n} x 2, {clusters} clusters, {args.warmup} warmup + {args.samples} kept "
             f"iterations, one chain, kernel {args.kernel!r}, seeds {args.seeds}; {os.cpu_count()} CPUs, load "
             f"average {load[0]:.1f} at the "
             "end (a shared machine: the seconds are the loaded machine's).", "",
             "| processes | process | rows | kernel | K (last draw) | NMI own points | compiling call s | "
             "timed call s | s / iteration | collectives / iteration | bytes / iteration | replayed s | "
             "communication share | RSS before sampling MB | peak RSS MB | RSS before timed run MB | "
             "timed run's peak RSS MB | same posterior |", "|" + " --- |" * 18]
    for result in results:
        for r in result["reports"]:
            measured = (f"{r['collective_count']} | {r['collective_bytes']} | {r['replayed_s']:.4f} | "
                        f"{r['communication_share']:.3f}") if not args.no_dump else "- | - | - | -"
            lines.append(f"| {result['processes']} | {r['process']} | {r['rows']} | {r['kernel']} | "
                         f"{r['num_clusters'][-1]} | {r['nmi']:.3f} | {r['compiling_call_s']:.1f} | "
                         f"{r['timed_call_s']:.1f} | {r['s_per_iteration']:.3f} | {measured} | "
                         f"{r.get('rss_with_rows_mb', float('nan')):.0f} | {r['max_rss_mb']:.0f} | "
                         f"{r.get('rss_before_timed_mb', float('nan')):.0f} | "
                         f"{r.get('timed_peak_rss_mb', float('nan')):.0f} | {result['same_posterior']} |")
    lines += ["", "The global run's last partition (every process's points together), per run:", "",
              "| processes | seed | start: K seated per process -> merged | K of the kept draws | K | NMI all points | "
              "points of each true cluster in each cluster | same posterior |", "|" + " --- |" * 8]
    for result in results:
        starts = [r["start"] for r in result["reports"]]
        start = (" + ".join(str(s.get("seated_k", "-")) for s in starts)
                 + (f" -> {starts[0]['merged_k']}" if "merged_k" in starts[0] else ""))
        kept = result["reports"][0]["num_clusters"]
        trace = f"{kept[0]}, ..., {kept[-1]} (min {min(kept)}, max {max(kept)})"
        found = result["partition"]
        held = "; ".join(f"{c}: {counts}" for c, counts in found["held"].items())
        lines.append(f"| {result['processes']} | {result['seed']} | {start} | {trace} | {found['k']} | "
                     f"{found['nmi']:.3f} | {held} | {result['same_posterior']} |")
    for result in results:
        for r in result["reports"]:
            if "pointwise_s" in r:
                lines.append(f"{'' if r['process'] else chr(10)}Pointwise log likelihood of the kept draws, "
                             f"{result['processes']} processes, process {r['process']}: {r['pointwise_s']:.1f} s "
                             f"(its programs compiled in it), peak RSS {r['pointwise_peak_rss_mb']:.0f} MB, finite "
                             f"{r['pointwise_finite']}, mean {r['pointwise_mean']:.4f}.")
    if "ceiling" in meta:
        lines += ["", f"Labels given the true clusters' parameters (their points' weights, means and covariances): "
                      f"drawn from each point's posterior, NMI {meta['ceiling']['draw']:.3f}; each point's most "
                      f"probable cluster, NMI {meta['ceiling']['most_probable']:.3f}."]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / stem}.json and .md")


if __name__ == "__main__":
    main()
