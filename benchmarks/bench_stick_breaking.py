"""The stick-breaking default run against the CRP default run on the same points (issue 32, item 5).

Issue 32 measured a `models/stick_breaking.dp`-style model on 300 2-D points, 2 chains, the default
kernel `sbgibbs+labelswap+labelpermute`, at 469 s against 14.5 s for the same data under a CRP
prior (32x), and asked for at most 2x. Here, side by side in one run on this machine: 300 points
of `dpppl.datasets.gaussian_mixture(300, 2, 4, mean_scale=4.0, seed=0)` saved as a .npy file, then, each in a new
process, `dpppl sample <model> --data x.npy --chains 2 --no-progress` (500 warmup + 1000 kept
iterations, the default kernel) for `models/stick_breaking.dp` and `models/gaussian_niw.dp` (the
same NIW component under CRP(alpha), alpha ~ Gamma(1, 1): `gibbs+splitmerge`), alternating which
goes first, with an empty persistent compilation cache (cold: `DPPPL_COMPILATION_CACHE` a new
directory, so compilation is included), then again on that cache (warm: the compiled programs are
loaded, not compiled). Wall seconds and the process's CPU seconds (getrusage of the child), import
and summary included. Run from the repository root:

    python benchmarks/bench_stick_breaking.py --repeats 2

Writes `benchmarks/results/stick_breaking.json` (`ratio_*_best`: cold, `ratio_*_warm_best`: warm).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_splitmerge_native import LAUNCH, child  # noqa: E402
from harness import load_average, write_json  # noqa: E402

MODELS = {"stick_breaking": "models/stick_breaking.dp", "crp": "models/gaussian_niw.dp"}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    import numpy as np

    import dpppl

    results = {"load_before": load_average()}
    with tempfile.TemporaryDirectory() as tmp:
        points = Path(tmp) / "x.npy"
        np.save(points, np.asarray(dpppl.datasets.gaussian_mixture(300, 2, 4, mean_scale=4.0, seed=0)[0], float))
        for rep in range(args.repeats):
            for name in MODELS if rep % 2 == 0 else list(MODELS)[::-1]:
                with tempfile.TemporaryDirectory() as cache:
                    argv_ = ["sample", MODELS[name], "--data", str(points), "--chains", "2", "--no-progress"]
                    for phase in ("", "_warm"):  # an empty cache, then the same cache
                        run = child(["-c", LAUNCH.format(patch=""), *argv_], {"DPPPL_COMPILATION_CACHE": cache})
                        results.setdefault(name + phase, []).append(run)
                        print(f"{name}{phase}: {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU", flush=True)
    for phase in ("", "_warm"):
        for measure in ("wall_s", "cpu_s"):
            sb = min(r[measure] for r in results["stick_breaking" + phase])
            crp = min(r[measure] for r in results["crp" + phase])
            results[f"ratio_{measure}{phase}_best"] = sb / crp
            print(f"stick_breaking / crp{phase}, best of {args.repeats}: {measure} {sb:.2f} / {crp:.2f} = "
                  f"{sb / crp:.2f}")
    write_json("stick_breaking", results)
    return results


if __name__ == "__main__":
    main()
