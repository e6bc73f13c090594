"""XLA compile options per kernel (issue 35, item 2): compile CPU seconds and run time of a kernel's chunk.

For each kernel, a new process (persistent cache off) starts `dpppl.sample` on the model and data
`bench_compile.py` uses (N = 600, 2 chains) and stops it at its first chunk of steps (the warmup
chunk: for `subcluster` the published sampler's, the kept chunk is another program of the same
size), keeping the chunk's function and arguments. It lowers the chunk once, then for each set of
compile options (`--options`, names below) compiles it (`Lowered.compile(options)`), counting the
process CPU seconds of that call (XLA's threads included), and runs the compiled chunk for
`--iterations` steps `--repeats` times, the option sets taking turns so the machine's load falls on
all alike; the run cell is the median process CPU milliseconds per step (both chains).

    python benchmarks/bench_compile_options.py --kernels gibbs+splitmerge,subcluster

Writes `benchmarks/results/compile_options.json` and `.md` (`--merge` keeps kernels measured before).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_compile import KERNELS, _load  # noqa: E402
from harness import load_average, machine_info, write_table  # noqa: E402

OPTIONS = {
    "xla": {},  # XLA's own defaults (LLVM level 2)
    "O1": {"xla_backend_optimization_level": 1},
    "O0": {"xla_backend_optimization_level": 0},
    "split1": {"xla_cpu_parallel_codegen_split_count": 1},
    "noexp": {"xla_llvm_disable_expensive_passes": True},
    "nofusionemit": {"xla_cpu_use_fusion_emitters": False},
    "O1nofusion": {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False},
}

DRIVER = r"""
import json, resource, statistics, sys
def cpu():
    a = resource.getrusage(resource.RUSAGE_SELF)
    return a.ru_utime + a.ru_stime
import jax, numpy as np
import dpppl
from dpppl.config import x64
from dpppl.core import compiled
from dpppl.datasets.synthetic import mallows_mixture, moving_blobs

kernel, path, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
iterations, repeats = int(sys.argv[4]), int(sys.argv[5])
caught = {}
call = compiled._Persisted._call

class Caught(Exception):
    pass

def catch(self, *args):
    if self.key[0] == "chunk":
        caught.update(fn=self.fn, args=args)
        raise Caught
    return call(self, *args)

compiled._Persisted._call = catch
if path.endswith("rankings.dp"):
    x = mallows_mixture(1, num_clusters=3, per_cluster=200, seed=0)[0]
elif path.endswith("ddp.dp"):
    x = moving_blobs(5, 3, 40, seed=0)[0]
else:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 1.0, (200, 2)) for c in rng.uniform(-6, 6, (3, 2))])
try:
    dpppl.sample(path, x, kernel=kernel, num_warmup=5, num_samples=5, num_chains=2, seed=0, progress_bar=False)
except Caught:
    pass
out = {}
with x64():
    states, chain_keys, start, _, target = caught["args"]
    leaves, tree = jax.tree.flatten((states, chain_keys, start, np.int32(iterations), target))
    flat = jax.jit(lambda *ls: caught["fn"](*jax.tree.unflatten(tree, ls)))
    used = cpu()
    lowered = flat.lower(*leaves)
    out["lower_cpu_s"] = cpu() - used
    programs = {}
    for name, opts in options.items():
        used = cpu()
        programs[name] = lowered.compile(opts)
        out[name] = {"compile_cpu_s": cpu() - used, "run_ms": []}
        jax.block_until_ready(programs[name](*leaves))
    for _ in range(repeats):
        for name, program in programs.items():
            used = cpu()
            jax.block_until_ready(program(*leaves))
            out[name]["run_ms"].append(1e3 * (cpu() - used) / iterations)
    for name in options:
        out[name]["run_ms_per_step"] = statistics.median(out[name].pop("run_ms"))
print("RESULT " + json.dumps(out))
"""


def measure(kernel: str, options: dict, iterations: int, repeats: int, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO, DPPPL_COMPILATION_CACHE="off", CI="1")
    try:
        done = subprocess.run([sys.executable, "-c", DRIVER, kernel, KERNELS[kernel], json.dumps(options),
                               str(iterations), str(repeats)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1][len("RESULT "):])


def render(results: dict) -> str:
    names = list(OPTIONS)
    lines = ["# Issue 35, item 2: XLA compile options per kernel (the first chunk program)", ""]
    for run in results["runs"]:
        m = run["machine"]
        lines += [f"`{run['command']}`", "", f"{m['cpu_count']} CPUs ({m['cpu_model']}), JAX {m['versions']['jax']}, "
                  f"load average {_load(run['load_start'])} at start -> {_load(run['load_end'])} at end, "
                  f"{run['seconds']:.0f} s; "
                  f"{run['iterations']} steps x {run['repeats']} runs per option set.", ""]
    lines += ["Options: " + "; ".join(f"**{k}** `{v}`" for k, v in OPTIONS.items()) + ".", "",
              "Each cell: compile CPU s / run CPU ms per step (median), and the ratio to **xla** (XLA's defaults).",
              "", "| kernel | lower CPU s | " + " | ".join(names) + " |",
              "| --- | --- | " + " | ".join("---" for _ in names) + " |"]
    for kernel, r in results["cells"].items():
        if "error" in r:
            lines.append(f"| {kernel} | {r['error']} |" + " |" * len(names))
            continue
        base = r.get("xla")
        cells = []
        for name in names:
            c = r.get(name)
            if c is None:
                cells.append("-")
                continue
            ratio = (f" ({c['compile_cpu_s'] / base['compile_cpu_s']:.2f}x / "
                     f"{c['run_ms_per_step'] / base['run_ms_per_step']:.2f}x)") if base and name != "xla" else ""
            cells.append(f"{c['compile_cpu_s']:.1f} / {c['run_ms_per_step']:.2f}{ratio}")
        lines.append(f"| {kernel} | {r['lower_cpu_s']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", default=",".join(k for k in KERNELS if k != "nuts"))
    p.add_argument("--options", default=",".join(OPTIONS), help=f"subset of {', '.join(OPTIONS)}")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--timeout", type=float, default=3000)
    p.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "compile_options"))
    p.add_argument("--merge", action="store_true")
    args = p.parse_args(argv)
    kernels = args.kernels.split(",")
    bad = [k for k in kernels if k not in KERNELS or k == "nuts"] + [o for o in args.options.split(",")
                                                                     if o not in OPTIONS]
    if bad:
        p.error(f"unknown kernel(s) or option set(s): {', '.join(bad)}")
    options = {name: OPTIONS[name] for name in args.options.split(",")}
    start, load_start = time.perf_counter(), load_average()
    cells = {}
    for kernel in kernels:
        cells[kernel] = measure(kernel, options, args.iterations, args.repeats, args.timeout)
        print(kernel, json.dumps(cells[kernel]), flush=True)
    run = {"command": "python benchmarks/bench_compile_options.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "load_start": load_start, "load_end": load_average(),
           "seconds": time.perf_counter() - start, "iterations": args.iterations, "repeats": args.repeats}
    results = {"runs": [run], "cells": cells}
    if args.merge and os.path.exists(args.out + ".json"):
        with open(args.out + ".json") as f:
            old = json.load(f)
        results = {"runs": old["runs"] + [run], "cells": {**old["cells"], **cells}}
    write_table(args.out, results, render(results))


if __name__ == "__main__":
    main()
