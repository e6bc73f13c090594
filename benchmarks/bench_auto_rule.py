"""The measurements behind `kernel="auto"`'s thresholds (`dpppl.kernels.auto`).

1. **Exchangeable prior, conjugate component: exact collapsed hybrid or sub-cluster burn-in.**
   On W2-like data (DESIGN.md sec. 7: D = 2, 10 Gaussian clusters with full covariances,
   DP(1) with the NIW prior) at N = 10^3, 3x10^3, 10^4, 3x10^4, from `dpppl.sample`'s
   sequential initialisation: run time (compilation apart) until the log joint first comes
   within 0.5% of the true labels' (`reach_0.5%`) and first reaches it (`reach_true`), for
   `gibbs+splitmerge` (the small-N choice) and the sub-cluster sampler's burn-in step (the
   published variant, which `kernel="subcluster"` runs in warmup) - side by side, same data,
   same seed. The rule switches to `subcluster` at the smallest N where its burn-in reaches the
   target in less time on every seed.
2. **Kept draws: effective samples per second.** The same candidates as `dpppl.sample` runs
   them (`gibbs+splitmerge`; `subcluster` with its defaults: published warmup, exact kept
   draws), 2 chains, on the same data at N = 10^3, 3x10^3, 10^4: seconds (wall and process CPU) of
   a second, compiled call, the ESS of `lp` and `num_clusters` (arviz) per second, and the mean K. The burn-in of
   section 1 is not all: the exact sub-cluster variant mixes slowly where sweeps would empty
   small clusters (galaxies, 82 points: ESS 20 of 16,000 draws of K,
   `benchmarks/bench_subcluster_galaxies.py`).
3. **perm: the sec. 3.2 dynamic program or the beam.** Seconds of one perm move (kept-draw
   form: uniform permutation, `dp="mh"`) without the beam (O(N^2)) and with the beam of
   sec. 3.3 (`beam_epsilon=1e-32, beam_width=16`, O(N W)), beside one collapsed Gibbs sweep,
   on W1-shaped data (D = 10, true labels) at N = 64 .. 4000. perm uses the beam by default
   from the smallest N where the O(N^2) move costs more than a Gibbs sweep.
4. **`gibbs+perm-move` with default options on W1, D = 40, N = 10,000 from one cluster** (issue 17's
   done-when, a shorter check than the bench helper's): the hybrid's warmup step as
   `dpppl.sample` runs it (one Gibbs sweep then one perm move with random projections and the
   beam, its defaults at this N) until it reaches the true labels' log joint, then `gibbs` for
   up to ten times that time. Run only with `--only perm-default`.
5. **The model's preference** (`--only model`, run with `--dim 50`): on the data of sections 1 and 2, the
   log joint of the true labels against that of every point in a cluster of its own (no sampling),
   and, with `--samples` > 0, each candidate's CPU seconds per kept iteration and K from the true
   labels: whether the posterior the kept-draw ESS of section 2 measures is the true clustering's at
   all.

    python -m benchmarks.bench_auto_rule [--quick] [--seeds 2] [--budget 60] [--only burn-in|kept|perm|model]

Writes benchmarks/results/auto_rule.json (auto_rule-<section>.json with --only, -quick with --quick). Times are
`time.perf_counter` around compiled calls; ratios in one run are what to compare.
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import numpy as np

import dpppl
from benchmarks.harness import GibbsTrace, machine_info, write_json
from dpppl.kernels.subcluster.sampler import COLLAPSED_BELOW
from dpppl.run.runner import point_class

HYBRID_SIZES = (1_000, 3_000, 10_000, 30_000)
PERM_SIZES = (64, 125, 250, 500, 1000, 2000, 4000)
BEAM = dict(beam_epsilon=1e-32, beam_width=16)
KEPT_CANDIDATES = {"gibbs+splitmerge": ("gibbs+splitmerge", {}), "subcluster": ("subcluster", {}),
                   "subcluster collapsed_below=0": ("subcluster", {"collapsed_below": 0})}
"""Section 2's runs: `subcluster` with its defaults runs the collapsed step below `collapsed_below`
points (counted padded, `point_class`); with `collapsed_below=0` its sub-cluster moves at every N
(run only below, where the defaults differ)."""
METHODS = {"gibbs+splitmerge": ("gibbs+splitmerge", {}),
           "subcluster burn-in": ("subcluster", {"variant": "paper"})}


def w2_model():
    return dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())


def time_to_truth(n, seed, budget, dim=2):
    """Section 1 at one N and seed: each method's seconds to within 0.5% of the true labels'
    log joint and to the true labels' log joint (None: not within `budget` seconds)."""
    x, labels = dpppl.datasets.load("w2", n=n, dim=dim, num_clusters=10, seed=seed)
    model = w2_model()
    lp_true = dpppl.log_joint(model, x, labels)
    near = lp_true - 0.005 * abs(lp_true)
    out = {"n": n, "dim": dim, "seed": seed, "lp_true": lp_true}
    for name, (kernel, options) in METHODS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the published variant announces itself
            trace = GibbsTrace(model, x, init="sequential", seed=seed, kernel=kernel, options=options)
        trace.compile()
        reach_true = trace.run_until(lp_true, budget)
        first_near = trace.first_reaching(near)
        out[name] = {"reach_0.5%": None if first_near is None else first_near[1], "reach_true": reach_true,
                     "sweeps": trace.sweeps, "seconds_per_sweep": (trace.elapsed - trace.init_seconds)
                     / max(trace.sweeps, 1), "init_seconds": trace.init_seconds,
                     "compile_seconds": trace.compile_seconds, "final_lp": trace.trace["lp"][-1],
                     "final_k": trace.num_clusters()}
        r = out[name]
        print(f"  N={n:6d} seed {seed} {name:20s} 0.5%: {_s(r['reach_0.5%'])}  true: {_s(r['reach_true'])}  "
              f"({r['sweeps']} sweeps, {r['seconds_per_sweep'] * 1e3:.1f} ms/sweep, K={r['final_k']}, "
              f"compile {r['compile_seconds']:.1f} s)", flush=True)
    return out


