"""Where the time of a collapsed-Gibbs sweep goes, JAX loop beside native sweep (issue 18, items 1-2).

Every figure is taken for both paths of the gibbs kernel, ``native=False`` (the JAX loop of
``dpppl.models.seating``) and ``native=True`` (one C++ call per sweep through XLA's FFI,
``dpppl.models.native_seating``), the repeats alternating between them so that the load of
the machine (shared with other jobs; the 1-minute load average is recorded with each row)
weighs on both alike. Three figures per workload and path, after a warm-up call (compile
time apart):

- ``sweep``: the compiled sweep alone, ``S`` steps of ``kernel="gibbs"`` (with the alpha move
  when the model has one, as ``dpppl.sample`` runs it) in one ``jax.jit`` over a
  ``lax.fori_loop``: no recording, no host round trip. Reported per sweep and as point
  updates per second.
- ``sample``: ``dpppl.sample(..., kernel="gibbs")`` end to end for ``S`` and ``S / 5``
  iterations (second call, warm); the difference gives the marginal cost per sweep of the
  runner (records, chunks) and the intercept its fixed cost per call.
- ``bare``: the same fori_loop over a body that only draws the visiting order and does
  one scalar update per point (the per-iteration floor of XLA's compiled loop on CPU).

Workloads: galaxies (82 points, ``models/gaussian_niw.dp``) and a W2-like set (10,000 x 2,
10 clusters, DP(1) NIW, started from the true labels), with 1 and 4 chains (four chains: one
vmapped call per sweep, whose chains the native sweep runs on threads when the work is large).
Also per row: CPU time of the process over the timed ``dpppl.sample`` calls (``sample_cpu_s``),
which the load inflates less than wall time; and for several chains the native compiled sweep
with its chains on one thread (``one_thread_sweep_ms``, ``DPPPL_NATIVE_THREADS=1``) beside the
default (issue 18, item 2).

Usage::

    python benchmarks/bench_gibbs_sweep.py                # ~1-2 minutes on 2 cores
    python benchmarks/bench_gibbs_sweep.py --quick
    python benchmarks/bench_gibbs_sweep.py --hlo          # also counts ops in the compiled sweep

Set ``PYTHONPATH`` to the tree to measure (the script prints which ``dpppl`` it imported); to
compare two trees, run it alternately with each (e.g. a ``git archive`` of the base commit).

Results go to ``benchmarks/results/gibbs_sweep.json`` and ``.md`` (``--out`` to change the name).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import dpppl
from dpppl.core import native
from dpppl.kernels.base import build
from dpppl.models.init import initial_states
from harness import load_average, write_json

ROOT = Path(__file__).resolve().parent.parent


def workloads(quick: bool):
    galaxies, _ = dpppl.datasets.load("galaxies")
    niw_model = dpppl.load(str(ROOT / "models" / "gaussian_niw.dp"))
    x2, labels2 = dpppl.datasets.gaussian_mixture(10_000, 2, 10, mean_scale=25.0, covariance="random", seed=0)
    w2_model = dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())
    return [("galaxies", niw_model, galaxies, "sequential", 1000 if quick else 5000),
            ("w2-10k", w2_model, x2, labels2, 4 if quick else 20)]


def timed(fn, *args):
    tic = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - tic


def timed_cpu(fn):
    """(wall, process CPU) seconds of `fn()`."""
    tic, cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn())
    return time.perf_counter() - tic, time.process_time() - cpu


def over_chains(per_chain):
    """jit of `per_chain` over a leading chain axis as the runner runs it: vmapped, or
    unbatched for one chain."""
    def run(states, keys, x):
        if keys.shape[0] > 1:
            return jax.vmap(per_chain, in_axes=(0, 0, None))(states, keys, x)
        return jax.tree.map(lambda a: a[None], per_chain(jax.tree.map(lambda a: a[0], states), keys[0], x))
    return jax.jit(run)


def sweep_loop(kern, num_sweeps):
    """A fori_loop of `num_sweeps` kernel steps per chain."""
    def per_chain(state, key, x):
        def body(t, s):
            return kern.step(jax.random.fold_in(key, t), s, x)[0]
        return jax.lax.fori_loop(0, num_sweeps, body, state)
    return over_chains(per_chain)


def bare_loop(num_sweeps):
    """The loop shape of a sweep with no arithmetic: a permutation and one scalar
    read-modify-write of the labels per point."""
    def per_chain(z, key, x):
        def sweep(t, z):
            order = jax.random.permutation(jax.random.fold_in(key, t), z.shape[0])

            def point(j, z):
                i = order[j]
                return z.at[i].set((z[i] + 1) % 7)
            return jax.lax.fori_loop(0, z.shape[0], point, z)
        return jax.lax.fori_loop(0, num_sweeps, sweep, z)
    return over_chains(per_chain)


def hlo_counts(compiled_text: str) -> dict:
    ops = ["while", "fusion", "dynamic-update-slice", "dynamic-slice", "copy", "scatter", "gather",
           "sort", "custom-call", "log", "lgamma", "exponential"]
    return {op: len(re.findall(rf" {op}\(", compiled_text)) for op in ops}


PATHS = {"jax": False, "native": True}


def measure(name, model, x, init, num_sweeps, chains, repeats, hlo):
    """Rows for both paths of one workload and chain count, repeats interleaved."""
    bound = model.bind(x)
    n = bound.num_points
    keys = jax.random.split(jax.random.key(0), chains)
    state = initial_states(bound, init, keys, None)
    xj = jnp.asarray(bound.x)
    run_keys = jax.random.split(jax.random.key(1), chains)
    short = max(1, num_sweeps // 5)
    rows, loops, samplers = {}, {}, {}
    for path, flag in PATHS.items():
        kern = build("gibbs", bound, native=flag)
        tic = time.perf_counter()
        compiled = sweep_loop(kern, num_sweeps).lower(state, run_keys, xj).compile()
        rows[path] = {"workload": name, "path": path, "n": n, "chains": chains, "sweeps": num_sweeps,
                      "compile_s": time.perf_counter() - tic, "capacity": int(state.stats.n.shape[-1])}
        if hlo:
            rows[path]["hlo"] = hlo_counts(compiled.as_text())
        compiled(state, run_keys, xj)
        loops[path] = compiled
        args = dict(kernel="gibbs", num_chains=chains, progress_bar=False, seed=1, native=flag,
                    init=init if isinstance(init, str) else np.asarray(init))
        samplers[path] = {s: (lambda s=s, args=args: dpppl.sample(model, x, num_warmup=0, num_samples=s, **args))
                          for s in (num_sweeps, short)}
        for run in samplers[path].values():  # compile both chunk lengths' first calls
            run()
    if chains > 1:  # the native sweep's chains on one thread, beside the default (item 2)
        os.environ["DPPPL_NATIVE_THREADS"] = "1"
        try:
            loops["native-1-thread"] = sweep_loop(build("gibbs", bound, native=True), num_sweeps).lower(
                state, run_keys, xj).compile()
        finally:
            del os.environ["DPPPL_NATIVE_THREADS"]
        loops["native-1-thread"](state, run_keys, xj)
    bare = bare_loop(num_sweeps).lower(state.z, run_keys, xj).compile()
    bare(state.z, run_keys, xj)
    times = {p: {"sweep": [], "sample": [], "sample_cpu": [], "sample_short": [], "load": []} for p in PATHS}
    bares = []
    for _ in range(repeats):
        bares.append(timed(bare, state.z, run_keys, xj))
        for path in PATHS:
            t = times[path]
            t["load"].append(load_average()[0])
            t["sweep"].append(timed(loops[path], state, run_keys, xj))
            wall, cpu = timed_cpu(samplers[path][num_sweeps])
            t["sample"].append(wall)
            t["sample_cpu"].append(cpu)
            t["sample_short"].append(timed_cpu(samplers[path][short])[0])
        if "native-1-thread" in loops:
            one = times.setdefault("native-1-thread", {"sweep": [], "load": []})
            one["load"].append(load_average()[0])
            one["sweep"].append(timed(loops["native-1-thread"], state, run_keys, xj))
    bare_s = min(bares)
    one = times.pop("native-1-thread", None)
    if one is not None:
        rows["native"]["one_thread_sweep_ms"] = 1e3 * min(one["sweep"]) / num_sweeps
        rows["native"]["one_thread_repeats"] = one
    for path, t in times.items():
        sweep_s, long_s, short_s = min(t["sweep"]), min(t["sample"]), min(t["sample_short"])
        marginal = (long_s - short_s) / (num_sweeps - short)
        rows[path].update({
            "sweep_loop_s": sweep_s, "sweep_ms": 1e3 * sweep_s / num_sweeps,
            "sweep_updates_per_s": chains * n * num_sweeps / sweep_s,
            "bare_loop_s": bare_s, "bare_ms": 1e3 * bare_s / num_sweeps,
            "sample_s": long_s, "sample_cpu_s": min(t["sample_cpu"]), "sample_short_s": short_s,
            "sample_short_sweeps": short,
            "sample_marginal_ms": 1e3 * marginal, "sample_fixed_s": short_s - short * marginal,
            "sample_updates_per_s": chains * n * num_sweeps / long_s,
            "sample_updates_per_s_per_chain": n * num_sweeps / long_s,
            "all_repeats": t, "load_average": load_average(),
        })
    return list(rows.values())


def markdown(rows, command) -> str:
    """The rows as a table, with the native/JAX ratios of each workload and chain count."""
    out = ["# Collapsed Gibbs sweep: JAX loop vs native sweep (issue 18)", "",
           f"`{command}`", "",
           "Best of the repeats (alternating paths); upd/s = point updates per second (all chains); "
           "load = 1-minute load average of the 2-core machine when the row was timed (other jobs share it).", "",
           "| workload | chains | path | compiled sweep ms | upd/s (compiled) | dpppl.sample s | upd/s (sample) "
           "| per chain | CPU s | marginal ms/sweep | fixed s | load |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['workload']} ({r['n']} pts, {r['sweeps']} sweeps) | {r['chains']} | {r['path']} "
                   f"| {r['sweep_ms']:.3f} | {r['sweep_updates_per_s']:,.0f} | {r['sample_s']:.3f} "
                   f"| {r['sample_updates_per_s']:,.0f} | {r['sample_updates_per_s_per_chain']:,.0f} "
                   f"| {r['sample_cpu_s']:.3f} | {r['sample_marginal_ms']:.3f} | {r['sample_fixed_s']:.3f} "
                   f"| {min(r['all_repeats']['load']):.1f}-{max(r['all_repeats']['load']):.1f} |")
    out += ["", "Native / JAX (dpppl.sample wall time, and compiled sweep):", ""]
    for r in rows:
        if r["path"] != "native":
            continue
        j = next(q for q in rows if q["path"] == "jax" and q["workload"] == r["workload"]
                 and q["chains"] == r["chains"])
        out.append(f"- {r['workload']}, {r['chains']} chain(s): dpppl.sample {j['sample_s'] / r['sample_s']:.1f}x "
                   f"faster, compiled sweep {j['sweep_ms'] / r['sweep_ms']:.1f}x faster")
    threaded = [r for r in rows if "one_thread_sweep_ms" in r]
    if threaded:
        out += ["", f"Native sweep, chains of one call on one thread vs on up to {native.num_threads()} "
                "(`DPPPL_NATIVE_THREADS`; compiled sweep, ms per sweep of all chains):", ""]
        for r in threaded:
            out.append(f"- {r['workload']}, {r['chains']} chains: 1 thread {r['one_thread_sweep_ms']:.3f} ms, "
                       f"default {r['sweep_ms']:.3f} ms ({r['one_thread_sweep_ms'] / r['sweep_ms']:.2f}x)")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chains", type=int, nargs="+", default=[1, 4])
    p.add_argument("--only", default=None, help="run one workload (galaxies or w2-10k)")
    p.add_argument("--hlo", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    print(f"dpppl from {Path(dpppl.__file__).parent}", flush=True)
    rows = []
    for name, model, x, init, sweeps in workloads(args.quick):
        if args.only and name != args.only:
            continue
        for chains in args.chains:
            for row in measure(name, model, x, init, sweeps, chains, args.repeats, args.hlo):
                rows.append(row)
                print(f"{name:9s} {row['path']:6s} chains={chains} N={row['n']} sweeps={sweeps}: compiled sweep "
                      f"{row['sweep_ms']:.3f} ms ({row['sweep_updates_per_s']:,.0f} upd/s), bare loop "
                      f"{row['bare_ms']:.3f} ms; dpppl.sample {row['sample_s']:.3f} s "
                      f"(CPU {row['sample_cpu_s']:.3f} s, "
                      f"marginal {row['sample_marginal_ms']:.3f} ms/sweep, fixed {row['sample_fixed_s']:.3f} s, "
                      f"{row['sample_updates_per_s']:,.0f} upd/s); load {row['load_average'][0]:.2f}"
                      + (f"\n   hlo {row['hlo']}" if args.hlo else ""), flush=True)
    name = args.out or ("gibbs_sweep-quick" if args.quick else "gibbs_sweep")
    path = write_json(name, {"rows": rows})
    given = argv if argv is not None else sys.argv[1:]
    command = "PYTHONPATH=. python benchmarks/bench_gibbs_sweep.py " + " ".join(given)
    path.with_suffix(".md").write_text(markdown(rows, command.strip()))
    print(f"wrote {path} and {path.with_suffix('.md')}")


if __name__ == "__main__":
    main()
