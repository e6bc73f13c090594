"""The permutation-augmented sampler (the move ``kernel="perm-move"``, and ``"perm"``, the paper's
``gibbs+splitmerge+perm-move``) against the issue's targets.

Three measurements, side by side in one process, each reported with a ratio:

1. **One perm move with the beam and random projections** (the burn-in configuration of
   Liang et al. 2007, sec. 5.1: ``permutation="projection"``, ``beam_epsilon=1e-32``)
   on W1-shaped data, N = 10,000, D = 10, from the true labels (K = 40). Target: at most
   50 ms. Ratio: against one collapsed-Gibbs sweep on the same state.
2. **The sec. 3.2 dynamic program** (``dp="mh"``, uniform permutation, no beam: the
   exact-after-warmup default) on N = 2,000, D = 10. Target: at most 1 s. Ratios:
   against the beam move of (1) at the same N and against a Gibbs sweep; the sec. 3.1
   form (``dp="exact"``, O(N^3)) is timed at N = 300 beside the sec. 3.2 form there.
3. **Burn-in on W1 with D = 40 from a single cluster**: GIBBS against GIBBS+PERM, the log
   joint against wall time (:class:`MoveTrace`). GIBBS+PERM interleaves one Gibbs sweep
   with as many perm moves (warmup form: projections + beam) as take about the same
   time, the even division of CPU time of the paper's sec. 5. It runs until it reaches
   the log joint of the true labels (or ``--budget`` seconds); GIBBS then runs for ten
   times that time. Target: GIBBS+PERM reaches it in at most a tenth of GIBBS's time, or
   GIBBS never reaches it within ten times GIBBS+PERM's time.

Times are ``time.perf_counter`` around jitted calls after compilation (compiled ahead of
time and reported apart), the minimum (1, 2) or the running total (3) on this machine:
2 shared CPU cores, so load from other processes inflates them (the JSON records the load
average). Model: DPMixture(1.0, NormalKnownCov(sigma2=1, mu0=0, tau2=100)) - W1's model
in DESIGN.md sec. 7.

    python benchmarks/bench_perm.py            # full sizes (a few minutes)
    python benchmarks/bench_perm.py --quick    # N = 2000 burn-in, smaller budget (~1-2 min)
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import dpppl
from dpppl.core.state import canonical_labels, grow, num_clusters
from dpppl.models.mixture import log_joint, state_from_labels

try:
    from harness import write_json
except ImportError:  # imported from elsewhere (examples/perm_burnin.py puts benchmarks/ on the path)
    from benchmarks.harness import write_json

BURNIN_PERM = dict(warmup_permutation="projection", beam_epsilon=1e-32, beam_width=16)


def w1_model():
    return dpppl.DPMixture(1.0, dpppl.families.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=100.0))


def build(name, bound, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # projection options announce their inexactness
        return dpppl.kernels.build(name, bound, **options)


def time_step(fn, state, x, reps, key=0):
    """Compile ``fn`` (a kernel step) ahead of time; return (min seconds over ``reps``
    calls from the same state with fresh keys, compile seconds, last info)."""
    k0 = jax.random.key(key)
    tic = time.perf_counter()
    compiled = jax.jit(fn).lower(k0, state, x).compile()
    compile_s = time.perf_counter() - tic
    best, info = np.inf, None
    for r in range(reps):
        tic = time.perf_counter()
        new, info = compiled(jax.random.fold_in(k0, r), state, x)
        jax.block_until_ready(new)
        best = min(best, time.perf_counter() - tic)
    return best, compile_s, {k: float(v) for k, v in info._asdict().items()}


def move_timings(n, dim, reps, seed=0, with_full_dp=True):
    """Per-move times on W1-shaped data from the true labels (K = 40)."""
    x_np, labels = dpppl.datasets.load("w1", n=n, dim=dim, seed=seed)
    bound = w1_model().bind(x_np)
    x = jnp.asarray(bound.x)
    state = state_from_labels(bound.family, x, canonical_labels(labels), 128, 1.0)
    out = {}
    configs = {"gibbs sweep": ("gibbs", {}, "step"),
               "perm beam+projection": ("perm-move", BURNIN_PERM, "warmup"),
               "perm beam+projection W=8": ("perm-move", dict(BURNIN_PERM, beam_width=8), "warmup"),
               "perm beam+uniform (exact)": ("perm-move", dict(beam_epsilon=1e-32, beam_width=16), "step")}
    if with_full_dp:
        configs["perm sec3.2 dp (uniform, no beam)"] = ("perm-move", {}, "step")
    for label, (name, options, phase) in configs.items():
        kern = build(name, bound, **options)
        s = kern.init(state, x) if kern.init else state
        seconds, compile_s, info = time_step(kern.warmup if phase == "warmup" else kern.step, s, x, reps)
        out[label] = {"seconds": seconds, "compile_seconds": compile_s, "info": info}
        print(f"  N={n} D={dim} {label}: {1000 * seconds:.1f} ms (compile {compile_s:.1f} s)", flush=True)
    return out


def exact_vs_mh(n, dim, reps):
    """sec. 3.1 (O(N^3)) against sec. 3.2 (O(N^2)) at a small N."""
    x_np, labels = dpppl.datasets.load("w1", n=n, dim=dim, num_clusters=10)
    bound = w1_model().bind(x_np)
    x = jnp.asarray(bound.x)
    state = state_from_labels(bound.family, x, canonical_labels(labels), 32, 1.0)
    out = {}
    for dp in ("exact", "mh"):
        kern = build("perm-move", bound, dp=dp)
        s = kern.init(state, x) if kern.init else state
        seconds, compile_s, info = time_step(kern.step, s, x, reps)
        out[dp] = {"seconds": seconds, "compile_seconds": compile_s, "info": info}
        print(f"  N={n} D={dim} perm dp={dp}: {1000 * seconds:.1f} ms", flush=True)
    return out


# ------------------------------------------------------------------------ burn-in trace ---
class MoveTrace:
    """Moves of dpppl kernels interleaved with even time shares, timed, with an lp trace.

    ``moves`` maps a label to a kernel spec (``"gibbs"``, ``"splitmerge"``, ``"perm-move"``)
    and its options. Kernels with a warmup form (perm) run it: this is burn-in. Each
    round runs the first move once and every other move as many times as fit in the
    first move's measured time (at least once), the even division of CPU time of Liang
    et al. (2007, sec. 5). Capacity grows on overflow (the step is re-run from the same
    state and key, as in :func:`dpppl.sample`); each (move, capacity) is compiled ahead
    of time and counted as compile time. The log joint is evaluated outside the timer.
    """

    def __init__(self, model, x, moves: dict, init="single", seed=0, init_labels=None):
        self.bound = model.bind(x)
        self.x = jnp.asarray(self.bound.x)
        fam, prior = self.bound.family, self.bound.prior
        n = self.bound.num_points
        self.kernels = {label: build(spec, self.bound, **opts) for label, (spec, opts) in moves.items()}
        self.key = jax.random.key(seed)
        self.compile_seconds = 0.0
        self._cache = {}
        self._lp = jax.jit(lambda s: log_joint(fam, prior, s))
        if init == "sequential":
            from dpppl.models.init import initial_states

            tic = time.perf_counter()
            states = initial_states(self.bound, "sequential", jax.random.split(self.key, 1))
            jax.block_until_ready(states)
            init_seconds = time.perf_counter() - tic   # includes its compile; small next to runs
            state = jax.tree.map(lambda a: a[0], states)
        else:
            labels = np.zeros(n, np.int32) if init == "single" else canonical_labels(init_labels)
            k = int(labels.max()) + 1
            state = state_from_labels(fam, self.x, labels, int(min(n + 1, max(16, 2 * k + 8))),
                                      prior.initial_alpha)
            init_seconds = 0.0
        for kern in self.kernels.values():
            if kern.init is not None:
                state = kern.init(state, self.x)
        self.state = state
        self.elapsed = init_seconds
        self.t = 0
        self.trace = {"seconds": [self.elapsed], "lp": [self.lp()], "num_clusters": [self.k()], "move": ["init"]}
        self.move_seconds = {}

    def lp(self):
        return float(self._lp(self.state))

    def k(self):
        return int(num_clusters(self.state))

    def _compiled(self, label, capacity):
        if (label, capacity) not in self._cache:
            kern = self.kernels[label]
            tic = time.perf_counter()
            self._cache[(label, capacity)] = jax.jit(kern.warmup).lower(self.key, self.state, self.x).compile()
            self.compile_seconds += time.perf_counter() - tic
        return self._cache[(label, capacity)]

    def move(self, label):
        key = jax.random.fold_in(self.key, self.t)
        seconds = 0.0
        n = self.bound.num_points
        while True:
            capacity = int(self.state.stats.n.shape[-1])
            step = self._compiled(label, capacity)
            tic = time.perf_counter()
            new, _ = step(key, self.state, self.x)
            jax.block_until_ready(new)
            seconds += time.perf_counter() - tic
            if not bool(new.overflow) or capacity == n + 1:
                break
            self.state = grow(self.state, min(2 * capacity, n + 1))
        self.state = new
        self.t += 1
        self.elapsed += seconds
        self.move_seconds.setdefault(label, []).append(seconds)
        self.trace["seconds"].append(self.elapsed)
        self.trace["lp"].append(self.lp())
        self.trace["num_clusters"].append(self.k())
        self.trace["move"].append(label)
        return seconds

    def run(self, budget_seconds, target_lp=None):
        """Rounds until ``budget_seconds`` of run time or the log joint reaches ``target_lp``."""
        labels = list(self.kernels)
        first = labels[0]
        while self.elapsed < budget_seconds:
            t_first = self.move(first)
            for other in labels[1:]:
                per_move = np.median(self.move_seconds.get(other, [t_first]))
                for _ in range(max(1, int(round(t_first / max(per_move, 1e-9))))):
                    self.move(other)
                    if target_lp is not None and self.trace["lp"][-1] >= target_lp:
                        return self
            if target_lp is not None and self.trace["lp"][-1] >= target_lp:
                return self
        return self

    def first_time_at(self, target_lp):
        for s, lp in zip(self.trace["seconds"], self.trace["lp"]):
            if lp >= target_lp:
                return s
        return None


SAMPLERS = {
    "gibbs": {"gibbs": ("gibbs", {})},
    "gibbs+splitmerge": {"gibbs": ("gibbs", {}), "splitmerge": ("splitmerge", {})},
    "gibbs+perm": {"gibbs": ("gibbs", {}), "perm": ("perm-move", BURNIN_PERM)},
    "gibbs+splitmerge+perm": {"gibbs": ("gibbs", {}), "splitmerge": ("splitmerge", {}),
                              "perm": ("perm-move", BURNIN_PERM)},
}


def burn_in_race(n, dim, budget, seed=0):
    x, labels = dpppl.datasets.load("w1", n=n, dim=dim, seed=seed)
    model = w1_model()
    lp_true = dpppl.log_joint(model, x, labels)
    print(f"  W1 N={n} D={dim}: lp(true labels) = {lp_true:.1f}", flush=True)
    hybrid = MoveTrace(model, x, SAMPLERS["gibbs+perm"], init="single", seed=seed).run(budget, lp_true)
    t_hybrid = hybrid.first_time_at(lp_true)
    print(f"  gibbs+perm: reached at {t_hybrid} s (ran {hybrid.elapsed:.1f} s, K={hybrid.k()}, "
          f"lp={hybrid.trace['lp'][-1]:.1f}, compile {hybrid.compile_seconds:.1f} s)", flush=True)
    gibbs_budget = 10 * (t_hybrid if t_hybrid is not None else hybrid.elapsed)
    gibbs = MoveTrace(model, x, SAMPLERS["gibbs"], init="single", seed=seed).run(gibbs_budget, lp_true)
    t_gibbs = gibbs.first_time_at(lp_true)
    print(f"  gibbs: reached at {t_gibbs} s (ran {gibbs.elapsed:.1f} s, K={gibbs.k()}, "
          f"lp={gibbs.trace['lp'][-1]:.1f})", flush=True)
    if t_hybrid is None:
        verdict = "gibbs+perm did not reach the true labels' log joint within the budget"
    elif t_gibbs is None:
        verdict = (f"target met: gibbs never reached it within {gibbs.elapsed:.1f} s "
                   f"(>= 10 x gibbs+perm's {t_hybrid:.2f} s)")
    else:
        ratio = t_gibbs / t_hybrid
        verdict = f"gibbs/gibbs+perm time ratio {ratio:.1f} ({'met' if ratio >= 10 else 'NOT met'}: target >= 10)"
    print("  " + verdict, flush=True)
    return {"n": n, "dim": dim, "lp_true": lp_true, "gibbs+perm_seconds_to_true": t_hybrid,
            "gibbs_seconds_to_true": t_gibbs, "gibbs_budget": gibbs_budget, "verdict": verdict,
            "traces": {"gibbs+perm": hybrid.trace, "gibbs": gibbs.trace},
            "move_seconds_median": {"gibbs+perm": {k: float(np.median(v)) for k, v in hybrid.move_seconds.items()},
                                    "gibbs": {k: float(np.median(v)) for k, v in gibbs.move_seconds.items()}}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller sizes and budget (smoke run)")
    p.add_argument("--budget", type=float, default=None, help="burn-in seconds for gibbs+perm (default 60; quick 20)")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    n_move, n_dp, n_burn = (2000, 1000, 2000) if args.quick else (10_000, 2000, 10_000)
    budget = args.budget or (20.0 if args.quick else 60.0)
    print("1. one perm move, beam + random projections (target <= 50 ms at N = 10,000, D = 10)")
    moves = move_timings(n_move, 10, args.reps, with_full_dp=args.quick)
    beam = moves["perm beam+projection"]["seconds"]
    print(f"  ratio perm move / gibbs sweep: {beam / moves['gibbs sweep']['seconds']:.3f}")
    print("2. the sec. 3.2 DP (target <= 1 s at N = 2,000, D = 10)")
    dp = move_timings(n_dp, 10, args.reps)
    sec32 = dp["perm sec3.2 dp (uniform, no beam)"]["seconds"]
    print(f"  ratio sec3.2 / beam move: {sec32 / dp['perm beam+projection']['seconds']:.1f}; "
          f"sec3.2 / gibbs sweep: {sec32 / dp['gibbs sweep']['seconds']:.2f}")
    exact = exact_vs_mh(300 if not args.quick else 150, 10, max(2, args.reps // 2))
    print(f"  ratio sec3.1 exact / sec3.2 at N={300 if not args.quick else 150}: "
          f"{exact['exact']['seconds'] / exact['mh']['seconds']:.1f}")
    print(f"3. burn-in race on W1, D = 40, single-cluster start (budget {budget:.0f} s)")
    race = burn_in_race(n_burn, 40, budget)
    payload = {"quick": args.quick,
               "perm_move": {"n": n_move, "dim": 10, "moves": moves, "target_seconds": 0.05,
                             "ratio_to_gibbs_sweep": beam / moves["gibbs sweep"]["seconds"]},
               "sec32_dp": {"n": n_dp, "dim": 10, "moves": dp, "target_seconds": 1.0},
               "sec31_vs_sec32": exact, "burn_in_race": race}
    path = write_json("perm-quick" if args.quick else "perm", payload)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
