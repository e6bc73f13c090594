"""Compile time per kernel (issue 35, item 4): before and after, side by side in one run.

For every kernel, with a model file it applies to, four `dpppl.sample` calls in a row in one
new process (5 warmup + 5 kept iterations, 2 chains, seed 0, so the figures are about compiling):

- first call: N = 600 points (a data set drawn with seed 0);
- new data, same shape: another data set of N = 600 (seed 1);
- new N within 25%: a data set of N = 620 (seed 2), in the shape class of 600 (both padded to 640 rows
  by the kernels that take masked points, `dpppl.run.runner.point_class`);
- same data again: the first call repeated.

The process runs twice per source tree: **cold**, with an empty persistent compilation cache
(`DPPPL_COMPILATION_CACHE` = a new temporary directory), then **warm**, a new process on the
same cache directory. Each cell is wall seconds, process CPU seconds (`getrusage` of the
process and its children: XLA's compiler threads count, the machine's other load does not),
and the programs lowered (`jax_log_compiles` records "Compiling ..." of logger "jax"; a program
read back from the persistent cache is lowered too, so "(k cached)" says how many of them the
cache served instead of XLA). `import dpppl` and then `import arviz` run before the first call and are
reported apart: ArviZ (with the SciPy and Matplotlib it imports, ~1.3 CPU s) is imported once per
process by whatever first builds an InferenceData, so it is not part of any kernel's compile.

"Before" is a git revision (`--before`, default 236f68d, the main commit issue 35 measured): its
`dpppl/`, `models/` and `examples/` are exported with `git archive` into a temporary directory
and the same driver runs there (PYTHONPATH and working directory); "after" is a source tree
(`--after`, default this working tree). Both trees run with the same Python and libraries, kernel
by kernel, on the same machine in one run:

    python benchmarks/bench_compile.py --kernels gibbs,gibbs+splitmerge,subcluster
    python benchmarks/bench_compile.py --kernels nuts --merge    # add rows to the same results
    python benchmarks/bench_compile.py --kernels mallows-slice --points 600,10000 --out /tmp/points
    python benchmarks/bench_compile.py --kernels subcluster --calls first,again --cold-only --n 100000

With `--n N` the calls' data have N points (new N within 25%: N * 620 / 600); the same call again
then says what of the first call's CPU was its run rather than its compile.

With `--points N1,N2,...`, instead of the four calls: the first call at each number of points, each
in a new process with an empty cache (the cold column only). What a compiled program is made of
(per move, per source line, per program of a call) is `benchmarks/bench_move_compile.py`'s.

Writes `benchmarks/results/compile.json` and the table `benchmarks/results/compile.md`
(`--out` to choose the stem); `--merge` keeps the kernels an earlier run measured and replaces
the ones measured now. The native Gibbs sweep's shared library (`DPPPL_NATIVE_CACHE`) is built
once per source and is not part of the compilation cache: it is left warm in both columns.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import load_average, machine_info, write_table  # noqa: E402

KERNELS = {
    "gibbs": "models/gaussian_niw.dp",
    "gibbs+splitmerge": "models/gaussian_niw.dp",
    "subcluster": "models/gaussian_niw.dp",
    "gibbs+perm": "models/gaussian_niw.dp",
    "sbgibbs+labelswap+labelpermute": "models/stick_breaking.dp",
    "mallows-slice": "models/rankings.dp",
    "ddp+ddpswap": "examples/ddp.dp",
    "nuts": "models/gaussian_niw.dp",
}
CALLS = {
    "first": ("first call", 0, 600),
    "new_data": ("new data, same shape", 1, 600),
    "new_n": ("new N within 25%", 2, 620),
    "again": ("same data again", 0, 600),
}
CACHES = ("cold", "warm")


def data(path: str, seed: int, n: int):
    """The data of about `n` points (seed `seed`) every compile benchmark gives the model file `path`:
    for `rankings.dp` 3 clusters of top-10 rankings of 20 items, for `ddp.dp` 5 time slices of 3
    moving blobs, otherwise three Gaussian blobs in 2-D (n // 3 points each). The driver below runs
    this very source in its child process."""
    import numpy as np  # noqa: PLC0415  (here, so that the driver's child runs the same source)
    from dpppl.datasets.synthetic import mallows_mixture, moving_blobs  # noqa: PLC0415

    if path.endswith("rankings.dp"):
        return mallows_mixture(1, num_clusters=3, per_cluster=n // 3, seed=seed)[0]
    if path.endswith("ddp.dp"):
        return moving_blobs(5, 3, n // 15, seed=seed)[0]
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, (3, 2))
    return np.concatenate([rng.normal(c, 1.0, (n // 3, 2)) for c in centres])


DRIVER = r"""
import json, logging, resource, sys, time

def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

wall0, cpu0 = time.perf_counter(), cpu()
import jax
import jax.monitoring

counts = {"lowered": 0, "cached": 0, "xla_s": 0.0}

class Lowerings(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("Compiling "):
            counts["lowered"] += 1

def on_event(event, **_):
    if event == "/jax/compilation_cache/cache_hits":
        counts["cached"] += 1

def on_duration(event, duration, **_):
    if event == "/jax/core/compile/backend_compile_duration":
        counts["xla_s"] += duration

logging.getLogger("jax").addHandler(Lowerings(logging.WARNING))
logging.getLogger("jax").propagate = False
jax.config.update("jax_log_compiles", True)
jax.monitoring.register_event_listener(on_event)
jax.monitoring.register_event_duration_secs_listener(on_duration)
import numpy as np
import dpppl
kernel, path, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {"import_s": time.perf_counter() - wall0, "import_cpu_s": cpu() - cpu0}
wall, used = time.perf_counter(), cpu()
import arviz  # noqa: F401  (imported by the first call's InferenceData otherwise: once per process, not compiling)
out["arviz_s"], out["arviz_cpu_s"] = time.perf_counter() - wall, cpu() - used

""" + inspect.getsource(data) + r"""
for name, seed, n in calls:
    x = data(path, seed, n)
    for key in counts:
        counts[key] = 0
    wall, used = time.perf_counter(), cpu()
    dpppl.sample(path, x, kernel=kernel, num_warmup=5, num_samples=5, num_chains=2, seed=0, progress_bar=False)
    out[name] = {"wall_s": time.perf_counter() - wall, "cpu_s": cpu() - used, **counts}
print("RESULT " + json.dumps(out))
"""


def export(rev: str, into: str) -> str:
    """The package, model files and examples of git revision `rev`, unpacked under `into`."""
    sha = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", rev], capture_output=True, text=True,
                         check=True).stdout.strip()
    archive = os.path.join(into, f"{sha}.tar")
    subprocess.run(["git", "-C", REPO, "archive", "--format=tar", "-o", archive, sha, "dpppl", "models", "examples"],
                   check=True)
    tree = os.path.join(into, sha)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def run_driver(tree: str, kernel: str, cache: str, calls: list, timeout: float) -> dict:
    """One new process in `tree` running `calls` of `kernel` with persistent cache `cache`."""
    env = dict(os.environ, PYTHONPATH=tree, DPPPL_COMPILATION_CACHE=cache, CI="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    wall = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", DRIVER, kernel, KERNELS[kernel],
                               json.dumps([(c, *CALLS[c][1:]) for c in calls])],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    result = json.loads(lines[-1][len("RESULT "):])
    result["process_wall_s"] = time.perf_counter() - wall
    return result


def measure(trees: dict, kernels: list, calls: list, caches: list, timeout: float) -> dict:
    """{kernel: {tree: {cache: driver result}}}, the trees of one kernel one after the other."""
    cells: dict = {}
    for kernel in kernels:
        cells[kernel] = {}
        for name, tree in trees.items():
            cells[kernel][name] = {}
            with tempfile.TemporaryDirectory(prefix="dpppl-bench-cache-") as cache:
                for state in caches:  # cold fills the empty cache, warm reads it in a new process
                    result = run_driver(tree, kernel, cache, calls, timeout)
                    cells[kernel][name][state] = result
                    print(f"{kernel:32s} {name:6s} {state}: " + (result.get("error") or "  ".join(
                        f"{c} {result[c]['wall_s']:.1f}s/{result[c]['cpu_s']:.1f}cpu/{result[c]['lowered']}"
                        for c in calls)), flush=True)
    return cells


def measure_sizes(trees: dict, kernel: str, sizes: list, timeout: float) -> dict:
    """`measure`'s cells for the first call at each of `sizes` points (call `first_N`), each in a new
    process with an empty cache: {kernel: {tree: {"cold": {first_N: ..., ...}}}}."""
    cells: dict = {kernel: {name: {"cold": {}} for name in trees}}
    for n in sizes:
        CALLS[f"first_{n}"] = (f"first call, N = {n}", 0, n)
        for name, by_cache in measure(trees, [kernel], [f"first_{n}"], ["cold"], timeout)[kernel].items():
            cells[kernel][name]["cold"].update(by_cache["cold"])
    return cells


def _cell(r: dict | None) -> str:
    if not r:
        return "-"
    cached = f" ({r['cached']} cached)" if r.get("cached") else ""
    return f"{r['wall_s']:.2f} / {r['cpu_s']:.2f} / {r['lowered']}{cached}"


def _ratio(before: dict | None, after: dict | None) -> str:
    if not before or not after:
        return "-"

    def div(a, b):
        return f"{a / b:.2g}x" if b > 0 else "-"
    return f"{div(after['wall_s'], before['wall_s'])} / {div(after['cpu_s'], before['cpu_s'])} / " \
           f"{before['lowered']} -> {after['lowered']}"


def _load(values: list | None) -> str:
    return ", ".join(f"{v:.1f}" for v in values) if values else "unknown"


def render(results: dict) -> str:
    """The markdown page: how it was run, on what, and the table."""
    before, after = results["trees"]["before"], results["trees"]["after"]
    lines = ["# Issue 35, item 4: compile time per kernel, before and after", ""]
    for run in results["runs"]:
        m = run["machine"]
        lines += [f"`{run['command']}`", "",
                  f"{m['cpu_count']} CPUs ({m['cpu_model']}), JAX {m['versions']['jax']} {m['jax_backend']}, "
                  f"nproc {run['nproc']}, load average (1, 5, 15 min) {_load(run['load_start'])} at start -> "
                  f"{_load(run['load_end'])} at end, {run['seconds']:.0f} s in all; kernels: "
                  f"{', '.join(run['kernels'])}.", ""]
    lines += [f"Before: git {before}; after: {after}. Each call: `dpppl.sample(path, x, kernel=..., num_warmup=5, "
              "num_samples=5, num_chains=2, seed=0)`; " + (
                  "the first call at each number of points, each in a new process with an empty persistent "
                  "compilation cache (`--points`). " if results.get("sizes") else
                  "the four calls run in that order in one new process, cold (empty persistent compilation cache) "
                  "and then warm (a new process on the cache the cold one filled). ") +
              f"Data: three Gaussian blobs in 2-D (N = {CALLS['first'][2]}, other seed, N = {CALLS['new_n'][2]}); "
              "rankings: "
              "`mallows_mixture(1, num_clusters=3, per_cluster=N/3)` (top-10 of 20 items); DDP: "
              "`moving_blobs(5, 3, N/15)`.", "",
              "Each cell: wall s / process CPU s / programs lowered (\"(k cached)\": k of them read back from "
              "the persistent cache, not compiled). Ratio rows: after / before for wall and CPU, and the "
              "programs lowered before -> after.", ""]
    calls = [c for c in CALLS if any(c in r for k in results["cells"].values() for t in k.values()
                                     for r in t.values())]
    lines += ["| kernel | model | cache | tree | " + " | ".join(CALLS[c][0] for c in calls) + " |",
              "| --- | --- | --- | --- | " + " | ".join("---" for _ in calls) + " |"]
    for kernel in KERNELS:
        if kernel not in results["cells"]:
            continue
        row = results["cells"][kernel]
        for state in CACHES:
            b, a = row.get("before", {}).get(state), row.get("after", {}).get(state)
            if b is None and a is None:
                continue
            for label, res in ((f"before {before}", b), ("after", a)):
                cells = [res["error"]] * len(calls) if res and "error" in res else \
                    [_cell((res or {}).get(c)) for c in calls]
                lines.append(f"| {kernel} | `{KERNELS[kernel]}` | {state} | {label} | " + " | ".join(cells) + " |")
            ratios = [_ratio((b or {}).get(c), (a or {}).get(c)) for c in calls]
            lines.append(f"| {kernel} | | {state} | after / before | " + " | ".join(ratios) + " |")
    lines += ["", "`import dpppl`, then `import arviz` (seconds, wall / CPU; in each process before the first call, "
              "not in the table; ArviZ would otherwise be imported by the first call's InferenceData):", ""]
    for kernel, row in results["cells"].items():
        parts = [f"{tree} {state} {r['import_s']:.1f} / {r['import_cpu_s']:.1f}"
                 + (f", arviz {r['arviz_s']:.1f} / {r['arviz_cpu_s']:.1f}" if "arviz_s" in r else "")
                 for tree, states in row.items() for state, r in states.items() if "import_s" in r]
        lines.append(f"- {kernel}: " + "; ".join(parts))
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="236f68d", help="git revision measured as 'before' (default: %(default)s)")
    p.add_argument("--after", default=REPO, help="source tree measured as 'after' (default: this working tree)")
    p.add_argument("--after-label", help="what the table calls the 'after' tree (default: its git revision)")
    p.add_argument("--kernels", default=",".join(KERNELS),
                   help=f"comma-separated subset of {', '.join(KERNELS)} (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="only the first call and new data of the same shape, cold cache only")
    p.add_argument("--calls", help=f"comma-separated subset of {', '.join(CALLS)}, in that order (default: all)")
    p.add_argument("--cold-only", action="store_true", help="the cold cache only")
    p.add_argument("--n", type=int, default=600,
                   help="points of the calls' data (default: %(default)s): new N within 25%% is N * 620 / 600; "
                        "with --calls first,again the same call again shows what of the first call was its run")
    p.add_argument("--points", help="instead of the calls: the first call at each of these comma-separated numbers "
                                    "of points, each in a new process with an empty cache")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per process (default: %(default)s)")
    p.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "compile"),
                   help="results stem: writes STEM.json and STEM.md (default: %(default)s)")
    p.add_argument("--merge", action="store_true", help="keep the kernels of an earlier STEM.json not run now")
    args = p.parse_args(argv)
    kernels = args.kernels.split(",")
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        p.error(f"unknown kernel(s) {', '.join(unknown)}; choose from {', '.join(KERNELS)}")
    calls = args.calls.split(",") if args.calls else ["first", "new_data"] if args.quick else list(CALLS)
    if any(c not in CALLS for c in calls):
        p.error(f"--calls: choose from {', '.join(CALLS)}")
    caches = ["cold"] if args.quick or args.cold_only else list(CACHES)
    sizes = [int(n) for n in args.points.split(",")] if args.points else None
    if args.n != 600:
        for name, (label, seed, n) in CALLS.items():
            CALLS[name] = (label, seed, round(n * args.n / 600))

    start, load_start = time.perf_counter(), load_average()
    old = None
    if args.merge and os.path.exists(args.out + ".json"):
        with open(args.out + ".json") as f:
            old = json.load(f)
    after = os.path.abspath(args.after)
    dirty = subprocess.run(["git", "-C", after, "status", "--porcelain", "--", "dpppl"], capture_output=True,
                           text=True).stdout.strip()
    head = subprocess.run(["git", "-C", after, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    label = args.after_label or (f"working tree at git {head}" + (" (dpppl/ modified)" if dirty else ""))
    cells: dict = {}
    with tempfile.TemporaryDirectory(prefix="dpppl-bench-before-") as tmp:
        before = export(args.before, tmp)
        for kernel in kernels:  # the results are written after each kernel: a long run stopped keeps its rows
            sources = {"before": before, "after": after}
            cells.update(measure_sizes(sources, kernel, sizes, args.timeout) if sizes else
                         measure(sources, [kernel], calls, caches, args.timeout))
            run = {"command": "python benchmarks/bench_compile.py " + " ".join(
                       shlex.quote(a) for a in (argv or sys.argv[1:])),
                   "machine": machine_info(), "nproc": os.cpu_count(), "load_start": load_start,
                   "load_end": load_average(), "seconds": time.perf_counter() - start, "kernels": list(cells)}
            trees = {"before": os.path.basename(before), "after": label}
            results = {"trees": trees, "runs": [run], "cells": cells, "sizes": sizes}
            if old is not None:
                results = {"trees": trees, "runs": old["runs"] + [run], "cells": {**old["cells"], **cells},
                           "sizes": sizes}
            write_table(args.out, results, render(results))  # printed after each kernel too

if __name__ == "__main__":
    main()
