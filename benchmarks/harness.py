"""A small harness that runs one workload with several methods side by side.

Benchmarks report ratios measured in one run, never bare times alone (DESIGN.md, sec. 7).
A *workload* is data, true labels and a dpppl model; a *method* is a function of the
workload that returns a :class:`MethodResult` (its run time, its compile time where it
compiles, and one representative label vector). :func:`run_workload` runs every method
in turn and scores each one against the truth:

- seconds (``time.perf_counter``, after any warm-up compile, which is reported apart),
- the ratio of those seconds to the baseline method's (dpppl's collapsed Gibbs),
- NMI of the labels against the true labels (``sklearn.metrics.normalized_mutual_info_score``),
- the number of clusters,
- the collapsed log joint of the labels, ``dpppl.log_joint(model, x, labels)``, relative
  to the true labels' as ``(lp - lp_true) / |lp_true|`` in percent (0 is as good as the
  truth, positive is a partition the model prefers to the truth).

:func:`print_table` prints them; :func:`write_json` stores them under
``benchmarks/results/<name>.json`` with :func:`machine_info`.

:class:`GibbsTrace` drives dpppl's collapsed Gibbs kernel sweep by sweep (the same
kernel, keys and capacity growth as ``dpppl.sample``), timing each sweep and recording
the log joint with a timestamp, so that benchmarks can ask *when* a chain first reaches
a given log joint.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

RESULTS_DIR = Path(__file__).resolve().parent / "results"


# ------------------------------------------------------------------------- data types ---
@dataclasses.dataclass
class Workload:
    """Data with true labels and the dpppl model every method is scored under."""

    name: str
    x: np.ndarray
    labels: np.ndarray
    model: object
    description: str = ""

    def __post_init__(self):
        import dpppl

        self.x = np.asarray(self.x, dtype=float)
        self.labels = np.asarray(self.labels)
        self.lp_true = dpppl.log_joint(self.model, self.x, self.labels)

    def relative_lp(self, lp: float) -> float:
        """``(lp - lp_true) / |lp_true|`` in percent."""
        return 100.0 * (lp - self.lp_true) / abs(self.lp_true)


@dataclasses.dataclass
class MethodResult:
    """What one method returns: timings, a representative label vector, extras.

    ``seconds`` excludes compilation; ``compile_seconds`` is None for methods that do not
    compile. ``extra`` holds method-specific figures (iterations, convergence, traces)
    that go to the JSON file; ``note`` is a short remark printed under the table.
    """

    seconds: float
    labels: np.ndarray
    compile_seconds: Optional[float] = None
    note: str = ""
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Row:
    method: str
    seconds: float
    compile_seconds: Optional[float]
    ratio: float
    nmi: float
    num_clusters: int
    lp: float
    lp_rel_percent: float
    note: str
    extra: dict


# ------------------------------------------------------------------------------ runs ---
def score(workload: Workload, name: str, result: MethodResult, baseline_seconds: float) -> Row:
    """Score one method's result against the workload's truth."""
    import dpppl
    from sklearn.metrics import normalized_mutual_info_score

    labels = np.asarray(result.labels)
    lp = dpppl.log_joint(workload.model, workload.x, labels)
    return Row(method=name, seconds=result.seconds, compile_seconds=result.compile_seconds,
               ratio=result.seconds / baseline_seconds if baseline_seconds > 0 else math.nan,
               nmi=float(normalized_mutual_info_score(workload.labels, labels)),
               num_clusters=int(np.unique(labels).size), lp=float(lp),
               lp_rel_percent=workload.relative_lp(lp), note=result.note, extra=result.extra)


def run_workload(workload: Workload, methods: dict[str, Callable[[Workload], MethodResult]],
                 baseline: Optional[str] = None, verbose: bool = True) -> list[Row]:
    """Run every method on the workload, in order, and score each one.

    ``baseline`` (default: the first method) names the method whose seconds the ratios
    divide by.
    """
    baseline = baseline or next(iter(methods))
    if baseline not in methods:
        raise ValueError(f"baseline {baseline!r} is not one of the methods {list(methods)}")
    results = {}
    for name, fn in methods.items():
        if verbose:
            print(f"[{workload.name}] running {name} ...", flush=True)
        results[name] = fn(workload)
        if verbose:
            r = results[name]
            comp = "" if r.compile_seconds is None else f" (+{r.compile_seconds:.2f} s compile)"
            print(f"[{workload.name}]   {name}: {r.seconds:.2f} s{comp}", flush=True)
    base = results[baseline].seconds
    return [score(workload, name, r, base) for name, r in results.items()]


# --------------------------------------------------------------------------- reporting ---
def format_table(workload: Workload, rows: list[Row], baseline: Optional[str] = None) -> str:
    """The rows as a fixed-width text table (a Markdown table, so it pastes into docs)."""
    baseline = baseline or rows[0].method
    head = ["method", "compile s", "run s", f"x {baseline}", "NMI", "K", "lp vs true"]
    lines = []
    for r in rows:
        lines.append([r.method,
                      "-" if r.compile_seconds is None else f"{r.compile_seconds:.2f}",
                      f"{r.seconds:.2f}", f"{r.ratio:.2f}", f"{r.nmi:.3f}", str(r.num_clusters),
                      f"{r.lp_rel_percent:+.2f}%"])
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]

    def fmt(cells):
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    out = [f"{workload.name}: {workload.description}",
           f"N={workload.x.shape[0]}, D={workload.x.shape[1]}, true K={np.unique(workload.labels).size}, "
           f"lp_true={workload.lp_true:.1f}",
           fmt(head), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [fmt(l) for l in lines]
    notes = [f"  {r.method}: {r.note}" for r in rows if r.note]
    if notes:
        out += ["notes:"] + notes
    return "\n".join(out)


def print_table(workload: Workload, rows: list[Row], baseline: Optional[str] = None) -> None:
    print()
    print(format_table(workload, rows, baseline))
    print(flush=True)


def _version(module: str) -> Optional[str]:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001  (a missing package is reported as None)
        return None


def _git_revision() -> Optional[str]:
    try:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (rev + ("-dirty" if dirty else "")) or None
    except Exception:  # noqa: BLE001
        return None


def _cpu_model() -> Optional[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def load_average() -> Optional[list]:
    """The 1, 5 and 15 minute load averages (other processes share this machine)."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def machine_info() -> dict:
    """Platform, CPU count, load average, library versions, JAX backend and devices."""
    import jax

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "load_average_1_5_15": load_average(),
        "python": sys.version.split()[0],
        "versions": {m: _version(m) for m in ("dpppl", "jax", "jaxlib", "numpyro", "numpy",
                                              "scikit-learn", "scipy")},
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "jax_x64": bool(jax.config.jax_enable_x64),
        "git_revision": _git_revision(),
    }


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


