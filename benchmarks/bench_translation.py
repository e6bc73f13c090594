"""Translation: does a translation-invariant model give the same answers on shifted data?

`models/gaussian_niw.dp` (mu0 = mean(x), psi0 = cov(x) / 10) is invariant under x -> x + c.
For every kernel this runs `dpppl.sample` (same seed, `--sweeps` iterations from the
sequential start) on data x and on x + c and reports

- `same_z`: whether the two chains' partitions are identical, draw by draw;
- `lp_error`: max over draws of |lp recorded on x + c - lp of the same state on x|, the
  reference computed in float64 on the unshifted data (`BoundModel.lp` of the draw's
  labels at the draw's alpha);
- `log_joint_error`: max over the draws on x + c of |dpppl.log_joint(model, x + c, z) -
  dpppl.log_joint(model, x, z)|, the first in the run's precision, the second the float64
  reference;
- `num_clusters`: K of the last draw on x + c.

The runs happen in a child process importing dpppl from `--tree` (default: the checkout
holding this script), with DPPPL_X64 set to `--x64`; the reference is computed here in
float64 with this checkout's dpppl (on the unshifted data, where every version agrees).

    python benchmarks/bench_translation.py                       # 10^5 points, c = 1e6, float64
    python benchmarks/bench_translation.py --tree /path/to/old/checkout
    python benchmarks/bench_translation.py --x64 0 --n 2000 --shift 1e3
    python benchmarks/bench_translation.py --x64 0 --n 100000 --shift 1e3

Prints one JSON object per kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = ("gibbs", "splitmerge", "perm-move", "subcluster")
KERNEL_OPTIONS = {"perm-move": {"beam_epsilon": 1e-32, "beam_width": 16}}
"""perm's default dynamic program is O(N^2) per step (over 15 minutes at N = 10^5 here); the
beam of sec. 3.3 is O(N W)."""


def data(n: int, seed: int):
    """Four well-separated 2-D Gaussian clusters of unit scale (the centre near 0)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = np.array([[-6.0, 0.0], [6.0, 0.0], [0.0, 6.0], [0.0, -6.0]])
    labels = rng.integers(0, 4, n)
    return centres[labels] + rng.normal(size=(n, 2))


def run(args):
    """Sample on x and x + shift in this process's precision; write draws to args.out."""
    import numpy as np

    import dpppl

    model = dpppl.load(os.path.join(ROOT, "models", "gaussian_niw.dp"))
    x = data(args.n, args.seed)
    out = {}
    for kernel in args.kernels:
        runs = {}
        for name, offset in (("plain", 0.0), ("shifted", args.shift)):
            tic = time.perf_counter()
            idata = dpppl.sample(model, x + offset, kernel=kernel, num_warmup=0, num_samples=args.sweeps,
                                 num_chains=1, seed=args.seed, init=args.init, progress_bar=False,
                                 **KERNEL_OPTIONS.get(kernel, {}))
            runs[name] = {"z": np.asarray(idata.posterior_partition["z"])[0].tolist(),
                          "alpha": np.asarray(idata.posterior["alpha"])[0].tolist(),
                          "lp": np.asarray(idata.sample_stats["lp"])[0].tolist()}
            print(f"{kernel} on {name} data: {time.perf_counter() - tic:.0f} s", file=sys.stderr, flush=True)
        runs["log_joint_shifted"] = [dpppl.log_joint(model, x + args.shift, np.asarray(z))
                                     for z in runs["shifted"]["z"]]
        out[kernel] = runs
    with open(args.out, "w") as f:
        json.dump(out, f)


def score(args, draws):
    """Float64 reference lp of every draw on the unshifted data; print the figures."""
    sys.path.insert(0, ROOT)
    import jax.numpy as jnp
    import numpy as np

    import dpppl

    model = dpppl.load(os.path.join(ROOT, "models", "gaussian_niw.dp"))
    x = data(args.n, args.seed)
    target = model.bind(x)

    def reference_lp(z, alpha):
        z = np.asarray(z)
        state = target.state_from_labels(None, jnp.asarray(z), int(z.max()) + 1)
        return float(target.lp(state._replace(alpha=jnp.asarray(alpha, state.alpha.dtype))))

    def lp_error(run):
        return max(abs(lp - reference_lp(z, a)) for z, a, lp in zip(run["z"], run["alpha"], run["lp"]))

    for kernel in args.kernels:
        plain, shifted = draws[kernel]["plain"], draws[kernel]["shifted"]
        joint_err = max(abs(lj - dpppl.log_joint(model, x, np.asarray(z)))
                        for z, lj in zip(shifted["z"], draws[kernel]["log_joint_shifted"]))
        print(json.dumps({"kernel": kernel, "n": args.n, "shift": args.shift, "x64": args.x64,
                          "same_z": plain["z"] == shifted["z"],
                          "lp_error_shifted": lp_error(shifted), "lp_error_plain": lp_error(plain),
                          "log_joint_error": joint_err,
                          "num_clusters": int(np.max(shifted["z"][-1])) + 1,
                          "lp_nan": bool(np.isnan(shifted["lp"]).any())}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--shift", type=float, default=1e6)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--x64", type=int, default=1)
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--init", default="sequential")
    parser.add_argument("--tree", default=ROOT, help="the checkout whose dpppl samples")
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.out:  # the sampling child
        run(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        args.out = os.path.join(tmp, "draws.json")
        child = [sys.executable, __file__, "--n", str(args.n), "--shift", repr(args.shift), "--sweeps",
                 str(args.sweeps), "--seed", str(args.seed), "--x64", str(args.x64), "--init", args.init,
                 "--out", args.out,
                 "--kernels", *args.kernels]
        subprocess.run(child, check=True, env=dict(os.environ, DPPPL_X64=str(args.x64),
                                                   PYTHONPATH=os.path.abspath(args.tree)))
        with open(args.out) as f:
            draws = json.load(f)
    os.environ["DPPPL_X64"] = "1"
    score(args, draws)


if __name__ == "__main__":
    main()
