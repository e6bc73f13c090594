"""What the compiled chunks of `gibbs+perm` and `sbgibbs+labelswap+labelpermute` are made of (issue 35).

`benchmarks/bench_move_compile.py` measures the README job's kernel (`gibbs+splitmerge`); this
script runs its measurement (`measure`: the runner's sampling chunk for 2 chains and each move
alone, lowered and compiled in this process with the persistent cache off, compile CPU from
`time.process_time()`, HLO instructions of the optimized program, and with `--hlo` the optimized
HLO attributed to the innermost dpppl source line of each instruction) on the kernels and data of
`benchmarks/bench_compile.py`:

- **gibbs+perm** (`gibbs+splitmerge+perm-every`): `models/gaussian_niw.dp` (alpha random) on
  three Gaussian blobs in 2-D;
- **sbgibbs+labelswap+labelpermute**: `models/stick_breaking.dp` on the same points;

at `--points` points (bench_compile.py's data: seed 0, 600 points by default; several sizes
comma-separated):

    nice -n 10 python benchmarks/bench_compile_permsb.py --hlo --points 600,10000
    nice -n 10 python benchmarks/bench_compile_permsb.py --kernels gibbs+perm --points 600 --out /tmp/p.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]
import bench_move_compile as moves  # noqa: E402  (reads --hlo, sets XLA_FLAGS before JAX starts)
from bench_compile import data  # noqa: E402
from harness import load_average  # noqa: E402

KERNELS = {"gibbs+perm": "models/gaussian_niw.dp",
           "sbgibbs+labelswap+labelpermute": "models/stick_breaking.dp"}


def moves_of(kernel, extras):
    """(name, move, its own extras) for every move of `kernel` (`bench_move_compile.parts_of` with
    each part's extras: a hybrid that carries values holds them in `HybridExtras.parts`)."""
    if not kernel.parts:
        return [(kernel.name, kernel, extras)]
    own = getattr(extras, "parts", None)
    return [item for i, part in enumerate(kernel.parts)
            for item in moves_of(part, extras if own is None else own[i])]


def measure(job: str, hlo: bool, top: int) -> dict:
    """`bench_move_compile.measure` for kernels whose moves carry values: the chunk, then each
    move alone on the chains' states with its own extras (`Kernel.init`, as
    `dpppl.run.runner.sample_partition` puts them)."""
    import jax  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from dpppl.core.compiled import compiler_options  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    program, make, kern, key, states, chain_keys = moves.setup(job)
    if kern.init is not None:
        states = jax.vmap(make(program).init, in_axes=(0, None))(states, program.x)
    capacity = int(states.stats.n.shape[-1])
    out = {"points": program.num_points, "capacity": capacity, "moves": {}, "hlo": {}}
    chunk = runner._chunk_function(make, kern, key, False, runner.chunk_length(2, program.num_points), capacity)
    lower, cpu, compiled = moves.compile_cpu(chunk.jitted, states, chain_keys, np.int32(0), np.int32(1), program)
    out["chunk"] = {"lower_cpu_s": lower, "compile_cpu_s": cpu, "instructions": len(moves.hlo_instructions(
        compiled.as_text()))}
    if hlo:
        out["hlo"]["chunk"] = moves.breakdown("chunk", top)
    keys = jax.random.split(jax.random.key(1), 2)
    for index, (name, _, _) in enumerate(moves_of(kern, states.extras)):
        def one(keys, states, target, index=index):
            _, move, extras = moves_of(make(target), states.extras)[index]
            return jax.vmap(lambda k, s: move.step(k, s, target.x))(keys, states._replace(extras=extras))
        one.__name__ = "move_" + re.sub(r"\W+", "_", name).strip("_")  # the dumped module's name
        jitted = jax.jit(one, compiler_options=compiler_options() or None)  # the chunk's options
        lower, cpu, compiled = moves.compile_cpu(jitted, keys, states, program)
        out["moves"][name] = {"lower_cpu_s": lower, "compile_cpu_s": cpu,
                              "instructions": len(moves.hlo_instructions(compiled.as_text()))}
        if hlo:
            out["hlo"][name] = moves.breakdown(one.__name__, top)
    return out


class ProgramTimes(logging.Handler):
    """Process CPU seconds per compiled program from `jax_log_compiles`' messages: tracing (up to
    "Finished tracing": the CPU since the message before it, so it includes running the programs
    and the host work between the two), lowering (up to "Finished jaxpr to MLIR"), XLA's compile (up
    to "Finished XLA compilation")."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.rows, self.last = [], time.process_time()

    def emit(self, record):
        now, text = time.process_time(), record.getMessage()
        found = re.match(r"Finished (tracing|jaxpr to MLIR|XLA compilation)\D*?(jit\(\S+\)|\S+ for)", text)
        if found:
            phase, name = found.group(1).split()[0], found.group(2).removesuffix(" for")
            if phase == "tracing":
                self.rows.append({"program": f"jit({name})", "tracing": 0.0, "jaxpr": 0.0, "XLA": 0.0})
            if self.rows:
                self.rows[-1][phase] = now - self.last
        self.last = time.process_time()


def programs(kernel: str, n: int) -> dict:
    """The first `dpppl.sample` call of `benchmarks/bench_compile.py` (5 + 5 iterations, 2 chains)
    in this process: the CPU seconds of each program it traces, lowers and compiles, and of the call."""
    import dpppl  # noqa: PLC0415
    import jax  # noqa: PLC0415

    handler = ProgramTimes()
    logging.getLogger("jax").addHandler(handler)
    logging.getLogger("jax").propagate = False
    jax.config.update("jax_log_compiles", True)
    start = time.process_time()
    handler.last = start
    dpppl.sample(os.path.join(moves.ROOT, KERNELS[kernel]), data(KERNELS[kernel], 0, n), kernel=kernel,
                 num_warmup=5, num_samples=5, num_chains=2, seed=0, progress_bar=False)
    jax.config.update("jax_log_compiles", False)
    logging.getLogger("jax").removeHandler(handler)
    return {"call_cpu_s": time.process_time() - start, "programs": handler.rows}


def render_programs(job: str, r: dict) -> str:
    rows = [f"\n### {job}: the first call's programs (call: {r['call_cpu_s']:.2f} CPU s)\n",
            "| program | until traced CPU s (runs included) | lower CPU s | XLA compile CPU s |\n|---|---|---|---|"]
    rows += [f"| {p['program']} | {p['tracing']:.2f} | {p['jaxpr']:.2f} | {p['XLA']:.2f} |" for p in r["programs"]]
    return "\n".join(rows)


def first_calls(kernels: list, sizes: list, before: str, timeout: float) -> dict:
    """`benchmarks/bench_compile.py`'s first call (a new process, empty persistent cache, 5 + 5
    iterations, 2 chains) at each of `sizes` points, git revision `before` and this tree one after
    the other: {kernel: {N: {tree: driver result}}}, printed as they come."""
    import tempfile  # noqa: PLC0415

    import bench_compile  # noqa: PLC0415

    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="dpppl-bench-before-") as tmp:
        trees = {"before": bench_compile.export(before, tmp), "after": moves.ROOT}
        for kernel in kernels:
            out[kernel] = {}
            for n in sizes:
                bench_compile.CALLS["first"] = ("first call", 0, n)  # the driver's data: seed 0, n points
                cells = bench_compile.measure(trees, [kernel], ["first"], ["cold"], timeout)[kernel]
                out[kernel][n] = {tree: {**cell["cold"], "load": load_average()} for tree, cell in cells.items()}
    return out


def render_first_calls(results: dict) -> str:
    rows = ["| kernel | N | before: wall s / CPU s / programs | after | CPU after / before | load after |",
            "|---|---|---|---|---|---|"]
    for kernel, by_n in results.items():
        for n, cell in by_n.items():
            b, a = (cell[t].get("first", {}) for t in ("before", "after"))
            if not b or not a:
                errors = (cell[t].get("error", "") for t in ("before", "after"))
                rows.append(f"| {kernel} | {n} | {' | '.join(errors)} | | |")
                continue
            rows.append(f"| {kernel} | {n} | {b['wall_s']:.1f} / {b['cpu_s']:.1f} / {b['lowered']} | "
                        f"{a['wall_s']:.1f} / {a['cpu_s']:.1f} / {a['lowered']} | {a['cpu_s'] / b['cpu_s']:.2f}x | "
                        f"{', '.join(f'{v:.1f}' for v in cell['after']['load'])} |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--points", default="600", help="comma-separated numbers of points")
    parser.add_argument("--hlo", action="store_true", help="break the chunk's HLO down by source line")
    parser.add_argument("--first-call", metavar="REV",
                        help="instead: bench_compile.py's cold first call at each --points, git REV and this tree")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per process of --first-call")
    parser.add_argument("--programs", action="store_true",
                        help="instead: the CPU of each program of a first `dpppl.sample` call (persistent cache off)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", default=None, help="a JSON file for the results")
    args = parser.parse_args(argv)
    from dpppl import config  # noqa: PLC0415

    results = {"load_before": load_average(), "jobs": {}}
    if args.first_call:
        results["first_calls"] = first_calls(args.kernels.split(","), [int(p) for p in args.points.split(",")],
                                             args.first_call, args.timeout)
        print(render_first_calls(results["first_calls"]))
    with config.x64():
        for kernel in args.kernels.split(",") if not args.first_call else []:
            for n in (int(p) for p in args.points.split(",")):
                job = f"{kernel} N={n}"
                moves.JOBS[job] = (os.path.join(moves.ROOT, KERNELS[kernel]), data(KERNELS[kernel], 0, n))
                if args.programs:
                    results["jobs"][job] = programs(kernel, n)
                    print(render_programs(job, results["jobs"][job]), flush=True)
                    continue
                moves.SPEC = kernel  # what `setup` builds and `render` names
                results["jobs"][job] = measure(job, args.hlo, args.top)
                print(moves.render({"jobs": {job: results["jobs"][job]}}), flush=True)
    results["load_after"] = load_average()
    print(f"load average before/after: {results['load_before']} / {results['load_after']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
