"""Where `kernel="nuts"`'s first call spends its CPU (issue 35), program by program, and the floor
NumPyro's own NUTS sets.

In this process, with the persistent compilation cache off and `jax_log_compiles` on:

- **dpppl**: one `dpppl.sample(model, x, kernel="nuts", num_warmup=5, num_samples=5, num_chains=2,
  seed=0)` on `bench_compile.data` for `models/gaussian_niw.dp` (`--points` points, default 600);
- **floor** (`--floor`): a bare NumPyro NUTS, no dpppl, on a model of 2 parameters (the mean and
  log scale of a Normal, `--points` observations), `MCMC(NUTS(model), 5, 5, num_chains=2,
  chain_method="sequential", jit_model_args=True)`: what NumPyro's tree building and adaptation
  cost to compile whatever the model. In JAX's default float32 (a float64 run under
  `jax.enable_x64` did not finish in 10 CPU minutes here: not understood, not pursued).

Every program JAX traces and compiles is listed with its tracing, lowering and XLA compile wall
seconds (JAX's log lines) and the process CPU seconds (`time.process_time()`: XLA's compiler
threads count, the machine's other load does not) spent from the end of the program's previous
event to the end of its compile; with `--dump-hlo`, the number of instructions of each program's
optimized HLO and, for the largest `--programs`, the instructions per innermost source line of
dpppl or NumPyro on the stack that made them (`bench_move_compile`'s stack-frame tables).

    nice -n 10 python benchmarks/bench_nuts_compile.py --floor --dump-hlo

With `--pieces`, instead: the pieces of the NUTS program (`dpppl.run.nuts.run_chains`), each jitted
and compiled alone with dpppl's compile options plus `LIGHT_OPTIONS` (as `kernel="nuts"` compiles
it), their trace + lower and XLA compile process CPU seconds and optimized HLO instructions: the
potential energy and its gradient at given unconstrained values (NUTS has one copy of it in its
transition, the init one more), a draw's `assignment` and its `lp` (the record of a kept draw), and
the whole program (2 chains, 5 + 5 iterations); `--floor` adds the same one-program design on
the bare 2-parameter model:

    nice -n 5 python benchmarks/bench_nuts_compile.py --pieces --floor
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time

os.environ["DPPPL_COMPILATION_CACHE"] = "off"  # every program is compiled by XLA here
DUMP = None
if "--dump-hlo" in sys.argv[1:]:  # XLA reads its flags once, when the backend starts: set before JAX
    DUMP = tempfile.mkdtemp(prefix="dpppl-nuts-hlo-")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={DUMP}"  # the large ones only
                               " --xla_dump_hlo_module_re=jit_(run_chains|_fori_collect_loop|program|_postprocessed"
                               "|_draws_lp)").strip()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]  # this tree's dpppl, then the benchmarks
import jax  # noqa: E402
from bench_compile import data  # noqa: E402
from bench_move_compile import _tables, hlo_instructions, logged_programs  # noqa: E402  (every frame into HLO locations; its own --hlo dump is not ours)
from harness import load_average  # noqa: E402

MODEL = "models/gaussian_niw.dp"


def programs(rows: list) -> list[dict]:
    """One row per compiled program of `ProgramTimes.rows`, in the order their compiles finished: its name,
    trace / lower / compile wall seconds and the process CPU from the previous program's compile to its own."""
    compiled = sorted((r for r in rows if r["cpu_at_end"] is not None), key=lambda r: r["cpu_at_end"])
    out, last = [], 0.0
    for r in compiled:
        out.append({"name": r["program"], "trace": r["tracing"], "lower": r["lower"] or 0.0, "compile": r["XLA"],
                    "cpu_s": r["cpu_at_end"] - last})
        last = r["cpu_at_end"]
    return out


def by_source(text: str) -> collections.Counter:
    """Instructions of an optimized HLO module `text` per innermost dpppl or NumPyro frame on the
    stack that made them (`file:line function`; "(jax only)" when neither is on it)."""
    files, functions, locations, frames = _tables(text)
    out = collections.Counter()
    for line in hlo_instructions(text):
        found = re.search(r"stack_frame_id=(\d+)", line)
        frame_id, where = int(found.group(1)) if found else 0, "(jax only)"
        while frame_id in frames:
            frame = frames[frame_id]
            loc = locations[frame["file_location_id"]]
            file = files[loc["file_name_id"]]
            cut = max(file.rfind("dpppl/"), file.rfind("numpyro/"))
            if cut >= 0 and "/benchmarks/" not in file:
                where = f"{file[cut:]}:{loc['line']} {functions[loc['function_name_id']]}"
                break
            frame_id = frame.get("parent_frame_id")
        out[where] += 1
    return out