def _s(seconds):
    return "  never" if seconds is None else f"{seconds:7.2f} s"


def kept_draws(n, seed, num_warmup, num_samples, dim=2):
    """Section 2 at one N: each candidate's ESS per second of kept draws (compiled call)."""
    import arviz as az

    x, _ = dpppl.datasets.load("w2", n=n, dim=dim, num_clusters=10, seed=seed)
    model = w2_model()
    out = {"n": n, "dim": dim, "seed": seed}
    for label, (kernel, options) in KEPT_CANDIDATES.items():
        if options.get("collapsed_below") == 0 and point_class(n) >= COLLAPSED_BELOW:
            out[label] = {"same_as": "subcluster"}  # the defaults run the sub-cluster moves already
            continue
        run = dict(kernel=kernel, num_chains=2, seed=seed, progress_bar=False, **options)
        dpppl.sample(model, x, num_warmup=1, num_samples=1, **run)  # compiles the chunk programs
        tic, cpu = time.perf_counter(), time.process_time()
        idata = dpppl.sample(model, x, num_warmup=num_warmup, num_samples=num_samples, **run)
        seconds, cpu = time.perf_counter() - tic, time.process_time() - cpu
        lp = idata.sample_stats["lp"].values
        k = idata.posterior["num_clusters"].values.astype(float)
        ess_lp, ess_k = float(az.ess(lp)), float(az.ess(k))
        out[label] = {"seconds": seconds, "cpu_seconds": cpu, "ess_lp": ess_lp, "ess_k": ess_k,
                      "ess_lp_per_s": ess_lp / seconds, "ess_k_per_s": ess_k / seconds,
                      "ess_lp_per_cpu_s": ess_lp / cpu, "ess_k_per_cpu_s": ess_k / cpu,
                      "mean_k": float(k.mean()), "mean_lp": float(lp.mean()),
                      "kernel_note": idata.attrs.get("kernel_note", "")}
        r = out[label]
        print(f"  N={n:6d} {label:30s} {seconds:7.1f} s ({cpu:7.1f} CPU s)  ESS(lp) {ess_lp:6.0f} "
              f"({r['ess_lp_per_s']:7.2f}/s)  ESS(K) {ess_k:6.0f} ({r['ess_k_per_s']:7.2f}/s)  "
              f"mean K {r['mean_k']:.2f}  mean lp {r['mean_lp']:.1f}",
              flush=True)
    return out


