"""Collapsed-Gibbs throughput: point updates per second, dpppl's JAX kernel vs plain NumPy.

One *point update* is one label drawn from its full conditional (a sweep over N points is
N updates). Each configuration draws N = 10,000 points from 10 well-separated Gaussian
clusters and starts both samplers from the true labels, so that about 10 clusters are
occupied throughout:

- ``NIW D=2`` and ``NIW D=10``: DP(1) mixture with dpppl's default Normal-Inverse-Wishart
  prior, data with random full covariances (issue 2 targets: >= 200,000 updates/s at D=2
  and >= 50,000/s at D=10 on the 2-core development machine);
- ``KnownCov D=10`` and ``KnownCov D=40``: DP(1) mixture of ``NormalKnownCov(sigma2=1,
  mu0=0, tau2=25)``, data with identity covariances (the model that generated them).

dpppl: ``dpppl.kernels.build("gibbs", ...)`` stepped by :class:`harness.GibbsTrace`
(compiled ahead of time; compile time reported apart; the cluster capacity is
``dpppl.sample``'s default for 10 clusters, 28 slots, and every slot is evaluated per
update; ``--capacity`` changes it). NumPy: :class:`numpy_gibbs.NumpyGibbs`, the per-point loop with incremental
statistics a user would write (BLAS limited to one thread, its fastest setting here).
Both are timed alternately ``--repeats`` times; the table shows the best repeat of each
and their ratio, and the JSON file keeps every repeat.

Usage::

    python benchmarks/bench_gibbs_throughput.py            # ~1 minute on 2 cores
    python benchmarks/bench_gibbs_throughput.py --quick    # smoke run, < 1 minute

Results go to ``benchmarks/results/gibbs_throughput.json`` (``gibbs_throughput-quick.json``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import dpppl
from harness import GibbsTrace, load_average, write_json
from numpy_gibbs import NumpyGibbs

NUM_CLUSTERS = 10
MEAN_SCALE = 25.0
TARGETS = {"NIW D=2": 200_000, "NIW D=10": 50_000}  # updates/s, issue 2 item 10


def configurations():
    """(name, family, dim, covariance of the simulated clusters)."""
    known = dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=MEAN_SCALE)
    return [("NIW D=2", dpppl.families.NormalInverseWishart(), 2, "random"),
            ("NIW D=10", dpppl.families.NormalInverseWishart(), 10, "random"),
            ("KnownCov D=10", known, 10, "identity"),
            ("KnownCov D=40", known, 40, "identity")]


def measure(name, family, dim, covariance, n, sweeps, numpy_sweeps, repeats, seed, blas_threads, capacity=None):
    """Time both samplers on one configuration; returns a dict of figures."""
    from threadpoolctl import threadpool_limits

    x, labels = dpppl.datasets.gaussian_mixture(n, dim, NUM_CLUSTERS, mean_scale=MEAN_SCALE,
                                                covariance=covariance, seed=seed)
    model = dpppl.DPMixture(1.0, family)
    lp_true = dpppl.log_joint(model, x, labels)
    cache = {}
    jax_rates, np_rates, compile_seconds = [], [], None
    jax_trace = np_ref = None
    for r in range(repeats):
        trace = GibbsTrace(model, x, init=labels, seed=seed + r, cache=cache, capacity=capacity)
        trace.compile()
        trace.sweep(record=False)  # first call of the executable: not timed
        if compile_seconds is None:
            compile_seconds = trace.compile_seconds
        seconds = sum(trace.sweep(record=False) for _ in range(sweeps))
        jax_rates.append(n * sweeps / seconds)
        jax_trace = trace

        with threadpool_limits(limits=blas_threads):
            ref = NumpyGibbs(model.bind(x), labels, seed=seed + r)
            tic = time.perf_counter()
            for _ in range(numpy_sweeps):
                ref.sweep()
            np_rates.append(n * numpy_sweeps / (time.perf_counter() - tic))
        np_ref = ref

    def rel(z):
        return 100.0 * (dpppl.log_joint(model, x, z) - lp_true) / abs(lp_true)

    best_jax, best_np = max(jax_rates), max(np_rates)
    return {"name": name, "n": n, "dim": dim, "family": type(family).__name__,
            "capacity": jax_trace.capacity, "compile_seconds": compile_seconds,
            "sweeps": sweeps, "numpy_sweeps": numpy_sweeps,
            "dpppl_updates_per_s": jax_rates, "numpy_updates_per_s": np_rates,
            "dpppl_best": best_jax, "numpy_best": best_np, "ratio_best": best_jax / best_np,
            "dpppl_median": statistics.median(jax_rates), "numpy_median": statistics.median(np_rates),
            "target": TARGETS.get(name),
            "dpppl_final_k": jax_trace.num_clusters(), "numpy_final_k": np_ref.num_clusters,
            "dpppl_final_lp_rel_percent": rel(jax_trace.labels), "numpy_final_lp_rel_percent": rel(np_ref.z)}


def format_table(rows) -> str:
    head = ["config", "dpppl upd/s", "numpy upd/s", "dpppl/numpy", "target", "met", "capacity",
            "compile s", "K (dpppl/numpy)", "lp vs true (dpppl/numpy)"]
    lines = []
    for r in rows:
        target = r["target"]
        lines.append([r["name"], f"{r['dpppl_best']:,.0f}", f"{r['numpy_best']:,.0f}", f"{r['ratio_best']:.1f}",
                      "-" if target is None else f"{target:,}",
                      "-" if target is None else ("yes" if r["dpppl_best"] >= target else "no"),
                      str(r["capacity"]), f"{r['compile_seconds']:.2f}",
                      f"{r['dpppl_final_k']}/{r['numpy_final_k']}",
                      f"{r['dpppl_final_lp_rel_percent']:+.2f}%/{r['numpy_final_lp_rel_percent']:+.2f}%"])
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]

    def fmt(cells):
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    return "\n".join([fmt(head), "| " + " | ".join("-" * w for w in widths) + " |"] + [fmt(l) for l in lines])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: N=2000, few sweeps, one repeat")
    parser.add_argument("--n", type=int, default=None, help="points (default 10000; quick 2000)")
    parser.add_argument("--sweeps", type=int, default=None, help="timed dpppl sweeps per repeat (default 30)")
    parser.add_argument("--numpy-sweeps", type=int, default=None, help="timed NumPy sweeps per repeat (default 2)")
    parser.add_argument("--repeats", type=int, default=None, help="alternating repeats; best is reported (default 3)")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads for NumPy (0: library default)")
    parser.add_argument("--capacity", type=int, default=None,
                        help="dpppl's initial cluster capacity (default: dpppl.sample's, 28 for 10 clusters)")
    parser.add_argument("--configs", default=None,
                        help="comma-separated subset of: " + ", ".join(c[0] for c in configurations()))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    q = args.quick
    n = args.n or (2000 if q else 10_000)
    sweeps = args.sweeps or (3 if q else 30)
    numpy_sweeps = args.numpy_sweeps or (1 if q else 2)
    repeats = args.repeats or (1 if q else 3)
    wanted = None if args.configs is None else {s.strip() for s in args.configs.split(",")}

    started = time.perf_counter()
    load_at_start = load_average()
    rows = []
    for name, family, dim, cov in configurations():
        if wanted is not None and name not in wanted:
            continue
        print(f"[throughput] {name} ...", flush=True)
        row = measure(name, family, dim, cov, n, sweeps, numpy_sweeps, repeats, args.seed,
                      args.blas_threads or None, args.capacity)
        print(f"[throughput]   dpppl {', '.join(f'{v:,.0f}' for v in row['dpppl_updates_per_s'])} /s; "
              f"numpy {', '.join(f'{v:,.0f}' for v in row['numpy_updates_per_s'])} /s", flush=True)
        rows.append(row)
    print()
    print(f"Collapsed Gibbs point updates per second, N={n}, {NUM_CLUSTERS} clusters, start at the true "
          f"labels; best of {repeats} repeat(s)")
    print(format_table(rows))
    total = time.perf_counter() - started
    path = write_json("gibbs_throughput-quick" if q else "gibbs_throughput",
                      {"args": vars(args), "load_average_at_start": load_at_start, "rows": rows,
                       "total_seconds": total})
    print(f"\ntotal {total:.1f} s; results written to {path}")


if __name__ == "__main__":
    main()
