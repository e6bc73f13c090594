"""Is K = 6 the posterior's answer or the sampler's? Exact chains started at the true labels and at the
states sampler runs end in, on issue 34's six-cluster data (`bench_subcluster_six.data`: 6 Gaussian
clusters in 2-D, `mean_scale=25`, random covariances, seed 3; a smaller N draws fewer points of the same
six clusters), `models/gaussian_niw.dp` (DP, alpha ~ Gamma(1, 1), NIW).

    python -m benchmarks.bench_six_from_truth --n 20000 --kernels "auto,gibbs+splitmerge" --chains 2
        --samples 200 [--start truth|merged|stuck|sequential] [--stuck-warmup 100] [--stuck-samples 50]
        [--point] [--options "singleton_moves=0"]
        [--w2-seed S --stuck-kernel subcluster --stuck-init single --stuck-warmup 0 --stuck-samples 100]
        [--out NAME]
    python -m benchmarks.bench_six_from_truth --table    # benchmarks/results/six_from_truth.md from every run

Every chain runs the kernel's kept-draw (exact) moves only (`num_warmup=0`) from its start:
`truth` is the true labels (`init=` an array of labels), `merged` the true labels with the two
overlapping true clusters (1 and 5, means 1.45 apart) as one, `stuck` the last draw of a default run
(`kernel="auto"`, `--stuck-warmup` + `--stuck-samples` iterations from the sequential start, seed =
the chain's; `--stuck-kernel` and `--stuck-init` change the kernel and the start), `sequential`
dpppl's sequential start. Recorded per chain and draw: K, the cluster
sizes, `lp` (the run's log joint at the draw's alpha, with alpha's prior) and alpha; per chain: the
NMI of its first and last draw, and the alpha-integrated log joint log p(x, z) (below) of its start,
of its last draw and of its best draw; over the chains: ArviZ's R-hat and bulk ESS of K, and the
frequency of each K over all kept draws. `--point` adds two of dpppl's point estimates over the kept
draws of all chains, their K and NMI: `"vi"` (SALSO, expected VI, 200 draws) and `"best"` (the draw of
highest `lp`).

log p(x, z) with alpha integrated out against its Gamma(1, 1) prior is what compares two partitions
under the model whatever alpha is: `dpppl.log_joint` (at alpha = 1, the prior's mean) minus the
CRP's alpha-dependent factor at alpha = 1, plus log of the integral over alpha of
Gamma(alpha; 1, 1) alpha^K Gamma(alpha) / Gamma(alpha + N), by quadrature over log alpha.

Writes benchmarks/results/six_from_truth[-NAME].json; `--table` writes benchmarks/results/six_from_truth.md,
one row per run file and kernel.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
import warnings

import arviz as az
import numpy as np
from scipy.special import gammaln, logsumexp

import dpppl
from benchmarks.bench_subcluster_kept import _options
from benchmarks.bench_subcluster_six import data
from benchmarks.harness import RESULTS_DIR, load_average, write_json
from dpppl.diagnostics.arviz_compat import partition_group

OVERLAPPING = (1, 5)
"""The two true clusters whose means are 1.45 apart (docs/kernels/subcluster.md, "Six clusters")."""

LOG_ALPHA = np.linspace(-15.0, 6.0, 8001)
"""The quadrature grid of log alpha for the alpha-integrated CRP factor."""


def log_alpha_factor(k, n):
    """log of the integral over alpha of Gamma(alpha; 1, 1) alpha^k Gamma(alpha) / Gamma(alpha + n)."""
    a = np.exp(LOG_ALPHA)
    log_f = -a + k * LOG_ALPHA + gammaln(a) - gammaln(a + n) + LOG_ALPHA  # the last term: d alpha = alpha d log alpha
    return float(logsumexp(log_f) + np.log(LOG_ALPHA[1] - LOG_ALPHA[0]))


def alpha_posterior(k, n):
    """Mean and 5%, 95% quantiles of p(alpha | K = k, N = n) under the Gamma(1, 1) prior."""
    a = np.exp(LOG_ALPHA)
    log_f = -a + k * LOG_ALPHA + gammaln(a) - gammaln(a + n) + LOG_ALPHA
    w = np.exp(log_f - logsumexp(log_f))
    cdf = np.cumsum(w)
    return {"mean": float(np.sum(w * a)), "q05": float(a[np.searchsorted(cdf, 0.05)]),
            "q95": float(a[np.searchsorted(cdf, 0.95)])}


def integrated_log_joint(model, x, z):
    """log p(x, z) with alpha integrated out (module docstring); for a model with a fixed alpha
    (`--w2-seed`'s), `dpppl.log_joint`."""
    if not isinstance(model.prior.alpha, dpppl.priors.Gamma):
        return dpppl.log_joint(model, x, z)
    z = np.unique(np.asarray(z), return_inverse=True)[1]
    k, n = int(z.max()) + 1, z.size
    at_one = dpppl.log_joint(model, x, z)  # the CRP factor there: Gamma(1) / Gamma(1 + N) prod Gamma(n_k)
    return at_one + float(gammaln(1 + n)) + log_alpha_factor(k, n)


def sizes(z):
    return sorted(np.bincount(np.unique(z, return_inverse=True)[1]).tolist(), reverse=True)


STUCK = {}
"""The stuck start of each seed, computed once whatever the kernels."""


def stuck_start(model, x, seed, args):
    """The last draw of a run of `--stuck-kernel` from `--stuck-init`."""
    if seed not in STUCK:
        idata = dpppl.sample(model, x, kernel=args.stuck_kernel, init=args.stuck_init, num_warmup=args.stuck_warmup,
                             num_samples=args.stuck_samples, seed=seed, progress_bar=False)
        STUCK[seed] = partition_group(idata)["z"].values[0, -1]
    return STUCK[seed]


def chain(model, x, y, kernel, seed, args):
    if args.start == "truth":
        init = y
    elif args.start == "merged":
        init = np.where(y == OVERLAPPING[1], OVERLAPPING[0], y)
    elif args.start == "stuck":
        init = stuck_start(model, x, seed, args)
    else:
        init = "sequential"
    tic, cpu = time.perf_counter(), time.process_time()
    options = _options(args.options) if kernel == "subcluster" else {}
    idata = dpppl.sample(model, x, kernel=kernel, init=init, num_warmup=0, num_samples=args.samples, seed=seed,
                         num_chains=1, progress_bar=False, **options)
    wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
    z = partition_group(idata)["z"].values[0]
    lp = idata.sample_stats["lp"].values[0]
    best = int(np.argmax(lp))
    start = z[0] if args.start == "sequential" else init
    record = {
        "kernel": idata.posterior.attrs["kernel"], "seed": seed, "wall_seconds": wall, "cpu_seconds": cpu,
        "K": idata.posterior["num_clusters"].values[0].tolist(),
        "alpha": idata.posterior["alpha"].values[0].tolist() if "alpha" in idata.posterior else [],  # fixed alpha
        "lp": lp.tolist(), "sizes": [sizes(zt) for zt in z],
        "start": {"K": len(sizes(start)), "sizes": sizes(start), "log_p_x_z": integrated_log_joint(model, x, start),
                  "nmi": float(dpppl.metrics.normalized_mutual_information(start, y))},
        "last": {"log_p_x_z": integrated_log_joint(model, x, z[-1]),
                 "nmi": float(dpppl.metrics.normalized_mutual_information(z[-1], y))},
        "best": {"draw": best, "K": len(sizes(z[best])), "sizes": sizes(z[best]),
                 "log_p_x_z": integrated_log_joint(model, x, z[best])},
    }
    counts = collections.Counter(record["K"])
    print(f"  {record['kernel']} seed {seed}: start K {record['start']['K']} "
          f"(log p(x,z) {record['start']['log_p_x_z']:.1f}) -> last K {record['K'][-1]} sizes {record['sizes'][-1]} "
          f"(log p(x,z) {record['last']['log_p_x_z']:.1f}, NMI {record['last']['nmi']:.3f}); K over draws "
          f"{dict(sorted(counts.items()))}; {wall:.1f} s ({cpu:.1f} CPU s)", flush=True)
    return record, z


def load(args):
    """The data, the true labels and the model: issue 34's (module docstring), or with `--w2-seed S`
    issue 32's one-cluster check's, `dpppl.datasets.load("w2", n, num_clusters=6, seed=S)` under
    `DPMixture(1.0, NormalInverseWishart())` (`benchmarks/bench_subcluster_kept.py`)."""
    if args.w2_seed is None:
        return (*data(args.n), dpppl.load("models/gaussian_niw.dp"))
    x, y = dpppl.datasets.load("w2", n=args.n, num_clusters=6, seed=args.w2_seed)
    return x, y, dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())


