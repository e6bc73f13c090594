"""Fixed cost of a run: a warm second ``dpppl.sample`` in one process, and a new process
running the README's main job with a warm persistent compilation cache.

Runs every measurement in a subprocess against one or more source trees side by side
(``--tree before=/path/to/old/checkout --tree after=.``), so the figures compare like
with like on one machine at one time:

    python benchmarks/bench_run_path.py --tree before=/tmp/dpppl-6b3bd48 --tree after=. \
        --out benchmarks/results/run_path.json

Measures, per tree (medians of ``--repeats``):
- ``second_call_s``: in one process, ``dpppl.sample(model, x, num_warmup=5, num_samples=5)``
  on galaxies with ``models/gaussian_niw.dp`` once (compiles), then again: the second call's
  wall time (the issue's target: <= 50 ms), with the persistent compilation cache off;
  ``cached_*``: the same in a process whose persistent cache an earlier process warmed
  (what a user has from the second session on; the issue's "today 1.8 s").
- ``second_call_other_length_s``: then a third call with other warmup/sample counts
  (``num_warmup=7, num_samples=13``): does a different length recompile?
- ``readme_job_s``: wall time of a new process running the README's main job
  (``dpppl sample models/gaussian_niw.dp --data galaxies --chains 2 --out ...``) with a
  persistent cache the same command warmed just before (the issue's target: <= 1/3 of before).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SECOND_CALL = r"""
import time, json, sys
t0 = time.perf_counter()
import dpppl
t_import = time.perf_counter() - t0
x, _ = dpppl.datasets.load("galaxies")
model = dpppl.load("models/gaussian_niw.dp")
times = []
for warmup, samples in ((5, 5), (5, 5), (7, 13)):
    tic = time.perf_counter()
    dpppl.sample(model, x, num_warmup=warmup, num_samples=samples, progress_bar=False, seed=1)
    times.append(time.perf_counter() - tic)
print(json.dumps({"import_s": t_import, "first_call_s": times[0], "second_call_s": times[1],
                  "second_call_other_length_s": times[2]}))
"""


def _env(tree: str, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), DPPPL_COMPILATION_CACHE=cache, CI="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return env


def measure(tree: str, repeats: int) -> dict:
    tree = os.path.abspath(tree)
    out: dict = {}
    with tempfile.TemporaryDirectory() as cache:
        for prefix, cache_dir in (("", "off"), ("cached_", cache)):
            rows = []
            for _ in range(repeats + (cache_dir != "off")):  # the first run with a cache warms it
                res = subprocess.run([sys.executable, "-c", SECOND_CALL], cwd=tree, env=_env(tree, cache_dir),
                                     capture_output=True, text=True, check=True)
                rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
            rows = rows[len(rows) - repeats:]
            for key in rows[0]:
                out[prefix + key] = statistics.median(r[key] for r in rows)
        job = [sys.executable, "-m", "dpppl.cli", "sample", "models/gaussian_niw.dp", "--data", "galaxies",
               "--chains", "2", "--out", os.path.join(cache, "galaxies.nc")]
        subprocess.run(job, cwd=tree, env=_env(tree, cache), capture_output=True, check=True)  # warms the cache
        walls = []
        for _ in range(repeats):
            tic = time.perf_counter()
            subprocess.run(job, cwd=tree, env=_env(tree, cache), capture_output=True, check=True)
            walls.append(time.perf_counter() - tic)
        out["readme_job_s"] = statistics.median(walls)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    results = {}
    for spec in args.tree:
        name, path = spec.split("=", 1)
        results[name] = measure(path, args.repeats)
        print(name, json.dumps(results[name], indent=1), flush=True)
    if len(results) == 2:
        (a, ra), (b, rb) = results.items()
        results["ratios"] = {k: rb[k] / ra[k] for k in ra}
        print(f"{b} / {a}:", json.dumps(results["ratios"], indent=1))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
