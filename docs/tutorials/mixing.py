"""Tutorial 3: why one-at-a-time Gibbs gets stuck, and how split-merge and permutation moves fix it.

Draws the figures of docs/tutorials/mixing.md:

* mixing_data.png     - the first two of ten coordinates of six well-separated clusters;
* mixing_lp.png       - log joint against iteration from a one-cluster start, per kernel;
* mixing_k.png        - number of clusters against iteration, per kernel;
* mixing_moves.png   - accepted splits and merges; the K of the clusterings the perm move draws;

and writes what it prints to mixing.txt beside them (the page includes docs/figures/mixing.txt).

Run:  python docs/tutorials/mixing.py [--quick] [--out DIR | --docs]

(with the virtual environment active, or as ``.venv/bin/python ...``). The figures go
to ``./dpppl-figures`` or ``--out DIR``; ``--docs`` redraws the committed ones in
``docs/figures/`` (full runs only).
"""

from __future__ import annotations

import argparse
import time
import importlib.util
import sys
from pathlib import Path

if not all(importlib.util.find_spec(m) for m in ("dpppl", "matplotlib")):
    sys.exit("dpppl or matplotlib is not installed for this Python: run the tutorial with the virtual "
             "environment's, `source .venv/bin/activate` first or `.venv/bin/python docs/tutorials/mixing.py`")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import dpppl  # noqa: E402

FIGURES = Path(__file__).resolve().parent.parent / "figures"
KERNELS = ("gibbs", "gibbs+splitmerge", "gibbs+perm-move")


def save(fig, out: Path, name: str) -> None:
    fig.tight_layout()
    fig.savefig(out / name, dpi=90)
    plt.close(fig)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short runs (for CI)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=Path("dpppl-figures"),
                       help="directory for the PNG figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const", const=FIGURES,
                       help="redraw the documentation's committed figures in docs/figures/")
    args = p.parse_args(argv)
    if args.quick and args.out.resolve() == FIGURES.resolve():
        p.error("--docs redraws the documentation's figures: run it without --quick")
    args.out.mkdir(parents=True, exist_ok=True)
    iterations, chains = (25, 2) if args.quick else (400, 4)

    # Six clusters in ten dimensions, unit covariance, means ~ N(0, 4 I): far apart.
    x, truth = dpppl.datasets.gaussian_mixture(120, 10, 6, mean_scale=4.0, seed=1)
    # A known-covariance model whose prior on the means is broad (tau2 = 100): a new
    # cluster's predictive density for a point is low, so Gibbs rarely opens one.
    model = dpppl.DPMixture(alpha=1.0, component=dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=100.0))
    true_lp = dpppl.log_joint(model, x, truth)

    fig, ax = plt.subplots(figsize=(4.5, 4))
    ax.scatter(x[:, 0], x[:, 1], c=truth, cmap="tab10", s=12)
    ax.set_xlabel("x[:, 0]")
    ax.set_ylabel("x[:, 1]")
    ax.set_title("6 clusters (2 of 10 coordinates)")
    save(fig, args.out, "mixing_data.png")

    runs, printed = {}, [f"{chains} chains x {iterations} iterations from one cluster (seed 0)"]
    for kernel in KERNELS:
        tic = time.perf_counter()
        # num_warmup=0 keeps the burn-in in the record: we want to watch it.
        runs[kernel] = dpppl.sample(model, x, kernel=kernel, num_warmup=0, num_samples=iterations,
                                    num_chains=chains, seed=0, init="single", progress_bar=False)
        lp = runs[kernel].sample_stats["lp"].values
        reached = [int(np.argmax(chain >= true_lp - 1.0)) if np.any(chain >= true_lp - 1.0) else None
                   for chain in lp]
        print(f"{kernel:<18} {time.perf_counter() - tic:6.1f} s (compilation included)")
        final_k = runs[kernel].posterior["num_clusters"].values[:, -1].tolist()
        printed.append(f"{kernel:<18} first iteration within 1 nat of the true clustering's log joint, per chain: "
                       f"{', '.join('never' if r is None else str(r) for r in reached)}; K at the end: {final_k}")

    ax = dpppl.plots.plot_log_joint(runs)
    ax.axhline(true_lp, color="black", linestyle="--", linewidth=1, label="true clustering")
    ax.set_xlabel("iteration (from one cluster)")
    ax.legend()
    save(ax.figure, args.out, "mixing_lp.png")

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for colour, (kernel, idata) in zip(("tab:blue", "tab:orange", "tab:green"), runs.items()):
        k = idata.posterior["num_clusters"].values
        for c, chain in enumerate(k):
            ax.plot(chain, color=colour, drawstyle="steps-post", alpha=0.8, linewidth=0.9,
                    label=kernel if c == 0 else None)
    ax.axhline(6, color="black", linestyle="--", linewidth=1, label="true K")
    ax.set_xlabel("iteration (from one cluster)")
    ax.set_ylabel("number of clusters")
    ax.legend()
    save(fig, args.out, "mixing_k.png")

    # What the big moves did: accepted splits and merges; what the perm move proposed.
    stats_sm = runs["gibbs+splitmerge"].sample_stats
    stats_perm = runs["gibbs+perm-move"].sample_stats
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for c in range(chains):
        axes[0].plot(np.cumsum(stats_sm["splitmerge_split_accepted"].values[c]), color="tab:orange",
                     label="splits" if c == 0 else None)
        axes[0].plot(np.cumsum(stats_sm["splitmerge_merge_accepted"].values[c]), color="tab:purple",
                     label="merges" if c == 0 else None)
        axes[1].plot(stats_perm["perm-move_proposed_clusters"].values[c], color="tab:green", alpha=0.7,
                     drawstyle="steps-post", label="K of the proposed clustering" if c == 0 else None)
    axes[0].set_title("gibbs+splitmerge: accepted proposals (cumulative)")
    axes[1].set_title("gibbs+perm-move: clusterings drawn by the dynamic program")
    axes[1].axhline(6, color="black", linestyle="--", linewidth=1, label="true K")
    for ax in axes:
        ax.set_xlabel("iteration")
        ax.legend()
    save(fig, args.out, "mixing_moves.png")
    accepted = stats_sm["splitmerge_split_accepted"].values
    printed.append(f"gibbs+splitmerge: accepted splits per chain {accepted.sum(axis=1).tolist()}, "
                   f"of which in the first 10 iterations {accepted[:, :10].sum(axis=1).tolist()}; "
                   f"perm moves accepted: {stats_perm['perm-move_accepted'].values.mean():.3f}")
    print("\n".join(printed))
    (args.out / "mixing.txt").write_text("\n".join(printed) + "\n", encoding="utf-8")
    print(f"figures and mixing.txt in {args.out}")


if __name__ == "__main__":
    main()
