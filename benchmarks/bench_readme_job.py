"""The README's main job in a new process, beside scikit-learn doing the same job (issue 35, item 4).

Each row is one new process, timed from outside (wall seconds, and CPU seconds of the child:
`getrusage(RUSAGE_CHILDREN)`, user + system, so XLA's compiler threads count and the machine's
other load does not):

- `dpppl cold`: `dpppl sample models/galaxies.dp --chains 2 --out galaxies.nc --no-progress` with an
  empty compilation cache (`DPPPL_COMPILATION_CACHE` = a new temporary directory);
- `dpppl warm`: the same command again on that cache directory (a second process of the same job);
- `sklearn`: a new Python process that reads the same data file and fits scikit-learn's
  `BayesianGaussianMixture(n_components=20, n_init=2, weight_concentration_prior_type=
  "dirichlet_process", max_iter=500)`, then prints the number of components with weight above 1%;

and the same three for Old Faithful (`dpppl sample models/gaussian_niw.dp --data faithful --chains 2`;
sklearn on its 272 x 2 points). The three kinds alternate within each repeat (sklearn, cold, warm),
`--repeats` times (default 3). With `--before REV` the dpppl rows are also run from that git revision
(its `dpppl/`, `models/` and `examples/` exported with `git archive`), in the same
repeats, so before and after are side by side in one run. The native sweep's shared library
(`DPPPL_NATIVE_CACHE`) is built once per source and is left warm in every row.

    python benchmarks/bench_readme_job.py                        # writes benchmarks/results/readme_job.md
    python benchmarks/bench_readme_job.py --before c5e2d81 --repeats 3

The table gives each row's median and the ratios of the medians to sklearn's (the issue's targets:
cold at most 3x, warm at most 1.5x, wall).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compile import export  # noqa: E402
from harness import load_average, machine_info  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = {
    "galaxies": (["sample", "models/galaxies.dp", "--chains", "2"], "dpppl/datasets/data/galaxies.csv"),
    "faithful": (["sample", "models/gaussian_niw.dp", "--data", "faithful", "--chains", "2"],
                 "dpppl/datasets/data/faithful.csv"),
}
SKLEARN = r"""
import sys
import numpy as np
from sklearn.mixture import BayesianGaussianMixture
x = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1, ndmin=2)
bgm = BayesianGaussianMixture(n_components=20, n_init=2, weight_concentration_prior_type="dirichlet_process",
                              max_iter=500, random_state=0).fit(x)
print("components above 1%:", int(np.sum(bgm.weights_ > 0.01)))
"""
DPPPL = "import sys; from dpppl.cli import main; sys.exit(main())"  # the console script's, without its Ctrl-C guard


def timed(command: list, cwd: str, env: dict) -> dict:
    """Run `command` in a new process: its wall and CPU seconds (an error when it fails)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def dpppl_env(tree: str, cache: str) -> dict:
    env = dict(os.environ, DPPPL_COMPILATION_CACHE=cache, PYTHONPATH=os.pathsep.join(
        [tree] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    env.pop("CI", None)
    return env


def measure(trees: dict, jobs: list, repeats: int) -> dict:
    """{job: {row: [ {wall_s, cpu_s}, ... ]}}, the rows alternating within each repeat."""
    results = {job: {} for job in jobs}
    for r in range(repeats):
        for job in jobs:
            args, data = JOBS[job]
            rows = results[job]
            rows.setdefault("sklearn", []).append(
                timed([sys.executable, "-c", SKLEARN, os.path.join(ROOT, data)], ROOT, dict(os.environ)))
            for name, tree in trees.items():
                with tempfile.TemporaryDirectory(prefix="dpppl-readme-job-") as work:
                    cache = os.path.join(work, "cache")
                    command = [sys.executable, "-c", DPPPL, *args, "--out", os.path.join(work, "run.nc"),
                               "--no-progress"]
                    for kind in ("cold", "warm"):
                        row = f"dpppl {kind}" + (f" ({name})" if len(trees) > 1 else "")
                        rows.setdefault(row, []).append(timed(command, tree, dpppl_env(tree, cache)))
                        print(f"repeat {r + 1} {job} {row}: {rows[row][-1]['wall_s']:.2f} s wall, "
                              f"{rows[row][-1]['cpu_s']:.2f} s CPU", flush=True)
    return results


def render(results: dict, info: dict) -> str:
    lines = ["# The README's main job in a new process, beside scikit-learn",
             "",
             "Written by `benchmarks/bench_readme_job.py` (its docstring says what each row runs). Each cell:",
             "median over the repeats (every repeat's figure in brackets); ratio: median wall (CPU) over",
             "sklearn's median wall (CPU). Issue 35's targets: cold <= 3x, warm <= 1.5x (wall).",
             "",
             f"Machine: {info.get('machine', '?')}; load average before/after: {info.get('load', '?')}",
             ""]
    for job, rows in results.items():
        lines += [f"## {job}", "", "| process | wall s | CPU s | ratio to sklearn, wall (CPU) |", "|---|---|---|---|"]
        base = rows["sklearn"]
        base_wall = statistics.median(r["wall_s"] for r in base)
        base_cpu = statistics.median(r["cpu_s"] for r in base)
        for row, runs in rows.items():
            wall = statistics.median(r["wall_s"] for r in runs)
            cpu = statistics.median(r["cpu_s"] for r in runs)
            every = lambda key: ", ".join(f"{r[key]:.2f}" for r in runs)  # noqa: E731
            ratio = "" if row == "sklearn" else f"{wall / base_wall:.2f}x ({cpu / base_cpu:.2f}x)"
            lines.append(f"| {row} | {wall:.2f} [{every('wall_s')}] | {cpu:.2f} [{every('cpu_s')}] | {ratio} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", default="galaxies,faithful", help="comma-separated: galaxies, faithful")
    parser.add_argument("--before", default=None, help="a git revision whose dpppl runs beside this tree's")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "readme_job"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dpppl-before-") as scratch:
        trees = {"after": ROOT}
        if args.before:
            trees = {f"before {args.before}": export(args.before, scratch), "after": ROOT}
        load = [load_average()]
        results = measure(trees, args.jobs.split(","), args.repeats)
        load.append(load_average())
    info = {"machine": machine_info(), "load": " / ".join(map(str, load))}
    with open(args.out + ".json", "w") as f:
        json.dump({"results": results, **info}, f, indent=1)
    text = render(results, info)
    with open(args.out + ".md", "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
