"""What a kernel's compiled chunk is made of (issue 35): compile CPU per move and HLO per source line,
for the kernels and model files of `bench_compile.py` that `bench_move_compile.py` (the README job's
`gibbs+splitmerge`) does not cover: `mallows-slice` on `models/rankings.dp` and `ddp+ddpswap` on
`examples/ddp.dp`, on the data `bench_compile.py` draws (rankings: `mallows_mixture`, 3 clusters of
top-10 rankings of 20 items; DDP: `moving_blobs(5, 3, N / 15)`).

In this process, with the persistent cache off: the sampling chunk the runner compiles (2 chains,
the run's chunk length and initial capacity), each move's vmapped step alone and the recorded `lp`,
each with the process CPU seconds of its lowering and XLA compile and its optimized HLO
instructions; with `--hlo`, the chunk's and each move's instructions per innermost dpppl source line
and per dpppl function on the stack. The measuring, dumping and attribution are
`bench_move_compile.py`'s (imported; its `--hlo` switch sets `XLA_FLAGS` before JAX starts).

    nice -n 10 python benchmarks/bench_kernel_compile.py --kernels mallows-slice,ddp+ddpswap --points 600 --hlo
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_move_compile as moves  # noqa: E402  (sets XLA_FLAGS for --hlo before JAX starts)
import jax  # noqa: E402
import numpy as np  # noqa: E402
from bench_compile import data  # noqa: E402
from harness import load_average  # noqa: E402

MODELS = {"mallows-slice": "models/rankings.dp", "ddp+ddpswap": "examples/ddp.dp"}


def measure(spec: str, n: int, hlo: bool, top: int) -> dict:
    """The chunk, every move alone and `lp` of kernel `spec` on its model with `n` points."""
    import dpppl  # noqa: PLC0415
    from dpppl.core.compiled import compiler_options  # noqa: PLC0415
    from dpppl.dsl.parser import bind_data  # noqa: PLC0415
    from dpppl.models.init import initial_states  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    model = dpppl.load(os.path.join(moves.ROOT, MODELS[spec]))
    _, target = bind_data(model, data(MODELS[spec], 0, n))
    program, (kern, key, make) = runner._program(spec, target, {})
    init_keys, chain_keys = runner._chain_keys(0, 2)
    states = initial_states(program, "sequential", init_keys, None)  # as the runner starts them
    if kern.init is not None:
        states = jax.jit(lambda states, bound: jax.vmap(make(bound).init, in_axes=(0, None))(states, bound.x))(
            states, program)
    capacity = int(states.stats.n.shape[-1])
    length = runner.chunk_length(2, program.num_points)
    out = {"points": int(target.num_points), "rows": int(program.num_points), "capacity": capacity, "moves": {}}
    chunk = runner._chunk_function(make, kern, key, False, length, capacity)
    args = (states, chain_keys, np.int32(0), np.int32(1), program)
    lower, cpu, compiled = moves.compile_cpu(chunk.jitted, *args)
    out["chunk"] = {"lower_cpu_s": lower, "compile_cpu_s": cpu,
                    "instructions": len(moves.hlo_instructions(compiled.as_text()))}
    if hlo:
        out["hlo"] = {"chunk": moves.breakdown("chunk", top)}
    programs = {}
    keys = jax.random.split(jax.random.key(1), 2)
    for index, (name, _) in enumerate(moves.parts_of(kern)):
        def one(keys, states, target, index=index):
            move = moves.parts_of(make(target))[index][1]

            def own(s):  # a hybrid whose parts carry extras holds each part's extras in `parts`
                parts = getattr(s.extras, "parts", None)
                return s if parts is None else s._replace(extras=parts[index])
            return jax.vmap(lambda k, s: move.step(k, own(s), target.x))(keys, states)
        programs[name] = (one, (keys, states, program))

    def lp(states, target):
        return jax.vmap(make(target).log_joint)(states)
    programs["lp (recorded)"] = (lp, (states, program))
    for name, (fn, fn_args) in programs.items():
        fn.__name__ = "move_" + re.sub(r"\W+", "_", name).strip("_")
        jitted = jax.jit(fn, compiler_options=compiler_options() or None)
        lower, cpu, compiled = moves.compile_cpu(jitted, *fn_args)
        out["moves"][name] = {"lower_cpu_s": lower, "compile_cpu_s": cpu,
                              "instructions": len(moves.hlo_instructions(compiled.as_text()))}
        if hlo:
            out["hlo"][name] = moves.breakdown(fn.__name__, top)
    return out


def render(results: dict) -> str:
    """`bench_move_compile.render`'s tables, kernel by kernel (its chunk row names `moves.SPEC`)."""
    parts = []
    for label, r in results["kernels"].items():
        moves.SPEC = label.split(" on ")[0]
        parts.append(moves.render({"jobs": {f"{label}, {r['points']} points": {**r, "points": r["rows"]}}}))
    return "\n".join(parts) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default=",".join(MODELS), help=f"comma-separated subset of {', '.join(MODELS)}")
    parser.add_argument("--points", type=int, default=600, help="points in the data (default: %(default)s)")
    parser.add_argument("--hlo", action="store_true", help="break the optimized HLO down by source line")
    parser.add_argument("--top", type=int, default=25, help="source lines and functions listed (default: %(default)s)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    from dpppl import config  # noqa: PLC0415

    results = {"load_start": load_average(), "kernels": {}}
    with config.x64():  # as `dpppl.sample` runs
        for spec in args.kernels.split(","):
            if spec not in MODELS:
                parser.error(f"unknown kernel {spec!r}; choose from {', '.join(MODELS)}")
            results["kernels"][f"{spec} on {MODELS[spec]}"] = measure(spec, args.points, args.hlo, args.top)
    results["load_end"] = load_average()
    print(render(results))
    print(f"load average (1, 5, 15 min): {results['load_start']} at start -> {results['load_end']} at end")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
