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
set) and ``mallows_fig6.json`` into ``--out`` (default ``docs/figures``); ``--quick`` writes
``mallows_fig6-quick.*`` instead.
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
from dpppl.inference import initial_states
from dpppl.kernels.base import build
from dpppl.kernels.state import grow

SAMPLERS = {"Beta-Gibbs": "mallows-beta", "Slice-Gibbs": "mallows-slice"}


def model_for(n_items: int) -> dpppl.Model:
    return dpppl.DPMixture(1.0, dpppl.GeneralizedMallows(n_items))


def trace(kernel: str, bound, truth, iterations: int, seed: int, **options):
    """Run ``kernel`` sweep by sweep as :func:`dpppl.sample` does (keys ``fold_in(chain_key, t)``,
    capacity doubled and the sweep re-run on overflow); each capacity is compiled ahead
    and not timed. Returns (seconds after each sweep, VI after each sweep, compile s)."""
    kern = build(kernel, bound, **options)
    x = jnp.asarray(bound.x)
    n = x.shape[0]
    k_init, k_run = jax.random.split(jax.random.key(seed))
    chain_key = jax.random.split(k_run, 1)[0]
    state = jax.tree.map(lambda a: a[0], initial_states(bound, "sequential", None, jax.random.split(k_init, 1)))
    state = jax.jit(kern.init)(state, x)
    compiled, compile_s = {}, 0.0

    def step_for(state):
        nonlocal compile_s
        cap = int(state.stats.n.shape[-1])
        if cap not in compiled:
            tic = time.perf_counter()
            compiled[cap] = jax.jit(kern.step).lower(chain_key, state, x).compile()
            compile_s += time.perf_counter() - tic
        return compiled[cap]

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


def run(datasets, replicates, iterations, per_cluster, seed=0, log=print):
    results = {}
    for d in datasets:
        for rep in range(replicates):
            data, truth, _, _ = dpppl.datasets.mallows_mixture(d, per_cluster=per_cluster, seed=seed + 100 * d + rep)
            bound = model_for(data.n_items).bind(data)
            for label, kernel in SAMPLERS.items():
                secs, vi, comp = trace(kernel, bound, truth, iterations, seed=seed + rep)
                results.setdefault(f"{d}/{label}", []).append({"seconds": secs.tolist(), "vi": vi.tolist(),
                                                                "compile_s": comp})
                log(f"data set {d} replicate {rep} {label:11s}: VI {vi[0]:.3f} -> {vi[-1]:.4f} after "
                    f"{iterations} sweeps, {secs[-1]:.1f} s ({secs[-1] / iterations:.3f} s/sweep; compile {comp:.1f} s)")
    return results


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
            axes[1, col].semilogy(secs, vi, color=colours[label], label=label)
        axes[0, col].set_title(f"Data set {d}")
        axes[0, col].set_xlabel("iterations")
        axes[1, col].set_xlabel("seconds")
        for row in range(2):
            axes[row, col].set_ylabel("VI distance")
            axes[row, col].set_ylim(floor / 2, 5)
    axes[0, 0].legend()
    fig.suptitle(f"VI distance to the true clustering (mean of {len(results[f'{datasets[0]}/Beta-Gibbs'])} "
                 f"replicates; values below {floor:g} drawn at {floor:g})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: data set 1, N = 500, 15 sweeps, 2 replicates")
    ap.add_argument("--datasets", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=250)
    ap.add_argument("--per-cluster", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "figures"))
    args = ap.parse_args(argv)
    if args.quick:
        args.datasets, args.replicates, args.iterations, args.per_cluster = [1], 2, 15, 50
    os.makedirs(args.out, exist_ok=True)
    results = run(args.datasets, args.replicates, args.iterations, args.per_cluster, args.seed)
    stem = "mallows_fig6-quick" if args.quick else "mallows_fig6"   # a smoke run keeps the docs' figure
    plot(results, args.datasets, os.path.join(args.out, stem + ".png"))
    summary = {"config": vars(args), "load_average": os.getloadavg(), "results": results}
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump(summary, f)
    return results


if __name__ == "__main__":
    main()
