"""Where one iteration of the README jobs' chunk goes, warm (issue 35): each part of the default
`gibbs+splitmerge` step alone, and the runner's own chunk.

One data set per run (`--data faithful`: `models/gaussian_niw.dp` on Old Faithful, alpha random, 272
points padded to 320 rows as the runner pads them; `--data galaxies`: `models/galaxies.dp`, m, tau and
alpha random, 82 points padded to 96). The two chains start as `dpppl.sample` starts them (sequential
seating) and run `--burn` iterations of the default kernel; then each part below runs `--iterations`
times from there as one jitted `fori_loop` of both chains (`vmap`, as the runner runs two chains), in
dpppl's float64 context, called once to compile and `--repeats` times timed (best kept): microseconds per
iteration of both chains, wall and process CPU.

Parts: each move alone (`gibbs`, the native sweep; `splitmerge`, native allocation and its JAX
remainder; `splitmerge (JAX)`, the JAX allocation loop; `alpha`; `hyperparameters` where the model has
them); `default step`, the composed kernel's step; `log joint`, the recorded `lp` alone (the collapsed
log joint from the state's statistics); `keys`, the runner's per-iteration key work alone
(`fold_in(chain_key, t)` and the hybrid's `split`); `runner chunk`, the runner's sampling chunk
(`dpppl.run.runner._chunk_function`: step, `lp`, records), called with `CHUNK_LENGTH` iterations; and
`runner chunk, 1 chain` (the unbatched program the runner runs for one chain), for the cost of `vmap`.

    nice -n 10 python benchmarks/bench_iteration_parts.py --data faithful --out iteration_parts_faithful

Writes `benchmarks/results/<out>.json` and `.md`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load_average, write_json, RESULTS_DIR  # noqa: E402

MODELS = {"faithful": "models/gaussian_niw.dp", "galaxies": "models/galaxies.dp"}


def _time(fn, args, iterations: int, repeats: int) -> dict:
    """Microseconds per iteration of `fn(*args)` (which runs `iterations`): first call (compile) CPU
    seconds, then the best of `repeats` timed calls, wall and CPU."""
    import jax

    cpu = time.process_time()
    jax.block_until_ready(fn(*args))
    first_cpu = time.process_time() - cpu
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(*args))
        best_wall = min(best_wall, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return {"first_call_cpu_s": first_cpu, "us_per_iteration": 1e6 * best_wall / iterations,
            "cpu_us_per_iteration": 1e6 * best_cpu / iterations}


def measure(data: str, iterations: int, burn: int, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import dpppl
    from dpppl.config import x64
    from dpppl.kernels import base as kernel_base
    from dpppl.models.init import initial_states
    from dpppl.run import runner

    bound = dpppl.load(MODELS[data], data=dpppl.datasets.load(data)[0])
    out = {"data": data, "points": bound.num_points}
    with x64():
        program, (kern, kernel_key, make) = runner._program("gibbs+splitmerge", bound, {})
        x = jnp.asarray(program.x)
        out["rows"] = int(x.shape[0])
        init_keys, chain_keys = runner._chain_keys(0, 2)
        states = initial_states(program, "sequential", init_keys, None)
        if kern.init is not None:
            states = jax.vmap(kern.init, in_axes=(0, None))(states, x)
        keys = jax.vmap(jax.random.wrap_key_data)(chain_keys)

        def looped(step):
            def run(key, state, target):
                def body(t, s):
                    return step(jax.random.fold_in(key, t), s, target)
                return jax.lax.fori_loop(0, iterations, body, state)
            return jax.jit(jax.vmap(run, in_axes=(0, 0, None)))

        def kernel_step(name, **options):
            def step(key, state, target):
                parts = {"gibbs": lambda b: kernel_base.entry("gibbs").factory(b, **options),
                         "splitmerge": lambda b: kernel_base.entry("splitmerge").factory(b, **options)}
                if name in parts:
                    kernel = parts[name](target)
                    if target.moves:  # at the state's random hyperparameters, as the composed kernel runs it
                        kernel = kernel_base.at_state_hyperparameters(
                            kernel, lambda hyper: parts[name](target.at_hyperparameters(hyper)))
                elif name == "default":
                    kernel = make(target)
                else:
                    kernel = kernel_base._PRIOR_MOVES[name](target)
                if kernel.init is not None and name != "default":
                    raise SystemExit(f"{name} carries extras: not profiled alone")
                return kernel.step(key, state, target.x)[0]
            return step

        burn_fn = looped(kernel_step("default"))
        for _ in range(max(1, burn // iterations)):
            states = jax.block_until_ready(burn_fn(keys, states, program))
        out["clusters"] = [int(np.sum(np.asarray(n) > 0.5)) for n in states.stats.n]
        parts = {"gibbs": kernel_step("gibbs"), "splitmerge": kernel_step("splitmerge"),
                 "splitmerge (JAX)": kernel_step("splitmerge", native=False),
                 **{m: kernel_step(m) for m in (*program.prior.moves, *program.moves)},
                 "default step": kernel_step("default")}
        rows = {}
        for name, step in parts.items():
            rows[name] = _time(looped(step), (keys, states, program), iterations, repeats)
            print(f"{name}: {rows[name]['us_per_iteration']:.1f} us/iteration", flush=True)

        def lp_loop(key, state, target):
            kernel = make(target)

            def body(t, acc):  # alpha moved by 0 * acc: lp is evaluated every iteration, not hoisted
                return acc + kernel.log_joint(state._replace(alpha=state.alpha + 0.0 * acc))
            return jax.lax.fori_loop(0, iterations, body, jnp.zeros((), x.dtype))
        rows["log joint"] = _time(jax.jit(jax.vmap(lp_loop, in_axes=(0, 0, None))), (keys, states, program),
                                  iterations, repeats)

        def key_loop(key, state, target):
            def body(t, acc):
                k = jax.random.fold_in(key, t)
                parts = jax.random.split(k, len(kern.parts) if kern.parts else 1)
                return acc ^ jax.random.key_data(parts).sum(dtype=jnp.uint32)
            return jax.lax.fori_loop(0, iterations, body, jnp.zeros((), jnp.uint32))
        rows["keys"] = _time(jax.jit(jax.vmap(key_loop, in_axes=(0, 0, None))), (keys, states, program),
                             iterations, repeats)
        on_device = jax.device_put(program)
        length = runner.chunk_length(2, program.num_points)
        capacity = int(states.stats.n.shape[-1])
        chunk = runner._chunk_function(make, kern, kernel_key, length, capacity)
        rows["runner chunk"] = _time(chunk, (states, chain_keys, np.int32(0), np.int32(length), np.bool_(False),
                                             on_device), length, repeats)
        one = jax.tree.map(lambda a: a[:1], states)
        rows["runner chunk, 1 chain"] = _time(chunk, (one, chain_keys[:1], np.int32(0), np.int32(length),
                                                      np.bool_(False), on_device), length, repeats)
        for name in ("log joint", "keys", "runner chunk", "runner chunk, 1 chain"):
            print(f"{name}: {rows[name]['us_per_iteration']:.1f} us/iteration", flush=True)
    out["parts"] = rows
    return out


def table(doc: dict) -> str:
    lines = [f"# One iteration of `gibbs+splitmerge` on {doc['data']}, warm, by part (issue 35)", "",
             f"`python benchmarks/bench_iteration_parts.py --data {doc['data']}` (git "
             f"{doc['machine']['git_revision']}; load {doc['load_at_start']} at start, "
             f"{doc['machine']['load_average_1_5_15']} at end): {doc['points']} points ({doc['rows']} rows), "
             f"clusters per chain {doc['clusters']}; each part a jitted `fori_loop` of {doc['iterations']} "
             "iterations of both chains (vmapped), best of the repeats. The parts overlap (the default step "
             "holds the moves; the runner chunk holds the step, `lp` and the records).", "",
             "| part | us per iteration (2 chains), wall | CPU | first call CPU s |", "| --- | --- | --- | --- |"]
    for name, row in doc["parts"].items():
        lines.append(f"| {name} | {row['us_per_iteration']:.1f} | {row['cpu_us_per_iteration']:.1f} | "
                     f"{row['first_call_cpu_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=sorted(MODELS), default="faithful")
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--burn", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="results file stem in benchmarks/results")
    args = parser.parse_args(argv)
    doc = {"load_at_start": load_average(), "iterations": args.iterations,
           **measure(args.data, args.iterations, args.burn, args.repeats)}
    out = args.out or f"iteration_parts_{args.data}"
    path = write_json(out, doc)
    import json
    doc["machine"] = json.loads(path.read_text())["machine"]
    (RESULTS_DIR / f"{out}.md").write_text(table(doc))
    print(table(doc))


if __name__ == "__main__":
    main()