def dumped_sizes(since: float) -> dict:
    """{dumped module file: (instructions, text)} of the optimized modules XLA dumped after `since`."""
    out = {}
    for path in glob.glob(os.path.join(DUMP, "*.cpu_after_optimizations.txt")):
        if os.path.getmtime(path) >= since:
            with open(path) as f:
                text = f.read()
            out[os.path.basename(path)] = (len(hlo_instructions(text)), text)
    return out


def run_dpppl(points: int):
    import dpppl  # noqa: PLC0415

    x = data(MODEL, 0, points)
    dpppl.sample(os.path.join(ROOT, MODEL), x, kernel="nuts", num_warmup=5, num_samples=5, num_chains=2, seed=0,
                 progress_bar=False)


def run_floor(points: int):
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import numpyro  # noqa: PLC0415
    import numpyro.distributions as dist  # noqa: PLC0415
    from numpyro.infer import MCMC, NUTS  # noqa: PLC0415

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        log_sigma = numpyro.sample("log_sigma", dist.Normal(0.0, 1.0))
        with numpyro.plate("point", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, jnp.exp(log_sigma)), obs=y)

    y = np.random.default_rng(0).normal(1.0, 2.0, points)
    mcmc = MCMC(NUTS(model), num_warmup=5, num_samples=5, num_chains=2, chain_method="sequential",
                progress_bar=False, jit_model_args=True)
    mcmc.run(jax.random.key(0), y)
    mcmc.get_samples()


def pieces(points: int, floor: bool) -> list[str]:
    """`--pieces`: one table row per piece of the NUTS program, each compiled alone (module docstring)."""
    import functools  # noqa: PLC0415

    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import numpyro  # noqa: PLC0415
    import numpyro.distributions as dist  # noqa: PLC0415
    from numpyro.infer import NUTS  # noqa: PLC0415
    from numpyro.infer.util import initialize_model  # noqa: PLC0415

    import dpppl  # noqa: PLC0415
    from dpppl.config import x64  # noqa: PLC0415
    from dpppl.core.compiled import LIGHT_OPTIONS, compiler_options  # noqa: PLC0415
    from dpppl.models.sites import canonical_in_jit  # noqa: PLC0415
    from dpppl.run import nuts  # noqa: PLC0415
    from dpppl.run.driver import bind_data  # noqa: PLC0415

    options = {**compiler_options(), **LIGHT_OPTIONS}
    truncation, rows = 20, []

    def compile_row(name, fn, *args):
        start = time.process_time()
        lowered = jax.jit(fn, compiler_options=options).lower(*args)
        traced = time.process_time()
        program = lowered.compile()
        size = len(hlo_instructions(program.as_text()))
        rows.append(f"| {name} | {traced - start:.2f} | {time.process_time() - traced:.2f} | {size:,} |")

    with x64():
        _, target = bind_data(dpppl.load(os.path.join(ROOT, MODEL)), data(MODEL, 0, points))
        model, keys = nuts.conditioned_model(truncation), jax.random.key_data(jax.random.split(jax.random.key(0), 2))
        leaves, tree = jax.tree.flatten(target)
        key = jax.random.key(0)

        def info(leaves):
            return initialize_model(key, model, dynamic_args=True, model_args=(jax.tree.unflatten(tree, leaves),))

        z = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(lambda l: info(l).param_info.z, leaves))

        def energy_and_gradient(leaves, z):
            return jax.value_and_grad(info(leaves).potential_fn(jax.tree.unflatten(tree, leaves)))(z)

        def assignment(leaves, z):
            return info(leaves).postprocess_fn(jax.tree.unflatten(tree, leaves))(z)["assignment"]

        def lp(leaves, z):
            bound = jax.tree.unflatten(tree, leaves)
            sites = info(leaves).postprocess_fn(bound)(z)
            labels = canonical_in_jit(sites["assignment"].astype(jnp.int32), truncation)
            return bound.lp_of_draw(labels, sites, nuts.model_truncation(bound, truncation))

        def whole(leaves, keys):
            return nuts.run_chains(jax.tree.unflatten(tree, leaves), keys, truncation=truncation, num_warmup=5,
                                   num_samples=5, thinning=1, progress=False)

        compile_row("potential energy and gradient", energy_and_gradient, leaves, z)
        compile_row("a draw's `assignment`", assignment, leaves, z)
        compile_row("a draw's `assignment` and `lp`", lp, leaves, z)
        compile_row("the whole program (`run_chains`, 2 chains, 5 + 5)", whole, leaves, keys)
        if floor:
            def bare(y):
                mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
                log_sigma = numpyro.sample("log_sigma", dist.Normal(0.0, 1.0))
                with numpyro.plate("point", y.shape[0]):
                    numpyro.sample("y", dist.Normal(mu, jnp.exp(log_sigma)), obs=y)

            def bare_chains(y, keys):
                def chain(key):
                    kernel = NUTS(bare)
                    state = kernel.init(key, 5, None, (y,), {})
                    return jax.lax.fori_loop(0, 10, lambda i, s: kernel.sample(s, (y,), {}), state).z
                return jax.lax.map(chain, jax.random.wrap_key_data(keys))

            compile_row("bare NumPyro NUTS, 2 parameters, same design", functools.partial(bare_chains),
                        np.random.default_rng(0).normal(1.0, 2.0, points), keys)
    return [f"\n### Pieces of the NUTS program, {MODEL}, {points} points, truncation {truncation}, options {options} "
            f"(load average {load_average()})\n",
            "| piece | trace + lower CPU s | XLA compile CPU s | optimized HLO instructions |", "|---|---|---|---|",
            *rows]


