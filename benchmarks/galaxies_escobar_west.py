"""`models/galaxies.dp`, Escobar & West's (1995, sec. 6) full model, against an independent NumPy sampler of it.

The model (units of 1000 km/s): x_i ~ N(mu_i, V_i), (mu_i, V_i) ~ DP(alpha, G0), G0: 1/V ~ Gamma(s/2, S/2),
mu | V ~ N(m, tau V), with s = 4, S = 2, alpha ~ Gamma(2, 4), m ~ N(0, 1000) (a variance) and
1/tau ~ Gamma(1/2, 50) (shape, rate). This script runs it on the bundled galaxies data (in units of
1000 km/s here; the model file writes its hyperparameters in km/s) and prints the posterior of K,
E[alpha] and the quantiles of m and tau:

1. `reference`: a plain NumPy Gibbs sampler (no code of dpppl's): the partition by collapsed Gibbs
   (Neal 2000, alg. 3; the cluster marginals are Normal-Inverse-Gamma), alpha by Escobar & West's
   auxiliary variable (their eq. 13), then m and 1/tau by Escobar & West's own route: each cluster's
   (mu_c, V_c) drawn from its posterior given its points, m from its Normal conditional
   N((m0/s0^2 + sum_c mu_c/(tau V_c)) / P, 1/P), P = 1/s0^2 + sum_c 1/(tau V_c), then 1/tau from its
   Gamma conditional Gamma(w/2 + K/2, W/2 + sum_c (mu_c - m)^2 / (2 V_c)), and the cluster parameters
   discarded. dpppl's default move is a slice sampler on the collapsed conditionals instead, so the two
   share neither code nor algorithm. `--fixed` fixes m = 20 and tau = 100 in the reference
   (the model of `models/galaxies_fixed.dp`).
2. `dpppl`: `dpppl.sample(dpppl.load("models/galaxies.dp"), kernel="gibbs+splitmerge")` (or
   `galaxies_fixed.dp` with `--fixed`).

Run from the repository root: `PYTHONPATH=benchmarks python benchmarks/galaxies_escobar_west.py`
(a few minutes); results in `benchmarks/results/galaxies_escobar_west.json` (`--fixed`:
`galaxies_escobar_west_fixed.json`). Nothing here asserts.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.special import gammaln

import dpppl
from harness import write_json

REPO = Path(__file__).resolve().parents[1]
S_SHAPE, S_SCALE, A, B, W_SHAPE, W_SCALE = 4.0, 2.0, 2.0, 4.0, 1.0, 100.0  # s, S, a, b, w, W
M0, M_VAR = 0.0, 1000.0  # m ~ N(M0, M_VAR)
FIXED = (20.0, 100.0)  # m, tau of models/galaxies_fixed.dp


def log_marginal(n, s1, s2, m, kappa0):
    """log p(x_c) of clusters with counts n, sums s1 and sums of squares s2 under
    mu | V ~ N(m, V / kappa0), 1/V ~ Gamma(s/2, S/2) (arrays over clusters)."""
    n = np.asarray(n, float)
    mean = s1 / np.maximum(n, 1.0)
    scatter = np.maximum(s2 - n * mean**2, 0.0)
    kappa_n = kappa0 + n
    psi_n = S_SCALE + scatter + kappa0 * n * (mean - m) ** 2 / kappa_n
    a0, an = S_SHAPE / 2, (S_SHAPE + n) / 2
    return (gammaln(an) - gammaln(a0) + a0 * np.log(S_SCALE / 2) - an * np.log(psi_n / 2)
            + 0.5 * np.log(kappa0 / kappa_n) - n / 2 * np.log(2 * np.pi))


def hyperparameters(rng, x, z, m, kappa0):
    """One Escobar & West update of (m, kappa0 = 1/tau) given the partition z: each cluster's (mu_c, V_c)
    from its Normal-Inverse-Gamma posterior, then m, then kappa0 from their conditionals (module docstring)."""
    n, s1, s2 = np.bincount(z).astype(float), np.bincount(z, x), np.bincount(z, x**2)
    mean = s1 / n
    kappa_n = kappa0 + n
    psi_n = S_SCALE + (s2 - n * mean**2) + kappa0 * n * (mean - m) ** 2 / kappa_n
    v = 1.0 / rng.gamma((S_SHAPE + n) / 2, 2.0 / psi_n)
    mu = rng.normal((kappa0 * m + s1) / kappa_n, np.sqrt(v / kappa_n))
    precision = 1.0 / M_VAR + np.sum(kappa0 / v)
    m = rng.normal((M0 / M_VAR + np.sum(kappa0 * mu / v)) / precision, np.sqrt(1.0 / precision))
    kappa0 = rng.gamma(W_SHAPE / 2 + n.size / 2, 1.0 / (W_SCALE / 2 + np.sum((mu - m) ** 2 / v) / 2))
    return m, kappa0


def reference(x, sweeps: int, seed: int, fixed=None):
    """Draws (K, alpha, m, tau) after a fifth of `sweeps` as burn-in; m and tau resampled unless
    `fixed` = (m, tau)."""
    rng = np.random.default_rng(seed)
    n_points = x.size
    z = np.zeros(n_points, int)
    alpha = 1.0
    m, kappa0 = (float(np.mean(x)), 0.01) if fixed is None else (fixed[0], 1.0 / fixed[1])
    draws = []
    for sweep in range(sweeps):
        for i in range(n_points):
            z[i] = -1
            labels = np.unique(z[z >= 0])
            inside = z[None, :] == labels[:, None]
            n, s1, s2 = inside.sum(1).astype(float), inside @ x, inside @ x**2
            join = (log_marginal(n + 1, s1 + x[i], s2 + x[i] ** 2, m, kappa0) - log_marginal(n, s1, s2, m, kappa0)
                    + np.log(n))
            new = log_marginal(1.0, x[i], x[i] ** 2, m, kappa0) + np.log(alpha)
            logits = np.append(join, new)
            p = np.exp(logits - logits.max())
            j = rng.choice(p.size, p=p / p.sum())
            z[i] = labels[j] if j < labels.size else z.max() + 1
        z = np.unique(z, return_inverse=True)[1]
        k = z.max() + 1
        eta = rng.beta(alpha + 1.0, n_points)  # Escobar & West (1995), eq. 13
        odds = (A + k - 1) / (n_points * (B - np.log(eta)))
        alpha = rng.gamma(A + k - (rng.random() >= odds / (1 + odds)), 1.0 / (B - np.log(eta)))
        if fixed is None:
            m, kappa0 = hyperparameters(rng, x, z, m, kappa0)
        if sweep >= sweeps // 5:
            draws.append((k, alpha, m, 1.0 / kappa0))
    return np.array(draws)


def summary(k, alpha) -> dict:
    values, counts = np.unique(k.astype(int), return_counts=True)
    return {"mean_K": float(k.mean()), "mean_alpha": float(alpha.mean()),
            "P(K)": {int(v): round(float(c) / k.size, 4) for v, c in zip(values, counts)}}


def quantiles(values) -> list:
    return np.quantile(np.asarray(values).ravel(), [0.1, 0.5, 0.9]).tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=3000, help="reference sweeps per seed (a fifth burn-in)")
    parser.add_argument("--seeds", type=int, default=2, help="reference chains")
    parser.add_argument("--fixed", action="store_true", help="m = 20 and tau = 100 fixed (galaxies_fixed.dp)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--samples", type=int, default=3000)
    args = parser.parse_args()
    x = dpppl.datasets.load("galaxies", scale=True)[0].ravel()

    tic = time.perf_counter()
    fixed = FIXED if args.fixed else None
    ref = np.concatenate([reference(x, args.sweeps, seed, fixed) for seed in range(args.seeds)])
    ref_seconds = time.perf_counter() - tic
    tic = time.perf_counter()
    path = REPO / "models" / ("galaxies_fixed.dp" if args.fixed else "galaxies.dp")
    idata = dpppl.sample(dpppl.load(path), kernel="gibbs+splitmerge", num_warmup=500,
                         num_samples=args.samples, num_chains=args.chains, seed=0, progress_bar=False)
    ours_seconds = time.perf_counter() - tic
    post = idata.posterior
    results = {
        "reference": {**summary(ref[:, 0], ref[:, 1]), "fixed (m, tau)": fixed,
                      "m_quantiles_10_50_90": quantiles(ref[:, 2]), "tau_quantiles_10_50_90": quantiles(ref[:, 3]),
                      "draws": len(ref), "seconds": ref_seconds},
        "dpppl": {**summary(np.asarray(post["num_clusters"]).ravel(), np.asarray(post["alpha"]).ravel()),
                  "model": str(path.relative_to(REPO)), "kernel": post.attrs["kernel"],
                  "draws": args.chains * args.samples, "seconds": ours_seconds},
    }
    if not args.fixed:  # dpppl's m is in km/s
        results["dpppl"]["m_quantiles_10_50_90"] = quantiles(np.asarray(post["m"]) / 1000.0)
        results["dpppl"]["tau_quantiles_10_50_90"] = quantiles(post["tau"])
    for name, r in results.items():
        print(f"{name:>9}: E[K] = {r['mean_K']:.2f}, E[alpha] = {r['mean_alpha']:.3f}, "
              + ", ".join(f"P(K={k})={p:.3f}" for k, p in r["P(K)"].items() if p >= 0.01))
        for h in ("m", "tau"):
            if f"{h}_quantiles_10_50_90" in r:
                q = r[f"{h}_quantiles_10_50_90"]
                print(f"{name:>9}: {h} 10/50/90% quantiles " + " / ".join(f"{v:.3g}" for v in q))
    print(f"wrote {write_json('galaxies_escobar_west' + ('_fixed' if args.fixed else ''), results)}")


if __name__ == "__main__":
    main()
