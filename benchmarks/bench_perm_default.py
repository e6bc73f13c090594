"""`kernel="perm"` (the paper's sampler, `gibbs+splitmerge+perm-every`: the move every 16th iteration) against
`gibbs+splitmerge` and `gibbs+splitmerge+perm-move` (the move each iteration) on galaxies (issue 32, item 4).

Each kernel samples `models/galaxies_fixed.dp` with 2 chains x 1,000 draws after 500 warmup iterations
(`dpppl.sample` defaults otherwise), side by side in one process: first a run on an empty
compilation cache (`DPPPL_COMPILATION_CACHE` = a new temporary directory, so its wall time includes
compiling the kernel's programs), then `--repeats` runs with further seeds, which compile nothing
(same shapes). Before the cold runs, a 1 + 1-iteration `gibbs` run compiles what every kernel
shares (the chains' start by sequential seating, their keys, the output's programs), so each cold
run pays for its own kernel's programs whichever runs first. The kernels alternate within each
round so that the machine's load falls on all of them alike. For each run: the ESS of K
(`arviz.ess` of `posterior.num_clusters`), the wall seconds of the `dpppl.sample` call, and ESS per
second; the table gives the cold run's ESS/s (compile included), the median over the warm runs
(compile excluded), the compile seconds (cold wall less the warm median), the process's CPU seconds
(cold, and the warm median: the machine's other load does not count there), and the ratios of
`perm`'s to `gibbs+splitmerge`'s, warm and cold (the issue's target: at least 0.5).

    PYTHONPATH=. python benchmarks/bench_perm_default.py     # writes benchmarks/results/perm_default.md and .json
    PYTHONPATH=. python benchmarks/bench_perm_default.py --repeats 1   # quicker
    PYTHONPATH=. python benchmarks/bench_perm_default.py --kernels perm,gibbs+splitmerge   # the two compared
    PYTHONPATH=. python benchmarks/bench_perm_default.py --every 4 --out /tmp/every4.md   # another every
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KERNELS = ("perm", "gibbs+splitmerge", "gibbs+splitmerge+perm-move")
"""`perm` (`gibbs+splitmerge+perm-every`), the project's default for galaxies, and the paper's
GIBBS+SPLITMERGE+PERM with the move each iteration (`perm` before the move was scheduled)."""
MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "galaxies_fixed.dp")


def cpu_seconds() -> float:
    """User and system CPU seconds of this process (XLA's compiler threads included)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def one_run(dpppl, az, kernel: str, seed: int, options: dict) -> dict:
    """One `dpppl.sample` of galaxies: the kernel that ran, wall and CPU seconds, ESS of K, mean K."""
    model = dpppl.load(MODEL)
    start, cpu = time.perf_counter(), cpu_seconds()
    idata = dpppl.sample(model, kernel=kernel, num_warmup=500, num_samples=1000, num_chains=2, seed=seed,
                         progress_bar=False, **options)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    k = idata.posterior["num_clusters"]
    ess = float(az.ess(k.astype(float)).to_array().values.squeeze())
    return {"ran": idata.attrs["kernel"], "seed": seed, "wall_s": wall, "cpu_s": cpu, "ess_k": ess,
            "ess_per_s": ess / wall,
            "mean_k": float(k.mean()), "rhat_k": float(az.rhat(k.astype(float)).to_array().values.squeeze())}


def table(runs: dict) -> list[str]:
    lines = ["| kernel | ran (`attrs[\"kernel\"]`) | mean K | ESS of K (cold) | wall s (cold, compile included) "
             "| ESS/s cold | ESS of K (warm, median) | wall s (warm, median) | ESS/s warm (median) | compile s "
             "| CPU s cold | CPU s warm (median) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for kernel, rs in runs.items():
        cold, warm = rs[0], rs[1:]
        med = (lambda key: statistics.median(r[key] for r in warm)) if warm else (lambda key: float("nan"))
        lines.append(f"| `{kernel}` | `{cold['ran']}` | {cold['mean_k']:.2f} | {cold['ess_k']:.0f} | "
                     f"{cold['wall_s']:.1f} | {cold['ess_per_s']:.1f} | {med('ess_k'):.0f} | {med('wall_s'):.1f} | "
                     f"{med('ess_per_s'):.1f} | {cold['wall_s'] - med('wall_s'):.1f} | {cold['cpu_s']:.1f} | "
                     f"{med('cpu_s'):.1f} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=4, help="warm runs per kernel after the cold one")
    p.add_argument("--every", type=int, default=None, help="perm's option every (default: perm's default)")
    p.add_argument("--kernels", default=",".join(KERNELS),
                   help="comma-separated kernels, perm and gibbs+splitmerge among them (default: %(default)s)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                 "perm_default.md"))
    args = p.parse_args()
    os.environ["DPPPL_COMPILATION_CACHE"] = tempfile.mkdtemp(prefix="dpppl-cache-")  # before dpppl is imported
    import arviz as az

    import dpppl
    from harness import load_average, machine_info, write_json

    dpppl.sample(dpppl.load(MODEL), kernel="gibbs", num_warmup=1, num_samples=1, num_chains=2, seed=0,
                 progress_bar=False)  # the programs every kernel shares, compiled before the cold runs
    kernels = args.kernels.split(",")
    if not {"perm", "gibbs+splitmerge"} <= set(kernels):
        p.error("--kernels must include perm and gibbs+splitmerge (their ratio is the result)")
    runs = {k: [] for k in kernels}
    for round_ in range(1 + args.repeats):
        for kernel in kernels:
            r = one_run(dpppl, az, kernel, round_, {"every": args.every} if kernel == "perm" and args.every else {})
            runs[kernel].append(r)
            print(f"round {round_} {kernel:<17} ran {r['ran']:<17} wall {r['wall_s']:6.1f} s  ESS(K) "
                  f"{r['ess_k']:6.0f}  ESS/s {r['ess_per_s']:6.1f}  K {r['mean_k']:.2f}  R-hat {r['rhat_k']:.3f}",
                  flush=True)
    lines = table(runs)
    ratio = {label: runs["perm"][i]["ess_per_s"] / runs["gibbs+splitmerge"][i]["ess_per_s"]
             for label, i in (("cold", 0),)}
    if args.repeats:
        ratio["warm"] = (statistics.median(r["ess_per_s"] for r in runs["perm"][1:])
                         / statistics.median(r["ess_per_s"] for r in runs["gibbs+splitmerge"][1:]))
    info = machine_info()
    doc = ["# `kernel=\"perm\"` on galaxies: ESS of K per second", "",
           "`python benchmarks/bench_perm_default.py --repeats " f"{args.repeats}"
           + (f" --every {args.every}" if args.every else "")
           + (f" --kernels {args.kernels}" if kernels != list(KERNELS) else "")
           + "`: `models/galaxies_fixed.dp`, 2 chains x 1,000 draws after 500 warmup, each kernel with its "
           "default options, side by side in one process "
           "(cold: an empty compilation cache, after a 1 + 1-iteration `gibbs` run compiled the programs every "
           "kernel shares; warm: further seeds, nothing compiled).", "", *lines, "",
           "perm / gibbs+splitmerge, ESS/s of K: " + ", ".join(f"{k} {v:.2f}" for k, v in ratio.items())
           + " (target: at least 0.5)", "",
           f"Machine: {info['platform']}, {info['cpus_usable']} usable CPUs, load average at the end "
           f"{load_average()}; JAX {info['versions']['jax']} on {info['jax_backend']}, {info['cpu_model']}.", "",
           "Each run (round 0 is the cold one):", "",
           "| kernel | seed | wall s | CPU s | ESS of K | ESS/s | mean K | R-hat K |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    doc += [f"| `{k}` | {r['seed']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['ess_k']:.0f} | {r['ess_per_s']:.1f} "
            f"| {r['mean_k']:.2f} | {r['rhat_k']:.3f} |" for k, rs in runs.items() for r in rs]
    with open(args.out, "w") as f:
        f.write("\n".join(doc) + "\n")
    write_json(os.path.splitext(os.path.basename(args.out))[0], {"every": args.every, "runs": runs, "ratio": ratio})
    print("\n".join(lines))
    print(f"ratio perm / gibbs+splitmerge: {ratio}; written {args.out}")


if __name__ == "__main__":
    main()