def model_preference(n, seed, num_samples, dim=2):
    """Section 5 at one N: the log joint of the true labels and of every point alone under section 1's
    model, and each candidate's seconds per kept iteration and K from the true labels (one chain,
    `num_warmup=0`, `num_samples` iterations after a compiling call; none when `num_samples` is 0)."""
    x, labels = dpppl.datasets.load("w2", n=n, dim=dim, num_clusters=10, seed=seed)
    model = w2_model()
    out = {"n": n, "dim": dim, "seed": seed, "lp_true": dpppl.log_joint(model, x, labels),
           "lp_singletons": dpppl.log_joint(model, x, np.arange(n))}
    print(f"  N={n:6d} D={dim}: log joint of the true labels {out['lp_true']:.1f}, of every point alone "
          f"{out['lp_singletons']:.1f}", flush=True)
    for label, (kernel, options) in KEPT_CANDIDATES.items() if num_samples else ():
        if options.get("collapsed_below") == 0 and point_class(n) >= COLLAPSED_BELOW:
            continue
        run = dict(kernel=kernel, num_chains=1, seed=seed, progress_bar=False, init=labels, num_warmup=0, **options)
        dpppl.sample(model, x, num_samples=1, **run)  # compiles the chunk programs
        tic, cpu = time.perf_counter(), time.process_time()
        idata = dpppl.sample(model, x, num_samples=num_samples, **run)
        seconds, cpu = time.perf_counter() - tic, time.process_time() - cpu
        k = idata.posterior["num_clusters"].values[0]
        lp = idata.sample_stats["lp"].values[0]
        out[label] = {"seconds_per_iteration": seconds / num_samples, "cpu_seconds_per_iteration": cpu / num_samples,
                      "k_first": int(k[0]), "k_last": int(k[-1]), "lp_last": float(lp[-1])}
        print(f"  N={n:6d} {label:30s} from the true labels: {cpu / num_samples:.2f} CPU s / iteration, K "
              f"{int(k[0])} -> {int(k[-1])}, lp {float(lp[-1]):.1f}", flush=True)
    return out


def perm_move_seconds(n, reps=3, seed=0):
    """Section 3 at one N: min seconds of a Gibbs sweep, the O(N^2) perm move and the beam move."""
    from dpppl.models.mixture import state_from_labels

    x, labels = dpppl.datasets.load("w1", n=n, dim=10, seed=seed)
    model = dpppl.DPMixture(1.0, dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=100.0))
    bound = model.bind(x)
    xj = jax.numpy.asarray(bound.x)
    k = int(labels.max()) + 1
    state = state_from_labels(bound.family, xj, np.asarray(labels), 2 * k + 8, 1.0)
    kernels = {"gibbs sweep": dpppl.kernels.build("gibbs", bound),
               "perm O(N^2)": dpppl.kernels.build("perm-move", bound, beam_epsilon=None),
               "perm beam": dpppl.kernels.build("perm-move", bound, **BEAM)}
    out = {"n": n}
    for name, kern in kernels.items():
        state0 = kern.init(state, xj) if kern.init is not None else state
        key = jax.random.key(seed)
        fn = jax.jit(kern.step).lower(key, state0, xj).compile()
        best, accepted = np.inf, []
        for r in range(reps):
            tic = time.perf_counter()
            new, info = fn(jax.random.fold_in(key, r), state0, xj)
            jax.block_until_ready(new)
            best = min(best, time.perf_counter() - tic)
            accepted.append(float(info._asdict().get("accept_prob", np.nan)))
        out[name] = {"seconds": best, "accept_prob": float(np.mean(accepted))}
    print(f"  N={n:5d}  gibbs sweep {out['gibbs sweep']['seconds'] * 1e3:8.1f} ms   perm O(N^2) "
          f"{out['perm O(N^2)']['seconds'] * 1e3:8.1f} ms (accept {out['perm O(N^2)']['accept_prob']:.2f})   "
          f"perm beam {out['perm beam']['seconds'] * 1e3:7.1f} ms (accept {out['perm beam']['accept_prob']:.2f})",
          flush=True)
    return out


