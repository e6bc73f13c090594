"""DP mixtures of Generalized Mallows models (workload M1): the issue's targets, measured.

1. Seconds per sweep of ``mallows-beta`` and ``mallows-slice`` at N = 5000, n = 20, t = 10
   (Fig. 6 data set 1), median of ``--sweeps`` sweeps after compilation, from the state
   reached after ``--burn`` sweeps (the cost grows with the number of clusters, so it is
   reported beside it). Targets: Beta-Gibbs <= 1 s, Slice-Gibbs <= 3 s.
2. Variation of information to the true clustering after each of ``--iterations`` sweeps
   on data set 1 (target: below 0.1 within 100 sweeps), ``--replicates`` runs each.
3. The error of the approximate Beta-Gibbs against the exact (enumerated) posterior over
   partitions of a small problem (n = 3 items, N = 5 rankings), beside Slice-Gibbs:
   total-variation distance of the partition law and the harness verdict.
4. ``--parts merged``: both kernels started at the true clustering of data set 1 with two true
   clusters merged (VI = 2 (per_cluster / N) ln 2 from the truth), ``--iterations`` sweeps:
   how long one-at-a-time label moves take to split the pair (the plateaus of Fig. 6's
   Slice-Gibbs curves are multiples of that VI).

    python benchmarks/bench_mallows.py            # ~10-15 min on a quiet 2-core machine
    python benchmarks/bench_mallows.py --quick    # N = 1000, 20 sweeps

Nothing here asserts; results go to ``benchmarks/results/mallows.json`` (``mallows-<parts>.json``
for a subset, ``-quick`` suffix for smoke runs) with the machine description and load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness import machine_info, write_json  # noqa: E402

import dpppl  # noqa: E402
from dpppl.testing.scripts import load_script  # noqa: E402


def _fig6():
    return load_script(HERE.parent / "examples" / "mallows_fig6.py")


def sweep_seconds(fig6, per_cluster, burn, sweeps):
    data, truth, _, _ = dpppl.datasets.mallows_mixture(1, per_cluster=per_cluster, seed=0)
    bound = fig6.model_for(data.n_items).bind(data)
    out = {}
    for label, kernel in fig6.SAMPLERS.items():
        secs, vi, comp = fig6.trace(kernel, bound, truth, burn + sweeps, seed=0)
        per = np.diff(np.r_[0.0, secs])[burn:]
        out[label] = {"median_s": float(np.median(per)), "min_s": float(per.min()), "max_s": float(per.max()),
                      "compile_s": comp, "vi_at_end": float(vi[-1])}
        print(f"{label:11s}: {np.median(per):.3f} s/sweep (min {per.min():.3f}, max {per.max():.3f}) "
              f"at N = {len(data)}, after {burn} sweeps; VI {vi[-1]:.3f}; load {os.getloadavg()[0]:.1f}")
    return out


def vi_within(fig6, per_cluster, iterations, replicates):
    results = fig6.run([1], replicates, iterations, per_cluster)
    out = {}
    for label in fig6.SAMPLERS:
        runs = results[f"1/{label}"]
        first = [next((i + 1 for i, v in enumerate(r["vi"]) if v < 0.1), None) for r in runs]
        out[label] = {"final_vi": [r["vi"][-1] for r in runs], "first_sweep_below_0.1": first,
                      "seconds": [r["seconds"][-1] for r in runs]}
        print(f"{label:11s}: VI after {iterations} sweeps {[round(r['vi'][-1], 4) for r in runs]}; "
              f"first sweep below 0.1: {first}")
    return out


def beta_error(num_chains, num_samples):
    from dpppl.diagnostics.arviz_compat import partition_group
    from dpppl.testing import check_kernel_samples, exact_posterior

    x = [[0, 1, 2], [0, 1], [2, 1, 0], [2, 1], [1, 0]]
    model = dpppl.DPMixture(1.0, dpppl.families.GeneralizedMallows(3))
    exact = exact_posterior(model, x)
    out = {}
    for kernel in ("mallows-slice", "mallows-beta"):
        idata = dpppl.sample(model, x, kernel=kernel, num_warmup=0, num_samples=num_samples + 50,
                             num_chains=num_chains, seed=3, init="prior", progress_bar=False, num_gibbs=2)
        z = partition_group(idata)["z"].values[:, 50:]
        res = check_kernel_samples(exact, z)
        out[kernel] = {"tv": res.tv_distance, "tv_noise": res.tv_noise, "passed": res.passed,
                       "p_k": res.p_num_clusters.tolist(), "p_k_exact": exact.p_num_clusters.tolist()}
        print(f"{kernel}: TV to the exact partition law {res.tv_distance:.4f} (noise {res.tv_noise:.4f}); "
              f"harness {'passed' if res.passed else 'FAILED'}; P(K=k) {np.round(res.p_num_clusters[1:], 3)} "
              f"vs exact {np.round(exact.p_num_clusters[1:], 3)}")
    return out


def merged_pair(fig6, per_cluster, iterations, seed=7):
    from dpppl.analysis.metrics import variation_of_information
    from dpppl.models.init import initial_states
    from dpppl.kernels.base import build

    data, truth, _, _ = dpppl.datasets.mallows_mixture(1, per_cluster=per_cluster, seed=seed)
    bound = fig6.model_for(data.n_items).bind(data)
    x = jax.numpy.asarray(bound.x)
    start = np.unique(np.where(truth == 1, 0, truth), return_inverse=True)[1].astype(np.int32)
    out = {"start_vi": variation_of_information(start, truth)}
    for label, kernel in fig6.SAMPLERS.items():
        kern = build(kernel, bound)
        state = jax.tree.map(lambda a: a[0], initial_states(bound, start[None], jax.random.split(
            jax.random.key(0), 1), capacity=32))
        state = jax.jit(kern.init)(state, x)
        step = jax.jit(kern.step)
        vi, k = [], []
        for t in range(iterations):
            state, _ = step(jax.random.fold_in(jax.random.key(seed), t), state, x)
            vi.append(variation_of_information(np.asarray(state.z), truth))
            k.append(int((np.asarray(state.stats.n) > 0.5).sum()))
        split = next((i + 1 for i, v in enumerate(vi) if v < 1e-9), None)
        out[label] = {"vi": vi, "num_clusters": k, "first_sweep_at_truth": split}
        print(f"{label:11s}: from VI {out['start_vi']:.3f} (one merged pair, N = {len(data)}): "
              f"first sweep at the truth {split}; VI every 10 sweeps {np.round(vi[::10], 3)}", flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--burn", type=int, default=30)
    ap.add_argument("--sweeps", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument("--chains", type=int, default=64)
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--parts", nargs="+", default=["sweep", "vi", "error"],
                    help="any of sweep, vi, error, merged (merged: not in the default run)")
    ap.add_argument("--per-cluster", type=int, default=500)
    args = ap.parse_args(argv)
    per_cluster = args.per_cluster
    if args.quick:
        per_cluster, args.burn, args.sweeps, args.iterations, args.chains, args.samples = 100, 5, 3, 20, 16, 100
    fig6 = _fig6()
    payload = {"config": vars(args), "machine_start": machine_info()}
    tic = time.time()
    if "sweep" in args.parts:
        payload["sweep_seconds"] = sweep_seconds(fig6, per_cluster, args.burn, args.sweeps)
    if "vi" in args.parts:
        payload["vi_within"] = vi_within(fig6, per_cluster, args.iterations, args.replicates)
    if "error" in args.parts:
        payload["beta_error"] = beta_error(args.chains, args.samples)
    if "merged" in args.parts:
        payload["merged_pair"] = merged_pair(fig6, per_cluster, args.iterations)
    payload["wall_s"] = time.time() - tic
    payload["machine_end"] = machine_info()
    name = "mallows" + ("" if set(args.parts) == {"sweep", "vi", "error"} else "-" + "-".join(args.parts))
    print(f"results: {write_json(name + ('-quick' if args.quick else ''), payload)}")


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
