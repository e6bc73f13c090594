"""Issue 18 item 3: one peer table. dpppl beside scikit-learn, bnpy and NumPyro NUTS.

Workloads (DESIGN.md sec. 7 and two bundled data sets), each split once (seed 0) into 80 %
training points and 20 % held-out points:

| id | data | model every method is scored under |
| --- | --- | --- |
| galaxies | `dpppl.datasets.load("galaxies", scale=True)`, 82 x 1 (1000 km/s) | DP(1), NIW |
| faithful | `dpppl.datasets.load("faithful")`, 272 x 2 | DP(1), NIW |
| R1 | `dpppl.datasets.load("digits", pca=10)`, 1797 x 10, digit labels | DP(1), NIW |
| W1 | `dpppl.datasets.load("w1")`, 10,000 x 10, 40 clusters | DP(1), NormalKnownCov(1, 0, 100) |
| W2 | `dpppl.datasets.load("w2")`, 100,000 x 2, 10 clusters | DP(1), NIW |
| W3 | `dpppl.datasets.load("w3")`, 1,000,000 x 2, 20 clusters | DP(1), NIW |

NIW is dpppl's default `NormalInverseWishart()` (mu0 = mean(x), kappa0 = 0.1, nu0 = D + 2,
psi0 = cov(x) / 10, resolved on the training points), the same prior is given to the peers
that take one (scikit-learn: `mean_precision_prior`, `degrees_of_freedom_prior`,
`covariance_prior`; bnpy: `kappa`, `nu`, `ECovMat="covdata"`, `sF`), and the DP
concentration is 1 for everyone (scikit-learn's `weight_concentration_prior`, bnpy's
`gamma0`). On W1 dpppl's model knows the unit covariance; the peers fit full covariances
under the NIW prior above (they have no known-covariance Gaussian).

Methods:

- `dpppl-auto`: `dpppl.sample(model, x_train, kernel="auto", ...)` (what a user gets:
  `gibbs+splitmerge` below 3,000 points, `subcluster` from there);
- `dpppl-alt`: a second dpppl kernel per workload (`ALT_KERNEL`); the table's "dpppl best"
  is whichever of the two has the higher held-out density (chosen after the fact, and said so);
- `sklearn-bgm`: `BayesianGaussianMixture(weight_concentration_prior_type="dirichlet_process")`,
  full covariances, `--components` components, fit with `warm_start` in growing chunks of
  EM iterations until converged (tol 1e-3), `--sklearn-max-iter` or `--cap` seconds, BLAS on one thread
  (bench_foundation.py says why);
- `bnpy-memoVB`: bnpy 0.1.7's memoized VB with birth, merge and shuffle moves
  (`bnpy.run(Data, "DPMixtureModel", "Gauss", "memoVB", moves="birth,merge,shuffle")`),
  run by `bnpy_worker.py` in bnpy's own virtual environment (`--bnpy-python`); rows are
  marked "not installed" when that Python is absent;
- `numpyro-nuts`: NumPyro NUTS on the truncated stick-breaking model that
  `dpppl.sample(kernel="nuts")` runs (`Target.nuts_model(truncation)`, truncation 20),
  called through `numpyro.infer.MCMC` directly so that its parameter draws are kept for its
  own predictive; skipped above `NUTS_MAX_POINTS` training points (tree depth 10: tens of
  seconds a draw at 10^4 points, see results/foundation.json).

Measures, per method and seed:

- **held-out lpd**: mean over the held-out points of log p(x* | training data), each
  method's own predictive: dpppl, `dpppl.analysis.predict.Predictor` (what `dpppl.predict`
  computes) over the kept draws; scikit-learn, `score_samples`; bnpy, the variational
  posterior predictive mixture of its learned global parameters (`bnpy_worker.py` says how);
  NUTS, `numpyro.infer.log_likelihood` of the held-out points averaged over the parameter
  draws (log-mean-exp). dpppl's and scikit-learn's are also traced against run time
  (dpppl: the draws of the second half of each prefix of the kept draws, the time of the
  prefix's last iteration; scikit-learn: after each chunk of EM iterations);
- **lp of the point estimate**: `dpppl.log_joint(model, x_train, labels)` of each method's
  point estimate of the training partition, relative to the true labels' where there are
  any: dpppl, `dpppl.point_estimate(idata)` (SALSO on the VI loss; `"best"`, the kept draw of
  highest lp, above `SALSO_MAX_POINTS` points); NUTS, `dpppl.point_estimate` of its draws'
  partitions (each point's most probable component); scikit-learn, `predict(x_train)`; bnpy,
  the argmax of its own local step's responsibilities;
- **NMI / ARI** of those labels to the truth (W1-W3, R1);
- **seconds**: run seconds (dpppl: the `dpppl.sample` call less its compilation, observed with
  `jax.monitoring` spans through bench_defaults.SampleClock; scikit-learn: the fits; bnpy: its
  `run`; NUTS: `MCMC.run`), compile seconds apart (dpppl and NUTS: the spans), first and
  second call seconds where two seeds ran, and the seconds of
  the post-processing (point estimate and predictive) apart.

Seeds 0, 1, 2 while a method's first run takes under a minute (medians over the seeds that
ran), else one seed. W2 and W3 run one seed, each method capped (`--cap`).

    PYTHONPATH=. python benchmarks/bench_peers.py --quick     # small sizes, a few minutes
    PYTHONPATH=. nice python benchmarks/bench_peers.py        # full mode (about an hour on 2 busy cores)
    PYTHONPATH=. python benchmarks/bench_peers.py --render a.json b.json --out peers   # merge, re-table

Results: `benchmarks/results/peers.json` and `peers.md` (`peers-quick.*` with `--quick`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import dpppl
from bench_defaults import SampleClock
from bench_foundation import make_model
from bench_perm import w1_model
from bench_subcluster import _parse_option
from harness import RESULTS_DIR, load_average, write_json

HERE = Path(__file__).resolve().parent
DEFAULT_BNPY_PYTHON = "/work/bnpy-venv/bin/python"
SALSO_MAX_POINTS = 20_000
NUTS_MAX_POINTS = 12_000
ALT_KERNEL = {"galaxies": "subcluster", "faithful": "subcluster", "R1": "subcluster", "W1": "gibbs+perm",
              "W2": None, "W3": None}
"""The second dpppl kernel per workload (None: `auto`'s choice, `subcluster`, is the only one run:
at 10^5 and 10^6 points a collapsed Gibbs sweep alone takes seconds on this shared machine)."""


@dataclasses.dataclass
class Spec:
    """One workload: how to load it, its model, and each method's budget."""

    name: str
    dataset: str
    options: dict
    model: str                    # "niw" or "w1"
    dpppl: dict                   # dpppl.sample arguments (num_warmup, num_samples, thinning)
    nuts: tuple | None            # (num_warmup, num_samples) or None (skipped)
    bnpy: dict                    # n_lap, n_batch, k_init
    seeds: int = 3


