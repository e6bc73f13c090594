"""The README's main job in a new process, beside scikit-learn doing the same job (issue 35, item 4).

Each row is one new process running the `dpppl` console script's `main` (`DPPPL`), timed from outside
(wall seconds, and CPU seconds of the child: `getrusage(RUSAGE_CHILDREN)`, user + system, so XLA's
compiler threads count and the machine's other load does not):

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
    python benchmarks/bench_readme_job.py --profile              # writes benchmarks/results/readme_job_profile.md

`--profile` runs each job once cold and once warm, each in a new process that times its own phases
(`PROFILE`: import of JAX, import of the command line, the model file read, `dpppl.sample` with its
compiled programs, the netCDF write, the summary; the interpreter's exit is the child's wall time
measured from outside minus its last mark), wall and process CPU (`getrusage`, all threads) at each
phase's end, and each compiled program's trace, lowering and XLA compile (or cache-load) seconds as
`jax_log_compiles` logs them, named by the key `dpppl.core.compiled.persisted` keeps it under.

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
from harness import load_average, machine_info, write_table  # noqa: E402

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
DPPPL = ("import sys\n"
         "try:\n"
         "    from dpppl_console import main\n"
         "except ImportError:\n"
         "    from dpppl.cli import main\n"
         "sys.exit(main())\n")
"""The `dpppl` console script's `main` (what `dpppl sample` runs), or `dpppl.cli.main` in a tree without it (a
`--before` revision exported with its package only: the same command, ended by the interpreter's teardown as
the console script of those revisions did)."""
PROFILE = r"""
import json, logging, re, resource, sys, threading, time
wall0 = time.perf_counter()
marks, programs, last = [], [], {}  # last: each thread's program (dpppl compiles the pointwise one in a thread)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def mark(name):
    marks.append((name, time.perf_counter() - wall0, cpu()))
class Compiles(logging.Handler):
    def emit(self, record):
        found = re.search(r"Finished (tracing|jaxpr to MLIR module conversion|XLA compilation) .*? in ([0-9.e-]+) sec",
                          record.getMessage())
        if found:
            programs.append((last.get(record.thread, "?"), found.group(1).split()[0], float(found.group(2))))
import jax
mark("import jax")
jax.config.update("jax_log_compiles", True)
handler = Compiles(level=logging.DEBUG)
for name in ("jax._src.dispatch", "jax._src.interpreters.pxla", "jax._src.compiler"):
    log = logging.getLogger(name)
    log.addHandler(handler), log.setLevel(logging.DEBUG)
    log.propagate = False
import dpppl
import dpppl.cli as cli
import dpppl.core.compiled as compiled
mark("import dpppl.cli")
caller = compiled._Persisted._caller
def named(self, in_tree, avals):
    last[threading.get_ident()] = str(self.key[0])
    return caller(self, in_tree, avals)
compiled._Persisted._caller = named
def marked(fn, name):
    def run(*args, **kwargs):
        out = fn(*args, **kwargs)
        mark(name)
        return out
    return run
dpppl.load = marked(dpppl.load, "read the model file")
dpppl.sample = marked(dpppl.sample, "dpppl.sample")
cli.write_atomically = marked(cli.write_atomically, "netCDF write")
cli.summary_text = marked(cli.summary_text, "summary")
code = cli.main(sys.argv[1:])
print("PROFILE " + json.dumps({"marks": marks, "programs": programs}), file=sys.stderr)
try:
    from dpppl_console import _exit_now  # the console script's end (no interpreter teardown)
except ImportError:
    _exit_now = sys.exit
_exit_now(code)
"""
"""The child of `--profile`: the command line, timing its phases and logging its compiled programs."""


def timed(command: list, cwd: str, env: dict, what: str | None = None) -> tuple[dict, str]:
    """Run `command` in a new process: `({wall_s, cpu_s}, its stderr)` (an error naming
    `what`, else the command, when it fails)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{what or ' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}, done.stderr


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
                timed([sys.executable, "-c", SKLEARN, os.path.join(ROOT, data)], ROOT, dict(os.environ))[0])
            for name, tree in trees.items():
                with tempfile.TemporaryDirectory(prefix="dpppl-readme-job-") as work:
                    cache = os.path.join(work, "cache")
                    command = [sys.executable, "-c", DPPPL, *args, "--out", os.path.join(work, "run.nc"),
                               "--no-progress"]
                    for kind in ("cold", "warm"):
                        row = f"dpppl {kind}" + (f" ({name})" if len(trees) > 1 else "")
                        rows.setdefault(row, []).append(timed(command, tree, dpppl_env(tree, cache))[0])
                        print(f"repeat {r + 1} {job} {row}: {rows[row][-1]['wall_s']:.2f} s wall, "
                              f"{rows[row][-1]['cpu_s']:.2f} s CPU", flush=True)
    return results


