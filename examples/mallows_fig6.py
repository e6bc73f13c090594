"""Reproduce Fig. 6 of Meilă & Chen (2010): Slice-Gibbs vs Beta-Gibbs on synthetic rankings.

Four data sets (sec. 6; :func:`dpppl.datasets.mallows_mixture`): 10 clusters of 500 top-t
rankings of n = 20 items (N = 5000), t = 10 or 19, theta* constant 1 or decreasing. Each
sampler runs from a random start (sequential seating by the CRP prior, as the GM has no
closed-form predictive) and the variation-of-information distance (Meilă 2007, natural
log) between its labels and the true clustering is recorded after every sweep, with the
wall time (compilation excluded). Curves are averaged over replicates.

    python examples/mallows_fig6.py                       # paper: 4 data sets, 10 replicates, 250 sweeps
    python examples/mallows_fig6.py --quick               # smoke run: N = 500, 15 sweeps, 2 replicates
    python examples/mallows_fig6.py --datasets 1 --replicates 3 --iterations 100

Writes ``mallows_fig6.png`` (VI against iteration and against time, one column per data
set) and ``mallows_fig6.json`` (every run's curves, load and a summary; rewritten after every
run, so a stopped run keeps what it finished) into ``--out`` (default ``./dpppl-figures``;
``--docs``: ``docs/figures``);
``--quick`` writes ``mallows_fig6-quick.*`` instead. Replicates can be split between processes
and merged afterwards (how the docs' figure was made; ``benchmarks/results/mallows-fig6.json``):

    python examples/mallows_fig6.py --iterations 100 --replicates 5 --first-replicate 0 --out OUT --name part0
    python examples/mallows_fig6.py --iterations 100 --replicates 5 --first-replicate 5 --out OUT --name part5
    python examples/mallows_fig6.py --plot-from OUT/part0.json OUT/part5.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import dpppl
from dpppl.analysis.metrics import variation_of_information
from dpppl.models.init import initial_states
from dpppl.kernels.base import build
from dpppl.core.state import grow

SAMPLERS = {"Beta-Gibbs": "mallows-beta", "Slice-Gibbs": "mallows-slice"}


def model_for(n_items: int) -> dpppl.models.mixture.Model:
    return dpppl.DPMixture(1.0, dpppl.families.GeneralizedMallows(n_items))


def trace(kernel: str, bound, truth, iterations: int, seed: int, compiled=None, **options):
    """Run ``kernel`` sweep by sweep as :func:`dpppl.sample` does (keys ``fold_in(chain_key, t)``,
    capacity doubled and the sweep re-run on overflow); each capacity is compiled ahead
    and not timed. ``compiled`` (a dict) shares the compiled steps between calls: the step
    depends on the model (n items, nu, r, alpha), not on the data values, so every data set
    and replicate of one shape reuses them. Returns (seconds after each sweep, VI after each
    sweep, compile s spent in this call)."""
    kern = build(kernel, bound, **options)
    x = jnp.asarray(bound.x)
    n = x.shape[0]
    k_init, k_run = jax.random.split(jax.random.key(seed))
    chain_key = jax.random.split(k_run, 1)[0]
    state = jax.tree.map(lambda a: a[0], initial_states(bound, "sequential", jax.random.split(k_init, 1)))
    state = jax.jit(kern.init)(state, x)
    compiled = {} if compiled is None else compiled
    compile_s = 0.0

    def step_for(state):
        nonlocal compile_s
        key = (kernel, tuple(sorted(options.items())), x.shape, int(state.stats.n.shape[-1]))
        if key not in compiled:
            tic = time.perf_counter()
            compiled[key] = jax.jit(kern.step).lower(chain_key, state, x).compile()
            compile_s += time.perf_counter() - tic
        return compiled[key]

    seconds, vi, elapsed = [], [], 0.0
    for t in range(iterations):
        while True:
            step = step_for(state)
            tic = time.perf_counter()
            new, _ = step(jax.random.fold_in(chain_key, t), state, x)
            jax.block_until_ready(new.z)
            spent = time.perf_counter() - tic
            cap = int(state.stats.n.shape[-1])
            if not bool(new.overflow) or cap == n + 1:
                break
            state = grow(state, min(2 * cap, n + 1))
        elapsed += spent
        state = new
        seconds.append(elapsed)
        vi.append(variation_of_information(np.asarray(state.z), truth))
    return np.array(seconds), np.array(vi), compile_s


def run(datasets, replicates, iterations, per_cluster, seed=0, first_replicate=0, log=print, save=None):
    """Replicates outermost (each finished replicate covers every data set), ``save(results)``
    called after every run so that a stopped run keeps what it finished. Replicate ``rep`` of
    data set ``d`` draws its data with seed ``seed + 100 d + rep`` and its chain with ``seed + rep``."""
    results, compiled = {}, {}
    for rep in range(first_replicate, first_replicate + replicates):
        for d in datasets:
            data, truth, _, _ = dpppl.datasets.mallows_mixture(d, per_cluster=per_cluster, seed=seed + 100 * d + rep)
            bound = model_for(data.n_items).bind(data)
            for label, kernel in SAMPLERS.items():
                secs, vi, comp = trace(kernel, bound, truth, iterations, seed=seed + rep, compiled=compiled)
                results.setdefault(f"{d}/{label}", []).append({"replicate": rep, "seconds": secs.tolist(),
                                                                "vi": vi.tolist(), "compile_s": comp,
                                                                "load_average": os.getloadavg()})
                log(f"data set {d} replicate {rep} {label:11s}: VI {vi[0]:.3f} -> {vi[-1]:.4f} after "
                    f"{iterations} sweeps, {secs[-1]:.1f} s ({secs[-1] / iterations:.3f} s/sweep; "
                    f"compile {comp:.1f} s; "
                    f"load {os.getloadavg()[0]:.1f})", flush=True)
                if save is not None:
                    save(results)
    return results


def summarise(results, datasets):
    """Per data set and sampler: replicates, VI at the last sweep (mean, sd, min, max), seconds
    per sweep (the median sweep of each run: median and range over runs; and the mean sweep,
    which load spikes inflate)."""
    table = {}
    for d in datasets:
        for label in SAMPLERS:
            runs = results.get(f"{d}/{label}", [])
            if not runs:
                continue
            last = np.array([r["vi"][-1] for r in runs])
            mean_sweep = np.array([r["seconds"][-1] / len(r["seconds"]) for r in runs])
            per_sweep = np.array([np.median(np.diff(np.r_[0.0, r["seconds"]])) for r in runs])
            table[f"{d}/{label}"] = {"replicates": len(runs), "iterations": len(runs[0]["vi"]),
                                     "vi_mean": float(last.mean()),
                                     "vi_sd": float(last.std(ddof=1)) if len(runs) > 1 else 0.0,
                                     "vi_min": float(last.min()), "vi_max": float(last.max()),
                                     "below_0.1": int((last < 0.1).sum()),
                                     "seconds_per_sweep_median": float(np.median(per_sweep)),
                                     "seconds_per_sweep_range": [float(per_sweep.min()), float(per_sweep.max())],
                                     "seconds_per_sweep_mean": float(mean_sweep.mean())}
    return table


def plot(results, datasets, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(datasets), figsize=(3.6 * len(datasets), 6), squeeze=False)
    colours = {"Beta-Gibbs": "tab:blue", "Slice-Gibbs": "tab:red"}
    floor = 1e-4
    for col, d in enumerate(datasets):
        for label in SAMPLERS:
            runs = results[f"{d}/{label}"]
            vi = np.maximum(np.mean([r["vi"] for r in runs], axis=0), floor)
            secs = np.mean([r["seconds"] for r in runs], axis=0)
            axes[0, col].semilogy(np.arange(1, vi.size + 1), vi, color=colours[label], label=label)
            if len(runs) > 1:   # the spread over replicates: min to max
                lo, hi = (np.maximum(f([r["vi"] for r in runs], axis=0), floor) for f in (np.min, np.max))
                axes[0, col].fill_between(np.arange(1, vi.size + 1), lo, hi, color=colours[label], alpha=0.15, lw=0)
            axes[1, col].semilogy(secs, vi, color=colours[label], label=label)
        axes[0, col].set_title(f"Data set {d} ({len(results[f'{d}/Beta-Gibbs'])} + "
                               f"{len(results[f'{d}/Slice-Gibbs'])} runs)")
        axes[0, col].set_xlabel("iterations")
        axes[1, col].set_xlabel("seconds")
        for row in range(2):
            axes[row, col].set_ylabel("VI distance")
            axes[row, col].set_ylim(floor / 2, 5)
    axes[0, 0].legend()
    fig.suptitle(f"VI distance to the true clustering (mean over replicates, band: min to max; "
                 f"values below {floor:g} drawn at {floor:g})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: data set 1, N = 500, 15 sweeps, 2 replicates")
    ap.add_argument("--datasets", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--first-replicate", type=int, default=0,
                    help="index of the first replicate (to split the replicates between processes)")
    ap.add_argument("--iterations", type=int, default=250)
    ap.add_argument("--per-cluster", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", default="dpppl-figures", help="directory for the figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const",
                       const=os.path.join(os.path.dirname(__file__), "..", "docs", "figures"),
                       help="write into docs/figures/, redrawing the documentation's committed figures")
    ap.add_argument("--name", default="mallows_fig6", help="stem of the output files")
    ap.add_argument("--plot-from", nargs="+", metavar="JSON",
                    help="run nothing: merge the results of these JSON files, plot and summarise them")
    args = ap.parse_args(argv)
    if args.quick:
        args.datasets, args.replicates, args.iterations, args.per_cluster = [1], 2, 15, 50
        args.name = args.name + "-quick"   # a smoke run keeps the docs' figure
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, args.name)
    if args.plot_from:
        results, loads = {}, []
        for fname in args.plot_from:
            with open(fname) as f:
                part = json.load(f)
            loads.append(part["load_average"])
            for k, runs in part["results"].items():
                results.setdefault(k, []).extend(runs)
        datasets = sorted({int(k.split("/")[0]) for k in results})
    else:
        datasets, loads = args.datasets, None

        def save(results):
            with open(path + ".json", "w") as f:
                json.dump({"config": vars(args), "load_average": os.getloadavg(), "results": results,
                           "summary": summarise(results, args.datasets)}, f)

        results = run(args.datasets, args.replicates, args.iterations, args.per_cluster, args.seed,
                      args.first_replicate, save=save)
    complete = [d for d in datasets if all(f"{d}/{lab}" in results for lab in SAMPLERS)]
    plot(results, complete, path + ".png")
    summary = summarise(results, complete)
    if args.plot_from:
        with open(path + ".json", "w") as f:
            json.dump({"config": vars(args), "merged_from": args.plot_from, "load_average": loads,
                       "results": results, "summary": summary}, f)
    for k, v in summary.items():
        print(f"{k:14s} {v['replicates']:2d} runs x {v['iterations']} sweeps: "
              f"VI {v['vi_mean']:.3f} +- {v['vi_sd']:.3f} "
              f"(min {v['vi_min']:.3f}, max {v['vi_max']:.3f}; {v['below_0.1']} below 0.1), "
              f"{v['seconds_per_sweep_median']:.2f} s/sweep")
    return results


if __name__ == "__main__":
    main()
