"""Split-merge's allocation pass native against the JAX loop (issue 35), beside scikit-learn.

Issue 35 measured the default `gibbs+splitmerge` on Old Faithful at 4.27 s for 218 points
against 0.19 s for scikit-learn's fit, and asked for the native path the Gibbs sweep has. Two
data sets, the ones of the issue's jobs: Old Faithful (`models/gaussian_niw.dp --data faithful`,
272 x 2) and galaxies (`models/galaxies_fixed.dp`, 82 velocities). Three parts, one run, this machine:

1. **profile**: where an iteration of the default kernel goes. In a new process per data set and
   split-merge path, the chains (2) start as `dpppl.sample` starts them (the points padded to
   their shape class, `dpppl.run.runner.point_class`; sequential seating) and run 500 iterations
   of `gibbs+splitmerge` (+ the alpha move); then each move alone runs `--iterations` steps from
   there, compiled (`jit(vmap(fori_loop))`), called once to compile and once timed: milliseconds
   per iteration (both chains), wall and process CPU.
2. **default runs**: `dpppl sample <model> [--data faithful] --chains 2 --no-progress` (500
   warmup + 1000 kept iterations, `gibbs+splitmerge` chosen by `kernel="auto"`), each in a new
   process, with the split-merge allocation native (the default now) and on the JAX loop (what
   the default ran before; the Gibbs sweep is native in both), first with an empty persistent
   compilation cache (cold: `DPPPL_COMPILATION_CACHE` a new directory), then again on it (warm).
   Wall seconds and the process's CPU seconds (`getrusage` of the child: XLA's compiler threads
   count, the machine's other load does not), compile, import and summary included.
3. **scikit-learn**: a new process that imports scikit-learn and fits
   `BayesianGaussianMixture(n_components=20, covariance_type="full",
   weight_concentration_prior_type="dirichlet_process")` (`random_state=0`, `max_iter=1000`) on the
   same points, BLAS on one thread; process wall and CPU seconds, and the fit's own seconds.

The JAX path is chosen in the child by replacing `dpppl.kernels.splitmerge.use_native` with a
function returning False before the command runs (the kernel option `native=False` would switch
the Gibbs sweep off too). Run from the repository root:

    python benchmarks/bench_splitmerge_native.py                 # ~17 min at load 9-12
    python benchmarks/bench_splitmerge_native.py --parts runs    # parts 2 and 3 only

Writes `benchmarks/results/splitmerge_native.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS_DIR, load_average, write_json  # noqa: E402

DATA = {"faithful": ("models/gaussian_niw.dp", ["--data", "faithful"]), "galaxies": ("models/galaxies_fixed.dp", [])}
"""Model file and command-line data option per data set (the data set of that name)."""
PATHS = ("native", "jax")
JAX_SPLITMERGE = "import dpppl.kernels.splitmerge as sm; sm.use_native = lambda *args, **kwargs: False; "
LAUNCH = "import sys; {patch}from dpppl.cli import main; sys.exit(main(sys.argv[1:]))"
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
"""BLAS on one thread for scikit-learn (as `bench_peers.py`): its threads spin against each other on a
loaded 2-CPU machine, and the fit is too small to gain from them."""
SKLEARN = """
import sys, time
import numpy as np
from sklearn.mixture import BayesianGaussianMixture
x = np.load(sys.argv[1])
start = time.perf_counter()
BayesianGaussianMixture(n_components=20, covariance_type="full", weight_concentration_prior_type="dirichlet_process",
                        max_iter=1000, random_state=0).fit(x)
print(time.perf_counter() - start)
"""


def child(args: list[str], env: dict | None = None) -> dict:
    """Run `python args` in a new process from the repository root: wall and CPU seconds (user +
    system of the child, from getrusage), its last line of output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"child failed ({done.returncode}): {done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stdout.strip().splitlines()
    return {"wall_s": wall, "cpu_s": cpu, "last_line": lines[-1] if lines else ""}


# ----------------------------------------------------------------------------- part 1 ---

