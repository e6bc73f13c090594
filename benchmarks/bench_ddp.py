"""DDP sweep time (issue 5 target: one DDP sweep over about 1000 points and 10 slices in
at most 50 ms), side by side with a collapsed-Gibbs sweep over the same points.

Data: ``dpppl.datasets.moving_blobs`` with 10 slices, 4 blobs, 25 points per blob and
slice (N = 1000, D = 2), seed 0. Models: ``dpppl.DDPMixture()`` (the defaults: one
covariance per label and slice, the paper's eq. 11) and ``DDPMixture(slice_covariances=False)``
(one covariance per label). Each chain starts from sequential prediction and runs ``--warm``
steps of ``ddp`` first, so the number of labels has settled. Then each kernel's jitted step
is timed ``--steps`` times
(wall clock, ``block_until_ready`` after every step, compile excluded; the process CPU
time of each step is recorded too, a figure less sensitive to other jobs on the machine):

- ``ddp``: one sweep over the assignments (eq. 10) and the parameters (eq. 11), with the
  default ``num_aux=10`` auxiliary parameter sets, and with ``num_aux=1``;
- ``ddpswap``: 100 label-swap proposals (the default ``num_swaps``);
- ``ddp+ddpswap``: both;
- ``gibbs (collapsed NIW)``: one collapsed Gibbs sweep of a DP(1) NIW mixture over the
  same 1000 points without their times, the project's baseline kernel.

The table gives the median and the best step time and the ratio of each median to the
collapsed sweep's. Other processes share the machine: the load average is printed and
saved.

Usage::

    python benchmarks/bench_ddp.py            # ~2 minutes with compilation
    python benchmarks/bench_ddp.py --quick

Results go to ``benchmarks/results/ddp.json`` (``ddp-quick.json``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import dpppl
from dpppl.models.init import initial_states
from harness import load_average, write_json


def time_steps(step, state, x, steps, seed=0):
    fn = jax.jit(step)
    tic = time.perf_counter()
    state, _ = fn(jax.random.key(seed), state, x)
    jax.block_until_ready(state)
    compile_s = time.perf_counter() - tic
    times, cpu = [], []
    for i in range(steps):
        tic, cpu_tic = time.perf_counter(), time.process_time()
        state, _ = fn(jax.random.fold_in(jax.random.key(seed), i + 1), state, x)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - tic)
        cpu.append(time.process_time() - cpu_tic)
    return times, compile_s, state, cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    steps, warm = (5, 3) if args.quick else (args.steps, args.warm)
    data, _ = dpppl.datasets.load("blobs", num_slices=10, num_clusters=4, points_per_blob=25, seed=0)
    print(f"load average before {load_average()}")
    rows, settled = {}, {}
    for covariances, slice_covariances in (("per slice", True), ("per label", False)):
        bound = dpppl.DDPMixture(slice_covariances=slice_covariances).bind(data)
        x = jnp.asarray(bound.x)
        state = jax.tree.map(lambda a: a[0], initial_states(bound, "sequential",
                                                                 jax.random.split(jax.random.key(0), 1)))
        ddp = jax.jit(dpppl.kernels.build("ddp", bound).step)
        for i in range(warm):
            state, _ = ddp(jax.random.key(100 + i), state, x)
        settled[covariances] = {"labels_in_use": int((state.stats.n > 0).sum()),
                                "capacity": int(state.stats.n.shape[0])}
        print(f"covariances {covariances}: N = {bound.num_points}, T = {bound.num_slices}, {settled[covariances]}")
        for name, options in (("ddp", {}), ("ddp (num_aux=1)", {"num_aux": 1}), ("ddpswap", {}), ("ddp+ddpswap", {})):
            kern = dpppl.kernels.build(name.split(" ")[0], bound, **options)
            times, compile_s, _, cpu = time_steps(kern.step, state, x, steps)
            rows[f"{name}, covariances {covariances}"] = {
                "median_s": statistics.median(times), "best_s": min(times), "compile_s": compile_s,
                "cpu_median_s": statistics.median(cpu), "times_s": times}
    niw = dpppl.DPMixture(1.0, dpppl.families.NormalInverseWishart())
    nbound = niw.bind(np.asarray(bound.x))
    gstate = jax.tree.map(lambda a: a[0], initial_states(
        nbound, "sequential", jax.random.split(jax.random.key(0), 1)))
    gibbs = dpppl.kernels.build("gibbs", nbound)
    times, compile_s, _, cpu = time_steps(gibbs.step, gstate, jnp.asarray(nbound.x), steps)
    rows["gibbs (collapsed NIW)"] = {"median_s": statistics.median(times), "best_s": min(times),
                                     "compile_s": compile_s, "cpu_median_s": statistics.median(cpu), "times_s": times}
    base = rows["gibbs (collapsed NIW)"]["median_s"]
    print(f"{'kernel':<40} {'median ms':>10} {'best ms':>9} {'cpu ms':>8} {'x gibbs':>8} {'compile s':>10}")
    for name, r in rows.items():
        r["ratio_to_gibbs"] = r["median_s"] / base
        print(f"{name:<40} {1e3 * r['median_s']:>10.1f} {1e3 * r['best_s']:>9.1f} {1e3 * r['cpu_median_s']:>8.1f} "
              f"{r['ratio_to_gibbs']:>8.2f} {r['compile_s']:>10.1f}")
    target = rows["ddp, covariances per slice"]["median_s"] <= 0.050
    print(f"target (one ddp sweep <= 50 ms): {'met' if target else 'NOT met'}; load average after {load_average()}")
    write_json("ddp-quick" if args.quick else "ddp", {
        "points": bound.num_points, "slices": bound.num_slices, "steps": steps, "warm": warm,
        "settled": settled, "kernels": rows, "target_ddp_sweep_le_50ms": target})


if __name__ == "__main__":
    main()