def specs(quick: bool) -> list[Spec]:
    if quick:
        return [
            Spec("galaxies", "galaxies", {"scale": True}, "niw", dict(num_warmup=200, num_samples=200), (30, 20),
                 dict(n_lap=200, n_batch=1, k_init=10), seeds=2),
            Spec("faithful", "faithful", {}, "niw", dict(num_warmup=200, num_samples=200), (30, 20),
                 dict(n_lap=200, n_batch=1, k_init=10), seeds=2),
            Spec("W1", "w1", {"n": 2000}, "w1", dict(num_warmup=100, num_samples=50, thinning=2), None,
                 dict(n_lap=100, n_batch=1, k_init=10), seeds=1),
            Spec("W2", "w2", {"n": 5000}, "niw", dict(num_warmup=100, num_samples=50, thinning=2), None,
                 dict(n_lap=100, n_batch=1, k_init=10), seeds=1),
            Spec("W3", "w3", {"n": 30000}, "niw", dict(num_warmup=50, num_samples=20, thinning=2), None,
                 dict(n_lap=50, n_batch=2, k_init=10), seeds=1),
        ]
    return [
        Spec("galaxies", "galaxies", {"scale": True}, "niw", dict(num_warmup=500, num_samples=1000), (100, 100),
             dict(n_lap=500, n_batch=1, k_init=10)),
        Spec("faithful", "faithful", {}, "niw", dict(num_warmup=500, num_samples=1000), (100, 100),
             dict(n_lap=500, n_batch=1, k_init=10)),
        Spec("R1", "digits", {"pca": 10}, "niw", dict(num_warmup=300, num_samples=300), (30, 10),
             dict(n_lap=300, n_batch=1, k_init=10)),
        Spec("W1", "w1", {}, "w1", dict(num_warmup=100, num_samples=50, thinning=2), None,
             dict(n_lap=200, n_batch=1, k_init=10)),
        Spec("W2", "w2", {}, "niw", dict(num_warmup=150, num_samples=50, thinning=2), None,
             dict(n_lap=100, n_batch=4, k_init=10), seeds=1),
        Spec("W3", "w3", {}, "niw", dict(num_warmup=100, num_samples=20, thinning=5), None,
             dict(n_lap=60, n_batch=16, k_init=10), seeds=1),
    ]


