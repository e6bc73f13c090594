"""Simulation from the prior: partitions by the Chinese restaurant, then data.

For teaching: what partitions does CRP(alpha) or PY(d, alpha) put on N points, and what
data does the whole model generate? One draw is

1. alpha ~ Gamma(shape, rate) when it has a Gamma prior (else fixed);
2. z ~ CRP / PY(d, alpha) by sequential seating: point i + 1 joins cluster c with
   probability (|c| - d) / (alpha + i) and opens a new one with probability
   (alpha + K d) / (alpha + i) (`prior.log_seat_weights`; Pitman 2006, sec. 3.2). The
   partitions are exact draws of the exchangeable partition law, not of a truncation;
3. h_j ~ p(h_j) for each random hyperparameter of the base measure (`m ~ Normal(0, 10)`; a random
   Pitman-Yor discount is drawn first and the partition drawn at it), and
   G_0 the base measure at those values (`dpppl.models.compile.family_at_hyperparameters`);
4. theta_k ~ G_0 for every cluster (`family.posterior_draw` of empty statistics) and
   x_i ~ F(theta_{z_i}) (`family.sample_points`), the same generative model the
   compiled NumPyro model (`dpppl.models.compile`) writes as a truncated stick-breaking
   mixture.

The expected number of clusters obeys E[K_{i+1}] = E[K_i] + (alpha + d E[K_i]) /
(alpha + i), E[K_1] = 1 (the new-cluster probability is linear in K_i). For the CRP this
sums to sum_{i=1}^N alpha / (alpha + i - 1); for PY with d > 0 it is
(alpha / d) [(alpha + d)_N / (alpha)_N - 1] (Pitman 2006, eq. 3.13), with (a)_N the
rising factorial. [`expected_num_clusters`][dpppl.simulate.expected_num_clusters] evaluates the recursion (integrating
over a Gamma prior on alpha numerically).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.config import in_x64
from dpppl.diagnostics.arviz_compat import PARTITION_GROUPS, to_arviz
from dpppl.diagnostics.summaries import label_summaries
from dpppl.dsl.parser import as_model, bind_data
from dpppl.errors import ArgumentError
from dpppl.families.base import stored_data
from dpppl.models.compile import family_at_hyperparameters, prior_family
from dpppl.models.mixture import BoundModel
from dpppl.priors.stick_breaking import refuse_labelled
from dpppl.run.driver import check_positive_int, check_seed


def draw_alpha(prior, key, dtype):
    """alpha ~ its Gamma prior, or the fixed value."""
    if prior.alpha_is_random:
        return (jax.random.gamma(key, prior.alpha.shape, dtype=dtype) / prior.alpha.rate).astype(dtype)
    return jnp.asarray(prior.initial_alpha, dtype)


def draw_data(family, key, z, capacity: int, num_trials=None):
    """x ~ p(x | z) with `family` at the draw's hyperparameters: theta_k ~ G_0 for every slot (the
    posterior draw of no points, or for a non-conjugate family `params_of(prior_draw)`), then
    x_i ~ F(theta_{z_i})."""
    k_theta, k_x = jax.random.split(key)
    if family.conjugate:
        theta = family.posterior_draw(k_theta, family.empty_stats((capacity,)))
    else:
        theta = family.params_of(family.prior_draw(k_theta, (capacity,)))
    if num_trials is None:
        return family.sample_points(k_x, theta, z)
    return family.sample_points(k_x, theta, z, num_trials=num_trials)


def draw_hyperparameters(model, key, dtype) -> dict:
    """h_j ~ p(h_j) for each random hyperparameter of the base measure of `model`, by name."""
    priors = model.hyperpriors
    keys = jax.random.split(key, max(len(priors), 1))
    return {name: prior.sample(k).astype(dtype) for k, (name, prior) in zip(keys, priors.items())}


def _family_for_data(model, data, dim):
    """The resolved family to simulate data with, or None when data cannot be simulated."""
    if isinstance(model, BoundModel):
        return model.data_family
    if data is not None or (dim is None and model.data.source is not None):
        return bind_data(model, data)[1].data_family
    if dim is None:
        return None
    return prior_family(model, dim)


@in_x64
def sample_prior(model, n: int, *, num_samples: int = 1000, seed: int = 0, data=None,
                 dim: int | None = None, num_trials=None):
    """Draw partitions (and data) of `n` points from a model's prior.

    Parameters
    ----------
    model : Model, BoundModel or str
        A DP or Pitman-Yor mixture (or a model-file path).
    n : int
        Number of points.
    num_samples : int
        Independent draws.
    seed : int
    data : array_like, optional
        Data whose summaries fix data-dependent hyperparameters (`mean(x)`,
        `cov(x) / 10`, ...) and the dimension; the prior then simulates data "like
        these". A BoundModel carries its own, and so does a model file that names its data
        (`data x : real[N] = dataset("galaxies")`) when neither `data` nor `dim` is given.
    dim : int, optional
        Data dimension when every hyperparameter is given numerically and no data are.
    num_trials : int, optional
        Total count of each simulated vector, for multinomial components.

    Returns
    -------
    InferenceData
        Group `prior` (one chain of `num_samples` draws): `num_clusters`,
        `largest_cluster`, `entropy`, `alpha` when it has a prior and each random
        hyperparameter of the base measure under its name (the data are drawn at its value); group
        `prior_partition`: the labels `z` (point) and `cluster_sizes` (cluster);
        group `prior_predictive`: the simulated data (point, dim; integers for count
        and binary data) when a family could be resolved (from `data`, a BoundModel or
        `dim`).
    """
    check_positive_int("n", n, 1)
    check_positive_int("num_samples", num_samples, 1)
    check_seed(seed)
    spec = model.model if isinstance(model, BoundModel) else as_model(model)
    family = _family_for_data(model if isinstance(model, BoundModel) else spec, data, dim)
    prior = spec.prior
    refuse_labelled(prior, "sample_prior")
    dtype = jnp.zeros(()).dtype
    keys = jax.random.split(jax.random.key(seed), num_samples)

    hyper = jax.jit(jax.vmap(lambda key: draw_hyperparameters(spec, jax.random.fold_in(key, 2), dtype)))(keys)
    discount = prior.random_discount

    def partition(key, values):  # at the draw's discount when it is random
        k_alpha, k_z = jax.random.split(jax.random.fold_in(key, 0))
        alpha = draw_alpha(prior, k_alpha, dtype)
        at = prior if discount is None else prior.at_discount(values[discount])
        return alpha, at.draw_labels(k_z, n, n, alpha)

    alpha, z = jax.jit(jax.vmap(partition))(keys, hyper)
    z = np.asarray(z)
    summaries = {k: v[None] for k, v in label_summaries(z).items()}
    partition = {"z": z[None], "cluster_sizes": summaries.pop("cluster_sizes")}
    groups = {"prior": summaries, PARTITION_GROUPS["prior"]: partition}
    if prior.alpha_is_random:
        groups["prior"]["alpha"] = np.asarray(alpha)[None]
    groups["prior"].update({name: np.asarray(value)[None] for name, value in hyper.items()})
    dims = {"z": ["point"], "cluster_sizes": ["cluster"]}
    if family is not None:
        capacity = int(z.max()) + 1
        simulate = jax.jit(jax.vmap(lambda key, labels, values: draw_data(
            family_at_hyperparameters(spec, family, values, family.dim), jax.random.fold_in(key, 1), labels,
            capacity, num_trials)))
        x = stored_data(family, np.asarray(simulate(keys, jnp.asarray(z), hyper)))
        groups["prior_predictive"] = {spec.data.name: x[None]}
        dims[spec.data.name] = ["point", "dim"]
    return to_arviz(groups, coords={"point": np.arange(n)}, dims=dims,
                    attrs={"model": spec.describe(), "num_points": n, "seed": seed})


def expected_num_clusters(prior, n: int, alpha: float | None = None) -> float:
    """E[K] for `n` points under a CRP / Pitman-Yor prior (module docstring).

    `alpha` overrides the prior's concentration; with a Gamma prior and no override,
    the expectation is integrated over alpha numerically. A random discount (a model's
    `PitmanYor(discount="d")`) is an [`ArgumentError`][dpppl.errors.ArgumentError]: give the prior at
    a value of d (`prior.at_discount(0.3)`).
    """
    from scipy import integrate, stats

    if isinstance(prior.discount, str):
        raise ArgumentError(f"expected_num_clusters: the discount '{prior.discount}' of {prior.describe()} is random; "
                            f"give the prior at a value of it, prior.at_discount(d)")

    def given(a):
        k = 1.0
        for i in range(1, n):
            k += (a + prior.discount * k) / (a + i)
        return k

    if alpha is not None or not prior.alpha_is_random:
        return given(prior.initial_alpha if alpha is None else float(alpha))
    g = prior.alpha
    density = stats.gamma(g.shape, scale=1.0 / g.rate).pdf
    return float(integrate.quad(lambda a: given(a) * density(a), 0.0, np.inf, limit=200)[0])


__all__ = ["draw_alpha", "draw_data", "expected_num_clusters", "sample_prior"]
