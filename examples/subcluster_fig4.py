"""Chang & Fisher (2013), sec. 6 and Figure 4: log likelihood against wall time on synthetic
data (10^5 points in 2-D from ten Gaussian clusters, DP mixture with a NIW prior), for
several initial numbers of clusters K and concentrations alpha.

The data are dpppl's workload W2 (``dpppl.datasets.load("w2")``: 10^5 x 2, ten clusters,
seed 0). The samplers, each driven iteration by iteration by ``benchmarks/harness.py``'s
:class:`GibbsTrace` (the registered kernel, ``dpppl.sample``'s keys and capacity growth,
compile time counted apart), start from K clusters drawn uniformly at random per point:

- ``VARIANTS``: (name, kernel, options) of dpppl kernels; by default the sub-cluster
  sampler as published (``subcluster``), its exact variant (``variant="exact"``) and the
  collapsed Gibbs sampler (``gibbs``, sequential over the points). One more entry adds a
  curve to every panel.
- scikit-learn's ``BayesianGaussianMixture`` (DP prior at the same alpha, 20 components,
  k-means initialisation, its own defaults otherwise), one EM iteration per ``fit`` call
  (``warm_start=True, max_iter=1``); it has no initial K, so one run per alpha is drawn in
  each panel of that alpha.

Every run is capped by ``--seconds`` of run time (it stops after the iteration that
crosses the cap). The y-axis is the **collapsed log joint per point**,
``log p(x, z) / N`` (``dpppl.log_joint``: the NIW parameters integrated out, the CRP(alpha)
prior of the partition), of the current labels; for scikit-learn, of its hard labels
``predict(x)`` after each iteration. The paper's "average log likelihood" is a
likelihood of the sampled parameters; the log joint of the labels is the quantity every
method here can be scored under alike. It depends on alpha through the CRP term, so
compare curves within a panel.

    python examples/subcluster_fig4.py                  # the figure (about 15 minutes on 2 cores)
    python examples/subcluster_fig4.py --quick          # 10^4 points, 10 s caps

writes ``subcluster_fig4[-quick].json`` (the curves) and ``subcluster_fig4[_quick].png`` under ``--out``
(default ``./dpppl-figures``; ``--docs``: ``docs/figures``, the committed ones), nowhere else.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import dpppl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import harness  # noqa: E402

FIGURES = ROOT / "docs" / "figures"

# (name, registered kernel, kernel options): one entry per curve
VARIANTS = [
    ("sub-cluster (paper)", "subcluster", {"variant": "paper"}),
    ("sub-cluster (exact)", "subcluster", {"variant": "exact"}),
    ("collapsed Gibbs", "gibbs", {}),
]
SKLEARN = "sklearn BayesianGaussianMixture"

# (initial K, alpha) panels; the paper's text varies both, small and large (sec. 6)
PANELS = [(1, 1.0), (10, 1.0), (1, 1e3), (10, 1e3)]


def random_labels(n, k, seed=0):
    """K initial clusters, each point's label uniform over them."""
    return np.random.default_rng(seed).integers(0, k, size=n)


def trace_kernel(model, x, kernel, options, init, seconds, cache, truth=None, capacity=64):
    """Run one dpppl kernel from labels ``init`` until ``seconds`` of run time have passed:
    times, log joint per point and K after each iteration, compile seconds, final NMI."""
    from dpppl.analysis.metrics import normalized_mutual_information

    trace = harness.GibbsTrace(model, x, init=init, kernel=kernel, options=options, cache=cache,
                               capacity=capacity)
    trace.compile()
    while trace.elapsed < seconds:
        trace.sweep()
    n = x.shape[0]
    out = {"seconds": trace.trace["seconds"], "loglik": [lp / n for lp in trace.trace["lp"]],
           "k": trace.trace["num_clusters"], "iterations": trace.sweeps,
           "compile_seconds": trace.compile_seconds}
    if truth is not None:
        out["nmi"] = normalized_mutual_information(trace.labels, truth)
    return out