def rows_to_dict(workload: Workload, rows: list[Row]) -> dict:
    return {"workload": workload.name, "description": workload.description,
            "n": int(workload.x.shape[0]), "d": int(workload.x.shape[1]),
            "true_k": int(np.unique(workload.labels).size), "lp_true": workload.lp_true,
            "rows": [dataclasses.asdict(r) for r in rows]}


def write_json(name: str, payload: dict, directory: Path = RESULTS_DIR) -> Path:
    """Write ``payload`` plus ``machine`` (:func:`machine_info`, taken now: its load average
    is the one at the end of the run) to ``<directory>/<name>.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    doc = {"benchmark": name, "machine": machine_info(), **payload}
    path.write_text(json.dumps(_jsonable(doc), indent=1) + "\n")
    return path


def write_table(out: str, payload: dict, text: str) -> None:
    """Write ``payload`` to ``<out>.json`` and the rendered ``text`` to ``<out>.md`` (a benchmark's
    results beside their table), creating the folder, and print the table."""
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump(payload, f, indent=1)
    with open(out + ".md", "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    print(text)


# ------------------------------------------------------------------------ gibbs trace ---
class GibbsTrace:
    """dpppl's collapsed Gibbs kernel driven sweep by sweep, timed, with an lp trace.

    Uses the registered kernel (``dpppl.kernels.build("gibbs", model.bind(x))``) with
    the driver's conventions: sweep ``t`` uses key ``fold_in(chain_key, t)``, and when a
    sweep runs out of empty cluster slots the capacity is doubled and the sweep re-run
    from the same state and key. Each capacity's step is compiled ahead of time
    (``jax.jit(...).lower(...).compile()``) and that time is counted as compile time,
    not run time. The log joint is evaluated after each timed sweep, outside the timer.

    Parameters
    ----------
    model : dpppl.models.mixture.Model
    x : array (N, D)
    init : {"single", "sequential"} or array of labels
        ``"sequential"`` runs sequential prediction (``dpppl.sample``'s default); its run
        time is counted (as ``init_seconds``) and its compile time is reported apart.
    seed : int
    kernel : str
        A registered kernel name (default ``"gibbs"``).
    cache : dict, optional
        Compiled executables, shared between traces of the same model and data.
    capacity : int, optional
        Initial cluster capacity for a start from labels (default: ``dpppl.sample``'s,
        ``max(16, 2 K + 8)``); it still doubles when a sweep needs more.
    options : dict, optional
        Keyword options of the kernel (``dpppl.kernels.build(kernel, bound, **options)``).
        A kernel with an ``init`` (e.g. ``"subcluster"``) has it run on the initial state,
        as ``dpppl.sample`` does, timed into ``init_seconds``.
    """

    def __init__(self, model, x, init="sequential", seed=0, kernel="gibbs", cache=None, capacity=None,
                 options=None):
        import jax
        import jax.numpy as jnp

        import dpppl
        from dpppl.models.mixture import log_joint, state_from_labels

        self.bound = model.bind(x)
        self.kernel = dpppl.kernels.build(kernel, self.bound, **(options or {}))
        self.x = jnp.asarray(self.bound.x)
        n = self.bound.num_points
        family, prior = self.bound.family, self.bound.prior
        alpha = prior.initial_alpha
        k_init, k_run = jax.random.split(jax.random.key(seed))
        self.chain_key = k_run
        self.compile_seconds = 0.0
        self.init_seconds = 0.0
        # compiled executables by (what, capacity); pass the same dict to several traces of
        # one model and data (e.g. several seeds) to compile once
        self._cache = {} if cache is None else cache
        self._lp = jax.jit(lambda s: log_joint(family, prior, s))

        if isinstance(init, str) and init == "sequential":
            state = self._sequential(k_init, n, alpha)
        else:
            if isinstance(init, str) and init != "single":
                raise ValueError(f"init must be 'single', 'sequential' or labels, got {init!r}")
            from dpppl.core.state import canonical_labels

            labels = np.zeros(n, np.int32) if isinstance(init, str) else np.asarray(init)
            labels = jnp.asarray(canonical_labels(labels))
            k = int(labels.max()) + 1
            # dpppl.sample's rule for the initial capacity, unless one is given
            cap = int(min(n + 1, max(k + 1, capacity) if capacity else max(16, 2 * k + 8)))
            build = self._cached(("from_labels", cap), lambda: jax.jit(
                lambda z: state_from_labels(family, self.x, z, cap, alpha)).lower(labels))
            tic = time.perf_counter()
            state = build(labels)
            jax.block_until_ready(state)
            self.init_seconds = time.perf_counter() - tic
        if self.kernel.init is not None:  # the kernel's carried values in state.extras
            kernel_init = self._cached(("kernel_init", int(state.stats.n.shape[-1])),
                                       lambda: jax.jit(self.kernel.init).lower(state, self.x))
            tic = time.perf_counter()
            state = kernel_init(state, self.x)
            jax.block_until_ready(state)
            self.init_seconds += time.perf_counter() - tic
        self.state = state
        self.sweeps = 0
        self.elapsed = self.init_seconds  # run time so far (init + sweeps), no compile
        self.trace = {"seconds": [self.elapsed], "lp": [self.lp()], "num_clusters": [self.num_clusters()]}

    # -- initialisation by sequential prediction, compiled ahead of time ----------------
    def _sequential(self, key, n, alpha):
        import jax
        import jax.numpy as jnp

        from dpppl.models.seating import sequential_prediction
        from dpppl.core.state import PartitionState

        fam = self.bound.family
        cap = int(min(n + 1, 24))  # dpppl.sample's initial capacity for sequential prediction
        fn = jax.jit(lambda k, s: sequential_prediction(self.bound, k, s, self.x))
        while True:
            empty = PartitionState(jnp.zeros((n,), jnp.int32), fam.empty_stats((cap,)),
                                   jnp.asarray(alpha, self.x.dtype), jnp.zeros((), bool))
            compiled = self._cached(("sequential", cap), lambda: fn.lower(key, empty))
            tic = time.perf_counter()
            state = compiled(key, empty)
            jax.block_until_ready(state)
            self.init_seconds += time.perf_counter() - tic
            if not bool(state.overflow) or cap == n + 1:
                return state
            cap = min(2 * cap, n + 1)

    def _cached(self, key, lower):
        """The executable ``lower().compile()`` under ``key``, compiling (timed) if new."""
        if key not in self._cache:
            tic = time.perf_counter()
            self._cache[key] = lower().compile()
            self.compile_seconds += time.perf_counter() - tic
        return self._cache[key]

    def _step_for(self, capacity):
        import jax

        key = jax.random.fold_in(self.chain_key, 0)
        return self._cached(("step", capacity), lambda: jax.jit(self.kernel.step).lower(key, self.state, self.x))

    @property
    def capacity(self) -> int:
        return int(self.state.stats.n.shape[-1])

    def compile(self) -> None:
        """Compile the sweep at the current capacity (also done lazily by :meth:`sweep`)."""
        self._step_for(self.capacity)

    def lp(self) -> float:
        return float(self._lp(self.state))

    def num_clusters(self) -> int:
        return int(np.sum(np.asarray(self.state.stats.n) > 0))

    @property
    def labels(self) -> np.ndarray:
        return np.asarray(self.state.z)

    def sweep(self, record: bool = True) -> float:
        """One timed sweep; returns its seconds (re-runs after capacity growth included)."""
        import jax

        from dpppl.core.state import grow

        key = jax.random.fold_in(self.chain_key, self.sweeps)
        seconds = 0.0
        while True:
            step = self._step_for(self.capacity)
            tic = time.perf_counter()
            new, _ = step(key, self.state, self.x)
            jax.block_until_ready(new)
            seconds += time.perf_counter() - tic
            if not bool(new.overflow) or self.capacity == self.bound.num_points + 1:
                break
            self.state = grow(self.state, min(2 * self.capacity, self.bound.num_points + 1))
        self.state = new
        self.sweeps += 1
        self.elapsed += seconds
        if record:
            self.trace["seconds"].append(self.elapsed)
            self.trace["lp"].append(self.lp())
            self.trace["num_clusters"].append(self.num_clusters())
        return seconds

    def run(self, sweeps: int, record: bool = True) -> "GibbsTrace":
        for _ in range(sweeps):
            self.sweep(record)
        return self

    def run_until(self, target_lp: float, seconds: float) -> Optional[float]:
        """Sweep until the last recorded lp reaches ``target_lp`` or ``seconds`` of run time
        have passed; return the run seconds of the first lp >= ``target_lp``, or None."""
        while self.elapsed < seconds and self.trace["lp"][-1] < target_lp:
            self.sweep()
        reached = self.first_reaching(target_lp)
        return None if reached is None else reached[1]

    def first_reaching(self, target_lp: float) -> Optional[tuple[int, float]]:
        """(sweep, run seconds) of the first recorded lp >= ``target_lp``, or None."""
        for t, (s, lp) in enumerate(zip(self.trace["seconds"], self.trace["lp"])):
            if lp >= target_lp:
                return t, s
        return None
