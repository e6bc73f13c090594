"""The compiled DDP under NUTS beside the exact `ddp+ddpswap` kernels: the same posterior?

`kernel="nuts"` samples the DDP truncated at K sticks per slice (`dpppl.models.ddp_compile`)
with the labels summed out; `ddp+ddpswap` samples the untruncated model with the labels
instantiated. On the same data and hyperparameters their label-invariant posterior
summaries must agree up to Monte Carlo error and the truncation (the prior mass past K
sticks, (b / (a + b))^(K-1) = 2^-(K-1) per slice for the default DP(1) sticks):

- `K_t`: the number of labels in use in slice t (ddp: counted in each draw; NUTS: its
  conditional mean given the draw, sum_k [1 - prod_{n in t} (1 - r_nk)], with r_nk the
  responsibilities p(z_n = k | w, theta, x_n));
- `K`: the number of labels in use over all slices (the run's `num_clusters`);
- `same_blob_across`, `other_blob_across`, `same_blob_within`: the mean of P(z_i = z_j) over
  pairs of points of the same true blob in different slices, of different blobs in different
  slices, and of the same blob in one slice (ddp: 1[z_i = z_j]; NUTS: sum_k r_ik r_jk).

Each summary is a scalar per draw; its Monte Carlo standard error is sd / sqrt(ESS)
(ArviZ's bulk ESS over the chains) and `z` the difference over the combined error.
Data: `dpppl.datasets.moving_blobs` with overlapping blobs (defaults: 3 slices, 2 blobs, 6
points per blob and slice, spread 0.05, seed 1); model `DDPMixture()` (the paper's
settings, DP(1) sticks).

Usage::

    python benchmarks/bench_ddp_nuts.py                 # ~6 minutes on 2 cores at load 2-3
    python benchmarks/bench_ddp_nuts.py --quick

Results go to ``benchmarks/results/ddp_nuts.json`` (``ddp_nuts-quick.json``).
"""

from __future__ import annotations

import argparse
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

import dpppl
from dpppl.diagnostics.arviz_compat import partition_group
from dpppl.models.compile import FamilyMixture
from harness import load_average, write_json


def pair_masks(labels, slices):
    """Boolean (N, N) masks of the three kinds of pairs (i < j)."""
    upper = np.triu(np.ones((labels.size, labels.size), bool), 1)
    same_blob, same_slice = labels[:, None] == labels[None, :], slices[:, None] == slices[None, :]
    return {"same_blob_across": upper & same_blob & ~same_slice, "other_blob_across": upper & ~same_blob & ~same_slice,
            "same_blob_within": upper & same_blob & same_slice}


def summaries_of_labels(z, labels, slices, num_slices):
    """Per-draw summaries of labelled draws z (chains, draws, N)."""
    out = {f"K_{t}": np.apply_along_axis(lambda row: np.unique(row).size, -1, z[..., slices == t])
           for t in range(num_slices)}
    out["K"] = np.apply_along_axis(lambda row: np.unique(row).size, -1, z)
    together = z[..., :, None] == z[..., None, :]
    for name, mask in pair_masks(labels, slices).items():
        out[name] = together[..., mask].mean(axis=-1)
    return out


def summaries_of_responsibilities(r, labels, slices, num_slices):
    """The conditional means of the same summaries given NUTS draws, from r (chains, draws, N, K)."""
    out = {f"K_{t}": np.sum(1 - np.prod(1 - r[..., slices == t, :], axis=-2), axis=-1) for t in range(num_slices)}
    out["K"] = np.sum(1 - np.prod(1 - r, axis=-2), axis=-1)
    together = np.einsum("...ik,...jk->...ij", r, r)
    for name, mask in pair_masks(labels, slices).items():
        out[name] = together[..., mask].mean(axis=-1)
    return out


