"""`subcluster` on issue 34's data set: 2 x 10^5 points from 6 Gaussian clusters in 2-D
(`dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25, covariance="random", seed=3)`, the data of
`bench_distributed.py` and of `bench_subcluster.py`'s `six` part), `models/gaussian_niw.dp`, one chain.

    python -m benchmarks.bench_subcluster_six [--options "subset_sweep=256"] [--seed 0] [--warmup 100]
        [--samples 50] [--n 200000] [--init sequential] [--out NAME]

Each run is a `dpppl.sample` call after one that compiles its programs (one warmup and one kept
iteration); recorded: its wall and process CPU seconds, K at every kept draw, K and the NMI against the
true labels at the first and the last kept draw, the default point estimate's K and NMI, `lp` of the
last draw beside the true labels' log joint, the splits, merges and singleton moves of the exact step,
and which true clusters the last draw's clusters hold. For every two clusters of the last draw whose
points are mostly of one true cluster: the log joint gained by merging them, and the log Metropolis-
Hastings ratio of the auxiliary merge of the two (the kernel's own `_auxiliary_log_q` and
`log_split_gain`, 5 draws of its auxiliary variables), with S, the sum over their points of -log P(the
point's current side) under the two-component mixture the merge proposal draws: the part of -log q_aux
that a merge of two overlapping clusters pays.

Writes benchmarks/results/subcluster_six[-NAME].json.
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import dpppl
from benchmarks.harness import write_json
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.kernels.subcluster import sampler


def data(n):
    return dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25.0, covariance="random", seed=3)


def auxiliary_merge(bound, z, a, b, draws=5, seed=0):
    """log ratio of the auxiliary merge of clusters `a` and `b` of the labels `z` (per draw of its
    auxiliary variables), the log joint gain of splitting the union back, and S per draw."""
    family, x = bound.family, jnp.asarray(bound.x)
    left = family.weighted_stats(x, jnp.asarray(z == a, x.dtype))
    right = family.weighted_stats(x, jnp.asarray(z == b, x.dtype))
    union = jax.tree.map(jnp.add, left, right)
    members = (z == a) | (z == b)
    xu, on_right = x[members], z[members] == b
    beta = sampler._auxiliary_beta(union.n)
    evidences = sampler.log_evidences(family, left, right, union, jax.tree.map(lambda t: beta * t, union))
    gain = float(sampler.log_split_gain(family, 1.0, left, right, union, evidences=evidences))
    grid = sampler._log_weight_grid(left.n[None], right.n[None])[0]
    log_norm = jax.scipy.special.logsumexp(grid) - jnp.log(float(sampler.WEIGHT_GRID))
    ratios, ambiguity = [], []
    key = jax.random.key(seed)
    for _ in range(draws):
        k_left, k_right, k_w, key = jax.random.split(key, 4)
        thetas = family.posterior_draw(k_left, left), family.posterior_draw(k_right, right)
        w = (jax.random.categorical(k_w, grid) + 0.5) / sampler.WEIGHT_GRID
        f0, f1 = (family.log_likelihood(jax.tree.map(lambda t: t[None], th), xu).reshape(-1) for th in thetas)
        mixture = jnp.logaddexp(jnp.log(w) + f0, jnp.log1p(-w) + f1)
        own = jnp.where(on_right, jnp.log1p(-w) + f1, jnp.log(w) + f0)
        log_q = sampler._auxiliary_log_q(evidences[jnp.array([0, 1, 3])], beta, jnp.sum(f0 + f1), log_norm,
                                         jnp.sum(mixture))
        ratios.append(float(log_q) - gain)
        ambiguity.append(float(jnp.sum(mixture - own)))
    return {"clusters": [int(a), int(b)], "sizes": [int(np.sum(z == a)), int(np.sum(z == b))],
            "log_joint_gain_of_merge": -gain, "auxiliary_merge_log_ratio": ratios, "S": ambiguity}


def run(args):
    x, y = data(args.n)
    model = dpppl.load("models/gaussian_niw.dp")
    truth = float(dpppl.log_joint(model, x, y))
    options = {k: int(v) if v.isdigit() else v for k, v in (o.split("=") for o in args.options.split(";") if o)}
    call = dict(kernel="subcluster", num_chains=1, seed=args.seed, progress_bar=False, init=args.init, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dpppl.sample(model, x, num_warmup=1, num_samples=1, **call)  # compiles the programs
        tic, cpu = time.perf_counter(), time.process_time()
        idata = dpppl.sample(model, x, num_warmup=args.warmup, num_samples=args.samples, **call)
        wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
    z = partition_group(idata)["z"].values[0]
    k = idata.posterior["num_clusters"].values[0]
    stats = {name.removeprefix("subcluster_"): v.values[0]
             for name, v in group(idata, "sample_stats").data_vars.items()}
    nmi = [float(dpppl.metrics.normalized_mutual_information(z[t], y)) for t in (0, -1)]
    last = z[-1]
    held = {int(c): np.bincount(y[last == c], minlength=6).tolist() for c in np.unique(last)}
    result = {"args": vars(args), "wall_seconds": wall, "cpu_seconds": cpu, "K_first": int(k[0]), "K_last": int(k[-1]),
              "nmi_first": nmi[0], "nmi_last": nmi[-1], "lp_last": float(stats["lp"][-1]), "lp_truth": truth,
              "restricted_splits": int(stats["restricted_splits"].sum()),
              "restricted_merges": int(stats["restricted_merges"].sum()),
              "singleton_births": int(stats["singleton_births"].sum()),
              "singleton_deaths": int(stats["singleton_deaths"].sum()), "K_draws": k.tolist(),
              "true_clusters_held": held}
    estimate = dpppl.point_estimate(idata)  # the default: SALSO on the expected variation of information
    result["point_estimate"] = {"K": len(np.unique(estimate)),
                                "nmi": float(dpppl.metrics.normalized_mutual_information(estimate, y))}
    print(f"{args.options or 'defaults'}: K {result['K_first']} -> {result['K_last']}, "
          f"NMI {nmi[0]:.3f} -> {nmi[1]:.3f}, lp {result['lp_last'] - truth:+.1f} against the truth's; "
          f"splits {result['restricted_splits']}, merges {result['restricted_merges']}; singleton births "
          f"{result['singleton_births']}, deaths {result['singleton_deaths']}; K over the draws "
          f"{dict(zip(*(a.tolist() for a in np.unique(k, return_counts=True))))}; point estimate K "
          f"{result['point_estimate']['K']}, NMI {result['point_estimate']['nmi']:.3f}; "
          f"{wall:.1f} s ({cpu:.1f} CPU s)", flush=True)
    with dpppl.config.x64():
        bound = model.bind(x)
        majority = {c: int(np.argmax(counts)) for c, counts in held.items()}
        result["merges"] = [auxiliary_merge(bound, last, a, b) for a, b in itertools.combinations(sorted(held), 2)
                            if majority[a] == majority[b]]
    for m in result["merges"]:
        print(f"  merge {m['clusters']} ({m['sizes']} points): log joint {m['log_joint_gain_of_merge']:+.1f}, "
              f"auxiliary merge log ratio {np.mean(m['auxiliary_merge_log_ratio']):.1f}, S {np.mean(m['S']):.1f}",
              flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default="", help="the kernel's options, 'subset_sweep=256;launch_scans=10'")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--init", default="sequential")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    write_json("subcluster_six" + (f"-{args.out}" if args.out else ""), run(args))


if __name__ == "__main__":
    main()