def profile(name: str, path: str, iterations: int) -> dict:
    """In this process (a child): milliseconds per iteration of each move of the default kernel."""
    import jax
    import numpy as np

    import dpppl
    from dpppl.kernels import base as kernel_base
    from dpppl.models.init import initial_states
    from dpppl.run import runner

    bound = dpppl.load(DATA[name][0], data=dpppl.datasets.load(name)[0])
    target = bound.padded(runner.point_class(bound.num_points)) if bound.num_points >= runner.PADDED_FROM else bound
    x = jax.numpy.asarray(target.x)
    keys = jax.random.split(jax.random.key(0), 2)
    native = path == "native"
    moves = {"gibbs": kernel_base.entry("gibbs").factory(target),
             "splitmerge": kernel_base.entry("splitmerge").factory(target, native=native)}
    moves.update({move: kernel_base._PRIOR_MOVES[move](target) for move in target.prior.moves})
    default = kernel_base.build("gibbs+splitmerge", target, native=native if native else None)
    if not native:  # the default hybrid with the JAX split-merge and the native sweep
        default = kernel_base.compose([moves["gibbs"], moves["splitmerge"]]
                                      + [moves[m] for m in target.prior.moves], name="gibbs+splitmerge")

    def looped(kernel, steps):
        def run(key, state):
            return jax.lax.fori_loop(0, steps, lambda t, s: kernel.step(jax.random.fold_in(key, t), s, x)[0], state)
        return jax.jit(jax.vmap(run))

    states = initial_states(target, "sequential", keys, 48)
    states = jax.block_until_ready(looped(default, 500)(keys, states))
    out = {"points": bound.num_points, "rows": int(target.x.shape[0]), "path": path,
           "clusters": [int(np.sum(np.asarray(n) > 0)) for n in states.stats.n]}
    for move, kernel in [*moves.items(), ("gibbs+splitmerge", default)]:
        fn = looped(kernel, iterations)
        start, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(keys, states))
        compiled, cpu_compiled = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(keys, states))
        end, cpu_end = time.perf_counter(), time.process_time()
        out[move] = {"first_call_s": compiled - start, "first_call_cpu_s": cpu_compiled - cpu,
                     "ms_per_iteration": 1e3 * (end - compiled) / iterations,
                     "cpu_ms_per_iteration": 1e3 * (cpu_end - cpu_compiled) / iterations}
    return out


# ----------------------------------------------------------------------------- part 2 ---

