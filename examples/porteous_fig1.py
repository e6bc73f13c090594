"""Porteous, Ihler, Smyth & Welling (2006), sec. 4 and Fig. 1: label switching in the
stick-breaking representation.

A symmetric data set: 25 points on the left, their mirror images on the right, and one
point at the centre. The model is a stick-breaking mixture with a_i = 5, b_i = 0.1 and a
normal-Wishart prior centred at zero, tuned so that two clusters explain the data. By
symmetry the centre point belongs with the left cluster or with the right one with
probability 0.5 each. Each chain starts with the left cluster at label 1 and the right one
at label 2. Collapsed Gibbs alone (``sbgibbs``) cannot swap the labels of two large
clusters, and label 1 has the larger prior weight (E[pi_1 | Z] > E[pi_2 | Z] for equal
sizes), so the centre is drawn to label 1's side: association about 0.54 / 0.46 in the
paper's setting. With the label moves (``sbgibbs+labelswap+labelpermute``) the chain mixes
over labels and both sides get 0.5.

The association of two points is the frequency with which they share a label (sec. 6).
The figure shows (a) the data, (b) the centre's association with every other point
without the moves, (c) with them; the paper runs 5000 iterations and drops 100.

    python examples/porteous_fig1.py                 # 5000 iterations, 4 chains (about a minute)
    python examples/porteous_fig1.py --quick         # 10 points a side, 400 iterations
    python examples/porteous_fig1.py --quick --component known   # what the test runs

writes ``porteous_fig1.png`` and ``porteous_fig1.json`` (the numbers) under ``--out`` (default
``./dpppl-figures``; ``--docs``: ``docs/figures``, the committed ones).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import dpppl
from dpppl.diagnostics.arviz_compat import partition_group

FIGURES = Path(__file__).resolve().parent.parent / "docs" / "figures"
KERNELS = {"without label moves": "sbgibbs", "with label moves": "sbgibbs+labelswap+labelpermute"}


def symmetric_data(per_side: int = 25, seed: int = 0):
    """Left points around (-1.5, 0), their mirror images, and the centre (0, 0) last."""
    left = np.random.default_rng(seed).normal([-1.5, 0.0], 0.5, size=(per_side, 2))
    right = left * np.array([-1.0, 1.0])
    return np.concatenate([left, right, [[0.0, 0.0]]])


COMPONENTS = {
    # the paper's normal-Wishart prior centred at zero
    "niw": dpppl.families.NormalInverseWishart(mu0=[0.0, 0.0], kappa0=0.05, nu0=5.0, psi0=[[1.0, 0.0], [0.0, 1.0]]),
    # a known isotropic covariance (cheaper; the tests use it): the same symmetry
    "known": dpppl.families.NormalKnownCov(sigma2=0.5, mu0=0.0, tau2=4.0),
}


def model(component="niw"):
    """a_i = 5, b_i = 0.1, components centred at zero."""
    return dpppl.StickBreakingMixture(a=5.0, b=0.1, component=COMPONENTS[component])


def association(z, point):
    """Per chain, the frequency with which ``point`` shares a label with each point:
    shape (chains, N)."""
    return (z == z[:, :, point:point + 1]).mean(axis=1)


def run(per_side=25, iterations=5000, burn=100, chains=4, seed=0, component="niw"):
    x = symmetric_data(per_side)
    n = x.shape[0]
    start = np.r_[np.zeros(per_side, int), np.ones(per_side, int), [0]]  # left: label 1, right: label 2
    out = {}
    for title, kernel in KERNELS.items():
        # one phase (num_warmup=0: one compilation); the first ``burn`` draws are dropped here
        idata = dpppl.sample(model(component), x, kernel=kernel, num_warmup=0, num_samples=iterations,
                             num_chains=chains, seed=seed, init=start, progress_bar=False)
        z = partition_group(idata)["z"].values[:, burn:]
        assoc = association(z, n - 1)
        out[title] = {"kernel": kernel, "association": assoc,
                      "left": assoc[:, :per_side].mean(axis=1), "right": assoc[:, per_side:2 * per_side].mean(axis=1),
                      "num_clusters": float(idata.posterior["num_clusters"].values[:, burn:].mean())}
    return x, out


def plot(x, out, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = x.shape[0]
    per_side = (n - 1) // 2
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    axes[0].scatter(x[:per_side, 0], x[:per_side, 1], s=14, c="tab:blue", label="left")
    axes[0].scatter(x[per_side:-1, 0], x[per_side:-1, 1], s=14, c="tab:orange", label="right (mirror)")
    axes[0].scatter([0], [0], s=60, c="k", marker="*", label="centre")
    axes[0].set_title("(a) symmetric data")
    axes[0].legend(fontsize=7, loc="lower left")
    for ax, (title, res), letter in zip(axes[1:], out.items(), "bc"):
        mean = res["association"].mean(axis=0)[:-1]
        ax.bar(np.arange(n - 1), mean, color=["tab:blue"] * per_side + ["tab:orange"] * per_side)
        ax.axhline(0.5, color="k", lw=0.8, ls="--")
        ax.set_ylim(0, 1)
        ax.set_xlabel("data point (left block, right block)")
        ax.set_ylabel("association with the centre")
        ax.set_title(f"({letter}) {title}: {res['left'].mean():.2f} / {res['right'].mean():.2f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10 points a side, 400 iterations, 4 chains")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=Path("dpppl-figures"),
                       help="directory for the figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const", const=FIGURES,
                       help="write into docs/figures/, redrawing the documentation's committed figures")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--component", choices=sorted(COMPONENTS), default="niw")
    args = p.parse_args(argv)
    if args.quick and args.out.resolve() == FIGURES.resolve():
        p.error("--docs redraws the documentation's figures: run it without --quick")
    args.out.mkdir(parents=True, exist_ok=True)
    per_side, iterations, burn = (10, 400, 50) if args.quick else (25, 5000, 100)
    x, out = run(per_side, iterations, burn, args.chains, args.seed, args.component)
    plot(x, out, args.out / "porteous_fig1.png")
    summary = {title: {"kernel": r["kernel"], "left_per_chain": r["left"].round(4).tolist(),
                       "right_per_chain": r["right"].round(4).tolist(), "left": float(r["left"].mean()),
                       "right": float(r["right"].mean()), "mean_num_clusters": r["num_clusters"]}
               for title, r in out.items()}
    summary["setting"] = {"per_side": per_side, "iterations": iterations, "burn": burn,
                          "chains": args.chains, "seed": args.seed, "component": args.component}
    (args.out / "porteous_fig1.json").write_text(json.dumps(summary, indent=1))
    for title, r in summary.items():
        if title != "setting":
            print(f"{title:>22}: centre with left {r['left']:.3f}, with right {r['right']:.3f} "
                  f"(chains: {r['left_per_chain']}), mean K {r['mean_num_clusters']:.2f}")
    return summary


if __name__ == "__main__":
    main()
