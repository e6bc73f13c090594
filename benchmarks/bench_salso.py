"""SALSO point estimates at scale: seconds and expected VI against the best draw's.

Posterior draws with the structure of a real clustering posterior are simulated around a
true partition (K clusters of uneven sizes, Dirichlet(2) shares): each draw starts from the
truth; its *ambiguous* points (20%, each with a fixed neighbouring cluster) take the
neighbour's label with probability 0.3; with probability 0.3 a random cluster is split in
two at random, with probability 0.2 two clusters are merged; 0.5% of the points become
singletons. The draws then differ in K (about K - 1 to K + 1 plus singletons), as a Gibbs
run's do.

For each size (N points x S draws) a fresh Python process (its own JAX compilation cache
and native-library cache, empty temporary directories, so that compiling is counted)
imports dpppl and times ``dpppl.point_estimate``'s search, ``salso(draws)`` with its
defaults (exact expected VI, 16 runs, 10 zealous attempts): ``cold`` is the first call
(JAX compiling included; the C++ pass's library, built once per machine and dpppl
version, is built before it and timed apart as ``native_build``), ``warm`` a second call
in the same process. Reported: wall and CPU
seconds, K, the estimate's posterior expected VI (exact, over all draws), the smallest
expected VI among the draws (all of them, or ``--candidates`` evenly spaced ones at the
largest size), and their difference (<= 0: the estimate is no worse than the best draw).
The memory the search holds is O(S K_draws K + N S) integers; the N x N co-clustering
matrix is never formed.

    python benchmarks/bench_salso.py            # 3,000 x 400 and 10,000 x 1,000
    python benchmarks/bench_salso.py --quick    # 1,000 x 200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from harness import load_average, write_json

SIZES = ((3000, 400), (10000, 1000))


def simulate_draws(n, s, k=10, seed=0):
    """The true labels (n,) and s draws (s, n) around them (module docstring)."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(k, size=n, p=rng.dirichlet(np.full(k, 2.0)))
    ambiguous = rng.random(n) < 0.2
    neighbour = (truth + rng.integers(1, k, n)) % k
    draws = np.empty((s, n), np.int64)
    for d in range(s):
        z = truth.copy()
        flip = ambiguous & (rng.random(n) < 0.3)
        z[flip] = neighbour[flip]
        if rng.random() < 0.3:
            c = rng.integers(k)
            half = (z == c) & (rng.random(n) < 0.5)
            z[half] = k
        if rng.random() < 0.2:
            a, b = rng.choice(k, 2, replace=False)
            z[z == b] = a
        lone = rng.random(n) < 0.005
        z[lone] = k + 1 + np.arange(lone.sum())
        draws[d] = z
    return truth, draws


def best_draw_loss(draws, candidates):
    """min over `candidates` evenly spaced draws (None: all) of their expected VI."""
    from dpppl.analysis.partitions import expected_vi

    index = np.arange(draws.shape[0]) if candidates is None else np.unique(
        np.linspace(0, draws.shape[0] - 1, candidates).round().astype(int))
    return float(min(expected_vi(draws[i], draws) for i in index)), int(index.size)


def measure(n, s, candidates):
    """Run in the child process: time the search cold and warm; print one JSON line."""
    import dpppl  # noqa: F401  (import first: its settings, its compilation cache)
    from dpppl.analysis import salso_search
    from dpppl.analysis.partitions import expected_vi, salso

    _, draws = simulate_draws(n, s)
    tic = time.perf_counter()
    native = salso_search.use_native("vi")
    native_build = time.perf_counter() - tic
    row = {"n": n, "draws": s, "native": native, "native_build_seconds": native_build,
           "draw_k": [int(k) for k in np.percentile([len(np.unique(d)) for d in draws], [5, 50, 95])]}
    for phase in ("cold", "warm"):
        wall, cpu = time.perf_counter(), time.process_time()
        labels, loss = salso(draws)
        row[f"{phase}_seconds"] = time.perf_counter() - wall
        row[f"{phase}_cpu_seconds"] = time.process_time() - cpu
    row["k"] = int(labels.max()) + 1
    row["expected_vi"] = float(expected_vi(labels, draws))
    row["reported_loss"] = loss
    row["best_draw_expected_vi"], row["draws_compared"] = best_draw_loss(draws, candidates)
    row["vs_best_draw"] = row["expected_vi"] - row["best_draw_expected_vi"]
    print(json.dumps(row))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1,000 points x 200 draws only")
    p.add_argument("--candidates", type=int, default=200,
                   help="draws compared at the largest size (all draws at the others)")
    p.add_argument("--child", nargs=3, type=int, metavar=("N", "S", "CANDIDATES"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        n, s, c = args.child
        return measure(n, s, c or None)
    sizes = ((1000, 200),) if args.quick else SIZES
    load_start = load_average()
    rows = []
    for n, s in sizes:
        candidates = args.candidates if (n, s) == sizes[-1] and len(sizes) > 1 else 0
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as native_cache:
            env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache, DPPPL_NATIVE_CACHE=native_cache)
            out = subprocess.run([sys.executable, __file__, "--child", str(n), str(s), str(candidates)], env=env,
                                 capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{'N':>6}{'draws':>7}{'build s':>9}{'cold s':>9}{'cpu':>8}{'warm s':>9}{'K':>4}{'E[VI]':>9}"
          f"{'best draw':>11}{'diff':>10}{'compared':>10}")
    for r in rows:
        print(f"{r['n']:>6}{r['draws']:>7}{r['native_build_seconds']:>9.1f}{r['cold_seconds']:>9.1f}{r['cold_cpu_seconds']:>8.1f}"
              f"{r['warm_seconds']:>9.1f}{r['k']:>4}{r['expected_vi']:>9.4f}{r['best_draw_expected_vi']:>11.4f}"
              f"{r['vs_best_draw']:>10.4f}{r['draws_compared']:>10}")
    path = write_json("salso" + ("-quick" if args.quick else ""),
                      {"load_average_start": load_start, "targets_seconds": {"3000x400": 20, "10000x1000": 60},
                       "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
