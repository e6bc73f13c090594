"""``kernel="subcluster"`` (Chang & Fisher 2013) at scale, side by side with its peers.

Parts (``--part``, default all):

- ``w3``: W3 (10^6 x 2, 20 clusters, NIW): seconds per iteration with the 20 clusters, from
  the true labels (``--w3-start single``: from one cluster, where the sampler stalls; see
  docs/kernels/subcluster.md) (target: 0.2 s on 2 cores; 10 ms on a GPU).
- ``six``: 10^6 x 2 with 6 clusters, 100 iterations from one cluster, total seconds (the
  C++ code of the authors: 77 s on 1 core, 41 s on 2, 13 s on 8, per the issue).
- ``w2``: W2 (10^5 x 2, 10 clusters): seconds until the labels' NMI against the truth reaches
  0.95 of the true labels' level, taken as the NMI of the Bayes assignment under the true
  clusters (0.933 at 10^5: the clusters overlap, so no clustering reaches 0.95 itself), beside scikit-learn's
  BayesianGaussianMixture (DP prior,
  20 components, run to convergence) and our collapsed Gibbs from the same start; ratios.
- ``nonconjugate``: the non-conjugate path (NormalLogNormal, MH or NUTS parameter moves)
  beside NumPyro's NUTS on the truncated model and the conjugate NormalGamma, 10^4 x 2.
- ``d128``: 2 x 10^5 points in 128-D, 20 clusters: seconds per iteration and the fraction
  of the machine's peak FLOP rate (``--peak-gflops``) that the likelihood work reaches.

The kernel's step is driven directly (``jax.jit(kernel.step)``), one iteration at a time, with
the capacity grown on the host as ``dpppl.sample`` does; compile time is reported apart.
Results go to ``benchmarks/results/subcluster[-quick].json``. ``--quick`` shrinks every size.
``--devices N`` makes N host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N``,
set before jax starts) and shards the points over them: one per core uses every core.
``--option NAME=VALUE`` passes a kernel option (e.g. ``pair_merges=true``) to every part.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

import harness


def _driver(model, x, *, init_labels=None, capacity=32, **options):
    """(state, step, grow) for the sub-cluster kernel on data x, one chain: the published sampler
    (`variant="paper"`, the default warmup step, which these figures measure) unless `options`
    name another variant."""
    import jax
    import jax.numpy as jnp

    import dpppl
    from dpppl.models.init import initial_states
    from dpppl.kernels import build
    from dpppl.core.state import grow

    bound = model.bind(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # variant="paper" announces its inexactness
        kernel = build("subcluster", bound, **{"variant": "paper", **options})
    init = "single" if init_labels is None else np.asarray(init_labels, np.int32)[None]
    state = initial_states(bound, init, jax.random.split(jax.random.key(0), 1), capacity=capacity)
    state = jax.tree.map(lambda a: a[0], state)
    xj = jnp.asarray(bound.x)
    state = kernel.init(state, xj)
    step = jax.jit(kernel.step)
    del dpppl
    return state, step, xj, grow


def run_chain(model, x, iterations, *, truth=None, nmi_target=None, seed=0, **options):
    """Run ``iterations`` steps; return per-iteration seconds, K, NMI (when ``truth``), the
    compile seconds and the time when NMI first reached ``nmi_target``."""
    import jax

    from dpppl.analysis.metrics import normalized_mutual_information

    state, step, xj, grow = _driver(model, x, **options)
    tic = time.perf_counter()
    jax.block_until_ready(step(jax.random.key(10**6), state, xj))
    compile_seconds = time.perf_counter() - tic
    seconds, ks, nmis, reached, elapsed = [], [], [], None, 0.0
    for t in range(iterations):
        key = jax.random.fold_in(jax.random.key(seed), t)
        while True:
            tic = time.perf_counter()
            new_state, _ = step(key, state, xj)
            jax.block_until_ready(new_state)
            spent = time.perf_counter() - tic
            if not bool(new_state.overflow):
                break
            capacity = int(state.stats.n.shape[0])
            state = grow(state, 2 * capacity)  # recompiles once per capacity, like dpppl.sample
        state = new_state
        seconds.append(spent)
        elapsed += spent
        ks.append(int((np.asarray(state.stats.n) > 0).sum()))
        if truth is not None:
            nmis.append(normalized_mutual_information(np.asarray(state.z), truth))
            if reached is None and nmi_target is not None and nmis[-1] >= nmi_target:
                reached = elapsed
    return dict(seconds=seconds, k=ks, nmi=nmis, compile_seconds=compile_seconds, reached_seconds=reached,
                total_seconds=elapsed, capacity=int(state.stats.n.shape[0]))


def part_w3(args):
    import dpppl

    n = 100_000 if args.quick else 1_000_000
    x, y = dpppl.datasets.load("w3", n=n)
    model = dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())
    start = y if args.w3_start == "truth" else None
    out = run_chain(model, x, args.iterations, truth=y, init_labels=start, **args.kernel_options)
    steady = out["seconds"][-10:]
    print(f"W3 {n} x 2 from {args.w3_start}: median of the last 10 iterations {np.median(steady):.3f} s/iteration, "
          f"K {out['k'][-1]}, NMI {out['nmi'][-1]:.3f}, compile {out['compile_seconds']:.1f} s")
    return dict(n=n, start=args.w3_start, median_last10=float(np.median(steady)), **out)


def part_six(args):
    import dpppl

    n = 100_000 if args.quick else 1_000_000
    x, y = dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25.0, covariance="random", seed=3)
    model = dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())
    out = run_chain(model, x, 100, truth=y, **args.kernel_options)
    print(f"{n} x 2, 6 clusters, 100 iterations: {out['total_seconds']:.1f} s "
          f"(C++ peer: 41 s on 2 cores at 10^6), K {out['k'][-1]}, NMI {out['nmi'][-1]:.3f}")
    return dict(n=n, **out)


def oracle_nmi(x, y):
    """NMI against y of the Bayes assignment of every point to the true cluster under the
    clusters' own weights, means and covariances: the most any clustering of these
    overlapping clusters reaches (the true labels themselves score 1 only by knowing them)."""
    from scipy.stats import multivariate_normal

    from dpppl.analysis.metrics import normalized_mutual_information

    log_density = np.stack([np.log(np.mean(y == k)) + multivariate_normal(x[y == k].mean(0), np.cov(x[y == k].T))
                            .logpdf(x) for k in np.unique(y)], axis=1)
    return normalized_mutual_information(np.argmax(log_density, axis=1), y)


def part_w2(args):
    import dpppl
    from dpppl.diagnostics.arviz_compat import partition_group
    from dpppl.analysis.metrics import normalized_mutual_information

    n = 20_000 if args.quick else 100_000
    x, y = dpppl.datasets.load("w2", n=n)
    model = dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())
    oracle = oracle_nmi(x, y)
    target = 0.95 * oracle
    sub = run_chain(model, x, args.iterations, truth=y, nmi_target=target, **args.kernel_options)
    print(f"W2 {n}: the true labels' level (NMI of the Bayes assignment under the clusters' own means and "
          f"covariances) is {oracle:.3f}; subcluster reached 0.95 of it ({target:.3f}) after "
          f"{sub['reached_seconds']} s (final NMI {sub['nmi'][-1]:.3f}, K {sub['k'][-1]})")
    from sklearn.mixture import BayesianGaussianMixture

    tic = time.perf_counter()
    bgm = BayesianGaussianMixture(n_components=20, weight_concentration_prior_type="dirichlet_process",
                                  weight_concentration_prior=1.0, max_iter=args.sklearn_max_iter,
                                  random_state=0).fit(x)
    sk_seconds = time.perf_counter() - tic
    sk_nmi = normalized_mutual_information(bgm.predict(x), y)
    print(f"W2 {n}: sklearn BayesianGaussianMixture {sk_seconds:.1f} s to converge "
          f"({bgm.n_iter_} iterations, converged={bgm.converged_}), NMI {sk_nmi:.3f}")
    ratio = None if sub["reached_seconds"] is None else sk_seconds / sub["reached_seconds"]
    print(f"W2 {n}: sklearn time / subcluster time to NMI {target}: {ratio}")
    gibbs = dpppl.sample(model, x, kernel="gibbs", init="single", num_warmup=0,
                         num_samples=args.gibbs_sweeps, progress_bar=False, seed=0)
    return dict(n=n, oracle_nmi=oracle, nmi_target=target, subcluster=sub, sklearn_seconds=sk_seconds,
                sklearn_nmi=sk_nmi,
                sklearn_iterations=int(bgm.n_iter_), ratio_sklearn_over_subcluster=ratio,
                gibbs_final_nmi=normalized_mutual_information(
                    np.asarray(partition_group(gibbs)["z"].values[0, -1]), y), gibbs_sweeps=args.gibbs_sweeps)


def part_d128(args):
    import dpppl

    n = 20_000 if args.quick else 200_000
    x, y = dpppl.datasets.gaussian_mixture(n, 128, 20, mean_scale=25.0, seed=4)
    model = dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())
    out = run_chain(model, x, 10, truth=y, init_labels=y, **{"record_parameters": False, **args.kernel_options})
    per_iteration = float(np.median(out["seconds"][2:]))
    # whitened quadratic forms: N D^2 multiply-adds per occupied cluster (the label pass forms
    # no others) and 2 N D^2 for each point's two sub-clusters
    flops = 2.0 * n * 128 * 128 * (out["k"][-1] + 2)
    gflops = flops / per_iteration / 1e9
    print(f"{n} x 128, 20 clusters: {per_iteration:.2f} s/iteration, {gflops:.1f} GFLOP/s in the "
          f"likelihood work = {100 * gflops / args.peak_gflops:.1f}% of {args.peak_gflops} GFLOP/s peak")
    return dict(n=n, seconds_per_iteration=per_iteration, gflops=gflops, peak_gflops=args.peak_gflops, **out)


def _parse_option(text):
    name, _, value = text.partition("=")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def part_nonconjugate(args):
    """The non-conjugate path beside its peers on one data set (10^4 x 2, 6 clusters): the
    sub-cluster sampler on NormalLogNormal with MH or NUTS parameter moves, NumPyro's NUTS on
    the truncated NormalLogNormal model, and the sub-cluster sampler on the conjugate
    NormalGamma (the same diagonal Gaussian likelihood). Each run through dpppl.sample,
    timed on its second call (the first compiles and fills the compilation cache)."""
    import dpppl
    from dpppl.analysis.metrics import normalized_mutual_information
    from dpppl.diagnostics.arviz_compat import partition_group

    n = 2_000 if args.quick else 10_000
    x, y = dpppl.datasets.gaussian_mixture(n, 2, 6, mean_scale=25.0, covariance="identity", seed=5)
    runs = {
        "subcluster NormalLogNormal, MH": (dpppl.families.NormalLogNormal(), "subcluster", {"init": "single"}),
        "subcluster NormalLogNormal, NUTS moves": (dpppl.families.NormalLogNormal(), "subcluster",
                                                   {"init": "single", "param_update": "nuts"}),
        "NUTS, truncated NormalLogNormal (T = 20)": (dpppl.families.NormalLogNormal(), "nuts", {"truncation": 20}),
        "subcluster NormalGamma (conjugate)": (dpppl.families.NormalGamma(), "subcluster", {"init": "single"}),
    }
    out = {}
    for name, (component, kernel, options) in runs.items():
        model = dpppl.DPMixture(1.0, component)
        for _ in range(2):
            tic = time.perf_counter()
            idata = dpppl.sample(model, x, kernel=kernel, num_warmup=100, num_samples=100, progress_bar=False,
                                 seed=0, **options)
            seconds = time.perf_counter() - tic
        z = partition_group(idata)["z"].values[0]
        nmi = [normalized_mutual_information(z[t], y) for t in range(len(z))]
        out[name] = dict(seconds=seconds, final_nmi=nmi[-1], mean_nmi=float(np.mean(nmi)),
                         final_k=int(idata.posterior["num_clusters"].values[0, -1]),
                         mean_lp=float(idata.sample_stats["lp"].values.mean()))
        print(f"nonconjugate {n} x 2: {name:42s} {seconds:6.1f} s for 200 iterations, NMI {nmi[-1]:.3f} "
              f"(mean {np.mean(nmi):.3f}), K {out[name]['final_k']}, mean lp {out[name]['mean_lp']:.1f}")
    base = out["subcluster NormalLogNormal, MH"]["seconds"]
    for name, row in out.items():
        row["seconds_over_subcluster_mh"] = row["seconds"] / base
    return dict(n=n, runs=out)


PARTS = {"w3": part_w3, "six": part_six, "w2": part_w2, "d128": part_d128, "nonconjugate": part_nonconjugate}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=sorted(PARTS), action="append")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--gibbs-sweeps", type=int, default=20)
    parser.add_argument("--sklearn-max-iter", type=int, default=500)
    parser.add_argument("--peak-gflops", type=float, default=150.0,
                        help="the machine's peak float32 GFLOP/s (2 AVX2 FMA cores at ~2.5 GHz: ~150)")
    parser.add_argument("--devices", type=int, default=1, help="host devices to shard the points over")
    parser.add_argument("--w3-start", choices=("truth", "single"), default="truth",
                        help="W3 from the true labels (the 20-cluster steady state; default) or one cluster")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a kernel option for every part (VALUE read as JSON, else as a string)")
    parser.add_argument("--out", help="results name under benchmarks/results (default: subcluster[-quick])")
    args = parser.parse_args()
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={args.devices}").strip()
    args.kernel_options = {"devices": args.devices, **dict(_parse_option(o) for o in args.option)}
    results = {}
    for name in args.part or sorted(PARTS):
        results[name] = PARTS[name](args)
    options = {k: str(v) for k, v in args.kernel_options.items()}
    path = harness.write_json(args.out or ("subcluster-quick" if args.quick else "subcluster"),
                              {"options": options, "parts": results})
    print("wrote", path)


if __name__ == "__main__":
    main()