def measure(label: str, run, points: int, top: int, largest: int) -> list[str]:
    jax.clear_caches()
    start, load = time.time(), load_average()
    with logged_programs() as log:
        run(points)
    total = time.process_time() - log.start
    rows = programs(log.rows)
    lines = [f"\n### {label}, {points} points: {total:.2f} process CPU s, {len(rows)} programs compiled "
             f"(load average {load} -> {load_average()})\n",
             "| program | trace s | lower s | XLA compile s | process CPU s |", "|---|---|---|---|---|"]
    shown = [r for r in rows if r["cpu_s"] >= 0.1]
    for r in shown:
        lines.append(f"| {r['name']} | {r.get('trace', 0):.2f} | {r.get('lower', 0):.2f} | {r.get('compile', 0):.2f} "
                     f"| {r['cpu_s']:.2f} |")
    rest = [r for r in rows if r["cpu_s"] < 0.1]
    lines.append(f"| {len(rest)} others (< 0.1 CPU s each) | | | | {sum(r['cpu_s'] for r in rest):.2f} |")
    if DUMP is not None:
        sizes = dumped_sizes(start)
        lines += ["", "| dumped optimized module | HLO instructions |", "|---|---|"]
        ranked = sorted(sizes.items(), key=lambda kv: -kv[1][0])
        lines += [f"| {name} | {n} |" for name, (n, _) in ranked if n >= 50]
        for name, (n, text) in ranked[:largest]:
            lines += ["", f"| innermost dpppl / NumPyro line ({name}, {n} instructions) | HLO instructions |",
                      "|---|---|"]
            lines += [f"| {where} | {count} |" for where, count in by_source(text).most_common(top)]
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=600)
    parser.add_argument("--floor", action="store_true", help="also a bare NumPyro NUTS on 2 parameters (first)")
    parser.add_argument("--floor-only", action="store_true", help="the bare NumPyro NUTS alone")
    parser.add_argument("--dump-hlo", action="store_true", help="HLO instructions per program and per source line")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--programs", type=int, default=2, help="how many of the largest programs to break down")
    parser.add_argument("--pieces", action="store_true", help="compile CPU of the NUTS program's pieces")
    args = parser.parse_args(argv)
    if args.pieces:
        print("\n".join(pieces(args.points, args.floor)))
        return
    lines = []
    if args.floor or args.floor_only:
        lines += measure("bare NumPyro NUTS, 2 parameters", run_floor, args.points, args.top, args.programs)
    if not args.floor_only:
        lines += measure(f"dpppl nuts on {MODEL}", run_dpppl, args.points, args.top, args.programs)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