def perm_default_race(n=10_000, dim=40, seed=0, budget=300.0):
    """Section 4: seconds to the true labels' log joint of `gibbs+perm-move` (default options, its
    warmup step) and of `gibbs`, from one cluster."""
    import dataclasses

    x, labels = dpppl.datasets.load("w1", n=n, dim=dim, seed=seed)
    model = dpppl.DPMixture(1.0, dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=100.0))
    lp_true = dpppl.log_joint(model, x, labels)
    hybrid = GibbsTrace(model, x, init="single", seed=seed, kernel="gibbs+perm-move")
    hybrid.kernel = dataclasses.replace(hybrid.kernel, step=hybrid.kernel.warmup)  # dpppl.sample's warmup
    t_hybrid = hybrid.run_until(lp_true, budget)
    print(f"  gibbs+perm-move (defaults): {_s(t_hybrid)} ({hybrid.sweeps} iterations, K={hybrid.num_clusters()}, "
          f"compile {hybrid.compile_seconds:.1f} s)", flush=True)
    gibbs = GibbsTrace(model, x, init="single", seed=seed, kernel="gibbs")
    limit = 10 * (t_hybrid if t_hybrid is not None else hybrid.elapsed)
    t_gibbs = gibbs.run_until(lp_true, limit)
    print(f"  gibbs: {_s(t_gibbs)} ({gibbs.sweeps} sweeps in {gibbs.elapsed:.1f} s, K={gibbs.num_clusters()}, "
          f"lp {gibbs.trace['lp'][-1]:.1f} against {lp_true:.1f})", flush=True)
    return {"n": n, "dim": dim, "seed": seed, "lp_true": lp_true, "gibbs+perm_seconds": t_hybrid,
            "gibbs+perm_iterations": hybrid.sweeps, "gibbs_seconds": t_gibbs, "gibbs_ran_seconds": gibbs.elapsed,
            "gibbs_final_lp": gibbs.trace["lp"][-1],
            "traces": {"gibbs+perm": hybrid.trace, "gibbs": gibbs.trace}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="N up to 10^4 and 1 seed")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--budget", type=float, default=60.0, help="seconds per method and run (section 1)")
    p.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="N of sections 1 and 2 (default 1000 3000 10000 30000; section 2 stops at 10000)")
    p.add_argument("--dim", type=int, default=2, help="D of the W2-like data of sections 1 and 2")
    p.add_argument("--only", choices=("burn-in", "kept", "perm", "perm-default", "model"), default=None,
                   help="run one section")
    p.add_argument("--warmup", type=int, default=100, help="warmup iterations (section 2)")
    p.add_argument("--samples", type=int, default=300, help="kept iterations (section 2)")
    args = p.parse_args(argv)
    sizes = args.sizes or (HYBRID_SIZES[:3] if args.quick else HYBRID_SIZES)
    seeds = range(1 if args.quick else args.seeds)
    payload = {"args": vars(args), "backend": jax.default_backend()}
    if args.only in (None, "burn-in"):
        print(f"1. time to the true labels' log joint on W2-like data (D = {args.dim}, 10 clusters)")
        with dpppl.config.x64():  # the precision dpppl.sample runs in (the NIW checks and the traces)
            payload["hybrid"] = [time_to_truth(n, seed, args.budget, args.dim) for n in sizes for seed in seeds]
    if args.only in (None, "kept"):
        print("2. kept draws: ESS per second, 2 chains, the candidates as dpppl.sample runs them")
        payload["kept"] = [kept_draws(n, 0, args.warmup, args.samples, args.dim) for n in sizes if n <= 10_000]
    if args.only in (None, "perm"):
        print("3. one perm move: the O(N^2) dynamic program against the beam, beside a Gibbs sweep (W1, D = 10)")
        payload["perm"] = [perm_move_seconds(n) for n in PERM_SIZES]
    if args.only == "perm-default":
        print("4. gibbs+perm-move with default options against gibbs, W1 D = 40, N = 10,000, from one cluster")
        payload["perm_default"] = perm_default_race()
    if args.only == "model":
        print(f"5. the model's preference on W2-like data (D = {args.dim}): true labels against every point alone")
        payload["model"] = [model_preference(n, 0, args.samples, args.dim) for n in sizes]
    name = ("auto_rule" + (f"-{args.only}" if args.only else "") + ("-sizes" if args.sizes else "")
            + (f"-d{args.dim}" if args.dim != 2 else "")
            + ("-quick" if args.quick else "")
            + ("" if jax.default_backend() == "cpu" else f"-{jax.default_backend()}"))
    print(f"wrote {write_json(name, {**payload, 'machine': machine_info()})}")


if __name__ == "__main__":
    main()
