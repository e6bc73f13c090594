"""What the sub-cluster sampler's compiled chunks are made of (issue 35): compile CPU and HLO per source line.

For each number of points given (`--points`, default 600 and 10000: the collapsed step below
`collapsed_below` padded points, the sub-cluster steps above it), `models/gaussian_niw.dp` on three
Gaussian blobs in 2-D (the data `benchmarks/bench_compile.py` draws, seed 0) and the `subcluster`
kernel with its default options, in this process with an empty in-memory cache and the persistent
cache off:

- **warmup chunk** and **sampling chunk**: the chunk programs the runner compiles
  (`dpppl.run.runner._chunk_function`, 2 chains, the run's chunk length and initial capacity),
  lowered and compiled with `jax.jit(...).lower(...).compile()` (one program when the kernel has no
  warmup step of its own);

each with the process CPU seconds of its lowering and XLA compile (`time.process_time()`: XLA's
compiler threads count, the machine's other load does not) and the number of HLO instructions in the
optimized program. With `--hlo`, each program's optimized HLO is broken down by the innermost dpppl
source line and by the dpppl functions on the stack of each instruction (the dump and attribution of
`benchmarks/bench_move_compile.py`, imported from it), the top `--top` lines printed.

With `--first-call REV`, instead: a user's first call at each number of points, before (git revision
REV, exported as `benchmarks/bench_compile.py` exports it) and after (this tree), side by side: one
new process per tree and size with an empty persistent compilation cache, running
`benchmarks/bench_compile.py`'s driver (`dpppl.sample`, 5 warmup + 5 kept iterations, 2 chains):
wall and process CPU seconds of the call (XLA's compiler threads count, the machine's other load does
not), the programs lowered and the seconds XLA spent compiling them.

    nice -n 10 python benchmarks/bench_subcluster_compile.py --points 600,10000 --hlo --out /tmp/sub.json
    nice -n 10 python benchmarks/bench_subcluster_compile.py --points 600,10000 --first-call 9122519
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# before JAX starts: the dump directory and its module filter (with --hlo) are set by this import
import bench_move_compile as moves  # noqa: E402
import bench_compile  # noqa: E402
import numpy as np  # noqa: E402

SPEC = "subcluster"
MODEL = "models/gaussian_niw.dp"


def measure(n: int, hlo: bool, top: int) -> dict:
    import dpppl  # noqa: PLC0415
    from dpppl.dsl.parser import bind_data  # noqa: PLC0415
    from dpppl.models.init import initial_states  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    _, target = bind_data(dpppl.load(os.path.join(moves.ROOT, MODEL)), bench_compile.data(MODEL, 0, n))
    program, (kern, key, make) = runner._program(SPEC, target, {})
    init_keys, chain_keys = runner._chain_keys(0, 2)
    states = initial_states(program, "sequential", init_keys, None)
    if kern.init is not None:  # the kernel's carried values, as the runner starts them
        import jax  # noqa: PLC0415
        states = jax.jit(lambda s, bound: jax.vmap(make(bound).init, in_axes=(0, None))(s, bound.x))(states, program)
    capacity = int(states.stats.n.shape[-1])
    length = runner.chunk_length(2, program.num_points)
    out = {"points": n, "rows": program.num_points, "capacity": capacity, "note": kern.note, "programs": {}}
    phases = (("warmup", True), ("sampling", False)) if kern.warmup_step is not None else (("chunk", False),)
    for name, warmup in phases:
        chunk = runner._chunk_function(make, kern, key, warmup, length, capacity)
        args = (states, chain_keys, np.int32(0), np.int32(1), program)
        lower, cpu, compiled = moves.compile_cpu(chunk.jitted, *args)
        out["programs"][name] = {"lower_cpu_s": lower, "compile_cpu_s": cpu,
                                 "instructions": len(moves.hlo_instructions(compiled.as_text()))}
        if hlo:
            out["programs"][name]["hlo"] = moves.breakdown("chunk", top)
    return out


def first_call(tree: str, n: int, timeout: float) -> dict:
    """One new process in `tree`, an empty compilation cache: `bench_compile.py`'s driver, one call on n points."""

    with tempfile.TemporaryDirectory(prefix="dpppl-bench-cache-") as cache:
        env = dict(os.environ, PYTHONPATH=tree, DPPPL_COMPILATION_CACHE=cache, CI="1")
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        done = subprocess.run([sys.executable, "-c", bench_compile.DRIVER, SPEC, MODEL, json.dumps([["first", 0, n]])],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1][len("RESULT "):])["first"]


