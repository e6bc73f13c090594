"""First-call compile cost of a kernel at other numbers of points (issue 35: "<= 5 CPU-seconds at any N").

`bench_compile.py`'s driver and trees (a git revision exported as "before", a source tree as
"after"), with one call: the first `dpppl.sample` of the process (5 + 5 iterations, 2 chains,
seed 0) on `bench_compile.py`'s data for the kernel's model file drawn with N points, with an empty
persistent compilation cache. Each cell: wall s / process CPU s (`getrusage` of the process and its
children, XLA's compiler threads included) / programs lowered / XLA compile wall s (JAX's
`backend_compile_duration` events). The CPU includes the 10 iterations themselves, which grow with N.

    nice -n 10 python benchmarks/bench_compile_points.py --kernels mallows-slice,ddp+ddpswap --points 600,10000 \\
        --before 9122519 --out benchmarks/results/compile_mallddp_points
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_compile  # noqa: E402
from harness import load_average, write_table  # noqa: E402


def render(results: dict) -> str:
    lines = ["# First call at other numbers of points, before and after", "",
             f"`{results['command']}`", "",
             f"Load average (1, 5, 15 min) {bench_compile._load(results['load_start'])} at start -> "
             f"{bench_compile._load(results['load_end'])} at end, "
             f"{results['seconds']:.0f} s in all. Before: git {results['before']}; after: {results['after']}.", "",
             "Each cell: wall s / process CPU s / programs lowered / XLA compile wall s, the first "
             "`dpppl.sample(path, x, kernel=..., num_warmup=5, num_samples=5, num_chains=2, seed=0)` of a new "
             "process with an empty compilation cache (CPU includes the 10 iterations).", "",
             "| kernel | N | before | after | CPU after / before |", "| --- | --- | --- | --- | --- |"]
    for kernel, by_n in results["cells"].items():
        for n, trees in by_n.items():
            row = []
            for tree in ("before", "after"):
                r = trees[tree].get("cold", {})
                c = r.get(f"first_{n}")
                row.append(r.get("error", "-") if c is None else
                           f"{c['wall_s']:.1f} / {c['cpu_s']:.1f} / {c['lowered']} / {c['xla_s']:.1f}")
            b, a = (trees[t].get("cold", {}).get(f"first_{n}") for t in ("before", "after"))
            ratio = f"{a['cpu_s'] / b['cpu_s']:.2f}x" if a and b else "-"
            lines.append(f"| {kernel} | {n} | " + " | ".join(row) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", default="mallows-slice,ddp+ddpswap")
    p.add_argument("--points", default="600,10000", help="comma-separated numbers of points")
    p.add_argument("--before", default="9122519", help="git revision measured as 'before'")
    p.add_argument("--after", default=bench_compile.REPO, help="source tree measured as 'after'")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--out", required=True, help="results stem: writes STEM.json and STEM.md")
    args = p.parse_args(argv)
    start, load_start = time.perf_counter(), load_average()
    cells: dict = {}
    with tempfile.TemporaryDirectory(prefix="dpppl-bench-before-") as tmp:
        trees = {"before": bench_compile.export(args.before, tmp), "after": os.path.abspath(args.after)}
        for kernel in args.kernels.split(","):
            cells[kernel] = {}
            for n in map(int, args.points.split(",")):
                bench_compile.CALLS[f"first_{n}"] = (f"first call, N = {n}", 0, n)
                cells[kernel][n] = bench_compile.measure(trees, [kernel], [f"first_{n}"], ["cold"],
                                                         args.timeout)[kernel]
    results = {"command": "python benchmarks/bench_compile_points.py " + " ".join(argv or sys.argv[1:]),
               "before": args.before, "after": os.path.abspath(args.after), "load_start": load_start,
               "load_end": load_average(), "seconds": time.perf_counter() - start, "cells": cells}
    write_table(args.out, results, render(results))


if __name__ == "__main__":
    main()