def default_runs(repeats: int) -> dict:
    import numpy as np

    import dpppl

    results = {}
    for name, (model_file, options) in DATA.items():
        for rep in range(repeats):
            for path in PATHS if rep % 2 == 0 else PATHS[::-1]:  # alternate which goes first
                code = LAUNCH.format(patch=JAX_SPLITMERGE if path == "jax" else "")
                argv = ["sample", model_file, *options, "--chains", "2", "--no-progress"]
                with tempfile.TemporaryDirectory() as cache:
                    env = {"DPPPL_COMPILATION_CACHE": cache}
                    for phase in ("cold", "warm"):
                        run = child(["-c", code, *argv], env)
                        results.setdefault(f"{name} {path} {phase}", []).append(run)
                        print(f"{name} {path} {phase}: {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU",
                              flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            points = Path(tmp) / "x.npy"
            x = np.asarray(dpppl.datasets.load(name)[0], float)
            np.save(points, x.reshape(len(x), -1))
            for rep in range(repeats):
                run = child(["-c", SKLEARN, str(points)], ONE_THREAD)
                run["fit_s"] = float(run.pop("last_line"))
                results.setdefault(f"{name} sklearn", []).append(run)
                print(f"{name} sklearn: {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU, fit {run['fit_s']:.3f} s",
                      flush=True)
    return results


def _load(values) -> str:
    return "/".join(f"{v:.1f}" for v in values) if values else "?"


def table(doc: dict) -> str:
    lines = ["# Split-merge's allocation pass: native against the JAX loop (issue 35)", "",
             f"`python benchmarks/bench_splitmerge_native.py` ({doc['machine']['cpu_model']}, "
             f"{doc['machine']['cpus_usable']} CPUs; load {_load(doc['load_at_start'])} at start, "
             f"{_load(doc['machine']['load_average_1_5_15'])} at end; git {doc['machine']['git_revision']}). "
             "Every figure comes from this one run; on a loaded machine the CPU seconds are the comparable "
             "ones.", ""]
    if "profile" in doc:
        lines += ["## Where an iteration goes (ms per iteration, 2 chains; wall / CPU)", "",
                  "| data | split-merge path | points (rows) | K | gibbs | splitmerge | alpha | gibbs+splitmerge |",
                  "| --- " * 8 + "|"]
        for row in doc["profile"]:
            cells = [f"{row[m]['ms_per_iteration']:.3f} / {row[m]['cpu_ms_per_iteration']:.3f}" if m in row else "-"
                     for m in ("gibbs", "splitmerge", "alpha", "gibbs+splitmerge")]
            lines.append(f"| {row['data']} | {row['path']} | {row['points']} ({row['rows']}) | "
                         f"{row['clusters']} | " + " | ".join(cells) + " |")
        lines.append("")
    if "runs" in doc:
        lines += ["## The default run in a new process (`dpppl sample ... --chains 2`), beside scikit-learn",
                  "", "Wall s / CPU s (mean of the repeats); the sklearn column is a new process importing "
                  "scikit-learn and fitting (its fit alone in brackets).", "",
                  "| data | native split-merge, cold | native, warm | JAX split-merge, cold | JAX, warm | "
                  "scikit-learn process (fit) |", "| --- " * 6 + "|"]
        runs = doc["runs"]

        def cell(key):
            rows = runs[key]
            wall = sum(r["wall_s"] for r in rows) / len(rows)
            cpu = sum(r["cpu_s"] for r in rows) / len(rows)
            fit = f" ({sum(r['fit_s'] for r in rows) / len(rows):.3f})" if "fit_s" in rows[0] else ""
            return f"{wall:.2f} / {cpu:.2f}{fit}"

        for name in DATA:
            lines.append(f"| {name} | " + " | ".join(cell(f"{name} {k}") for k in (
                "native cold", "native warm", "jax cold", "jax warm", "sklearn")) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=("profile", "runs"), default=["profile", "runs"])
    parser.add_argument("--iterations", type=int, default=1000, help="timed iterations per move (profile)")
    parser.add_argument("--repeats", type=int, default=1, help="default runs and sklearn fits per data set")
    parser.add_argument("--out", default="splitmerge_native", help="results file stem in benchmarks/results")
    parser.add_argument("--render", action="store_true", help="write the .md table of the existing .json only")
    parser.add_argument("--child-profile", nargs=2, metavar=("DATA", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_profile:
        print(json.dumps(profile(*args.child_profile, args.iterations)))
        return
    if args.render:
        doc = json.loads((RESULTS_DIR / f"{args.out}.json").read_text())
        (RESULTS_DIR / f"{args.out}.md").write_text(table(doc) + "\n")
        print(table(doc))
        return
    doc = {"load_at_start": load_average(), "iterations": args.iterations, "repeats": args.repeats}
    if "profile" in args.parts:
        doc["profile"] = []
        for name in DATA:
            for path in PATHS:
                run = child([__file__, "--child-profile", name, path, "--iterations", str(args.iterations)])
                row = {"data": name, **json.loads(run["last_line"])}
                doc["profile"].append(row)
                print(f"profile {name} {path}: " + ", ".join(
                    f"{m} {row[m]['ms_per_iteration']:.3f} ms" for m in ("gibbs", "splitmerge", "alpha",
                                                                         "gibbs+splitmerge") if m in row),
                      flush=True)
    if "runs" in args.parts:
        doc["runs"] = default_runs(args.repeats)
    path = write_json(args.out, doc)
    doc["machine"] = json.loads(path.read_text())["machine"]
    (RESULTS_DIR / f"{args.out}.md").write_text(table(doc) + "\n")
    print(table(doc))


if __name__ == "__main__":
    main()
