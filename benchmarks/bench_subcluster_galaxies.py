"""Galaxies (82 points, `models/gaussian_niw.dp`): `subcluster` with default options against
`gibbs+splitmerge`, mean K and alpha with ESS-based Monte Carlo standard errors (issue 17,
"Done when": the default sub-cluster sampler agrees with an exact kernel within Monte Carlo
error). Also the published variant after warmup (`variant="paper"`), the old default, whose
posterior differs.

    python benchmarks/bench_subcluster_galaxies.py [--chains 4] [--draws 4000] [--warmup 1000]

Writes benchmarks/results/subcluster_galaxies.json. The difference of two means is reported in
units of its standard error, sqrt(se_a^2 + se_b^2), each se = sd / sqrt(ESS) (arviz.ess over
chains and draws).
"""

from __future__ import annotations

import argparse
import time
import warnings

import arviz as az
import numpy as np

import dpppl
from benchmarks.harness import machine_info, write_json

RUNS = {"gibbs+splitmerge": ("gibbs+splitmerge", {}),
        "subcluster (default)": ("subcluster", {}),
        "subcluster variant='paper'": ("subcluster", {"variant": "paper"})}


def summarise(idata):
    out = {}
    for var in ("num_clusters", "alpha"):
        values = idata.posterior[var].values.astype(float)
        ess = float(az.ess(values))  # (chain, draw)
        out[var] = {"mean": float(values.mean()), "sd": float(values.std()), "ess": ess,
                    "se": float(values.std() / np.sqrt(ess))}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = dpppl.load("models/gaussian_niw.dp")
    x = "galaxies"  # the bundled data set, as `--data galaxies`
    results = {}
    for name, (kernel, options) in RUNS.items():
        tic = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            idata = dpppl.sample(model, x, kernel=kernel, num_warmup=args.warmup, num_samples=args.draws,
                                 num_chains=args.chains, seed=args.seed, progress_bar=False, **options)
        results[name] = {"kernel": kernel, "options": options, "exact": int(idata.attrs["exact"]),
                         "seconds": time.perf_counter() - tic, **summarise(idata)}
        r = results[name]
        print(f"{name:28s} K {r['num_clusters']['mean']:6.2f} +- {r['num_clusters']['se']:.2f} "
              f"(ESS {r['num_clusters']['ess']:7.0f})  alpha {r['alpha']['mean']:5.2f} +- {r['alpha']['se']:.2f} "
              f"(ESS {r['alpha']['ess']:7.0f})  {r['seconds']:.0f} s", flush=True)
    ref = results["gibbs+splitmerge"]
    for name, r in results.items():
        if name == "gibbs+splitmerge":
            continue
        r["z_vs_gibbs+splitmerge"] = {
            var: (r[var]["mean"] - ref[var]["mean"]) / float(np.hypot(r[var]["se"], ref[var]["se"]))
            for var in ("num_clusters", "alpha")}
        print(f"{name}: difference from gibbs+splitmerge in standard errors: "
              + ", ".join(f"{k} {v:+.2f}" for k, v in r["z_vs_gibbs+splitmerge"].items()))
    write_json("subcluster_galaxies", {"args": vars(args), "results": results, "machine": machine_info()})


if __name__ == "__main__":
    main()
