"""`models/galaxies.dp` against the full model of Escobar & West (1995, sec. 6), side by side.

The model file fixes tau (mu | V ~ N(m, tau V)) at 100, since the model language has no prior
on kappa0 = 1 / tau; Escobar & West put 1/tau ~ Gamma(w/2, W/2), w = 1, W = 100. This script
runs both on the bundled galaxies data (in units of 1000 km/s here; the model file writes its
hyperparameters in km/s) and prints the posterior of K, E[alpha] and (full model) tau:

1. `reference`: a plain NumPy collapsed Gibbs sampler of the full model (Neal 2000, alg. 3;
   the cluster marginals are Normal-Inverse-Gamma), alpha by Escobar & West's auxiliary
   variable (their eq. 13), tau by griddy Gibbs on 400 log-spaced values in [0.01, 1000]
   from p(tau | z, x) proportional to p(tau) prod_c p(x_c | tau). With `--tau T` the
   reference fixes tau = T instead (the same model as the file with `tau = T`).
2. `dpppl`: `dpppl.sample(dpppl.load("models/galaxies.dp"), kernel="gibbs+splitmerge")`.

Run from the repository root: `python benchmarks/galaxies_escobar_west.py` (~3 min); results
in `benchmarks/results/galaxies_escobar_west.json`. Nothing here asserts.
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
M, S_SHAPE, S_SCALE, A, B, W_SHAPE, W_SCALE = 20.0, 4.0, 2.0, 2.0, 4.0, 1.0, 100.0  # m, s, S, a, b, w, W
TAU_GRID = np.exp(np.linspace(np.log(0.01), np.log(1000.0), 400))


def log_marginal(n, s1, s2, kappa0):
    """log p(x_c) of clusters with counts n, sums s1 and sums of squares s2 under
    mu | V ~ N(m, V / kappa0), 1/V ~ Gamma(s/2, S/2) (arrays over clusters)."""
    n = np.asarray(n, float)
    mean = s1 / np.maximum(n, 1.0)
    scatter = np.maximum(s2 - n * mean**2, 0.0)
    kappa_n = kappa0 + n
    psi_n = S_SCALE + scatter + kappa0 * n * (mean - M) ** 2 / kappa_n
    a0, an = S_SHAPE / 2, (S_SHAPE + n) / 2
    return (gammaln(an) - gammaln(a0) + a0 * np.log(S_SCALE / 2) - an * np.log(psi_n / 2)
            + 0.5 * np.log(kappa0 / kappa_n) - n / 2 * np.log(2 * np.pi))


def reference(x, sweeps: int, seed: int, tau=None):
    """Draws (K, alpha, tau) after a fifth of `sweeps` as burn-in; tau resampled when None."""
    rng = np.random.default_rng(seed)
    n_points = x.size
    z = np.zeros(n_points, int)
    alpha, t = 1.0, 1.0 if tau is None else tau
    draws = []
    for sweep in range(sweeps):
        kappa0 = 1.0 / t
        for i in range(n_points):
            z[i] = -1
            labels = np.unique(z[z >= 0])
            inside = z[None, :] == labels[:, None]
            n, s1, s2 = inside.sum(1).astype(float), inside @ x, inside @ x**2
            join = log_marginal(n + 1, s1 + x[i], s2 + x[i] ** 2, kappa0) - log_marginal(n, s1, s2, kappa0) + np.log(n)
            new = log_marginal(1.0, x[i], x[i] ** 2, kappa0) + np.log(alpha)
            logits = np.append(join, new)
            p = np.exp(logits - logits.max())
            j = rng.choice(p.size, p=p / p.sum())
            z[i] = labels[j] if j < labels.size else z.max() + 1
        z = np.unique(z, return_inverse=True)[1]
        k = z.max() + 1
        eta = rng.beta(alpha + 1.0, n_points)  # Escobar & West (1995), eq. 13
        odds = (A + k - 1) / (n_points * (B - np.log(eta)))
        alpha = rng.gamma(A + k - (rng.random() >= odds / (1 + odds)), 1.0 / (B - np.log(eta)))
        if tau is None:
            n, s1, s2 = np.bincount(z).astype(float), np.bincount(z, x), np.bincount(z, x**2)
            logp = np.array([log_marginal(n, s1, s2, 1.0 / g).sum() for g in TAU_GRID])
            logp += (W_SHAPE / 2) * np.log(1.0 / TAU_GRID) - W_SCALE / (2 * TAU_GRID)  # on log tau
            p = np.exp(logp - logp.max())
            t = rng.choice(TAU_GRID, p=p / p.sum())
        if sweep >= sweeps // 5:
            draws.append((k, alpha, t))
    return np.array(draws)


def summary(k, alpha) -> dict:
    values, counts = np.unique(k.astype(int), return_counts=True)
    return {"mean_K": float(k.mean()), "mean_alpha": float(alpha.mean()),
            "P(K)": {int(v): round(float(c) / k.size, 4) for v, c in zip(values, counts)}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=3000, help="reference sweeps per seed (a fifth burn-in)")
    parser.add_argument("--seeds", type=int, default=2, help="reference chains")
    parser.add_argument("--tau", type=float, default=None, help="fix tau in the reference (default: resampled)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--samples", type=int, default=3000)
    args = parser.parse_args()
    x = dpppl.datasets.load("galaxies", scale=True)[0].ravel()

    tic = time.perf_counter()
    ref = np.concatenate([reference(x, args.sweeps, seed, args.tau) for seed in range(args.seeds)])
    ref_seconds = time.perf_counter() - tic
    tic = time.perf_counter()
    idata = dpppl.sample(dpppl.load(REPO / "models" / "galaxies.dp"), kernel="gibbs+splitmerge", num_warmup=500,
                         num_samples=args.samples, num_chains=args.chains, seed=0, progress_bar=False)
    ours_seconds = time.perf_counter() - tic
    results = {
        "reference": {**summary(ref[:, 0], ref[:, 1]), "tau": "resampled" if args.tau is None else args.tau,
                      "tau_quantiles_10_50_90": np.quantile(ref[:, 2], [0.1, 0.5, 0.9]).tolist(),
                      "draws": len(ref), "seconds": ref_seconds},
        "dpppl": {**summary(np.asarray(idata.posterior["num_clusters"]).ravel(),
                            np.asarray(idata.posterior["alpha"]).ravel()),
                  "kernel": idata.posterior.attrs["kernel"], "draws": args.chains * args.samples,
                  "seconds": ours_seconds},
    }
    for name, r in results.items():
        print(f"{name:>9}: E[K] = {r['mean_K']:.2f}, E[alpha] = {r['mean_alpha']:.3f}, "
              + ", ".join(f"P(K={k})={p:.3f}" for k, p in r["P(K)"].items() if p >= 0.01))
    q = results["reference"]["tau_quantiles_10_50_90"]
    print(f"reference tau: {results['reference']['tau']}; 10/50/90% quantiles {q[0]:.3g} / {q[1]:.3g} / {q[2]:.3g}")
    print(f"wrote {write_json('galaxies_escobar_west', results)}")


if __name__ == "__main__":
    main()
