"""Issue 17's "Done when" benchmarks: what `dpppl.sample` gives with default options.

Three measures, each side by side in one process (`--only` picks a subset):

- **galaxies** (bundled, 82 points, `models/gaussian_niw.dp`): `kernel="subcluster"` with
  default options (or those of `--subcluster-option`) beside `--reference-kernel`
  (`gibbs+splitmerge`), 4 chains x 4000 draws after dpppl's default warmup. For
  `num_clusters` and `alpha`: the posterior mean, its Monte Carlo standard error
  `sd / sqrt(ESS)` (ArviZ's `ess(method="mean")` over the 4 chains), and the z-score of the
  difference of the two means, `(m1 - m2) / sqrt(se1^2 + se2^2)`. Done when |z| is within
  Monte Carlo error (|z| <= `--z-max`, 3 by default) for both.
- **w1** (DESIGN.md sec. 7, D = 40, N = 10,000, 40 clusters, DP(1) with
  NormalKnownCov(sigma2=1, mu0=0, tau2=100)), both from one cluster: run seconds of
  `kernel="gibbs+perm"` with default options (or `--perm-option`s; dpppl's default
  warmup and draws) and of `kernel="gibbs"` until the log joint first reaches the true
  labels'. Gibbs is capped (`--w1-cap`, 600 s); when it never reaches it, its time is
  reported as ">= cap" and the ratio as an upper bound. Done when the ratio perm / gibbs
  is at most 0.1.
- **w2** (W2 variants, N = 10,000, D = 2, 10 full-covariance clusters, DP(1), NIW; data
  seeds 0-4): run seconds of the default call `dpppl.sample(model, x, seed=s)` (no
  `kernel` argument, whatever the default is; `--default-kernel` names one instead) until
  the log joint is within 0.5 % of the true labels', beside scikit-learn's
  `BayesianGaussianMixture` (DP prior of weight 1, full covariances, 30 components, BLAS
  on one thread: see bench_foundation.py) fit to convergence on the same data in the same
  run. Done when the default is faster on every seed; times with the compile time added
  are reported beside.

**How a `dpppl.sample` call is timed.** Every dpppl run here is one real `dpppl.sample`
call with the options a user would pass. Its log joint after each iteration is read from
the chunks the runner computes: the benchmark wraps `dpppl.run.runner._chunk_function`
(the one private hook; warmup iterations included) and records each chunk's wall time
and its per-iteration `lp`. An iteration's time is its chunk's start plus its share of the
chunk (chunks last about 0.5 s; iterations within one are taken as equally long).
Compilation (JAX tracing, lowering and XLA compilation or a persistent-cache load,
observed with `jax.monitoring` time spans) is subtracted and reported apart, so *run s*
is the wall time of the call up to that iteration (checks, initialisation, kernel
init, iterations) less compilation. The call is stopped once the target is reached or the
cap passes (an exception raised from the wrapper; nothing is returned then). A run that
ends before either is reported as not reached within its iterations.

    PYTHONPATH=. python benchmarks/bench_defaults.py                  # all three: 12-25 min (W1 caps)
    PYTHONPATH=. python benchmarks/bench_defaults.py --only galaxies  # one measure (~1 min)
    PYTHONPATH=. python benchmarks/bench_defaults.py --quick          # small sizes, ~3 min
    PYTHONPATH=. python benchmarks/bench_defaults.py --quick --default-kernel gibbs+splitmerge \\
        --perm-option beam_epsilon=1e-32 --perm-option beam_width=16   # explicit specs

(`PYTHONPATH=.` from the repository root makes this tree's `dpppl` the one imported.)

Results: `benchmarks/results/defaults.json` and `defaults.md` (`defaults-quick.*` with
`--quick`, or `--out NAME`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

import dpppl
from bench_foundation import TARGET_FRACTION, make_model, sklearn_method
from bench_perm import w1_model
from bench_subcluster import _parse_option
from harness import RESULTS_DIR, Workload, load_average, write_json

COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")
MEASURES = ("galaxies", "w1", "w2")


# ---------------------------------------------------------------- timing a sample call ---
class Stop(Exception):
    """Raised from the chunk wrapper to end a `dpppl.sample` call: target reached or cap passed."""


class SampleClock:
    """The log joint of one `dpppl.sample` call against its run time, compilation apart.

    Use as a context manager around the call; see the module docstring. ``target_lp``:
    stop once an iteration's lp (chain 0) is at least this; ``cap``: stop once the run
    time passes this many seconds.
    """

    _active = None
    _installed = False

    def __init__(self, target_lp: float, cap: float = math.inf):
        self.target_lp, self.cap = target_lp, cap
        self.spans, self.trace, self.kernels = [], [], []
        self.reached = None   # {"iteration", "run_seconds", "compile_seconds", "num_clusters", "warmup"}
        self.capped = False
        self.start = self.end = None

    # -- the hooks (installed once per process, active for the clock in a `with`) ------
    @classmethod
    def _install(cls):
        if cls._installed:
            return
        from dpppl.run import runner

        def on_span(event, start, end, **_):
            if cls._active is not None and event in COMPILE_EVENTS:
                cls._active.spans.append((start, end))

        jax.monitoring.register_event_time_span_listener(on_span)
        original = runner._chunk_function

        def chunk_function(make, kern, kernel_key, length, capacity):
            fn = original(make, kern, kernel_key, length, capacity)
            clock = cls._active
            if clock is None:
                return fn
            spec = kernel_key[1] if isinstance(kernel_key, tuple) and len(kernel_key) > 1 else kern.name

            def timed(states, chain_keys, t, n_iter, warmup, target):
                entry = {"spec": str(spec), "name": kern.name, "exact": bool(kern.exact), "warmup": bool(warmup)}
                if entry not in clock.kernels:
                    clock.kernels.append(entry)
                a = time.time()
                out = jax.block_until_ready(fn(states, chain_keys, t, n_iter, warmup, target))
                clock._chunk(a, time.time(), out, int(t), int(n_iter), bool(warmup))
                return out
            return timed

        runner._chunk_function = chunk_function
        cls._installed = True

    def __enter__(self):
        self._install()
        if SampleClock._active is not None:
            raise RuntimeError("one SampleClock at a time")
        SampleClock._active = self
        self.start = time.time()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.end = time.time()
        SampleClock._active = None
        stopped = exc_type is not None and issubclass(exc_type, Stop)
        if (exc_type is None or stopped) and not self.trace:
            raise RuntimeError("no chunk of the partition runner was observed: the run did not go through "
                               "dpppl.run.runner (another backend?) and cannot be timed here")
        return stopped

    # -- accounting ---------------------------------------------------------------------
    def compile_between(self, a: float, b: float) -> float:
        """Seconds in [a, b] spent compiling (the union of the recorded spans)."""
        total, reach = 0.0, a
        for s, e in sorted(self.spans):
            s, e = max(s, reach), min(e, b)
            if e > s:
                total += e - s
                reach = e
        return total

    def run_seconds(self, wall: float) -> float:
        return (wall - self.start) - self.compile_between(self.start, wall)

    def _chunk(self, a, b, out, t, n_iter, warmup):
        new_states, buf = out
        if np.asarray(new_states.overflow).any():  # the runner grows the capacity and runs it again
            return
        lp = np.asarray(buf["lp"])[0, :n_iter]
        k = np.asarray(buf["num_clusters"])[0, :n_iter]
        comp = self.compile_between(a, b)  # compilation comes before the chunk's iterations
        for j in range(n_iter):
            wall = a + comp + (j + 1) / n_iter * (b - a - comp)
            row = {"iteration": t + j + 1, "run_seconds": self.run_seconds(wall), "lp": float(lp[j]),
                   "num_clusters": int(k[j]), "warmup": warmup}
            self.trace.append(row)
            if self.reached is None and lp[j] >= self.target_lp:
                self.reached = dict(row, compile_seconds=self.compile_between(self.start, wall))
                raise Stop
        if self.run_seconds(b) > self.cap:
            self.capped = True
            raise Stop

    def summary(self) -> dict:
        """What the JSON keeps: the hit (or None), totals, kernels seen, a thinned trace."""
        last = self.trace[-1]
        step = max(1, len(self.trace) // 400)
        keys = ("iteration", "run_seconds", "lp", "num_clusters")
        return {"reached": self.reached, "capped": self.capped,
                "cap_seconds": None if math.isinf(self.cap) else self.cap, "target_lp": self.target_lp,
                "iterations": last["iteration"], "run_seconds": self.run_seconds(self.end),
                "compile_seconds": self.compile_between(self.start, self.end), "last_lp": last["lp"],
                "last_num_clusters": last["num_clusters"], "kernels": self.kernels,
                "trace": {key: [r[key] for r in self.trace[::step] + [last]] for key in keys}}


def timed_sample(model, x, target_lp, cap=math.inf, **kwargs) -> dict:
    """One `dpppl.sample(model, x, **kwargs)` (no progress bar), stopped at the target or cap."""
    attrs = None  # the returned InferenceData's, when the call ran to its end
    with SampleClock(target_lp, cap) as clock:
        idata = dpppl.sample(model, x, progress_bar=False, **kwargs)
        attrs = {k: idata.attrs.get(k) for k in ("kernel", "exact")}
    return dict(clock.summary(), attrs=attrs, call=dict(kwargs))


def _seconds(hit: dict) -> str:
    if hit["reached"]:
        return f"{hit['reached']['run_seconds']:.2f}"
    return f">= {hit['run_seconds']:.1f}" if hit["capped"] else f"not in {hit['iterations']} it"


def _kernels(hit: dict) -> str:
    return ", ".join(dict.fromkeys(f"{k['spec']}{' (warmup)' if k['warmup'] else ''}" for k in hit["kernels"]))


# ------------------------------------------------------------------------- (a) galaxies ---
def posterior_mean(idata, name: str) -> dict | None:
    """Mean, sd, ESS of the mean (ArviZ, over all chains), MCSE = sd / sqrt(ESS), and R-hat."""
    import arviz as az

    if name not in idata.posterior:
        return None
    values = idata.posterior[name]
    ess = float(az.ess(idata.posterior[[name]], method="mean")[name])
    sd = float(np.std(np.asarray(values), ddof=1))
    return {"mean": float(values.mean()), "sd": sd, "ess": ess, "mcse": sd / math.sqrt(ess),
            "rhat": float(az.rhat(idata.posterior[[name]])[name])}


def galaxies(args) -> dict:
    x, _ = dpppl.datasets.load("galaxies")
    model = dpppl.load(args.galaxies_model)
    runs = {"subcluster": ("subcluster", args.subcluster_options),
            args.reference_kernel: (args.reference_kernel, {})}
    out = {"model": args.galaxies_model, "n": int(x.shape[0]), "chains": args.chains, "draws": args.draws, "runs": {}}
    for label, (spec, options) in runs.items():
        print(f"[galaxies] {spec} {options or '(default options)'}: {args.chains} x {args.draws} ...", flush=True)
        tic = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # inexact options announce themselves
            idata = dpppl.sample(model, x, kernel=spec, num_chains=args.chains, num_samples=args.draws,
                                 seed=args.seed, progress_bar=False, **options)
        row = {"kernel": spec, "options": options, "seconds": time.perf_counter() - tic,
               "attrs": {k: idata.attrs.get(k) for k in ("kernel", "exact", "num_warmup")},
               **{name: posterior_mean(idata, name) for name in ("num_clusters", "alpha")}}
        out["runs"][label] = row
        print(f"[galaxies]   K {row['num_clusters']['mean']:.3f} +- {row['num_clusters']['mcse']:.3f}"
              + (f", alpha {row['alpha']['mean']:.3f} +- {row['alpha']['mcse']:.3f}" if row["alpha"] else "")
              + f" ({row['seconds']:.1f} s)", flush=True)
    a, b = out["runs"]["subcluster"], out["runs"][args.reference_kernel]
    out["z"] = {name: (a[name]["mean"] - b[name]["mean"]) / math.hypot(a[name]["mcse"], b[name]["mcse"])
                for name in ("num_clusters", "alpha") if a[name] and b[name]}
    out["met"] = all(abs(z) <= args.z_max for z in out["z"].values())
    print(f"[galaxies] z: {out['z']} -> {'met' if out['met'] else 'NOT met'} (|z| <= {args.z_max})", flush=True)
    return out


def galaxies_md(r: dict, args) -> list[str]:
    lines = [f"## (a) galaxies: subcluster vs {args.reference_kernel}",
             "", f"Model `{_relative(r['model'])}`, N = {r['n']}, {r['chains']} chains x {r['draws']} draws after "
             "dpppl's default warmup; mean +- MCSE (sd / sqrt(ESS of the mean), ArviZ).", "",
             "| kernel | options | exact | mean K | ESS K | R-hat K | mean alpha | ESS alpha | R-hat alpha | s |",
             "| --- " * 10 + "|"]
    for row in r["runs"].values():
        k, al = row["num_clusters"], row["alpha"]
        lines.append(f"| {row['kernel']} | {_opts(row['options'])} | {row['attrs']['exact']} | "
                     f"{k['mean']:.3f} +- {k['mcse']:.3f} | {k['ess']:.0f} | {k['rhat']:.3f} | "
                     + (f"{al['mean']:.3f} +- {al['mcse']:.3f} | {al['ess']:.0f} | {al['rhat']:.3f}" if al
                        else "- | - | -")
                     + f" | {row['seconds']:.1f} |")
    zs = ", ".join(f"{name} {z:+.2f}" for name, z in r["z"].items())
    lines += ["", f"z-scores of the differences: {zs}. **{'Met' if r['met'] else 'Not met'}** "
              f"(|z| <= {args.z_max})."]
    return lines


# ------------------------------------------------------------------------------- (b) W1 ---
def w1(args) -> dict:
    n = args.w1_n or (2000 if args.quick else 10_000)
    x, labels = dpppl.datasets.load("w1", n=n, dim=40, seed=args.seed)
    w = Workload("W1", x, labels, w1_model(), f"W1: {n} x 40, 40 clusters; DP(1), NormalKnownCov(1, 0, 100)")
    print(f"[w1] N={n} D=40: lp(true labels) = {w.lp_true:.1f}", flush=True)
    big = 10**7  # iterations enough for any cap; thinning keeps one draw
    perm = dict(kernel="gibbs+perm", init="single", seed=args.seed, **args.perm_options)
    gibbs = dict(kernel="gibbs", init="single", seed=args.seed, num_warmup=0, num_samples=big, thinning=big)
    out = {"n": n, "dim": 40, "lp_true": w.lp_true}
    for label, call, cap in (("gibbs+perm", perm, args.w1_cap), ("gibbs", gibbs, args.w1_cap)):
        print(f"[w1] {label} {call} ...", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out[label] = timed_sample(w.model, w.x, w.lp_true, cap, **call)
        print(f"[w1]   {label}: run s {_seconds(out[label])}, compile {out[label]['compile_seconds']:.1f} s, "
              f"{out[label]['iterations']} iterations, K {out[label]['last_num_clusters']}", flush=True)
    p, g = out["gibbs+perm"]["reached"], out["gibbs"]
    if p is None:
        out["ratio"], out["ratio_bound"], out["met"] = None, None, False
    else:
        g_seconds = g["reached"]["run_seconds"] if g["reached"] else g["run_seconds"]
        out["ratio"] = p["run_seconds"] / g_seconds
        out["ratio_bound"] = "=" if g["reached"] else "<="  # gibbs never reached: its time is at least the cap
        out["met"] = out["ratio"] <= 0.1
    print(f"[w1] perm / gibbs {out['ratio_bound'] or ''} {out['ratio']} -> {'met' if out['met'] else 'NOT met'}",
          flush=True)
    return out


def w1_md(r: dict, args) -> list[str]:
    lines = ["## (b) W1: gibbs+perm vs gibbs to the true labels' log joint", "",
             f"N = {r['n']}, D = 40, from one cluster, lp_true = {r['lp_true']:.1f}; run s without compilation "
             f"(gibbs capped at {args.w1_cap:.0f} s).", "",
             "| method | call | kernels run | run s to lp_true | iterations | compile s | K |", "| --- " * 7 + "|"]
    for label in ("gibbs+perm", "gibbs"):
        h = r[label]
        hit = h["reached"] or {"iteration": h["iterations"], "num_clusters": h["last_num_clusters"]}
        lines.append(f"| {label} | {_opts(h['call'])} | {_kernels(h)} | {_seconds(h)} | {hit['iteration']} | "
                     f"{h['compile_seconds']:.1f} | {hit['num_clusters']} |")
    ratio = "-" if r["ratio"] is None else f"{r['ratio_bound']} {r['ratio']:.3f}"
    lines += ["", f"Ratio gibbs+perm / gibbs: {ratio} (target <= 0.1): **{'met' if r['met'] else 'not met'}**."]
    return lines


# ------------------------------------------------------------------------------- (c) W2 ---
def w2(args) -> dict:
    n = args.w2_n or (2000 if args.quick else 10_000)
    seeds = range(args.seed, args.seed + (args.seeds or (2 if args.quick else 5)))
    call = dict(args.default_options, **({"kernel": args.default_kernel} if args.default_kernel else {}))
    out = {"n": n, "call": call, "seeds": []}
    for seed in seeds:
        x, labels = dpppl.datasets.load("w2", n=n, seed=seed)
        w = Workload("W2", x, labels, make_model(), f"W2 variant: {n} x 2, 10 clusters, data seed {seed}")
        target = w.lp_true - TARGET_FRACTION * abs(w.lp_true)
        print(f"[w2] seed {seed}: lp_true {w.lp_true:.1f}; dpppl.sample(model, x, {call}) ...", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            hit = timed_sample(w.model, w.x, target, args.w2_cap, seed=seed, **call)
        fits = {}
        sk = sklearn_method(args.components, args.max_iter, seed, fits, args.blas_threads or None)(w)
        row = {"seed": seed, "lp_true": w.lp_true, "target_lp": target, "default": hit,
               "sklearn": {"seconds": sk.seconds, "lp_rel_percent": w.relative_lp(dpppl.log_joint(w.model, w.x,
                                                                                                  sk.labels)),
                           **sk.extra}}
        if hit["reached"]:
            s, c = hit["reached"]["run_seconds"], hit["reached"]["compile_seconds"]
            row.update(ratio=sk.seconds / s, ratio_with_compile=sk.seconds / (s + c), met=s < sk.seconds)
        else:
            row.update(ratio=None, ratio_with_compile=None, met=False)
        out["seeds"].append(row)
        print(f"[w2]   default ({_kernels(hit)}): run s {_seconds(hit)} (+{hit['compile_seconds']:.1f} s compile); "
              f"sklearn {sk.seconds:.2f} s ({sk.extra['n_iter']} iterations, converged {sk.extra['converged']}) "
              f"-> {'met' if row['met'] else 'NOT met'}", flush=True)
    out["met"] = all(r["met"] for r in out["seeds"])
    out["seeds_met"] = sum(r["met"] for r in out["seeds"])
    return out


def w2_md(r: dict, args) -> list[str]:
    call = f"dpppl.sample(model, x, seed=s{''.join(f', {k}={v!r}' for k, v in r['call'].items())})"
    lines = ["## (c) W2 variants: the default kernel vs scikit-learn", "",
             f"N = {r['n']}, D = 2, 10 clusters, DP(1), NIW; `{call}` until lp >= lp_true - "
             f"{100 * TARGET_FRACTION:.1f}% |lp_true|, beside `BayesianGaussianMixture` ({args.components} components, "
             f"BLAS threads {args.blas_threads or 'default'}) fit to convergence, same data, same run.", "",
             "| seed | kernels run | run s | iterations | compile s | run + compile s | sklearn s (iterations) "
             "| sklearn / default | with compile | met |", "| --- " * 10 + "|"]
    for row in r["seeds"]:
        h, sk, hit = row["default"], row["sklearn"], row["default"]["reached"]
        compile_s = (hit or h)["compile_seconds"]
        lines.append(" | ".join([
            f"| {row['seed']}", _kernels(h), _seconds(h), str((hit or {"iteration": h["iterations"]})["iteration"]),
            f"{compile_s:.1f}", f"{hit['run_seconds'] + compile_s:.2f}" if hit else "-",
            f"{sk['seconds']:.2f} ({sk['n_iter']}{'' if sk['converged'] else ', not converged'})",
            "-" if row["ratio"] is None else f"{row['ratio']:.2f}x",
            "-" if row["ratio_with_compile"] is None else f"{row['ratio_with_compile']:.2f}x",
            "yes" if row["met"] else "no"]) + " |")
    lines += ["", f"Seeds where the default is faster (run s < sklearn s): {r['seeds_met']} of {len(r['seeds'])}: "
              f"**{'met' if r['met'] else 'not met'}**."]
    return lines


# ----------------------------------------------------------------------------- report ---
def _relative(path: str) -> str:
    """`path` relative to the repository root where it lies there."""
    root = RESULTS_DIR.parent.parent.resolve()
    p = Path(path).resolve()
    return str(p.relative_to(root)) if p.is_relative_to(root) else path


def _opts(options: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in options.items()) or "defaults"


def markdown(results: dict, args, machine_line: str) -> str:
    lines = ["# Issue 17: dpppl.sample with default options", "",
             f"`python benchmarks/bench_defaults.py {' '.join(args.argv)}`".replace(" `", "`"), "", machine_line, ""]
    for name, fn in (("galaxies", galaxies_md), ("w1", w1_md), ("w2", w2_md)):
        if name in results:
            lines += fn(results[name], args) + [""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], metavar="|".join(MEASURES),
                        help="run these measures (comma-separated or repeated; default all)")
    parser.add_argument("--quick", action="store_true", help="small sizes: galaxies 2 x 500, W1 and W2 at N = 2000, "
                                                             "2 W2 seeds, W1 cap 60 s")
    parser.add_argument("--seed", type=int, default=0, help="first data and chain seed")
    parser.add_argument("--galaxies-model", default=str(RESULTS_DIR.parent.parent / "models" / "gaussian_niw.dp"),
                        help="model file for galaxies (default: the repository's models/gaussian_niw.dp)")
    parser.add_argument("--chains", type=int, default=None, help="galaxies chains (default 4; quick 2)")
    parser.add_argument("--draws", type=int, default=None, help="galaxies draws per chain (default 4000; quick 500)")
    parser.add_argument("--subcluster-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of kernel='subcluster' on galaxies (VALUE read as JSON, else a string)")
    parser.add_argument("--reference-kernel", default="gibbs+splitmerge")
    parser.add_argument("--z-max", type=float, default=3.0, help="|z| that counts as within Monte Carlo error")
    parser.add_argument("--w1-n", type=int, default=None, help="W1 points (default 10000; quick 2000)")
    parser.add_argument("--w1-cap", type=float, default=None, help="run seconds before a W1 run stops (default 600; "
                                                                    "quick 60)")
    parser.add_argument("--perm-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the W1 gibbs+perm call (a kernel option or a dpppl.sample argument)")
    parser.add_argument("--w2-n", type=int, default=None, help="W2 points (default 10000; quick 2000)")
    parser.add_argument("--seeds", type=int, default=None, help="W2 data seeds (default 5; quick 2)")
    parser.add_argument("--w2-cap", type=float, default=120.0, help="run seconds before a W2 default run stops")
    parser.add_argument("--default-kernel", default=None,
                        help="kernel of the W2 'default' call (default: no kernel argument, dpppl's default)")
    parser.add_argument("--default-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the W2 default call (a kernel option or a dpppl.sample argument)")
    parser.add_argument("--components", type=int, default=30, help="sklearn n_components")
    parser.add_argument("--max-iter", type=int, default=2000, help="sklearn max_iter")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads for sklearn's fit (0: default)")
    parser.add_argument("--out", default=None, help="results name (default defaults, quick defaults-quick)")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.only = [m.strip() for o in args.only for m in o.split(",") if m.strip()] or list(MEASURES)
    unknown = sorted(set(args.only) - set(MEASURES))
    if unknown:
        parser.error(f"--only: unknown measure(s) {unknown}; choose from {', '.join(MEASURES)}")
    args.chains = args.chains or (2 if args.quick else 4)
    args.draws = args.draws or (500 if args.quick else 4000)
    args.w1_cap = args.w1_cap or (60.0 if args.quick else 600.0)
    args.subcluster_options = dict(_parse_option(o) for o in args.subcluster_option)
    args.perm_options = dict(_parse_option(o) for o in args.perm_option)
    args.default_options = dict(_parse_option(o) for o in args.default_option)

    started = time.perf_counter()
    load_start = load_average()
    results = {}
    for name, fn in (("galaxies", galaxies), ("w1", w1), ("w2", w2)):
        if name in args.only:
            results[name] = fn(args)
    name = args.out or ("defaults-quick" if args.quick else "defaults")
    payload = {"args": {k: v for k, v in vars(args).items() if k != "argv"}, "argv": args.argv,
               "load_average_at_start": load_start, "total_seconds": time.perf_counter() - started, **results}
    path = write_json(name, payload)
    machine = json.loads(path.read_text())["machine"]
    machine_line = (f"{machine['cpu_count']} CPUs ({machine['cpu_model']}), JAX {machine['versions']['jax']} "
                    f"{machine['jax_backend']}, git {machine['git_revision']}, load average "
                    f"{load_start[0]:.1f} -> {machine['load_average_1_5_15'][0]:.1f}, "
                    f"{payload['total_seconds']:.0f} s in all.")
    (RESULTS_DIR / f"{name}.md").write_text(markdown(results, args, machine_line) + "\n")
    print(f"wrote {path} and {RESULTS_DIR / (name + '.md')}")


if __name__ == "__main__":
    main()