def first_calls(before: str, points: list, timeout: float) -> dict:
    """{n: {"before": ..., "after": ...}}: `first_call` of revision `before` and of this tree, size by size."""

    out = {}
    with tempfile.TemporaryDirectory(prefix="dpppl-bench-tree-") as into:
        trees = {"before": bench_compile.export(before, into), "after": moves.ROOT}
        for n in points:
            out[n] = {}
            for name, tree in trees.items():
                out[n][name] = {"load": moves.load_average(), **first_call(tree, n, timeout)}
                print(n, name, out[n][name], flush=True)
    return out


def render_first_calls(before: str, results: dict) -> str:
    rows = [f"| points | {before}: wall s / CPU s / lowered / XLA s | this tree | load (1, 5, 15 min) |",
            "|---|---|---|---|"]
    for n, r in results.items():
        cells = [r[k].get("error") or f"{r[k]['wall_s']:.1f} / {r[k]['cpu_s']:.1f} / {r[k]['lowered']} / "
                 f"{r[k]['xla_s']:.1f}" for k in ("before", "after")]
        load = " -> ".join(", ".join(f"{v:.1f}" for v in r[k]["load"]) for k in ("before", "after"))
        rows.append(f"| {n} | {cells[0]} | {cells[1]} | {load} |")
    return "\n".join(rows)


def render(results: dict) -> str:
    rows = []
    for n, r in results["sizes"].items():
        rows.append(f"\n### {n} points ({r['rows']} rows, capacity {r['capacity']})\n")
        if r["note"]:
            rows.append(f"{r['note']}\n")
        rows.append("| program | lower CPU s | compile CPU s | HLO instructions |\n|---|---|---|---|")
        for name, p in r["programs"].items():
            rows.append(f"| {name} | {p['lower_cpu_s']:.2f} | {p['compile_cpu_s']:.2f} | {p['instructions']} |")
        for name, p in r["programs"].items():
            if "hlo" not in p:
                continue
            rows.append(f"\n| innermost dpppl source line ({name}) | HLO instructions |\n|---|---|")
            rows += [f"| {w} | {k} |" for w, k in p["hlo"]["by_line"]]
            rows.append(f"\n| dpppl function on the stack ({name}, inclusive) | HLO instructions |\n|---|---|")
            rows += [f"| {w} | {k} |" for w, k in p["hlo"]["by_function"]]
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="600,10000", help="comma-separated numbers of points")
    parser.add_argument("--hlo", action="store_true", help="break each program's HLO down by source line")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default=None, help="a JSON file for the results")
    parser.add_argument("--first-call", metavar="REV", help="first calls of revision REV and of this tree instead")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per process (--first-call)")
    args = parser.parse_args(argv)
    if args.first_call:
        results = first_calls(args.first_call, [int(n) for n in args.points.split(",")], args.timeout)
        print(render_first_calls(args.first_call, results))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)
        return
    from dpppl import config  # noqa: PLC0415

    results = {"load_before": moves.load_average(), "sizes": {}}
    with config.x64():
        for n in args.points.split(","):
            results["sizes"][n] = measure(int(n), args.hlo, args.top)
    results["load_after"] = moves.load_average()
    print(f"load average before/after: {results['load_before']} / {results['load_after']}")
    print(render(results))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
