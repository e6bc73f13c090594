"""Power and false-alarm rate of the two correctness checks, at the budgets the tests use.

1. The enumeration harness (:func:`dpppl.testing.check_kernel_samples`): for several small
   data sets, draws are simulated from the exact posterior of the model with its
   concentration multiplied by a factor (what collapsed Gibbs with a new-cluster weight off
   by that factor samples), as autocorrelated chains, at the budget of
   tests/test_exactness.py (64 chains x 500 draws); the rejection rate per factor is
   reported. Factor 1 is the false-alarm rate.
2. The Geweke test (:func:`dpppl.testing.geweke.geweke_test`): collapsed Gibbs built from
   a model whose concentration is off by a factor, run against the true model, at the
   budget of tests/test_geweke.py; factor 1 is the false-alarm rate.

Nothing here asserts; the numbers go to benchmarks/results/harness_power.json.

    python benchmarks/bench_harness_power.py            # ~15 min on 2 cores
    python benchmarks/bench_harness_power.py --quick    # ~2 min
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import write_json  # noqa: E402

import dpppl  # noqa: E402
from dpppl.testing import power_curve, scale_concentration, small_datasets  # noqa: E402
from dpppl.testing.geweke import geweke_test  # noqa: E402


def enumeration_power(cases, factors, repeats, stickiness, num_chains, num_draws):
    out = []
    for case in cases:
        tic = time.perf_counter()
        curve = power_curve(case.model, case.x, factors, num_chains=num_chains, num_draws=num_draws,
                            stickiness=stickiness, repeats=repeats, seed=1)
        row = {"case": case.name, "factors": curve.factors.tolist(), "tv": curve.tv.tolist(),
               "max_k_error": curve.max_k_error.tolist(), "rejection_rate": curve.rejection_rate.tolist(),
               "smallest_detected_90": curve.smallest_detected(0.9), "seconds": time.perf_counter() - tic}
        out.append(row)
        print(f"{case.name:34s} " + "  ".join(
            f"x{f:.2f}: {r:4.0%} (TV {t:.3f})" for f, r, t in zip(row["factors"], row["rejection_rate"], row["tv"]))
            + f"  smallest detected (90%): {row['smallest_detected_90']}", flush=True)
    return out


def geweke_power(factors, repeats, num_chains, num_steps):
    from dpppl import families as fam

    model = dpppl.DPMixture(dpppl.priors.Gamma(2.0, 2.0), fam.NormalInverseWishart(
        mu0=[0.0, 0.0], kappa0=0.1, nu0=8.0, psi0=[[2.0, 0.0], [0.0, 2.0]]))
    fixed = dpppl.DPMixture(1.0, fam.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0))
    out = []
    for name, m, dim in (("niw_gamma_alpha (alpha update off)", model, 2),
                         ("normal_known_fixed_alpha (new-cluster weight off)", fixed, 1)):
        rates = []
        for factor in factors:
            kernel_model = None if factor == 1.0 else scale_concentration(m, factor)
            rejected = sum(not geweke_test(m, "gibbs", 12, dim, num_chains=num_chains, num_steps=num_steps,
                                           seed=100 + r, kernel_model=kernel_model).passed
                           for r in range(repeats))
            rates.append(rejected / repeats)
        out.append({"model": name, "factors": list(factors), "rejection_rate": rates})
        print(f"Geweke {name:50s} " + "  ".join(f"x{f:.2f}: {r:4.0%}" for f, r in zip(factors, rates)), flush=True)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer cases, factors and repeats")
    p.add_argument("--repeats", type=int, default=None)
    args = p.parse_args(argv)
    quick = args.quick
    cases = {c.name: c for c in small_datasets()}
    names = ["niw_2d_overlap", "normal_known_1d_overlap", "pitman_yor_normal_known"]
    names += [] if quick else ["dirichlet_multinomial_overlap", "beta_bernoulli_separated"]
    factors = [1.0, 1.05, 1.1, 1.25] if quick else [1.0, 1.02, 1.05, 1.1, 1.15, 1.25]
    repeats = args.repeats or (10 if quick else 40)
    print(f"enumeration harness: 64 chains x 500 draws, stickiness 0.5, {repeats} repeats per factor")
    enum = enumeration_power([cases[n] for n in names], factors, repeats, 0.5, 64, 500)
    g_factors = [1.0, 1.1, 1.2, 1.3] if not quick else [1.0, 1.3]
    g_repeats = 4 if quick else 20
    print(f"Geweke test: 128 chains x 200 steps, {g_repeats} repeats per factor")
    gew = geweke_power(g_factors, g_repeats, 128, 200)
    write_json("harness_power" + ("-quick" if quick else ""),
               {"enumeration": enum, "geweke": gew, "repeats": repeats, "geweke_repeats": g_repeats})


if __name__ == "__main__":
    main()
