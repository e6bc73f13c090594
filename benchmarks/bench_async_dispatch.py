"""Does dpppl's setting `jax_cpu_enable_async_dispatch=False` slow a user's own NumPyro model?

One plain NumPyro NUTS model (a linear regression, 200 points, 300 warm-up + 300 kept steps) in
fresh processes, with the progress bar (NumPyro's Python loop, one dispatch per step) and without
(one compiled loop), under three settings: JAX's defaults (`jax`), async dispatch off and nothing
else (`async_off`), and `import dpppl` (`dpppl`: async dispatch off; 64-bit mode is no longer
changed). Each process times a second `mcmc.run` (the programs compiled by the first; without the
progress bar NumPyro compiles the loop again for the new key, so that time includes a compile)
and 2,000 small eager operations, wall and CPU seconds; on a machine other jobs share, compare the
CPU seconds. Modes are interleaved, `--reps` rounds. Run from the repository root::

    PYTHONPATH=. nice -n 10 python benchmarks/bench_async_dispatch.py --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
mode, pb = sys.argv[1], sys.argv[2] == "1"
import jax
if mode == "async_off":
    jax.config.update("jax_cpu_enable_async_dispatch", False)
elif mode == "dpppl":
    import dpppl  # noqa: F401
import jax.numpy as jnp, numpy as np, numpyro, numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 3)); y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=200)
def model(X, y):
    b = numpyro.sample("b", dist.Normal(0, 5).expand([3]).to_event(1))
    s = numpyro.sample("s", dist.HalfNormal(2.0))
    numpyro.sample("y", dist.Normal(X @ b, s), obs=y)
mcmc = MCMC(NUTS(model), num_warmup=300, num_samples=300, progress_bar=pb)
mcmc.run(jax.random.key(0), X, y); jax.block_until_ready(mcmc.get_samples())
w, c = time.perf_counter(), time.process_time()
mcmc.run(jax.random.key(1), X, y); jax.block_until_ready(mcmc.get_samples())
run_wall, run_cpu = time.perf_counter() - w, time.process_time() - c
w, c = time.perf_counter(), time.process_time()
a = jnp.ones(3)
for _ in range(2000):
    a = a * 1.0001 + 0.5
a.block_until_ready()
print(json.dumps({"mode": mode, "progress_bar": pb, "async": jax.config.values["jax_cpu_enable_async_dispatch"],
                  "x64": jax.config.values["jax_enable_x64"], "run_wall": run_wall, "run_cpu": run_cpu,
                  "eager_wall": time.perf_counter() - w, "eager_cpu": time.process_time() - c}))
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    env = dict(os.environ, JAX_PLATFORMS="cpu", DPPPL_COMPILATION_CACHE="off")
    for name in ("DPPPL_CPU_THREADING", "JAX_ENABLE_X64", "XLA_FLAGS"):
        env.pop(name, None)
    rows = []
    for _ in range(args.reps):
        for pb in ("1", "0"):
            for mode in ("jax", "async_off", "dpppl"):
                out = subprocess.run([sys.executable, "-c", CHILD, mode, pb], capture_output=True, text=True,
                                     env=env, check=True)
                rows.append(json.loads(out.stdout.splitlines()[-1]))
                print(json.dumps(rows[-1]), flush=True)
    print("median CPU seconds (second run / 2,000 eager ops):")
    for pb in (True, False):
        for mode in ("jax", "async_off", "dpppl"):
            mine = [r for r in rows if r["mode"] == mode and r["progress_bar"] is pb]
            print(f"  progress_bar={pb!s:5} {mode:9} {statistics.median(r['run_cpu'] for r in mine):6.2f} s  "
                  f"{statistics.median(r['eager_cpu'] for r in mine):6.3f} s")


if __name__ == "__main__":
    main()
