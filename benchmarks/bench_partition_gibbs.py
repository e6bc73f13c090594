"""The cost of a DP mixture inside a NumPyro model (issue 19, items 1-2): milliseconds per outer
step of `dpppl.PartitionGibbs(NUTS(model), kernel)` against NUTS alone on the same regression
with normal errors, side by side in one process.

Data: y = 1.5 x + e, x ~ N(0, 1), e from three groups at -2, 0, 2 with sd 0.3, N points. Models:
``normal`` (beta ~ N(0, 25), s ~ HalfNormal(3), y ~ N(x beta, s)) under NUTS, and ``dp``
(beta ~ N(0, 25), DP(1) mixture of NormalKnownCov(0.1, 0, 4) errors) under the composed
kernel with ``gibbs`` and ``gibbs+splitmerge`` (one sweep per outer step). Each run is 200
warmup + 300 kept steps, one chain; every sampler runs once to compile, then the timed runs
alternate between samplers ``--repeats`` times. Report the ratios: the machine's load moves the
absolute times.

Usage::

    PYTHONPATH=. python benchmarks/bench_partition_gibbs.py --points 200 2000
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

import dpppl

MIXTURE = dpppl.DPMixture(1.0, dpppl.families.NormalKnownCov(sigma2=0.1, mu0=0.0, tau2=4.0))
NUM_WARMUP, NUM_SAMPLES = 200, 300


def dp_errors(x, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0))
    dpppl.dp_mixture("resid", MIXTURE, obs=y - x * beta)


def normal_errors(x, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0))
    s = numpyro.sample("s", dist.HalfNormal(3.0))
    numpyro.sample("obs", dist.Normal(x * beta, s), obs=y)


def data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return jnp.asarray(x), jnp.asarray(1.5 * x + rng.choice([-2.0, 0.0, 2.0], n) + 0.3 * rng.normal(size=n))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"dpppl from {dpppl.__file__}")
    samplers = {"NUTS, normal errors": lambda: NUTS(normal_errors),
                "PartitionGibbs(NUTS, gibbs)": lambda: dpppl.PartitionGibbs(NUTS(dp_errors), "gibbs"),
                "PartitionGibbs(NUTS, gibbs+splitmerge)":
                    lambda: dpppl.PartitionGibbs(NUTS(dp_errors), "gibbs+splitmerge")}
    for n in args.points:
        x, y = data(n)
        runs = {name: MCMC(make(), num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES, progress_bar=False)
                for name, make in samplers.items()}
        for mcmc in runs.values():
            mcmc.run(jax.random.key(0), x, y)  # compile
        times = {name: [] for name in runs}
        for rep in range(args.repeats):
            for name, mcmc in runs.items():
                tic = time.perf_counter()
                mcmc.run(jax.random.key(rep + 1), x, y)
                jax.block_until_ready(mcmc.get_samples())
                times[name].append((time.perf_counter() - tic) / (NUM_WARMUP + NUM_SAMPLES) * 1e3)
        base = np.median(times["NUTS, normal errors"])
        for name, ms in times.items():
            print(f"N={n:6d}  {name:40s} {np.median(ms):7.2f} ms/step  x{np.median(ms) / base:5.1f}  "
                  f"({', '.join(f'{t:.2f}' for t in ms)})", flush=True)


if __name__ == "__main__":
    main()