def profile(jobs: list) -> dict:
    """{job: {"cold"|"warm": {"wall_s", "cpu_s", "marks", "programs"}}}: one new process each (`PROFILE`)."""
    out = {}
    for job in jobs:
        args, _ = JOBS[job]
        with tempfile.TemporaryDirectory(prefix="dpppl-readme-job-") as work:
            env = dpppl_env(ROOT, os.path.join(work, "cache"))
            command = [sys.executable, "-c", PROFILE, *args, "--out", os.path.join(work, "run.nc"), "--no-progress"]
            for kind in ("cold", "warm"):
                times, stderr = timed(command, ROOT, env, f"{job} {kind}")
                line = next(x for x in stderr.splitlines() if x.startswith("PROFILE "))
                out.setdefault(job, {})[kind] = {**times, **json.loads(line[len("PROFILE "):])}
                print(f"profile {job} {kind}: {times['wall_s']:.2f} s wall", flush=True)
    return out


def _preamble(title: str, explanation: list[str], info: dict) -> list[str]:
    """The lines that open a results file: its title, what it holds, and the machine and load."""
    return [f"# {title}", "", *explanation, "",
            f"Machine: {info.get('machine', '?')}; load average before/after: {info.get('load', '?')}", ""]


def render_profile(profiles: dict, info: dict) -> str:
    lines = _preamble("The README's main job in a new process: where its time goes", [
        "Written by `benchmarks/bench_readme_job.py --profile` (its docstring says how). Each phase: the",
        "wall and process CPU seconds it took (CPU: every thread of the process, so XLA's compiler threads",
        "count and the machine's other load mostly does not). Then each compiled program: the seconds",
        "`jax_log_compiles` gives its trace, its lowering and its XLA compilation (warm: the load of the",
        "compiled program from the persistent cache), named by its `persisted` key (`?`: a program",
        "outside it, such as the chains' keys). The pointwise log likelihood's program compiles in a thread",
        "of its own while the chains compile and run, so its seconds overlap the chunk's."], info)
    for job, kinds in profiles.items():
        lines += [f"## {job}", "", "| phase | " + " | ".join(f"{k} wall s | {k} CPU s" for k in kinds) + " |",
                  "|---|" + "---|---|" * len(kinds)]
        names = [m[0] for m in next(iter(kinds.values()))["marks"]] + ["interpreter exit", "whole process"]
        for i, name in enumerate(names):
            cells = []
            for run in kinds.values():
                marks = run["marks"]
                if name == "whole process":
                    wall, cpu = run["wall_s"], run["cpu_s"]
                elif name == "interpreter exit":
                    wall, cpu = run["wall_s"] - marks[-1][1], run["cpu_s"] - marks[-1][2]
                else:
                    previous = marks[i - 1] if i else (None, 0.0, 0.0)
                    wall, cpu = marks[i][1] - previous[1], marks[i][2] - previous[2]
                cells.append(f"{wall:.2f} | {cpu:.2f}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "| process | program | trace s | lower s | compile (or cache load) s |", "|---|---|---|---|---|"]
        for kind, run in kinds.items():
            table = {}
            for program, phase, seconds in run["programs"]:
                row = table.setdefault(program, {"tracing": 0.0, "jaxpr": 0.0, "XLA": 0.0})
                row[phase] += seconds
            for program, row in table.items():
                lines.append(f"| {kind} | {program} | {row['tracing']:.2f} | {row['jaxpr']:.2f} | {row['XLA']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def render(results: dict, info: dict) -> str:
    lines = _preamble("The README's main job in a new process, beside scikit-learn", [
        "Written by `benchmarks/bench_readme_job.py` (its docstring says what each row runs). Each cell:",
        "median over the repeats (every repeat's figure in brackets); ratio: median wall (CPU) over",
        "sklearn's median wall (CPU). Issue 35's targets: cold <= 3x, warm <= 1.5x (wall)."], info)
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
    parser.add_argument("--profile", action="store_true", help="profile each job's phases instead (module docstring)")
    args = parser.parse_args(argv)
    if args.profile:
        load = [load_average()]
        profiles = profile(args.jobs.split(","))
        load.append(load_average())
        info = {"machine": machine_info(), "load": " / ".join(map(str, load))}
        write_table(args.out + "_profile", {"profiles": profiles, **info}, render_profile(profiles, info))
        return
    with tempfile.TemporaryDirectory(prefix="dpppl-before-") as scratch:
        trees = {"after": ROOT}
        if args.before:
            trees = {f"before {args.before}": export(args.before, scratch), "after": ROOT}
        load = [load_average()]
        results = measure(trees, args.jobs.split(","), args.repeats)
        load.append(load_average())
    info = {"machine": machine_info(), "load": " / ".join(map(str, load))}
    write_table(args.out, {"results": results, **info}, render(results, info))


if __name__ == "__main__":
    main()
