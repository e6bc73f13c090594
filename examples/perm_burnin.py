"""Burn-in curves in the manner of Liang, Jordan & Taskar (2007), Fig. 3(a)-(h).

The log joint log p(x, C) against wall time for GIBBS, GIBBS+SPLITMERGE, GIBBS+PERM and
GIBBS+SPLITMERGE+PERM on the W1 workload (Gaussian mixture, means ~ N(0, 2I), identity
covariance; model DP(1) with N(mu, I), mu ~ N(0, 100 I)), from a chosen start. The
hybrids interleave their moves with even shares of CPU time (paper, sec. 5); the perm
move is the burn-in form of sec. 5.1, random projections with the beam
(``warmup_permutation="projection"``, ``beam_epsilon=1e-32``). The dashed line is the
log joint of the true labels. Several seeds give a band (min-max, as the paper's error
bars). Traces are driven by :class:`MoveTrace` of ``benchmarks/bench_perm.py``.

The paper's claims to compare with (sec. 5.1): the samplers with permutation moves are
largely insensitive to the start; GIBBS stays stuck from a single cluster; GIBBS+SPLITMERGE
catches up slowly and degrades with many initial clusters; gains grow with dimension.

    python examples/perm_burnin.py --quick                  # N=2000, D=10, 1 seed, ~2 min
    python examples/perm_burnin.py --n 10000 --dim 40 --init single --seeds 3 --budget 120
    python examples/perm_burnin.py --n 10000 --dim 40 --init sequential --seeds 5 --budget 300

writes ``perm_burnin_<init>_D<dim>.png`` (and a JSON of the traces) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import dpppl  # noqa: E402
from bench_perm import SAMPLERS, MoveTrace, w1_model  # noqa: E402

COLOURS = {"gibbs": "tab:blue", "gibbs+splitmerge": "tab:orange", "gibbs+perm": "tab:green",
           "gibbs+splitmerge+perm": "tab:red"}


def run(n, dim, init, seeds, budget, many_clusters):
    x, labels = dpppl.datasets.load("w1", n=n, dim=dim)
    model = w1_model()
    lp_true = dpppl.log_joint(model, x, labels)
    traces = {}
    for name, moves in SAMPLERS.items():
        traces[name] = []
        for seed in range(seeds):
            init_labels = None
            if init == "many":
                init_labels = np.random.default_rng(seed).integers(0, many_clusters, n)
            trace = MoveTrace(model, x, moves, init="labels" if init == "many" else init, seed=seed,
                              init_labels=init_labels).run(budget)
            print(f"{name} seed {seed}: lp {trace.trace['lp'][-1]:.1f} (true {lp_true:.1f}), "
                  f"K={trace.k()}, {trace.elapsed:.1f} s", flush=True)
            traces[name].append({k: trace.trace[k] for k in ("seconds", "lp", "num_clusters")})
    return lp_true, traces


def plot(lp_true, traces, title, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    lo_all = []
    for name, runs in traces.items():
        grid = np.linspace(0, max(r["seconds"][-1] for r in runs), 200)
        # each run's log joint after every move, interpolated on a common time grid; min-max over seeds
        curves = np.array([np.interp(grid, r["seconds"], r["lp"]) for r in runs])
        ax.plot(grid, np.median(curves, axis=0), color=COLOURS[name], label=name.upper())
        ax.fill_between(grid, curves.min(axis=0), curves.max(axis=0), color=COLOURS[name], alpha=0.2)
        lo_all.append(np.percentile(curves, 10))
    ax.axhline(lp_true, color="k", ls="--", lw=1, label="true labels")
    ax.set_ylim(min(lo_all), lp_true + 0.02 * abs(lp_true))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("log p(x, C)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="N=2000, D=10, one seed, 15 s per sampler")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--dim", type=int, default=40)
    p.add_argument("--init", choices=["single", "sequential", "many"], default="single")
    p.add_argument("--many-clusters", type=int, default=500, help="clusters of a 'many' start")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget", type=float, default=120.0, help="run seconds per sampler and seed")
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.dim, args.seeds, args.budget = 2000, 10, 1, 15.0
    lp_true, traces = run(args.n, args.dim, args.init, args.seeds, args.budget, args.many_clusters)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"perm_burnin_{args.init}_D{args.dim}" + ("_quick" if args.quick else "")
    title = (f"W1: N={args.n}, D={args.dim}, 40 clusters, {args.init} start, "
             f"{args.seeds} seed(s) (min-max band)")
    plot(lp_true, traces, title, out / f"{stem}.png")
    (out / f"{stem}.json").write_text(json.dumps({"lp_true": lp_true, "traces": traces, "args": vars(args)}))
    print(f"wrote {out / (stem + '.png')}")


if __name__ == "__main__":
    main()