@dataclasses.dataclass
class Data:
    spec: Spec
    x_train: np.ndarray
    x_test: np.ndarray
    y_train: np.ndarray | None
    model: object
    bound: object
    lp_true: float | None


def load(spec: Spec) -> Data:
    x, y = dpppl.datasets.load(spec.dataset, **spec.options)
    order = np.random.default_rng(0).permutation(x.shape[0])
    n_test = x.shape[0] // 5
    test, train = order[:n_test], order[n_test:]
    model = w1_model() if spec.model == "w1" else make_model()
    y_train = None if y is None else y[train]
    lp_true = None if y is None else float(dpppl.log_joint(model, x[train], y_train))
    return Data(spec, x[train], x[test], y_train, model, model.bind(x[train]), lp_true)


# --------------------------------------------------------------------------- scoring ---
def scores(data: Data, labels) -> dict:
    """lp of labels under the workload's model on the training points, NMI, ARI, K."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    labels = np.asarray(labels)
    lp = float(dpppl.log_joint(data.model, data.x_train, labels))
    out = {"lp": lp, "num_clusters": int(np.unique(labels).size)}
    if data.lp_true is not None:
        out.update(lp_vs_true=lp - data.lp_true, nmi=float(normalized_mutual_info_score(data.y_train, labels)),
                   ari=float(adjusted_rand_score(data.y_train, labels)))
    return out


def niw_prior(data: Data) -> dict:
    """The training data's dpppl NIW prior in the peers' terms (kappa0, nu0, psi0 = cov_scale cov(x))."""
    d = data.x_train.shape[1]
    return {"kappa0": 0.1, "nu0": d + 2, "cov_scale": 0.1}


# --------------------------------------------------------------------------- methods ---
def run_dpppl(data: Data, kernel: str, seed: int, salso_max_points: int = SALSO_MAX_POINTS,
              options: dict | None = None) -> dict:
    from dpppl.analysis.predict import Predictor, alpha_draws
    from dpppl.analysis.partitions import posterior_draws

    call = dict(data.spec.dpppl, kernel=kernel, seed=seed, **(options or {}))
    tic = time.perf_counter()
    with warnings.catch_warnings(), SampleClock(math.inf) as clock:
        warnings.simplefilter("ignore", UserWarning)
        idata = dpppl.sample(data.model, data.x_train, progress_bar=False, **call)
    wall = time.perf_counter() - tic
    summary = clock.summary()
    tic = time.perf_counter()
    n = data.x_train.shape[0]
    method = "vi" if n <= salso_max_points else "best"
    labels = dpppl.point_estimate(idata, method)
    estimate_seconds = time.perf_counter() - tic
    tic = time.perf_counter()
    lpd = float(np.mean(dpppl.predict(idata, data.model, data.x_test, clustering=labels).log_density))
    predict_seconds = time.perf_counter() - tic
    # lpd against run time: the second half of each prefix of the kept draws
    draws, alphas = posterior_draws(idata), alpha_draws(idata, data.bound)
    s = draws.shape[0]
    warmup, thinning = call.get("num_warmup", 500), call.get("thinning", 1)
    run_at = {row["iteration"]: row["run_seconds"] for row in clock.trace}
    curve = []
    for j in sorted({max(2, s // 4), max(2, s // 2), s}):
        part = slice(j // 2, j)
        pred = Predictor(data.bound, draws[part], alphas[part], draws[j - 1])(data.x_test)
        curve.append({"draws": j, "run_seconds": run_at.get(warmup + j * thinning),
                      "lpd": float(np.mean(pred.log_density))})
    kernels = ", ".join(dict.fromkeys(k["spec"] for k in summary["kernels"]))
    return {"run_seconds": summary["run_seconds"], "compile_seconds": summary["compile_seconds"],
            "call_seconds": wall, "post_seconds": estimate_seconds + predict_seconds,
            "estimate_seconds": estimate_seconds, "predict_seconds": predict_seconds, "point_estimate": method,
            "lpd": lpd, "kernels": kernels, "iterations": summary["iterations"], "curve": curve,
            "lp_trace": summary["trace"], **scores(data, labels)}


def run_sklearn(data: Data, seed: int, components: int, max_iter: int, cap: float) -> dict:
    from sklearn.mixture import BayesianGaussianMixture
    from threadpoolctl import threadpool_limits

    prior = niw_prior(data)
    bgm = BayesianGaussianMixture(
        n_components=components, covariance_type="full", weight_concentration_prior_type="dirichlet_process",
        weight_concentration_prior=1.0, mean_precision_prior=prior["kappa0"],
        degrees_of_freedom_prior=prior["nu0"],
        covariance_prior=prior["cov_scale"] * np.atleast_2d(np.cov(data.x_train.T)),
        warm_start=True, random_state=seed)
    seconds, done, curve = 0.0, 0, []
    chunk = 10
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")  # ConvergenceWarning after each chunk that does not converge
        while done < max_iter:
            if done and seconds + chunk * seconds / done > cap:  # the next chunk would pass the cap
                chunk = int((cap - seconds) * done / seconds)
                if chunk < 1:
                    break
            bgm.max_iter = min(chunk, max_iter - done)
            tic = time.perf_counter()
            bgm.fit(data.x_train)
            seconds += time.perf_counter() - tic
            done += bgm.n_iter_
            curve.append({"iterations": done, "run_seconds": seconds,
                          "lpd": float(np.mean(bgm.score_samples(data.x_test)))})
            if bgm.converged_:
                break
            chunk *= 2
        tic = time.perf_counter()
        labels = bgm.predict(data.x_train)
        lpd = float(np.mean(bgm.score_samples(data.x_test)))
    return {"run_seconds": seconds, "compile_seconds": None, "post_seconds": time.perf_counter() - tic, "lpd": lpd,
            "iterations": done, "converged": bool(bgm.converged_), "components": components, "curve": curve,
            **scores(data, labels)}


def run_bnpy(data: Data, seed: int, python: str, cap: float) -> dict:
    if not Path(python).exists():
        return {"skipped": f"not installed ({python} absent; see benchmarks/README.md, 'Peer table')"}
    options = dict(niw_prior(data), seed=seed, alpha=1.0, **data.spec.bnpy)
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.json")
        np.savez(inp, x_train=data.x_train, x_test=data.x_test, options=json.dumps(options))
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        tic = time.perf_counter()
        try:
            proc = subprocess.run([python, "-W", "ignore", str(HERE / "bnpy_worker.py"), inp, out], env=env,
                                  capture_output=True, text=True, timeout=cap)
        except subprocess.TimeoutExpired:
            return {"skipped": f"timed out after {cap:.0f} s"}
        process_seconds = time.perf_counter() - tic
        if proc.returncode != 0:
            return {"skipped": "failed: " + proc.stderr.strip().splitlines()[-1][:300]}
        result = json.loads(Path(out).read_text())
    labels = np.asarray(result.pop("labels"))
    density = np.asarray(result.pop("test_log_density"))
    return {"run_seconds": result["seconds"], "compile_seconds": None, "process_seconds": process_seconds,
            "lpd": float(np.mean(density)), "iterations": result["laps"], "bnpy": result, **scores(data, labels)}


def run_nuts(data: Data, seed: int, truncation: int = 20) -> dict:
    import jax
    from numpyro.infer import MCMC, NUTS
    from numpyro.infer.util import log_likelihood
    from scipy.special import logsumexp

    warmup, samples = data.spec.nuts
    model, (x,) = data.bound.nuts_model(truncation)
    mcmc = MCMC(NUTS(model), num_warmup=warmup, num_samples=samples, progress_bar=False)
    clock = SampleClock(math.inf)  # only its record of JAX's compilation spans: NUTS has no runner chunks
    try:
        with clock:
            mcmc.run(jax.random.key(seed), x, extra_fields=("diverging",))
    except RuntimeError as err:
        if "no chunk of the partition runner" not in str(err):
            raise
    compile_seconds = clock.compile_between(clock.start, clock.end)
    seconds = (clock.end - clock.start) - compile_seconds
    draws = mcmc.get_samples()
    tic = time.perf_counter()
    x_test = data.bound.translate(data.x_test)  # NUTS runs in the target's (translated) frame
    params = {k: v for k, v in draws.items() if k != "assignment"}  # the training points' labels
    ll = log_likelihood(model, params, jax.numpy.asarray(x_test))
    site = next(iter(ll))
    pointwise = np.asarray(ll[site])
    lpd = float(np.mean(logsumexp(pointwise, axis=0) - math.log(pointwise.shape[0])))
    labels = dpppl.point_estimate(np.asarray(draws["assignment"]), "vi")
    post = time.perf_counter() - tic
    return {"run_seconds": seconds, "compile_seconds": compile_seconds, "post_seconds": post, "lpd": lpd,
            "iterations": warmup + samples, "truncation": truncation, "likelihood_site": site,
            "divergent": int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum()), **scores(data, labels)}


# --------------------------------------------------------------------------- driver ---
def seeds_of(run, max_seeds: int, label: str, log) -> list[dict]:
    """Run seed 0; seeds 1.. too while each run took under a minute (compilation not counted)."""
    out = []
    for seed in range(max_seeds):
        r = run(seed)
        r["seed"] = seed
        out.append(r)
        log(f"  {label} seed {seed}: " + (r.get("skipped") or
            f"run {r['run_seconds']:.2f} s, lpd {r['lpd']:.4f}, K {r['num_clusters']}"
            + (f", NMI {r['nmi']:.3f}" if "nmi" in r else "")))
        if "skipped" in r or r["run_seconds"] >= 60:
            break
    return out


def median_row(runs: list[dict]) -> dict:
    """Medians over the seeds that ran; first and second call seconds."""
    ok = [r for r in runs if "skipped" not in r]
    if not ok:
        return {"skipped": runs[0]["skipped"], "seeds": 0}
    row = {"seeds": len(ok)}
    for key in ("run_seconds", "post_seconds", "lpd", "lp", "lp_vs_true", "nmi", "ari",
                "num_clusters", "iterations"):
        values = [r[key] for r in ok if r.get(key) is not None]
        row[key] = statistics.median(values) if values else None
    row["compile_seconds"] = ok[0].get("compile_seconds")  # the first call's: later calls reuse its programs
    row["first_call_seconds"] = ok[0]["run_seconds"] + (ok[0].get("compile_seconds") or 0)
    if len(ok) > 1:
        row["second_call_seconds"] = ok[1]["run_seconds"] + (ok[1].get("compile_seconds") or 0)
    for key in ("kernels", "point_estimate", "converged"):
        if key in ok[0]:
            row[key] = ok[0][key]
    return row


def run_workload(spec: Spec, args, log, results: dict) -> dict:
    data = load(spec)
    n, d = data.x_train.shape
    log(f"[{spec.name}] train {n} x {d}, test {data.x_test.shape[0]}"
        + (f", lp_true {data.lp_true:.1f}" if data.lp_true is not None else ""))
    # --dpppl-option changes the dpppl calls' budget; the rows are then named apart (merged tables keep both)
    tag = "".join(f" {k}={v}" for k, v in args.dpppl_options.items())
    methods = {f"dpppl-auto{tag}": lambda s: run_dpppl(data, "auto", s, args.salso_max_points, args.dpppl_options)}
    if ALT_KERNEL.get(spec.name):
        methods[f"dpppl-alt{tag}"] = lambda s: run_dpppl(data, ALT_KERNEL[spec.name], s, args.salso_max_points,
                                                         args.dpppl_options)
    methods["sklearn-bgm"] = lambda s: run_sklearn(data, s, args.components, args.sklearn_max_iter, args.cap)
    methods["bnpy-memoVB"] = lambda s: run_bnpy(data, s, args.bnpy_python, args.cap)
    if spec.nuts is not None and n <= NUTS_MAX_POINTS:
        methods["numpyro-nuts"] = lambda s: run_nuts(data, s)
    out = {"n_train": n, "n_test": int(data.x_test.shape[0]), "d": d, "lp_true": data.lp_true,
           "dataset": spec.dataset, "options": spec.options, "model": spec.model, "dpppl_call": spec.dpppl,
           "nuts": spec.nuts, "bnpy": spec.bnpy, "alt_kernel": ALT_KERNEL.get(spec.name), "methods": {}}
    results["workloads"][spec.name] = out
    if "numpyro-nuts" not in methods:
        out["methods"]["numpyro-nuts"] = {"runs": [], "row": {
            "skipped": f"not run at {n} training points: NUTS at tree depth 10 takes tens of seconds a draw "
                       f"at ~10^4 points (results/foundation.json)", "seeds": 0}}
    for name, run in methods.items():
        if args.methods and name.split()[0] not in args.methods:
            continue
        log(f"[{spec.name}] {name} ...")
        runs = seeds_of(run, 1 if args.one_seed else spec.seeds, name, log)
        row = median_row(runs)
        out["methods"][name] = {"runs": runs, "row": row}
        _checkpoint(args)
    return out


def _best_dpppl(w: dict) -> None:
    """Name the dpppl row of higher held-out lpd 'dpppl best'."""
    rows = {k: m["row"] for k, m in w["methods"].items() if k.startswith("dpppl")}
    rows = {k: r for k, r in rows.items() if r.get("lpd") is not None}
    w["dpppl_best"] = max(rows, key=lambda k: rows[k]["lpd"]) if rows else None


def verdict(w: dict) -> dict:
    """Is dpppl's held-out lpd at equal or lower run time at least the best peer's?

    The best peer is the peer row of highest median lpd; dpppl's lpd at that peer's run
    time is the best lpd of any dpppl curve point (over both kernels, seed 0's curve) at a
    run time no longer than the peer's, or the median lpd of a dpppl row no slower.
    """
    peers = {k: m["row"] for k, m in w["methods"].items() if not k.startswith("dpppl") and m["row"].get("lpd")
             is not None}
    if not peers:
        return {"answer": "no peer ran"}
    best = max(peers, key=lambda k: peers[k]["lpd"])
    t, target = peers[best]["run_seconds"], peers[best]["lpd"]
    candidates = []
    for k, m in w["methods"].items():
        if not k.startswith("dpppl") or m["row"].get("lpd") is None:
            continue
        if m["row"]["run_seconds"] <= t:
            candidates.append((m["row"]["lpd"], k, m["row"]["run_seconds"], "median"))
        run0 = m["runs"][0]
        for p in run0.get("curve", []):
            if p["run_seconds"] is None or p["lpd"] is None:
                continue
            # a call stopped at this draw would still pay what follows the last iteration (building the
            # InferenceData): add the seconds between the last iteration and the end of the call
            seconds = p["run_seconds"] + run0["run_seconds"] - run0["lp_trace"]["run_seconds"][-1]
            if seconds <= t:
                candidates.append((p["lpd"], k, seconds, f"seed 0, {p['draws']} draws"))
    out = {"best_peer": best, "peer_lpd": target, "peer_seconds": t}
    if not any(k.startswith("dpppl") and m["row"].get("run_seconds") is not None for k, m in w["methods"].items()):
        out.update(answer="no dpppl row")
        return out
    if not candidates:
        fastest = min((m["row"]["run_seconds"], k) for k, m in w["methods"].items()
                      if k.startswith("dpppl") and m["row"].get("run_seconds") is not None)
        out.update(answer="no dpppl point at that time", dpppl_fastest=fastest)
        return out
    lpd, k, s, what = max(candidates)
    out.update(dpppl_lpd=lpd, dpppl_method=k, dpppl_seconds=s, dpppl_point=what, gap=lpd - target,
               answer="yes" if lpd >= target else "no")
    return out


# --------------------------------------------------------------------------- report ---
def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def markdown(results: dict, header: list[str]) -> str:
    lines = ["# Peer table (issue 18 item 3)", ""] + header + [""]
    for name, w in results["workloads"].items():
        lines += [f"## {name}: {w['n_train']} training x {w['d']}, {w['n_test']} held out"
                  + (f", lp_true {w['lp_true']:.1f}" if w["lp_true"] is not None else ""), "",
                  "| method | seeds | run s | compile s | 1st / 2nd call s | post s | held-out lpd | lp of point est."
                  + (" vs true | NMI | ARI" if w["lp_true"] is not None else "") + " | K | note |",
                  "| --- " * (12 if w["lp_true"] is not None else 10) + "|"]
        for method, m in w["methods"].items():
            r = m["row"]
            label = method + (" (dpppl best)" if method == w.get("dpppl_best") else "")
            if "skipped" in r:
                cells = [label, "0"] + ["-"] * (9 if w["lp_true"] is not None else 6) + [r["skipped"]]
            else:
                calls = _f(r["first_call_seconds"], ".2f") + (f" / {r['second_call_seconds']:.2f}"
                                                             if "second_call_seconds" in r else "")
                note = r.get("kernels") or ""
                if method == "sklearn-bgm":
                    converged = "converged" if r.get("converged") else "NOT converged"
                    note = f"{_f(r['iterations'], '.0f')} EM it., {converged}"
                elif method == "bnpy-memoVB":
                    note = f"{_f(r['iterations'], '.0f')} laps"
                elif method == "numpyro-nuts":
                    note = f"{_f(r['iterations'], '.0f')} iterations, truncation 20"
                elif r.get("point_estimate"):
                    note += f"; point estimate {r['point_estimate']}"
                lp_cell = (_f(r["lp_vs_true"], "+.1f") if w["lp_true"] is not None else _f(r["lp"], ".1f"))
                cells = [label, str(r["seeds"]), _f(r["run_seconds"], ".2f"), _f(r["compile_seconds"], ".2f"), calls,
                         _f(r["post_seconds"], ".2f"), _f(r["lpd"], ".4f"), lp_cell]
                if w["lp_true"] is not None:
                    cells += [_f(r["nmi"], ".3f"), _f(r["ari"], ".3f")]
                cells += [_f(r["num_clusters"], ".0f"), note]
            lines.append("| " + " | ".join(cells) + " |")
        v = w.get("verdict", {})
        if "gap" in v:
            lines += ["", f"Best peer by held-out lpd: {v['best_peer']} ({v['peer_lpd']:.4f} in "
                      f"{v['peer_seconds']:.2f} s). "
                      f"dpppl's best at <= that run time: {v['dpppl_method']} {v['dpppl_lpd']:.4f} "
                      f"({v['dpppl_point']}, {v['dpppl_seconds']:.2f} s): **{v['answer']}** "
                      f"(difference {v['gap']:+.4f} nats per point)."]
        elif v:
            lines += ["", f"Verdict: {v.get('answer')} {v.get('dpppl_fastest', '')}"
                      + (f" (best peer {v['best_peer']} {v['peer_lpd']:.4f} in {v['peer_seconds']:.2f} s)"
                         if "best_peer" in v else "")]
        lines.append("")
    return "\n".join(lines)


_STATE = {}


def _checkpoint(args) -> None:
    """Write the JSON and Markdown after every method, so an interrupted run keeps what finished."""
    results, name = _STATE["results"], _STATE["name"]
    for w in results["workloads"].values():
        if "methods" in w:
            _best_dpppl(w)
            w["verdict"] = verdict(w)
    results["total_seconds"] = time.perf_counter() - _STATE["started"]
    path = write_json(name, results)
    machine = json.loads(path.read_text())["machine"]
    (RESULTS_DIR / f"{name}.md").write_text(markdown(results, _header(results, machine)) + "\n")


def _header(results: dict, machine: dict) -> list[str]:
    return [f"Command: `{results['command']}`", "",
            f"Date {machine['timestamp']}, git {machine['git_revision']}, {machine['cpu_count']} CPUs "
            f"({machine['cpu_model']}), JAX {machine['versions']['jax']} {machine['jax_backend']}, "
            f"load average (1 min) {results['load_average_at_start'][0]:.1f} at start, "
            f"{machine['load_average_1_5_15'][0]:.1f} at this write; {results['total_seconds']:.0f} s so far. "
            f"Workloads finished: {', '.join(results['finished']) or 'none'}.", "",
            "Seconds are run seconds without compilation (medians over the seeds that ran). *held-out lpd*: "
            "mean log predictive density of the 20 % held-out points, nats per point, each method's own "
            "predictive. *lp of point est.*: dpppl.log_joint of the method's point estimate of the training "
            "partition (minus the true labels' where there are any). *post s*: point estimate and predictive."]


def render(paths: list[Path], out: Path) -> None:
    """Rows, verdicts and Markdown again from the per-seed runs kept in earlier runs' JSON files.

    Several files (e.g. workloads run in parallel processes) are merged into `out`, the
    workloads in the order given; where two files hold the same workload, the later file's
    methods that ran replace the earlier's (one peer run again with another `--cap`). Each
    file's command, machine record and load are kept under `parts`.
    """
    docs = [json.loads(p.read_text()) for p in paths]
    results = dict(docs[0], workloads={}, finished=[], parts=[])
    for doc in docs:
        for name, w in doc["workloads"].items():
            if name in results["workloads"]:  # a later file's methods (e.g. one peer run again) replace
                w = dict(results["workloads"][name], methods={**results["workloads"][name]["methods"],
                                                              **{k: m for k, m in w["methods"].items() if m["runs"]}})
            results["workloads"][name] = w
        results["finished"] += [name for name in doc["finished"] if name not in results["finished"]]
        results["parts"].append({"file": str(doc.get("benchmark")), "command": doc["command"],
                                 "machine": doc["machine"], "load_average_at_start": doc["load_average_at_start"],
                                 "total_seconds": doc["total_seconds"], "finished": doc["finished"]})
    if len(docs) > 1:
        results["command"] = " ; ".join(d["command"] for d in docs)
        results["total_seconds"] = max(d["total_seconds"] for d in docs)
    for w in results["workloads"].values():
        for m in w["methods"].values():
            if m["runs"]:
                m["row"] = median_row(m["runs"])
        _best_dpppl(w)
        w["verdict"] = verdict(w)
    out.write_text(json.dumps(results, indent=1) + "\n")
    header = _header(results, results["machine"])
    if len(docs) > 1:
        header += [""] + [f"Part `{p['command']}`: last written {p['machine']['timestamp']} after "
                          f"{p['total_seconds']:.0f} s, git HEAD then {p['machine']['git_revision']}, load "
                          f"{p['load_average_at_start'][0]:.1f} at start, {p['machine']['load_average_1_5_15'][0]:.1f} "
                          f"at its last write; finished {', '.join(p['finished']) or 'nothing'}."
                          for p in results["parts"]]
    (out.parent / f"{out.stem}.md").write_text(markdown(results, header) + "\n")
    print(f"rendered {out} and {out.stem}.md")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (W1 2000, W2 5000, W3 30000), few seeds")
    parser.add_argument("--only", action="append", default=[], help="workloads to run (repeat or comma-separate)")
    parser.add_argument("--methods", action="append", default=[], help="methods to run (default all)")
    parser.add_argument("--one-seed", action="store_true", help="one seed per method everywhere")
    parser.add_argument("--cap", type=float, default=300.0,
                        help="run seconds at most for scikit-learn (no new chunk of EM iterations past it) and "
                             "for the bnpy worker (stopped)")
    parser.add_argument("--components", type=int, default=50, help="scikit-learn n_components")
    parser.add_argument("--sklearn-max-iter", type=int, default=1000, help="scikit-learn EM iterations at most")
    parser.add_argument("--bnpy-python", default=os.environ.get("BNPY_PYTHON", DEFAULT_BNPY_PYTHON),
                        help="Python of bnpy's virtual environment (env BNPY_PYTHON)")
    parser.add_argument("--dpppl-option", action="append", default=[], metavar="NAME=VALUE",
                        help="a dpppl.sample argument replacing the workload's budget (e.g. num_warmup=400); "
                             "the dpppl rows are then named with it")
    parser.add_argument("--salso-max-points", type=int, default=SALSO_MAX_POINTS,
                        help="largest training set whose dpppl point estimate is SALSO's (method 'vi'); above it "
                             "'best', the kept draw of highest lp")
    parser.add_argument("--out", default=None, help="results name (default peers, quick peers-quick)")
    parser.add_argument("--render", metavar="JSON", nargs="+", default=None,
                        help="no runs: recompute the rows, verdicts and Markdown of earlier runs' JSON files, "
                             "merged into results/<--out or peers>.json")
    args = parser.parse_args(argv)
    if args.render:
        return render([Path(p) for p in args.render], RESULTS_DIR / f"{args.out or 'peers'}.json")
    args.only = [m.strip() for o in args.only for m in o.split(",") if m.strip()]
    args.methods = [m.strip() for o in args.methods for m in o.split(",") if m.strip()]
    args.dpppl_options = dict(_parse_option(o) for o in args.dpppl_option)
    name = args.out or ("peers-quick" if args.quick else "peers")
    results = {"command": "PYTHONPATH=. python benchmarks/bench_peers.py " + " ".join(sys.argv[1:] if argv is None
                                                                                     else argv),
               "args": vars(args), "load_average_at_start": load_average(), "finished": [], "workloads": {}}
    _STATE.update(results=results, name=name, started=time.perf_counter())

    def log(msg):
        print(msg, flush=True)

    for spec in specs(args.quick):
        if args.only and spec.name not in args.only:
            continue
        run_workload(spec, args, log, results)
        results["finished"].append(spec.name)
        _checkpoint(args)
        v = results["workloads"][spec.name]["verdict"]
        log(f"[{spec.name}] verdict: {v}")
    print(f"wrote {RESULTS_DIR / (name + '.json')} and .md")


if __name__ == "__main__":
    main()
