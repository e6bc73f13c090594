"""Translation: does a translation-invariant model give the same answers on shifted data?

`models/gaussian_niw.dp` (mu0 = mean(x), psi0 = cov(x) / 10) is invariant under x -> x + c.
For every kernel this runs `dpppl.sample` (same seed) on data x and on x + c and reports

- `same_z`: whether the two chains' partitions are identical, draw by draw;
- `lp_error`: max over draws of |lp recorded on x + c - lp of the same state on x|, the
  reference computed in float64 on the unshifted data (`BoundModel.lp` of the draw's
  labels at the draw's alpha);
- `log_joint_error`: max over draws of |dpppl.log_joint(model, x + c, z) - dpppl.log_joint(model, x, z)|;
- `num_clusters`: K of the last draw on x + c.

In 32-bit mode (`--x64 0`, the script re-runs itself with DPPPL_X64=0) the reference is
still float64 (a subprocess in 64-bit mode scores the float32 run's draws).

    python benchmarks/bench_translation.py                       # 10^5 points, c = 1e6, float64
    python benchmarks/bench_translation.py --x64 0 --n 2000 --shift 1e3
    python benchmarks/bench_translation.py --x64 0 --n 100000 --shift 1e3

Prints one JSON object per kernel and one for log_joint.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

KERNELS = ("gibbs", "splitmerge", "perm", "subcluster")


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

    model = dpppl.load("models/gaussian_niw.dp")
    x = data(args.n, args.seed)
    out = {}
    for kernel in args.kernels:
        runs = {}
        for name, offset in (("plain", 0.0), ("shifted", args.shift)):
            idata = dpppl.sample(model, x + offset, kernel=kernel, num_warmup=0, num_samples=args.sweeps,
                                 num_chains=1, seed=args.seed, init="single", progress_bar=False)
            runs[name] = {"z": np.asarray(idata.posterior_partition["z"])[0].tolist(),
                          "alpha": np.asarray(idata.posterior["alpha"])[0].tolist(),
                          "lp": np.asarray(idata.sample_stats["lp"])[0].tolist()}
        out[kernel] = runs
    z = data_labels = np.asarray(out[args.kernels[0]]["plain"]["z"][-1]) if args.kernels else None
    if z is not None:
        out["log_joint"] = {"z": data_labels.tolist(),
                            "shifted": dpppl.log_joint(model, x + args.shift, data_labels),
                            "plain_here": dpppl.log_joint(model, x, data_labels)}
    with open(args.out, "w") as f:
        json.dump(out, f)


def score(args, draws):
    """Float64 reference lp of every draw on the unshifted data; print the figures."""
    import jax.numpy as jnp
    import numpy as np

    import dpppl

    model = dpppl.load("models/gaussian_niw.dp")
    x = data(args.n, args.seed)
    target = model.bind(x)

    def reference_lp(z, alpha):
        z = np.asarray(z)
        state = target.state_from_labels(None, jnp.asarray(z), int(z.max()) + 1)
        return float(target.lp(state._replace(alpha=jnp.asarray(alpha, state.alpha.dtype))))

    for kernel in args.kernels:
        plain, shifted = draws[kernel]["plain"], draws[kernel]["shifted"]
        lp_err = max(abs(lp - reference_lp(z, a)) for z, a, lp in zip(shifted["z"], shifted["alpha"], shifted["lp"]))
        plain_err = max(abs(lp - reference_lp(z, a)) for z, a, lp in zip(plain["z"], plain["alpha"], plain["lp"]))
        joint_err = max(abs(dpppl.log_joint(model, x + args.shift, np.asarray(z))
                            - dpppl.log_joint(model, x, np.asarray(z))) for z in shifted["z"]) if args.x64 else None
        print(json.dumps({"kernel": kernel, "n": args.n, "shift": args.shift, "x64": args.x64,
                          "same_z": plain["z"] == shifted["z"],
                          "lp_error_shifted": lp_err, "lp_error_plain": plain_err,
                          "log_joint_error": joint_err,
                          "num_clusters": int(np.max(shifted["z"][-1])) + 1,
                          "lp_nan": bool(np.isnan(shifted["lp"]).any())}))
    if "log_joint" in draws:
        lj = draws["log_joint"]
        reference = dpppl.log_joint(model, x, np.asarray(lj["z"]))
        print(json.dumps({"kernel": "log_joint", "n": args.n, "shift": args.shift, "x64": args.x64,
                          "error_shifted": abs(lj["shifted"] - reference),
                          "error_plain": abs(lj["plain_here"] - reference)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--shift", type=float, default=1e6)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--x64", type=int, default=1)
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.out:  # the sampling child
        run(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        args.out = os.path.join(tmp, "draws.json")
        child = [sys.executable, __file__, "--n", str(args.n), "--shift", repr(args.shift), "--sweeps",
                 str(args.sweeps), "--seed", str(args.seed), "--x64", str(args.x64), "--out", args.out,
                 "--kernels", *args.kernels]
        subprocess.run(child, check=True, env=dict(os.environ, DPPPL_X64=str(args.x64)))
        with open(args.out) as f:
            draws = json.load(f)
    os.environ["DPPPL_X64"] = "1"
    score(args, draws)


if __name__ == "__main__":
    main()
