"""The exact kept-draw step of `subcluster` (issue 32): restricted-Gibbs split-merge moves of
anchor pairs and the anchored label update.

    python -m benchmarks.bench_subcluster_kept --part one-cluster [--n 100000] [--iterations 100] [--seed 0]
        [--options "subset_sweep=256"] [--calls 2] [--out NAME]
    python -m benchmarks.bench_subcluster_kept --part galaxies [--chains 4] [--draws 2000] [--warmup 500]

`one-cluster`: 10^5 x 2, 6 separated clusters (`dpppl.datasets.load("w2", num_clusters=6)`), the
kept-draw step only (`num_warmup=0`, no published sampler) from one cluster: the NMI against the
true labels at every iteration and the first iteration with NMI >= 0.9.

`galaxies`: `models/gaussian_niw.dp` on the bundled galaxies data, default `subcluster` (on 82
points its kept draws run collapsed Gibbs with SAMS split-merge, `collapsed_below`), `subcluster`
with its sub-cluster moves kept (`collapsed_below=0`) and `gibbs+splitmerge` side by side in one
run: mean K and alpha, ESS (arviz over chains and draws) and ESS per second of K. Each kernel is
run twice with the same options and seed; the seconds of the second call (compilation from the
persistent cache) divide the ESS, and the first call's seconds are reported beside them.

Writes benchmarks/results/subcluster_kept-<part>.json.
"""

from __future__ import annotations

import argparse
import time
import warnings

import arviz as az
import numpy as np

import dpppl
from benchmarks.harness import write_json
from dpppl.diagnostics.arviz_compat import group, partition_group


def one_cluster(args):
    x, labels = dpppl.datasets.load("w2", n=args.n, num_clusters=6, seed=args.seed)
    model = dpppl.DPMixture(1.0, dpppl.NormalInverseWishart())
    runs, cpu = [], time.process_time()
    for _ in range(args.calls):  # a second call reads its compilation from the cache
        tic = time.perf_counter()
        idata = dpppl.sample(model, x, kernel="subcluster", num_warmup=0, num_samples=args.iterations,
                             init="single", seed=args.seed, progress_bar=False, **_options(args.options))
        runs.append(time.perf_counter() - tic)
    z = partition_group(idata)["z"].values[0]
    nmi = [float(dpppl.metrics.normalized_mutual_information(z[t], labels)) for t in range(args.iterations)]
    reached = next((t + 1 for t, v in enumerate(nmi) if v >= 0.9), None)
    stats = group(idata, "sample_stats")
    result = {"args": vars(args), "seconds_first_call": runs[0], "seconds": runs[-1],
              "cpu_seconds_all_calls": time.process_time() - cpu, "nmi": nmi,
              "first_iteration_nmi_0.9": reached, "final_nmi": nmi[-1],
              "num_clusters": idata.posterior["num_clusters"].values[0].tolist(),
              "restricted_splits": int(stats["restricted_splits"].sum()),
              "restricted_merges": int(stats["restricted_merges"].sum()),
              "singleton_births": int(stats["singleton_births"].sum()),
              "singleton_deaths": int(stats["singleton_deaths"].sum()),
              "sweep_rejected": float(stats["sweep_rejected"].mean())}
    print(f"NMI >= 0.9 first at iteration {reached}; final NMI {nmi[-1]:.3f}, K {result['num_clusters'][-1]}; "
          f"{runs[-1]:.1f} s ({runs[0]:.1f} s with compilation); restricted splits {result['restricted_splits']}, "
          f"merges {result['restricted_merges']}; singleton births {result['singleton_births']}, deaths "
          f"{result['singleton_deaths']}", flush=True)
    return result


def _options(text):
    """`--options`: 'name=value;...' (digits are ints) as keyword options of the kernel."""
    return {k: int(v) if v.isdigit() else v for k, v in (o.split("=") for o in text.split(";") if o)}


def galaxies(args):
    model = dpppl.load("models/gaussian_niw.dp")
    results = {}
    runs = {"gibbs+splitmerge": ("gibbs+splitmerge", {}), "subcluster": ("subcluster", {}),
            "subcluster collapsed_below=0": ("subcluster", {"collapsed_below": 0})}
    for label, (kernel, options) in runs.items():
        seconds = []
        for _ in range(2):
            tic = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                idata = dpppl.sample(model, "galaxies", kernel=kernel, num_warmup=args.warmup,
                                     num_samples=args.draws, num_chains=args.chains, seed=args.seed,
                                     progress_bar=False, **options)
            seconds.append(time.perf_counter() - tic)
        r = {"seconds_first_call": seconds[0], "seconds": seconds[1], "exact": int(idata.attrs["exact"])}
        for var in ("num_clusters", "alpha"):
            values = idata.posterior[var].values.astype(float)
            ess = float(az.ess(values))
            r[var] = {"mean": float(values.mean()), "ess": ess, "se": float(values.std() / np.sqrt(ess))}
        r["ess_per_second_K"] = r["num_clusters"]["ess"] / seconds[1]
        r["kernel_note"] = idata.attrs.get("kernel_note", "")
        results[label] = r
        print(f"{label:28s} K {r['num_clusters']['mean']:6.2f} +- {r['num_clusters']['se']:.2f} "
              f"(ESS {r['num_clusters']['ess']:6.0f})  alpha {r['alpha']['mean']:5.2f} +- {r['alpha']['se']:.2f} "
              f"(ESS {r['alpha']['ess']:6.0f})  {seconds[1]:.1f} s ({seconds[0]:.1f} s first call)  "
              f"ESS/s of K {r['ess_per_second_K']:.1f}", flush=True)
    base = results["gibbs+splitmerge"]["ess_per_second_K"]
    ratios = {label: r["ess_per_second_K"] / base for label, r in results.items() if label != "gibbs+splitmerge"}
    for label, ratio in ratios.items():
        print(f"ESS/s of K, {label} / gibbs+splitmerge: {ratio:.2f}")
    return {"args": vars(args), "results": results, "ess_per_second_ratio": ratios}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("one-cluster", "galaxies"), required=True)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0, help="the data's and the sampler's seed")
    parser.add_argument("--calls", type=int, default=2, help="one-cluster: calls of the run (the last one timed)")
    parser.add_argument("--options", default="", help="one-cluster: the kernel's options, 'subset_sweep=256;...'")
    parser.add_argument("--out", default=None, help="the results' name (default subcluster_kept-<part>)")
    args = parser.parse_args()
    result = one_cluster(args) if args.part == "one-cluster" else galaxies(args)
    write_json(args.out or f"subcluster_kept-{args.part}", result)


if __name__ == "__main__":
    main()
