"""MAP search (Daumé 2007) beside Gibbs and split-merge: Fig. 2 in small form, and a large run.

**Fig. 2 (artificial data).** For each N, data sets are drawn from the model the methods
score under, a DP(alpha = 1) mixture of 2-D Gaussians with known covariance I and means
~ N(0, 10 I) (the paper: "prior mean zero and prior variance 10"). Methods, all scored
by the collapsed log joint ``dpppl.log_joint``:

- six searches: A* (unbounded queue) and beam 10, each with the trivial, admissible and
  inadmissible scores, ``order="marginal"``, with the greedy start (A* searches are
  stopped at ``--max-states`` enqueued states; such a stop is counted);
- Gibbs and Gibbs+split-merge for a fixed budget: one chain from one cluster and one
  from sequential prediction, ``--sweeps`` sweeps each; the best log joint over all
  sweeps of both chains is kept (as the paper does: "the best of the best").

Figures per N (means over the data sets): the ratio of the negative log joint to the
exhaustive optimum (enumeration, N <= 10; lower is better, 1 is optimal), the same ratio
against the best any method found (every N; beyond N = 10 the optimum is the admissible
A*'s when it completes within ``--max-states``), the pairwise F-score against the true
labels (geometric mean of pairwise precision and recall, as the paper), seconds (search:
the call, compiled beforehand on the first data set; samplers: sweeps to the best sweep,
compile excluded) and states enqueued.

**Large run.** N = 60,000, D = 50: Fashion-MNIST's training images (Debian package
``dataset-fashion-mnist``, read from /usr/share/datasets/fashion-mnist) centred, PCA to 50
and whitened as the paper's MNIST (sec. 4.2), model DP(1) with NormalKnownCov(sigma2=1,
mu0=0, tau2=0.1) (the paper's "prior variance of 0.1"); without the package, a synthetic mixture of 30
Gaussians, means ~ N(0, 4 I), covariance I, model NormalKnownCov(sigma2=1, tau2=4).
Inadmissible beam-100 search (cold, i.e. with compilation, and warm), then 100 Gibbs
sweeps from one cluster (the paper's baseline) and 100 Gibbs sweeps from the search's
clustering.

    python benchmarks/bench_search.py                 # both parts
    python benchmarks/bench_search.py --part fig2 --datasets 3 --sizes 4 8 12 20
    python benchmarks/bench_search.py --part large --n 60000

Writes ``benchmarks/results/search.json`` (``search-<part>.json`` for one part).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import GibbsTrace, load_average, write_json  # noqa: E402

import dpppl  # noqa: E402
from dpppl.testing.exact import MAX_POINTS, exact_posterior  # noqa: E402

SEARCHES = [(f"{'astar' if beam is None else 'beam10'}-{h}", h, beam)
            for beam in (None, 10) for h in ("trivial", "admissible", "inadmissible")]


def pairwise_f(truth, labels):
    """Geometric mean of pairwise precision and recall of 'same cluster' decisions, from
    the contingency table (pairs together in both = sum_ij C(n_ij, 2)): O(N)."""
    _, t = np.unique(truth, return_inverse=True)
    _, z = np.unique(labels, return_inverse=True)
    table = np.bincount(t * (z.max() + 1) + z).astype(float)
    pairs = lambda counts: float(np.sum(counts * (counts - 1) / 2))  # noqa: E731
    both, same_t, same_z = pairs(table), pairs(np.bincount(t).astype(float)), pairs(np.bincount(z).astype(float))
    return 0.0 if both == 0 else float(np.sqrt(both / same_z * both / same_t))


def draw_data(n, rng):
    """A DP(1) draw: CRP labels, means ~ N(0, 10 I), points ~ N(mean, I), 2-D."""
    labels, counts = np.zeros(n, int), []
    for i in range(n):
        w = np.array(counts + [1.0])
        k = rng.choice(len(w), p=w / w.sum())
        counts = counts + [0] if k == len(counts) else counts
        counts[k] += 1
        labels[i] = k
    means = rng.normal(0, np.sqrt(10.0), (len(counts), 2))
    return means[labels] + rng.normal(0, 1, (n, 2)), labels


def sampler_best(model, x, kernel, sweeps, seed, cache):
    """Best log joint over ``sweeps`` sweeps of a chain from one cluster and one from
    sequential prediction: (lp, labels, seconds to reach it in its chain). ``cache``
    holds the compiled sweeps, shared by data sets of one size (the data are arguments)."""
    best = (-np.inf, None, 0.0)
    for key in [k for k in cache if k[0] != "step"]:
        del cache[key]   # the initial states are compiled with the data inside; the sweep is not
    for init in ("single", "sequential"):
        trace = GibbsTrace(model, x, init=init, seed=seed, kernel=kernel, cache=cache)
        trace.compile()
        for _ in range(sweeps):
            trace.sweep()
            if trace.trace["lp"][-1] > best[0]:
                best = (trace.trace["lp"][-1], np.array(trace.labels), trace.elapsed)  # a copy
    return best


def fig2(sizes, datasets, sweeps, max_states, seed, greedy_start=True, save=None):
    model = dpppl.DPMixture(1.0, dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=10.0))
    rng = np.random.default_rng(seed)
    rows = []
    result = {"model": "DP(1) mixture, NormalKnownCov(sigma2=1, mu0=0, tau2=10), D=2", "datasets": datasets,
              "sweeps": sweeps, "max_states": max_states, "greedy_start": greedy_start, "rows": rows}
    for n in sizes:
        caches = {"gibbs": {}, "gibbs+splitmerge": {}}
        sets = [draw_data(n, rng) for _ in range(datasets)]
        per = {name: {"ratio_exact": [], "ratio_best": [], "f": [], "seconds": [], "enqueued": [], "stopped": 0}
               for name in [s[0] for s in SEARCHES] + ["gibbs", "gibbs+splitmerge"]}
        for i, (x, truth) in enumerate(sets):
            found = {}
            for name, heuristic, beam in SEARCHES:
                if i == 0:   # compile for this N outside the timings
                    dpppl.map_search(model, x, heuristic=heuristic, beam=beam, max_states=50, greedy_start=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    r = dpppl.map_search(model, x, heuristic=heuristic, beam=beam, max_states=max_states,
                                         greedy_start=greedy_start)
                found[name] = (r.log_joint, r.labels, r.seconds, r.states_enqueued, r.stopped_early)
                if name == "astar-admissible" and r.proved_optimal:
                    proved = r.log_joint
            exact = None   # the exhaustive optimum: enumeration, else a completed admissible A*
            if n <= MAX_POINTS:
                ex = exact_posterior(model, x)
                exact = dpppl.log_joint(model, x, ex.partitions[np.argmax(ex.log_prob)])
            elif not found["astar-admissible"][4]:
                exact = proved
            for kernel in ("gibbs", "gibbs+splitmerge"):
                lp, labels, seconds = sampler_best(model, x, kernel, sweeps, seed + i, caches[kernel])
                assert abs(lp - dpppl.log_joint(model, x, labels)) < 1e-6 * abs(lp)
                found[kernel] = (lp, labels, seconds, None, False)
            best = max(v[0] for v in found.values())
            for name, (lp, labels, seconds, enq, stopped) in found.items():
                p = per[name]
                if exact is not None:
                    p["ratio_exact"].append(lp / exact)
                p["ratio_best"].append(lp / best)
                p["f"].append(pairwise_f(truth, labels))
                p["seconds"].append(seconds)
                if enq is not None:
                    p["enqueued"].append(enq)
                p["stopped"] += stopped
        for name, p in per.items():
            rows.append({"n": n, "method": name,
                         "ratio_to_exact": float(np.mean(p["ratio_exact"])) if p["ratio_exact"] else None,
                         "datasets_with_exact": len(p["ratio_exact"]),
                         "optimal_fraction": (float(np.mean(np.abs(np.array(p["ratio_exact"]) - 1) < 1e-9))
                                              if p["ratio_exact"] else None),
                         "ratio_to_best": float(np.mean(p["ratio_best"])), "f_score": float(np.mean(p["f"])),
                         "seconds": float(np.mean(p["seconds"])),
                         "enqueued": float(np.mean(p["enqueued"])) if p["enqueued"] else None,
                         "stopped": p["stopped"]})
            r = rows[-1]
            print(f"N={n:3d} {name:20s} -lp/-exact {_f(r['ratio_to_exact'], '.4f'):>7} "
                  f"opt {_f(r['optimal_fraction'], '.2f'):>5} -lp/-best {r['ratio_to_best']:.4f} "
                  f"F {r['f_score']:.3f} {r['seconds']:8.4f}s enq {_f(r['enqueued'], '.0f'):>8} "
                  f"stopped {r['stopped']}", flush=True)
        if save is not None:
            save(result)   # after every N: a stopped run keeps what it measured
    return result


def _f(v, spec):
    return "-" if v is None else format(v, spec)


FASHION = Path("/usr/share/datasets/fashion-mnist")   # Debian package dataset-fashion-mnist


def fashion_mnist(n, dim):
    """The first ``n`` Fashion-MNIST training images, centred, PCA to ``dim`` components
    and whitened (the paper's preprocessing of MNIST, sec. 4.2), with their classes."""
    import gzip

    from sklearn.decomposition import PCA

    with gzip.open(FASHION / "train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:n].astype(float)
    with gzip.open(FASHION / "train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n].astype(int)
    return PCA(dim, whiten=True, random_state=0).fit_transform(images - images.mean(axis=0)), labels


def large(n, dim, clusters, gibbs_sweeps, seed, data):
    if data == "fashion":
        x, truth = fashion_mnist(n, dim)
        # whitened data (unit variance); the paper's "prior variance of 0.1" read as that of the means
        # (sigma2 = var/10 = 0.1 instead splits 5000 images into ~2300 clusters)
        model = dpppl.DPMixture(1.0, dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=0.1))
        what = f"Fashion-MNIST, first {n} training images, PCA to {dim} (whitened)"
    else:
        x, truth = dpppl.datasets.gaussian_mixture(n, dim, clusters, mean_scale=4.0, seed=seed)
        model = dpppl.DPMixture(1.0, dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=4.0))
        what = f"synthetic mixture of {clusters} Gaussians, means ~ N(0, 4 I), covariance I"
    out = {"n": n, "dim": dim, "data": what, "model": model.describe(),
           "lp_true_labels": dpppl.log_joint(model, x, truth), "load_start": load_average()}
    print(what, flush=True)
    cold = dpppl.map_search(model, x, heuristic="inadmissible", beam=100)
    warm = dpppl.map_search(model, x, heuristic="inadmissible", beam=100)
    out["search"] = {"seconds_cold": cold.seconds, "seconds_warm": warm.seconds, "log_joint": warm.log_joint,
                     "num_clusters": warm.num_clusters, "enqueued": warm.states_enqueued,
                     "dequeued": warm.states_dequeued, "greedy_log_joint": warm.greedy_log_joint,
                     "points_per_second_cold": n / cold.seconds, "f_score": pairwise_f(truth, warm.labels)}
    print(f"search: {cold.seconds:.1f} s cold, {warm.seconds:.1f} s warm, lp {warm.log_joint:.1f}, "
          f"K {warm.num_clusters}, dequeued {warm.states_dequeued}; true labels' lp {out['lp_true_labels']:.1f}",
          flush=True)
    for start in ("single", warm.labels):
        name = "gibbs_from_single" if isinstance(start, str) else "gibbs_from_search"
        trace = GibbsTrace(model, x, init=start, seed=seed)
        trace.compile()
        for _ in range(gibbs_sweeps):
            trace.sweep()
        lps = np.array(trace.trace["lp"])
        out[name] = {"sweeps": gibbs_sweeps, "seconds": trace.elapsed, "best_lp": float(lps.max()),
                     "last_lp": float(lps[-1]), "first_lp": float(lps[0]),
                     "best_minus_search": float(lps.max() - warm.log_joint),
                     "seconds_per_sweep": trace.elapsed / gibbs_sweeps, "num_clusters": trace.num_clusters()}
        print(f"{name}: {gibbs_sweeps} sweeps in {trace.elapsed:.1f} s, best lp {lps.max():.1f} "
              f"(search {warm.log_joint:.1f}; difference {lps.max() - warm.log_joint:+.1f})", flush=True)
    out["load_end"] = load_average()
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("fig2", "large", "both"), default="both")
    p.add_argument("--sizes", type=int, nargs="+", default=[4, 6, 8, 10, 12, 15, 20, 30, 50])
    p.add_argument("--datasets", type=int, default=5, help="data sets per N (paper: 10)")
    p.add_argument("--sweeps", type=int, default=200, help="sweeps per sampler chain (paper: 1000)")
    p.add_argument("--max-states", type=int, default=5000, help="enqueued states before an A* stops")
    p.add_argument("--no-greedy-start", action="store_true",
                   help="searches without the greedy pass (Fig. 1 as in the paper: no incumbent pruning)")
    p.add_argument("--tag", default=None, help="suffix of the JSON file name")
    p.add_argument("--n", type=int, default=60000)
    p.add_argument("--dim", type=int, default=50)
    p.add_argument("--clusters", type=int, default=30, help="clusters of the synthetic data")
    p.add_argument("--data", choices=("fashion", "synthetic"), default=None,
                   help="large run's data (default: Fashion-MNIST when installed, else synthetic)")
    p.add_argument("--gibbs-sweeps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    payload = {}
    tic = time.perf_counter()
    name = ("search" if args.part == "both" else f"search-{args.part}") + (f"-{args.tag}" if args.tag else "")
    if args.part in ("fig2", "both"):
        payload["fig2"] = fig2(args.sizes, args.datasets, args.sweeps, args.max_states, args.seed,
                               not args.no_greedy_start, save=lambda part: write_json(name, {"fig2": part}))
    if args.part in ("large", "both"):
        data = args.data or ("fashion" if FASHION.exists() else "synthetic")
        payload["large"] = large(args.n, args.dim, args.clusters, args.gibbs_sweeps, args.seed, data)
    payload["wall_seconds"] = time.perf_counter() - tic
    path = write_json(name, payload)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
