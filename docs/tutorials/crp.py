"""Tutorial 1: the Chinese restaurant process and stick-breaking, by simulation.

Draws the figures of docs/tutorials/crp.md:

* crp_tables.png         - number of tables K_n as customers arrive, for three alpha, against
                           the exact expectation E[K_n] = sum_{i<=n} alpha / (alpha + i - 1);
* stick_breaking.png     - weights pi_k = V_k prod_{j<k} (1 - V_j), V_k ~ Beta(1, alpha) (DP)
                           and V_k ~ Beta(1 - d, alpha + k d) (Pitman-Yor);
* crp_vs_sticks.png      - the law of K for n points seated by the CRP and for n points drawn
                           i.i.d. from stick-breaking weights: the same law;
* prior_cluster_sizes.png - dpppl.sample_prior on a DP and a Pitman-Yor model;

and writes what it prints to crp.txt beside them (the page includes docs/figures/crp.txt).

Run:  python docs/tutorials/crp.py [--quick] [--out DIR | --docs]

(with the virtual environment active, or as ``.venv/bin/python ...``). The figures go
to ``./dpppl-figures`` or ``--out DIR``; ``--docs`` redraws the committed ones in
``docs/figures/`` (full runs only).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

if not all(importlib.util.find_spec(m) for m in ("dpppl", "matplotlib")):
    sys.exit("dpppl or matplotlib is not installed for this Python: run the tutorial with the virtual "
             "environment's, `source .venv/bin/activate` first or `.venv/bin/python docs/tutorials/crp.py`")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import dpppl  # noqa: E402
from dpppl.simulate import expected_num_clusters  # noqa: E402

FIGURES = Path(__file__).resolve().parent.parent / "figures"


def crp_seating(n: int, alpha: float, rng: np.random.Generator, discount: float = 0.0) -> np.ndarray:
    """Seat n customers by the Chinese restaurant (Pitman-Yor when discount > 0).

    Customer i + 1 (i seated so far, K tables) joins table c with probability
    (|c| - d) / (alpha + i) and opens a new table with probability (alpha + K d) / (alpha + i).
    Returns the table of every customer, numbered by opening order.
    """
    tables = np.zeros(n, dtype=int)
    counts: list[int] = []
    for i in range(n):
        weights = np.array([c - discount for c in counts] + [alpha + discount * len(counts)])
        k = rng.choice(len(weights), p=weights / weights.sum())
        if k == len(counts):
            counts.append(0)
        counts[k] += 1
        tables[i] = k
    return tables


def stick_weights(num_sticks: int, alpha: float, rng: np.random.Generator, discount: float = 0.0) -> np.ndarray:
    """The first num_sticks weights of a stick-breaking construction:
    V_k ~ Beta(1 - d, alpha + k d), pi_k = V_k prod_{j<k} (1 - V_j) (k = 1, 2, ...)."""
    k = np.arange(1, num_sticks + 1)
    v = rng.beta(1.0 - discount, alpha + k * discount)
    return v * np.concatenate([[1.0], np.cumprod(1.0 - v)[:-1]])


def figure_tables(n, alphas, num_runs, rng, out):
    fig, ax = plt.subplots(figsize=(7, 4))
    for colour, alpha in zip(("tab:blue", "tab:orange", "tab:green"), alphas):
        for run in range(num_runs):
            tables = crp_seating(n, alpha, rng)
            opened = np.maximum.accumulate(tables) + 1  # K after each customer
            ax.plot(np.arange(1, n + 1), opened, color=colour, alpha=0.3, linewidth=0.8)
        i = np.arange(1, n + 1)
        expected = np.cumsum(alpha / (alpha + i - 1))
        ax.plot(i, expected, color=colour, linewidth=2.5, label=f"alpha = {alpha}: E[K_n]")
    ax.set_xlabel("customers n")
    ax.set_ylabel("tables K_n")
    ax.set_title("Chinese restaurant process: thin lines are simulations")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "crp_tables.png", dpi=90)
    plt.close(fig)


def figure_sticks(alphas, rng, out):
    num_sticks = 20
    fig, axes = plt.subplots(1, len(alphas) + 1, figsize=(12, 3.2), sharey=True)
    for ax, alpha in zip(axes, alphas):
        ax.bar(np.arange(1, num_sticks + 1), stick_weights(num_sticks, alpha, rng), color="tab:blue")
        ax.set_title(f"DP, alpha = {alpha}")
        ax.set_xlabel("stick k")
    axes[-1].bar(np.arange(1, num_sticks + 1), stick_weights(num_sticks, 2.0, rng, discount=0.5),
                 color="tab:purple")
    axes[-1].set_title("Pitman-Yor, d = 0.5, alpha = 2")
    axes[-1].set_xlabel("stick k")
    axes[0].set_ylabel("weight pi_k")
    fig.tight_layout()
    fig.savefig(out / "stick_breaking.png", dpi=90)
    plt.close(fig)


def figure_crp_vs_sticks(n, alpha, num_draws, rng, out):
    k_crp = np.array([crp_seating(n, alpha, rng).max() + 1 for _ in range(num_draws)])
    k_sticks = []
    for _ in range(num_draws):
        weights = stick_weights(400, alpha, rng)  # the mass left beyond 400 sticks is negligible
        points = rng.choice(weights.size, size=n, p=weights / weights.sum())
        k_sticks.append(np.unique(points).size)
    k_sticks = np.array(k_sticks)
    bins = np.arange(0.5, max(k_crp.max(), k_sticks.max()) + 1.5)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.hist(k_crp, bins=bins, density=True, alpha=0.5, label=f"CRP seating (mean {k_crp.mean():.2f})")
    ax.hist(k_sticks, bins=bins, density=True, histtype="step", linewidth=2,
            label=f"i.i.d. from sticks (mean {k_sticks.mean():.2f})")
    ax.axvline(expected_num_clusters(dpppl.priors.CRP(alpha), n), color="black", linestyle="--", label="E[K] exact")
    ax.set_xlabel(f"number of clusters among n = {n} points")
    ax.set_ylabel("probability")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "crp_vs_sticks.png", dpi=90)
    plt.close(fig)
    return k_crp.mean(), k_sticks.mean()


def figure_prior_sizes(n, num_samples, out):
    dp = dpppl.DPMixture(alpha=1.0, component=dpppl.families.NormalInverseWishart())
    py = dpppl.PitmanYorMixture(discount=0.5, alpha=1.0, component=dpppl.families.NormalInverseWishart())
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    means = {}
    for row, (name, model) in zip(axes, (("DP(1)", dp), ("PY(0.5, 1)", py))):
        prior = dpppl.sample_prior(model, n, num_samples=num_samples, seed=0)  # partitions only
        dpppl.plots.plot_cluster_sizes(prior, axes=row)
        row[0].set_title(f"{name}: sorted cluster sizes, n = {n}")
        row[1].set_title(f"{name}: number of clusters")
        means[name] = float(prior.prior["num_clusters"].mean())
    fig.tight_layout()
    fig.savefig(out / "prior_cluster_sizes.png", dpi=90)
    plt.close(fig)
    return means


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small simulations (for CI)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=Path("dpppl-figures"),
                       help="directory for the PNG figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const", const=FIGURES,
                       help="redraw the documentation's committed figures in docs/figures/")
    args = p.parse_args(argv)
    if args.quick and args.out.resolve() == FIGURES.resolve():
        p.error("--docs redraws the documentation's figures: run it without --quick")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n, runs, draws, prior_draws = (100, 3, 100, 100) if args.quick else (500, 10, 2000, 2000)

    figure_tables(n, (0.5, 2.0, 10.0), runs, rng, args.out)
    figure_sticks((0.5, 2.0, 10.0), rng, args.out)
    k_crp, k_sticks = figure_crp_vs_sticks(50, 2.0, draws, rng, args.out)
    printed = [f"mean K for 50 points, alpha = 2, over {draws} simulations: CRP {k_crp:.2f}, "
               f"sticks {k_sticks:.2f}, exact {expected_num_clusters(dpppl.priors.CRP(2.0), 50):.2f}"]
    means = figure_prior_sizes(n, prior_draws, args.out)
    printed += [f"{name}: mean K over {prior_draws} prior draws of {n} points = {value:.2f}"
                for name, value in means.items()]
    printed.append(f"exact: DP(1) {expected_num_clusters(dpppl.priors.CRP(1.0), n):.2f}, "
                   f"PY(0.5, 1) {expected_num_clusters(dpppl.priors.PitmanYor(0.5, 1.0), n):.2f}")
    print("\n".join(printed))
    (args.out / "crp.txt").write_text("\n".join(printed) + "\n", encoding="utf-8")
    print(f"figures and crp.txt in {args.out}")


if __name__ == "__main__":
    main()
