"""Point estimates of the clustering side by side: cost and quality on one set of draws.

One run of dpppl collapsed Gibbs on a data set (default: galaxies, NIW, alpha ~ Gamma(1, 1),
4 chains x 1000 draws after 500 warmup) gives posterior draws; then, on the same draws:

- ``coclustering``: the posterior similarity matrix;
- ``best``: the draw of highest log joint;
- ``dahl``: Dahl's least-squares draw (includes computing the similarity matrix);
- ``salso-vi_lb``: SALSO search on Wade & Ghahramani's bound (includes the similarity matrix);
- ``salso-vi``: SALSO search on the exact expected VI over at most 1000 evenly spaced
  draws (the default of ``dpppl.point_estimate``);
- ``salso-vi-all``: the same over all draws;

and ``predict`` for 1000 new points (grid over the data's range) against the VI
estimate. Reported per method: seconds (wall, median of ``--repeats``), ratio to
``dahl``, the estimate's K, and its posterior expected VI (exact, over the draws; lower
is better, the quantity ``salso-vi`` minimises). Writes results/point_estimates.json.

    python benchmarks/bench_point_estimates.py [--data galaxies] [--draws 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dpppl
from dpppl.analysis.partitions import coclustering, dahl, expected_vi, salso
from harness import load_average, write_json


def _timed(fn, repeats):
    seconds, out = [], None
    for _ in range(repeats):
        tic = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - tic)
    return statistics.median(seconds), out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="galaxies")
    p.add_argument("--draws", type=int, default=1000, help="kept draws per chain")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="2 chains x 200 draws, 1 repeat")
    args = p.parse_args(argv)
    if args.quick:
        args.chains, args.draws, args.repeats = 2, 200, 1
    load_start = load_average()
    x, _ = dpppl.datasets.load(args.data)
    model = dpppl.DPMixture(dpppl.priors.Gamma(1.0, 1.0), dpppl.families.NormalInverseWishart())
    idata = dpppl.sample(model, x, num_warmup=500, num_samples=args.draws, num_chains=args.chains,
                         seed=0, progress_bar=False)
    draws = dpppl.analysis.partitions.posterior_draws(idata)
    methods = {
        "coclustering": lambda: (None, coclustering(draws)),
        "best": lambda: (dpppl.point_estimate(idata, "best"), None),
        "dahl": lambda: (dahl(draws)[0], None),
        "salso-vi_lb": lambda: (salso(draws, loss="vi_lb")[0], None),
        "salso-vi": lambda: (salso(draws, loss="vi")[0], None),
        "salso-vi-all": lambda: (salso(draws, loss="vi", max_draws=None)[0], None),
    }
    rows = {}
    for name, fn in methods.items():
        seconds, (labels, _) = _timed(fn, args.repeats)
        rows[name] = {"seconds": seconds}
        if labels is not None:
            rows[name].update(k=int(np.unique(labels).size), expected_vi=expected_vi(labels, draws))
    vi_labels = salso(draws, loss="vi")[0]
    grid = np.linspace(x.min(), x.max(), 1000)[:, None]
    dpppl.predict(idata, model, grid[:10], clustering=vi_labels)          # not timed: compile
    seconds, _ = _timed(lambda: dpppl.predict(idata, model, grid, clustering=vi_labels), args.repeats)
    rows["predict-1000"] = {"seconds": seconds}
    base = rows["dahl"]["seconds"]
    print(f"{args.data}: N={x.shape[0]}, {draws.shape[0]} draws "
          f"(mean K {float(np.mean(dpppl.analysis.label_summaries(draws)['num_clusters'])):.2f})")
    print(f"{'method':<14}{'seconds':>10}{'x dahl':>9}{'K':>5}{'E[VI]':>9}")
    for name, r in rows.items():
        r["ratio_to_dahl"] = r["seconds"] / base
        print(f"{name:<14}{r['seconds']:>10.3f}{r['ratio_to_dahl']:>9.2f}{r.get('k', ''):>5}"
              f"{r.get('expected_vi', float('nan')):>9.4f}")
    path = write_json("point_estimates" + ("-quick" if args.quick else ""),
                      {"data": args.data, "n": int(x.shape[0]), "num_draws": int(draws.shape[0]),
                       "repeats": args.repeats, "load_average_start": load_start, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
