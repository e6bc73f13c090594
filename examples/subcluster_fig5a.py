"""Chang & Fisher (2013), sec. 6 and Figure 5a: log likelihood against wall time on real
data, a DP mixture with a NIW prior, from two initialisations.

The paper runs MNIST (70,000 images) after PCA to 50 dimensions; MNIST is not available
offline here, so this uses scikit-learn's bundled digits (1797 8x8 images, 10 classes,
``dpppl.datasets.load("digits", pca=...)``) after PCA to ``--pca`` dimensions (default 10,
as workload R1 of the design notes; ``--pca 50`` for the paper's). The methods, the
y-axis (the collapsed log joint per point ``log p(x, z) / N``), the caps and the driving
are those of ``examples/subcluster_fig4.py`` (its ``VARIANTS`` list, its
``run_panels``); in addition the NMI of each method's final labels against the digit
labels is reported and printed in the legend.

    python examples/subcluster_fig5a.py                 # about 6 minutes on 2 cores
    python examples/subcluster_fig5a.py --quick         # 10 s caps

writes ``subcluster_fig5a[-quick].json`` (the curves) and ``subcluster_fig5a[_quick].png`` under ``--out``
(default ``./dpppl-figures``; ``--docs``: ``docs/figures``, the committed ones), nowhere else.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import dpppl
from subcluster_fig4 import FIGURES, harness, plot, run_panels

# (initial K, alpha): one random start with a single cluster and one with ten
PANELS = [(1, 1.0), (10, 1.0)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 s caps")
    parser.add_argument("--pca", type=int, default=10, help="PCA dimensions (default 10; the paper: 50)")
    parser.add_argument("--seconds", type=float, default=None, help="run-time cap per run (default 45)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=Path("dpppl-figures"),
                       help="directory for the figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const", const=FIGURES,
                       help="write into docs/figures/, redrawing the documentation's committed figures")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = args.seconds or (10.0 if args.quick else 45.0)
    x, y = dpppl.datasets.load("digits", pca=args.pca)
    results = run_panels(x, PANELS, seconds, truth=y)
    for panel in results.values():  # NMI of the final labels in the legend
        for name in [m for m in panel if "nmi" in panel[m]]:
            out = panel.pop(name)
            panel[f"{name} (NMI {out['nmi']:.2f})"] = out
    suffix = "-quick" if args.quick else ""
    path = harness.write_json("subcluster_fig5a" + suffix, directory=args.out, payload={
        "data": f"sklearn digits, PCA to {args.pca}", "n": int(x.shape[0]), "seconds_cap": seconds,
        "panels": results, "y": "collapsed log joint per point, log p(x, z) / N (dpppl.log_joint)"})
    png = args.out / f"subcluster_fig5a{suffix.replace('-', '_')}.png"
    plot(results, png, f"digits (1797 x {args.pca} after PCA), NIW (cf. Chang & Fisher 2013, Fig. 5a)")
    print("wrote", path, "and", png)


if __name__ == "__main__":
    main()
