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
and summary included. With `--before REV`, the stick-breaking model also runs on the code of the git
revision REV (its package and model files exported with `git archive` to a temporary directory put
first on the child's `sys.path`), in the same rotation: before and after side by side in one run.
Run from the repository root (under `nice -n 10` on a shared machine):

    python benchmarks/bench_stick_breaking.py --repeats 2 [--before REV] [--name stick_breaking]

Writes `benchmarks/results/<name>.json` (`ratio_*_best`: cold, `ratio_*_warm_best`: warm, each
stick-breaking run against the CRP run; with `--before`, `before_ratio_*` likewise for REV's code).

`--sampling-only` measures the samplers without what the CLI does around them: one new process
calls `dpppl.sample` (the same points, 2 chains, default lengths and kernels, `log_likelihood=False`)
twice per model, the stick-breaking model then the CRP model, and reports each call's CPU and wall
seconds (the first compiles, the second runs compiled programs); writes
`benchmarks/results/<name>_sampling.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_compile import export  # noqa: E402
from bench_splitmerge_native import LAUNCH, child  # noqa: E402
from harness import load_average, write_json  # noqa: E402

MODELS = {"stick_breaking": "models/stick_breaking.dp", "crp": "models/gaussian_niw.dp"}

SAMPLING = """
import json, resource, sys, time
import numpy as np
import dpppl
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
x, out = np.load(sys.argv[1]), {}
for name, path in json.loads(sys.argv[2]).items():
    for call in ("first", "second"):
        used, wall = cpu(), time.perf_counter()
        idata = dpppl.sample(dpppl.load(path), x, num_chains=2, seed=0, progress_bar=False, log_likelihood=False)
        out[name + "_" + call] = {"cpu_s": cpu() - used, "wall_s": time.perf_counter() - wall,
                                  "largest_label": int(idata.posterior_partition["z"].values.max())}
        print(name, call, out[name + "_" + call], flush=True)
print("RESULT " + json.dumps(out))
"""
"""The child of `--sampling-only`: argv the points (.npy) and MODELS as JSON."""


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--before", help="a git revision whose stick-breaking code also runs, side by side")
    parser.add_argument("--name", default="stick_breaking", help="the results file's name")
    parser.add_argument("--sampling-only", action="store_true", help="dpppl.sample in one process, no log likelihood")
    args = parser.parse_args(argv)
    import numpy as np

    import dpppl

    results = {"load_before": load_average(), "before_revision": args.before}
    with tempfile.TemporaryDirectory() as tmp:
        points = Path(tmp) / "x.npy"
        np.save(points, np.asarray(dpppl.datasets.gaussian_mixture(300, 2, 4, mean_scale=4.0, seed=0)[0], float))
        if args.sampling_only:
            with tempfile.TemporaryDirectory() as cache:
                run = child(["-c", SAMPLING, str(points), json.dumps(MODELS)], {"DPPPL_COMPILATION_CACHE": cache})
            results.update(json.loads(run["last_line"].removeprefix("RESULT ")))
            for call in ("first", "second"):
                for measure in ("cpu_s", "wall_s"):
                    ratio = results[f"stick_breaking_{call}"][measure] / results[f"crp_{call}"][measure]
                    results[f"ratio_{measure}_{call}"] = ratio
                    print(f"stick_breaking / crp, {call} call: {measure} {ratio:.2f}")
            write_json(args.name + "_sampling", results)
            return results
        runs = {name: (path, "") for name, path in MODELS.items()}  # name -> (model, patch of sys.path)
        if args.before:
            tree = export(args.before, tmp)
            runs["stick_breaking_before"] = (MODELS["stick_breaking"], f"sys.path.insert(0, {str(tree)!r}); ")
        for rep in range(args.repeats):
            for name in runs if rep % 2 == 0 else list(runs)[::-1]:
                model, patch = runs[name]
                with tempfile.TemporaryDirectory() as cache:
                    argv_ = ["sample", model, "--data", str(points), "--chains", "2", "--no-progress"]
                    for phase in ("", "_warm"):  # an empty cache, then the same cache
                        run = child(["-c", LAUNCH.format(patch=patch), *argv_], {"DPPPL_COMPILATION_CACHE": cache})
                        results.setdefault(name + phase, []).append(run)
                        print(f"{name}{phase}: {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU", flush=True)
    for sb_name, prefix in (("stick_breaking", ""), ("stick_breaking_before", "before_")):
        for phase in ("", "_warm") if sb_name + phase in results else ():
            for measure in ("wall_s", "cpu_s"):
                sb = min(r[measure] for r in results[sb_name + phase])
                crp = min(r[measure] for r in results["crp" + phase])
                results[f"{prefix}ratio_{measure}{phase}_best"] = sb / crp
                print(f"{sb_name} / crp{phase}, best of {args.repeats}: {measure} {sb:.2f} / {crp:.2f} = "
                      f"{sb / crp:.2f}")
    write_json(args.name, results)
    return results


if __name__ == "__main__":
    main()