def mean_and_se(values):
    """Mean over (chains, draws) and its Monte Carlo standard error sd / sqrt(bulk ESS)."""
    values = np.asarray(values, float)
    ess = float(az.ess(values[None] if values.ndim == 1 else values))
    return float(values.mean()), float(values.std() / np.sqrt(max(ess, 1.0))), ess


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", type=int, default=3)
    parser.add_argument("--blobs", type=int, default=2)
    parser.add_argument("--per-blob", type=int, default=6)
    parser.add_argument("--spread", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--truncation", type=int, default=10)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--ddp-iterations", type=int, default=10000)
    parser.add_argument("--nuts-iterations", type=int, default=1000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    ddp_iter, nuts_iter = (400, 100) if args.quick else (args.ddp_iterations, args.nuts_iterations)
    x, labels = dpppl.datasets.moving_blobs(args.slices, args.blobs, args.per_blob, spread=args.spread,
                                            seed=args.seed)
    model = dpppl.DDPMixture()
    bound = model.bind(x)
    slices = np.asarray(bound.slices)
    print(f"N = {bound.num_points}, T = {bound.num_slices}; load average before {load_average()}")

    tic = time.perf_counter()
    idata = dpppl.sample(model, x, kernel="ddp+ddpswap", num_warmup=ddp_iter // 2, num_samples=ddp_iter // 2,
                         num_chains=args.chains, seed=args.seed, progress_bar=False)
    ddp_s = time.perf_counter() - tic
    ddp = summaries_of_labels(np.asarray(partition_group(idata)["z"].values), labels, slices, bound.num_slices)

    fn, model_args = bound.nuts_model(args.truncation)
    tic = time.perf_counter()
    mcmc = MCMC(NUTS(fn), num_warmup=nuts_iter // 2, num_samples=nuts_iter // 2, num_chains=args.chains,
                chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.key(args.seed), *model_args, extra_fields=("diverging",))
    nuts_s = time.perf_counter() - tic
    samples = mcmc.get_samples(group_by_chain=True)
    fam, xs = bound.family, jnp.asarray(bound.x)

    def responsibilities(w, mu, cov):
        mixture = FamilyMixture(w[slices], {"mu": mu, "cov": cov}, fam.at_slices(slices))
        return jax.nn.softmax(mixture.component_log_prob(xs), axis=-1)

    r = jax.vmap(jax.vmap(responsibilities))(samples["weights"], samples["theta_mu"], samples["theta_cov"])
    nuts = summaries_of_responsibilities(np.asarray(r), labels, slices, bound.num_slices)
    divergences = int(np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"]).sum())

    rows = {}
    print(f"{'summary':<20} {'ddp+ddpswap':>20} {'nuts':>20} {'z':>7}   (mean +- MC se, ESS)")
    for name in ddp:
        (m1, s1, e1), (m2, s2, e2) = mean_and_se(ddp[name]), mean_and_se(nuts[name])
        z = (m2 - m1) / np.hypot(s1, s2)
        rows[name] = {"ddp": m1, "ddp_se": s1, "ddp_ess": e1, "nuts": m2, "nuts_se": s2, "nuts_ess": e2, "z": z}
        print(f"{name:<20} {m1:>9.4f} +- {s1:.4f} {m2:>9.4f} +- {s2:.4f} {z:>7.2f}   (ESS {e1:.0f}, {e2:.0f})")
    print(f"ddp+ddpswap {ddp_s:.1f} s, nuts {nuts_s:.1f} s (with compilation), {divergences} divergences; "
          f"load average after {load_average()}")
    write_json("ddp_nuts-quick" if args.quick else "ddp_nuts", {
        "settings": vars(args), "points": bound.num_points, "slices": bound.num_slices,
        "ddp_iterations": ddp_iter, "nuts_iterations": nuts_iter, "ddp_seconds": ddp_s, "nuts_seconds": nuts_s,
        "nuts_divergences": divergences, "summaries": rows})


if __name__ == "__main__":
    main()