def trace_sklearn(model, x, alpha, seconds, truth=None, n_components=20, seed=0):
    """scikit-learn's variational DP mixture, one EM iteration per fit call, until ``seconds``:
    times (fitting only) and the log joint per point of its hard labels after each one."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import BayesianGaussianMixture

    from dpppl.analysis.metrics import normalized_mutual_information

    bgm = BayesianGaussianMixture(n_components=n_components, weight_concentration_prior_type="dirichlet_process",
                                  weight_concentration_prior=alpha, max_iter=1, warm_start=True,
                                  random_state=seed)
    n = x.shape[0]
    times, loglik, ks, elapsed = [], [], [], 0.0
    while elapsed < seconds:
        tic = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            bgm.fit(x)
        elapsed += time.perf_counter() - tic
        labels = bgm.predict(x)
        times.append(elapsed)
        loglik.append(dpppl.log_joint(model, x, labels) / n)
        ks.append(int(np.unique(labels).size))
        if bgm.converged_:
            break
    out = {"seconds": times, "loglik": loglik, "k": ks, "iterations": len(times),
           "converged": bool(bgm.converged_), "compile_seconds": None}
    if truth is not None:
        out["nmi"] = normalized_mutual_information(labels, truth)
    return out


def run_panels(x, panels, seconds, truth=None, variants=VARIANTS, sklearn=True, seed=0):
    """Every variant in every (K, alpha) panel, plus scikit-learn once per alpha; one compiled
    step per (variant, alpha) is shared across K. Returns {panel title: {method: trace}}."""
    results, caches, sk = {}, {}, {}
    truth_lp = None
    for k, alpha in panels:
        model = dpppl.DPMixture(alpha, dpppl.families.NormalInverseWishart())
        init = random_labels(x.shape[0], k, seed)
        title = f"K={k}, alpha={alpha:g}"
        panel = results[title] = {}
        for name, kernel, options in variants:
            cache = caches.setdefault((name, alpha), {})
            panel[name] = trace_kernel(model, x, kernel, options, init, seconds, cache, truth)
            _report(title, name, panel[name])
        if sklearn:
            if alpha not in sk:
                sk[alpha] = trace_sklearn(model, x, alpha, seconds, truth, seed=seed)
            panel[SKLEARN] = sk[alpha]
            _report(title, SKLEARN, panel[SKLEARN])
        if truth is not None:
            truth_lp = dpppl.log_joint(model, x, truth) / x.shape[0]
            panel["true labels"] = {"loglik": truth_lp}
    return results


def _report(title, name, out):
    nmi = f", NMI {out['nmi']:.3f}" if "nmi" in out else ""
    comp = "" if out["compile_seconds"] is None else f" (+{out['compile_seconds']:.0f} s compile)"
    print(f"{title:>18} | {name:<32} {out['iterations']:>5} it in {out['seconds'][-1]:6.1f} s{comp}: "
          f"log p(x, z)/N {out['loglik'][-1]:.4f}, K {out['k'][-1]}{nmi}", flush=True)


def plot(results, path, suptitle):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = list(results)
    cols = min(2, len(titles))
    rows = -(-len(titles) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, title in zip(axes.flat, titles):
        for name, out in results[title].items():
            if name == "true labels":
                ax.axhline(out["loglik"], color="k", ls=":", lw=1, label="true labels")
                continue
            t = np.maximum(out["seconds"], 1e-2)
            ax.plot(t, out["loglik"], marker="." if len(t) < 40 else None, label=name)
        ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel("run time (s, compile excluded)")
        ax.set_ylabel("log p(x, z) / N")
        lows = [min(o["loglik"]) if isinstance(o["loglik"], list) else o["loglik"] for o in results[title].values()]
        highs = [max(o["loglik"]) if isinstance(o["loglik"], list) else o["loglik"] for o in results[title].values()]
        top = max(highs)
        ax.set_ylim(max(min(lows), top - 4 * (top - np.median(lows)) - 0.05), top + 0.05 * abs(top - min(lows)) + 0.01)
    for ax in list(axes.flat)[len(titles):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(suptitle)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10^4 points, 10 s caps")
    parser.add_argument("--n", type=int, default=None, help="number of points (default 10^5)")
    parser.add_argument("--seconds", type=float, default=None, help="run-time cap per run (default 40)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=Path("dpppl-figures"),
                       help="directory for the figures (default: ./dpppl-figures)")
    where.add_argument("--docs", dest="out", action="store_const", const=FIGURES,
                       help="write into docs/figures/, redrawing the documentation's committed figures")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n = args.n or (10_000 if args.quick else 100_000)
    seconds = args.seconds or (10.0 if args.quick else 40.0)
    x, y = dpppl.datasets.load("w2", n=n)
    results = run_panels(x, PANELS, seconds, truth=y)
    suffix = "-quick" if args.quick else ""
    path = harness.write_json("subcluster_fig4" + suffix, directory=args.out, payload={
        "n": n, "seconds_cap": seconds, "panels": results,
        "y": "collapsed log joint per point, log p(x, z) / N (dpppl.log_joint)"})
    png = args.out / f"subcluster_fig4{suffix.replace('-', '_')}.png"
    plot(results, png, f"W2: {n} x 2, 10 clusters, NIW (cf. Chang & Fisher 2013, Fig. 4)")
    print("wrote", path, "and", png)


if __name__ == "__main__":
    main()
