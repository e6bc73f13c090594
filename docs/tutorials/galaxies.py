"""Tutorial 2: a first model on the galaxies data, with diagnostics.

Draws the figures of docs/tutorials/galaxies.md:

* galaxies_data.png           - the 82 velocities;
* galaxies_trace.png          - the trace of the label-invariant summaries, chain by chain
                                (dpppl.plots.plot_trace: ArviZ's, integers as bars);
* galaxies_autocorr.png       - the autocorrelation of the same, one line per chain;
* galaxies_label_switching.png - the label of one galaxy against the size of its cluster;
* galaxies_k.png              - the posterior of the number of clusters;
* galaxies_coclustering.png   - the co-clustering matrix ordered by the VI point estimate;
* galaxies_clusters.png       - the data coloured by the VI point estimate;

and writes what it prints to galaxies.txt beside them (the page includes docs/figures/galaxies.txt).

Run:  python docs/tutorials/galaxies.py [--quick] [--out DIR | --docs]

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
             "environment's, `source .venv/bin/activate` first or `.venv/bin/python docs/tutorials/galaxies.py`")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import dpppl  # noqa: E402
from dpppl.diagnostics.arviz_compat import az, partition_group  # noqa: E402  (ArviZ 0.x or 1.x)
from dpppl.diagnostics.convergence import INTERVAL  # noqa: E402  (0.9: dpppl's one interval level)

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "figures"
LABEL_INVARIANT = ["num_clusters", "largest_cluster", "entropy", "alpha"]


def save(fig, out: Path, name: str) -> None:
    fig.tight_layout()
    fig.savefig(out / name, dpi=90)
    plt.close(fig)


def size_of_own_cluster(z: np.ndarray, point: int) -> np.ndarray:
    """For labels z (chain, draw, N): the size of the cluster holding ``point`` in each
    draw, a label-invariant quantity (unlike the label z[..., point] itself)."""
    return (z == z[..., point:point + 1]).sum(axis=-1)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a short run (for CI)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=Path("dpppl-figures"),
                       help="directory for the PNG figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const", const=FIGURES,
                       help="redraw the documentation's committed figures in docs/figures/")
    args = p.parse_args(argv)
    if args.quick and args.out.resolve() == FIGURES.resolve():
        p.error("--docs redraws the documentation's figures: run it without --quick")
    args.out.mkdir(parents=True, exist_ok=True)
    warmup, samples, chains = (0, 60, 2) if args.quick else (500, 2000, 4)

    # 1. the data: 82 galaxy velocities (km/s)
    x, _ = dpppl.datasets.load("galaxies")
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.hist(x[:, 0] / 1000, bins=40, color="tab:gray")
    ax.set_xlabel("velocity (1000 km/s)")
    ax.set_ylabel("galaxies")
    save(fig, args.out, "galaxies_data.png")

    # 2. the model and the run
    model = dpppl.load(ROOT / "models" / "gaussian_niw.dp")
    idata = dpppl.sample(model, x, kernel="gibbs+splitmerge", num_warmup=warmup, num_samples=samples,
                         num_chains=chains, seed=1, progress_bar=False)

    # 3. diagnostics on label-invariant quantities
    summary = az.summary(idata, var_names=LABEL_INVARIANT, hdi_prob=INTERVAL, round_to=3)
    printed = [f"{chains} chains x {samples} draws (seed 1)", summary.to_string()]
    axes = dpppl.plots.plot_trace(idata.isel(draw=slice(0, None, 4)))  # every 4th draw
    save(axes[0, 0].figure, args.out, "galaxies_trace.png")
    axes = dpppl.plots.plot_trace(idata, kind="autocorr")
    save(axes[0, 0].figure, args.out, "galaxies_autocorr.png")

    # 4. why not diagnose labels: the label of one galaxy switches, its cluster does not
    z = partition_group(idata)["z"].values  # (chain, draw, point): the labels are not in posterior
    point = int(np.argmax(x[:, 0]))  # the fastest galaxy
    own = size_of_own_cluster(z, point)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    for c in range(z.shape[0]):
        axes[0].plot(z[c, :, point], drawstyle="steps-mid", linewidth=0.8, label=f"chain {c}")
        axes[1].plot(own[c], drawstyle="steps-mid", linewidth=0.8, label=f"chain {c}")
    axes[0].set_title(f"label z[{point}] (meaningless)")
    axes[1].set_title(f"size of galaxy {point}'s cluster (label-invariant)")
    for ax in axes:
        ax.set_xlabel("draw")
        ax.legend(fontsize=7)
    save(fig, args.out, "galaxies_label_switching.png")
    import xarray as xr

    label = xr.Dataset({"label": (("chain", "draw"), z[..., point].astype(float)),
                        "own_cluster_size": (("chain", "draw"), own.astype(float))})
    printed.append(f"R-hat of the label of galaxy {point}: {float(az.rhat(label)['label']):.2f}; "
                   f"of the size of its cluster: {float(az.rhat(label)['own_cluster_size']):.2f}")

    # 5. the posterior of K, co-clustering and a point estimate
    ax = dpppl.plots.plot_num_clusters(idata)
    ax.set_title("posterior of the number of clusters")
    save(ax.figure, args.out, "galaxies_k.png")
    labels = dpppl.point_estimate(idata, "vi")
    ax = dpppl.plots.plot_coclustering(idata, estimate=labels)
    save(ax.figure, args.out, "galaxies_coclustering.png")
    ax = dpppl.plots.plot_clusters(idata, estimate=labels)
    save(ax.figure, args.out, "galaxies_clusters.png")
    sizes = np.bincount(labels)
    printed.append(f"VI point estimate: {sizes.size} clusters of sizes {sorted(sizes.tolist(), reverse=True)}")
    print("\n".join(printed))
    (args.out / "galaxies.txt").write_text("\n".join(printed) + "\n", encoding="utf-8")
    print(f"figures and galaxies.txt in {args.out}")


if __name__ == "__main__":
    main()
