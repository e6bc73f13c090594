"""Does the XLA CPU wedge still happen? Count hung runs under each CPU threading setting.

The wedge (CI, jaxlib 0.4-0.5 era): a vmapped dpppl kernel on a 2-core machine, the process
idle at 0% CPU for ever, every Eigen pool thread waiting for work while the caller waits for
a result. dpppl's defence is two settings (docs/configuration.md): ``--xla_cpu_multi_thread_eigen=false``
in ``XLA_FLAGS`` and ``jax_cpu_enable_async_dispatch=False``. This script runs the same
workload in fresh subprocesses under each combination of the two and counts the runs that
do not finish within the timeout (a hang; ``cpu_s_in_last_5s`` near 0 tells a wedge from a
run that is only slow on a loaded machine) or fail.

Workload of one run (a fresh ``python`` process): ``dpppl.sample`` of ``models/gaussian_niw.dp``
on the ``faithful`` data with ``kernel="gibbs+splitmerge"`` and with ``kernel="subcluster"``,
4 vmapped chains, 50 warm-up and 50 kept iterations each. All runs share one persistent
compilation cache (a temporary directory, warmed by one untimed run per setting first) so
that a run is mostly execution, which is where the wedge was seen.

Run from the repository root (2 cores; about 15 s a run once the cache is warm)::

    PYTHONPATH=. python benchmarks/bench_cpu_wedge.py --runs 20 --timeout 120 \
        --out benchmarks/results/cpu-wedge.json

``--settings eigen=off,async=off`` (comma-separated items, ``;`` between settings) picks
combinations; the default is all four. ``--parallel K`` runs K processes at once (more
contention for the 2 cores, which is what CI had with ``pytest -n 2``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

WORKLOAD = r"""
import time
_t0 = time.perf_counter()
import os, jax
# JAX reads no environment variable for this flag (jax 0.10): set it before the CPU client exists
jax.config.update("jax_cpu_enable_async_dispatch", os.environ["WEDGE_ASYNC_DISPATCH"] == "1")
import dpppl
x, _ = dpppl.datasets.load("faithful")
m = dpppl.load("models/gaussian_niw.dp")
for kernel in ("gibbs+splitmerge", "subcluster"):
    idata = dpppl.sample(m, x, kernel=kernel, num_chains=4, num_warmup=50, num_samples=50,
                         seed={seed}, progress_bar=False)
    assert idata.posterior.sizes["chain"] == 4
print("ok", round(time.perf_counter() - _t0, 1), jax.config.values["jax_cpu_enable_async_dispatch"],
      os.environ["XLA_FLAGS"], flush=True)
"""

SETTINGS = {  # name -> (XLA_FLAGS eigen value or None for XLA's default, async dispatch)
    "eigen=off,async=off": ("false", False),   # dpppl's default before this benchmark
    "eigen=on,async=off": ("true", False),
    "eigen=off,async=on": ("false", True),
    "eigen=on,async=on": ("true", True),       # JAX's own defaults
}


def _env(name: str, cache: str) -> dict:
    eigen, async_dispatch = SETTINGS[name]
    env = dict(os.environ, JAX_PLATFORMS="cpu", CI="1", DPPPL_COMPILATION_CACHE=cache,
               DPPPL_CPU_THREADING="default",  # dpppl changes nothing; the two settings below rule
               XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={eigen}",
               WEDGE_ASYNC_DISPATCH="1" if async_dispatch else "0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
    return env


def _start(name: str, seed: int, cache: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKLOAD.replace("{seed}", str(seed))],
                            env=_env(name, cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _finish(proc: subprocess.Popen, started: float, timeout: float) -> dict:
    try:
        out, err = proc.communicate(timeout=max(0.0, timeout - (time.perf_counter() - started)))
    except subprocess.TimeoutExpired:
        # a wedge sits at 0% CPU; a run that is merely slow (a loaded machine) keeps computing
        before = _cpu_seconds(proc.pid)
        time.sleep(5)
        after = _cpu_seconds(proc.pid)
        proc.kill()
        proc.communicate()
        busy = None if before is None or after is None else round(after - before, 2)
        return {"status": "hung", "seconds": round(time.perf_counter() - started, 1),
                "cpu_s_in_last_5s": busy}
    ok = proc.returncode == 0 and out.startswith("ok")
    # the run's own time (the parent reaps a batch in order, so its clock would give the slowest)
    seconds = float(out.split()[1]) if ok else round(time.perf_counter() - started, 1)
    return {"status": "ok" if ok else "failed", "seconds": seconds,
            **({} if ok else {"stderr": err[-2000:]})}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--settings", default=";".join(SETTINGS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default=None, help="compilation cache directory (default: a new temporary one)")
    args = ap.parse_args(argv)
    names = [s.strip() for s in args.settings.split(";") if s.strip()]
    cache = args.cache or tempfile.mkdtemp(prefix="dpppl-wedge-cache-")
    result = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv),
              "cpus": os.cpu_count(), "runs": args.runs, "timeout_s": args.timeout,
              "parallel": args.parallel, "settings": {}}
    try:
        import jax
        result["jax"] = jax.__version__
    except ImportError:
        pass
    # warm the compilation cache (not counted); the eigen flag is part of the cache key
    warm = [(name, _start(name, 0, cache), time.perf_counter()) for name in names]
    for name, proc, t0 in warm:
        r = _finish(proc, t0, 10 * args.timeout)
        print(f"{name}: warm-up {r['status']} in {r['seconds']} s", flush=True)
    # interleave settings so that load from other users of the machine hits all alike
    jobs = [(name, seed) for seed, name in itertools.product(range(1, args.runs + 1), names)]
    runs = {name: [] for name in names}
    while jobs:
        batch, jobs = jobs[:args.parallel], jobs[args.parallel:]
        started = [(name, seed, _start(name, seed, cache), time.perf_counter()) for name, seed in batch]
        for name, seed, proc, t0 in started:
            r = _finish(proc, t0, args.timeout)
            runs[name].append({"seed": seed, **r})
            print(f"{name} seed {seed}: {r['status']} {r['seconds']} s", flush=True)
    for name in names:
        rs = runs[name]
        times = sorted(r["seconds"] for r in rs if r["status"] == "ok")
        result["settings"][name] = {
            "hung": sum(r["status"] == "hung" for r in rs),
            "failed": sum(r["status"] == "failed" for r in rs),
            "ok": len(times), "median_s": times[len(times) // 2] if times else None, "runs": rs}
        s = result["settings"][name]
        print(f"{name}: {s['hung']} hung, {s['failed']} failed, {s['ok']} ok of {len(rs)}; "
              f"median {s['median_s']} s", flush=True)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