def run(args):
    x, y, model = load(args)
    truth = integrated_log_joint(model, x, y)
    result = {"args": vars(args), "n": args.n, "truth": {"sizes": sizes(y), "log_p_x_z": truth},
              "alpha_given_K": {k: alpha_posterior(k, args.n) for k in range(4, 13)}, "kernels": {}}
    print(f"N {args.n}: true sizes {sizes(y)}, true labels' log p(x, z) {truth:.1f}", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for kernel in args.kernels.split(","):
            chains, draws = [], []
            for c in range(args.chains):
                record, z = chain(model, x, y, kernel, args.seed + c, args)
                chains.append(record)
                draws.append(z)
            k = np.array([r["K"] for r in chains], dtype=float)
            frequency = collections.Counter(k.reshape(-1).astype(int).tolist())
            summary = {"chains": chains, "K_frequency": {int(a): b / k.size for a, b in sorted(frequency.items())},
                       "K_mean": float(k.mean()),
                       "K_rhat": float(az.rhat(k)) if args.chains > 1 else None,
                       "K_ess_bulk": float(az.ess(k)) if np.ptp(k) > 0 else None,
                       "alpha_mean": float(np.mean([r["alpha"] for r in chains])) if chains[0]["alpha"] else None}
            if args.point:
                lp = np.array([r["lp"] for r in chains])
                best = np.unravel_index(np.argmax(lp), lp.shape)
                estimates = {"vi": dpppl.analysis.point_estimate(np.stack(draws), max_draws=200),
                             "best": draws[best[0]][best[1]]}
                summary["point_estimate"] = {
                    method: {"K": len(sizes(estimate)), "sizes": sizes(estimate),
                             "nmi": float(dpppl.metrics.normalized_mutual_information(estimate, y)),
                             "log_p_x_z": integrated_log_joint(model, x, estimate)}
                    for method, estimate in estimates.items()}
            result["kernels"][kernel] = summary
            print(f"{kernel}: P(K) {summary['K_frequency']}, mean K {summary['K_mean']:.2f}, R-hat "
                  f"{summary['K_rhat']}, ESS {summary['K_ess_bulk']}, mean alpha {summary['alpha_mean']}"
                  + "".join(f"; point estimate '{m}' K {e['K']} NMI {e['nmi']:.3f}"
                            for m, e in summary.get("point_estimate", {}).items()), flush=True)
    result["load_average"] = load_average()
    return result


def table_row(name, result, kernel, summary):
    """One row of the table: a run's K posterior, its extra clusters and its point estimates."""
    chains, truth, n = summary["chains"], result["truth"]["log_p_x_z"], result["n"]
    extra = [s for r in chains for sz in r["sizes"] for s in sz[6:]]
    frequency = {int(k): v for k, v in summary["K_frequency"].items()}
    estimates = summary.get("point_estimate", {})
    estimates = {"vi": estimates} if "K" in estimates else estimates  # the first runs recorded "vi" alone
    data_seed = result["args"].get("w2_seed")
    cells = [f"{n:,}", result["args"]["start"] + ("" if data_seed is None else f" (issue 32's data, seed {data_seed})"),
             kernel, f"{len(chains)} x {len(chains[0]['K'])}",
             *(f"{frequency.get(k, 0.0):.3f}" for k in (5, 6, 7)),
             f"{sum(v for k, v in frequency.items() if k >= 8):.3f}", f"{summary['K_mean']:.2f}",
             "-" if summary["K_rhat"] is None else f"{summary['K_rhat']:.3f}",
             "-" if summary["K_ess_bulk"] is None else f"{summary['K_ess_bulk']:.0f}",
             f"{np.median(extra):.0f} / {max(extra)}" if extra else "none",
             f"{np.mean([sum(s >= 0.01 * n for s in sz) == 6 for r in chains for sz in r['sizes']]):.3f}",
             "-" if summary["alpha_mean"] is None else f"{summary['alpha_mean']:.2f}",
             ", ".join(f"{r['start']['log_p_x_z'] - truth:+.0f}" for r in chains),
             ", ".join(f"{r['last']['log_p_x_z'] - truth:+.0f}" for r in chains),
             ", ".join(f"{r['last']['nmi']:.3f}" for r in chains),
             "; ".join(f"{m} K {e['K']}, NMI {e['nmi']:.3f}" for m, e in estimates.items()) or "-",
             f"{sum(r['cpu_seconds'] for r in chains):.0f}"]
    return "| " + " | ".join(cells) + " |"


def write_table():
    """benchmarks/results/six_from_truth.md from every six_from_truth-*.json."""
    runs = [json.loads(path.read_text()) for path in sorted(RESULTS_DIR.glob("six_from_truth-*.json"))]
    runs.sort(key=lambda r: (r["n"], r["args"]["start"]))
    header = ["N", "start", "kernel", "chains x draws", "P(K=5)", "P(K=6)", "P(K=7)", "P(K>=8)", "mean K",
              "R-hat K", "ESS K", "extra clusters' size: median / max", "P(6 clusters of >= 1% of N)", "mean alpha",
              "start's log p(x,z) - truth's", "last draw's - truth's", "last draw's NMI", "point estimates",
              "CPU s"]
    lines = ["# Exact chains on issue 34's six-cluster data (`benchmarks/bench_six_from_truth.py`)", "",
             "Every chain runs the kept-draw (exact) moves only, `num_warmup=0`, from its start: `truth` the true "
             "labels, `merged` the true labels with the overlapping pair (true clusters 1 and 5) as one, `stuck` "
             "the last draw of a default run (100 warmup + 50 kept iterations from the sequential start, the "
             "chain's seed). log p(x, z) is the alpha-integrated log joint (the script's docstring), relative to "
             "the true labels'. Extra clusters: every cluster beyond the six largest of every draw; then the "
             "share of draws with exactly six clusters of at least 1% of the points each. Point "
             "estimates over all chains' draws: `vi` (SALSO, expected VI) and `best` (highest `lp`). "
             "Shared 2-core machine at load 15-21: CPU seconds, not wall.", "",
             "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += [table_row(f"six_from_truth-{r['args']['out']}", r, kernel, summary)
              for r in runs for kernel, summary in r["kernels"].items()]
    (RESULTS_DIR / "six_from_truth.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--kernels", default="auto,gibbs+splitmerge")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", choices=("truth", "merged", "stuck", "sequential"), default="truth")
    parser.add_argument("--stuck-kernel", default="auto")
    parser.add_argument("--stuck-init", default="sequential")
    parser.add_argument("--stuck-warmup", type=int, default=100)
    parser.add_argument("--stuck-samples", type=int, default=50)
    parser.add_argument("--point", action="store_true")
    parser.add_argument("--options", default="", help="`subcluster`'s options, 'singleton_moves=0;...'")
    parser.add_argument("--w2-seed", type=int, default=None, help="issue 32's data of this seed (`load`)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--table", action="store_true", help="write six_from_truth.md from the runs' files")
    args = parser.parse_args()
    if args.start == "merged" and args.w2_seed is not None:
        parser.error("--start merged names issue 34's overlapping pair; it has no meaning with --w2-seed")
    if args.table:
        return write_table()
    write_json("six_from_truth" + (f"-{args.out}" if args.out else ""), run(args))


if __name__ == "__main__":
    main()
