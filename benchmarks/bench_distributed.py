"""`dpppl.sample` over several local processes joined by `jax.distributed` (issue 34, docs/distributed.md).

The run of the issue: 2 x 10^5 points in 2-D from 6 Gaussian clusters
(`dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25, covariance="random", seed=3)`, the data of
`bench_subcluster.py`'s `six` part), split in P contiguous parts, one per process; every process calls
`dpppl.sample(dpppl.load("models/gaussian_niw.dp"), its_rows, kernel="auto", ...)` and reports the
kernel auto chose, its `num_clusters` draws, a digest of its `posterior` and `sample_stats`, the NMI of
its own points' last labels against the truth, its wall seconds (compile included), its seconds per
iteration after the first chunk (the run's iterations timed from the progress callback are not
available, so: a second, identical call in the same process, which compiles nothing, divided by its
iterations), and its peak resident memory. The parent checks that every process reports the same
posterior and writes `benchmarks/results/distributed[-quick].{json,md}`.

    nice -n 10 python benchmarks/bench_distributed.py --processes 2 [--n 200000] [--warmup 100] [--samples 50]

Each process runs on one CPU device with gloo collectives; `--processes 1` runs the same job in one
process for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"

WORKER = r"""
import hashlib, json, resource, sys, time
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, pid, nproc, n, warmup, samples, seed = sys.argv[1], *map(int, sys.argv[2:8])
if nproc > 1:
    jax.distributed.initialize(f"localhost:{port}", num_processes=nproc, process_id=pid)
import numpy as np
import dpppl

x, y = dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25.0, covariance="random", seed=3)
rows = np.array_split(np.arange(n), nproc)[pid]
x, y = x[rows], y[rows]  # this process's rows only from here on
del rows
model = dpppl.load("models/gaussian_niw.dp")
def run():
    tic = time.perf_counter()
    idata = dpppl.sample(model, x, num_warmup=warmup, num_samples=samples, num_chains=1, seed=seed,
                         progress_bar=False)
    return idata, time.perf_counter() - tic
idata, first = run()
_, again = run()
digest = hashlib.sha256()
for group in ("posterior", "sample_stats"):
    for name in sorted(idata[group].data_vars):
        digest.update(np.ascontiguousarray(idata[group][name].values).tobytes())
z = idata.posterior_partition["z"].values[0, -1]
print(json.dumps({"process": pid, "kernel": idata.attrs["kernel"], "rows": int(len(x)),
                  "num_clusters": idata.posterior["num_clusters"].values[0].tolist(),
                  "digest": digest.hexdigest(), "nmi": float(dpppl.metrics.normalized_mutual_information(z, y)),
                  "first_call_s": first, "second_call_s": again, "s_per_iteration": again / (warmup + samples),
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(processes: int, n: int, warmup: int, samples: int, seed: int) -> list[dict]:
    """Run the worker on `processes` local processes; their reports, in process order."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    port = str(_free_port())
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, port, str(p), str(processes), str(n), str(warmup),
                                 str(samples), str(seed)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=pathlib.Path(__file__).resolve().parent.parent)
               for p in range(processes)]
    reports = []
    for p, w in enumerate(workers):
        out, err = w.communicate()
        if w.returncode != 0:
            raise SystemExit(f"process {p} failed:\n{err[-4000:]}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, nargs="+", default=[2])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="10^4 points, 20 + 10 iterations")
    args = ap.parse_args()
    if args.quick:
        args.n, args.warmup, args.samples = 10_000, 20, 10
    results = []
    for processes in args.processes:
        tic = time.perf_counter()
        reports = launch(processes, args.n, args.warmup, args.samples, args.seed)
        same = len({r["digest"] for r in reports}) == 1
        results.append({"processes": processes, "wall_s": time.perf_counter() - tic, "same_posterior": same,
                        "reports": reports})
        print(json.dumps(results[-1]), flush=True)
    load = os.getloadavg()
    meta = {"n": args.n, "dim": 2, "clusters": 6, "warmup": args.warmup, "samples": args.samples, "seed": args.seed,
            "load_average": load, "cpus": os.cpu_count(), "results": results}
    stem = "distributed-quick" if args.quick else "distributed"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(meta, indent=1) + "\n")
    lines = ["# `dpppl.sample` over local processes (`benchmarks/bench_distributed.py`)", "",
             f"{args.n} x 2, 6 clusters, {args.warmup} warmup + {args.samples} kept iterations, one chain, seed "
             f"{args.seed}; {os.cpu_count()} CPUs, load average {load[0]:.1f} at the end (a shared machine: the "
             "seconds are the loaded machine's).", "",
             "| processes | process | rows | kernel | K (last draw) | NMI own points | first call s | "
             "second call s | s / iteration | peak RSS MB | same posterior |", "|" + " --- |" * 11]
    for result in results:
        for r in result["reports"]:
            lines.append(f"| {result['processes']} | {r['process']} | {r['rows']} | {r['kernel']} | "
                         f"{r['num_clusters'][-1]} | {r['nmi']:.3f} | {r['first_call_s']:.1f} | "
                         f"{r['second_call_s']:.1f} | {r['s_per_iteration']:.3f} | {r['max_rss_mb']:.0f} | "
                         f"{result['same_posterior']} |")
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / stem}.json and .md")


if __name__ == "__main__":
    main()
