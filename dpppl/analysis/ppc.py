"""Posterior predictive checks: replicated data for every kept draw of a run.

For a posterior draw of the partition z of the training points x, the replicated data are

    theta_k ~ p(theta | x_{z = k})           for every occupied cluster k,
    x_rep_i ~ f(x | theta_{z_i})             for every point i,

so that (z, theta, x_rep) is a draw of p(z, theta, x_rep | x) and x_rep, over the draws, a
draw of the posterior predictive p(x_rep | x) of data set replicates sharing the training
points' clustering (Gelman, Meng & Stern 1996, sec. 2; Gelman et al., BDA3, sec. 6.3). The
concentration alpha does not enter: given z, the atoms of the occupied clusters are
independent of it.

- Conjugate families (`family.conjugate`: NormalInverseWishart, NormalKnownCov,
  NormalGamma, DirichletMultinomial, BetaBernoulli) draw theta_k exactly from
  `family.posterior_draw` of the cluster's statistics, whatever kernel ran.
- A non-conjugate family (NormalLogNormal) has no closed-form posterior: the run's
  recorded parameters `theta_*` per label slot (`kernel="subcluster"`, which records them
  by default) are used, drawn in the same step as the labels. A slot that z occupies but
  whose parameters were not drawn in that step (a cluster a split made at the step's end)
  takes a draw of the family's data-driven proposal q(theta | x_k), an approximation of
  p(theta | x_k); `attrs["proposal_draws"]` counts them.
- Count data keep each point's total: x_rep_i ~ Multinomial(sum_v x_iv, p_{z_i}).

Rankings (Generalized Mallows) and DDP models are refused (see `posterior_predictive`).

Cost and memory: one jitted map over the kept draws, `batch` draws vectorised at a time
(`jax.lax.map(..., batch_size=)`, sized so that a batch's replicated data and parameters
stay within `BATCH_BUDGET` numbers). The result holds chains x draws x N x D numbers;
`num_draws` (draws kept per chain, evenly spaced) bounds it, and by default the draws are
thinned to at most `OUTPUT_BUDGET` numbers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.analysis.partitions import is_inference_data
from dpppl.analysis.predict import bind_to_run
from dpppl.diagnostics.arviz_compat import PARTITION_GROUPS, group, with_groups
from dpppl.diagnostics.summaries import compact_labels
from dpppl.dsl import parse
from dpppl.dsl.parser import as_model
from dpppl.errors import ArgumentError, DataError, ModelError
from dpppl.families.base import segment_stats, stored_data, translated_params
from dpppl.models.ddp import DDPModel
from dpppl.models.mixture import BoundModel, Model

OUTPUT_BUDGET = 2**25
"""Numbers of replicated data kept by default (256 MB in float64): more draws are thinned."""
BATCH_BUDGET = 2**23
"""Numbers of replicated data and parameters formed at once while drawing."""


def _model_of(idata, model):
    """The model the run sampled: `model`, or the model-file text the run recorded."""
    if model is not None:
        return model
    source = group(idata, "posterior").attrs.get("model_source")
    if source is None:
        raise ArgumentError("posterior_predictive: the run records no model source; pass model=...")
    try:
        return parse(source)
    except ModelError:
        raise ArgumentError("posterior_predictive: the run's model was built in Python, not read from a model "
                            "file; pass model=... (the model the run sampled)") from None


def _refuse(spec) -> None:
    if isinstance(spec, DDPModel) or not isinstance(spec, Model):
        raise ModelError(f"posterior_predictive supports DP / Pitman-Yor / stick-breaking mixtures; "
                         f"{type(spec).__name__} is not one (a DDP model's atoms move over time and its runs "
                         f"do not record them per draw, so replicated data cannot be drawn from its labels)")
    if spec.component.data_kind == "ranking":
        raise ModelError("posterior_predictive: Generalized Mallows components have no conjugate posterior and "
                         "their runs do not record the central permutations per draw, so replicated rankings "
                         "cannot be drawn from the labels")


def _kept_draws(num_draws, chains: int, draws: int, per_draw: int) -> np.ndarray:
    """Indices of the draws kept in every chain, evenly spaced."""
    if num_draws is None:
        num_draws = max(1, OUTPUT_BUDGET // max(chains * per_draw, 1))
    elif isinstance(num_draws, bool) or not isinstance(num_draws, (int, np.integer)) or num_draws < 1:
        raise ArgumentError(f"num_draws must be an integer >= 1 or None, got {num_draws!r}")
    if num_draws >= draws:
        return np.arange(draws)
    return np.unique(np.round(np.linspace(0, draws - 1, int(num_draws))).astype(int))


def _recorded_params(idata, family):
    """The run's `theta_*` per slot (chain, draw, slot, ...) of a non-conjugate family."""
    part = group(idata, PARTITION_GROUPS["posterior"])
    names = [k for k in part.data_vars if k.startswith("theta_")]
    if not names:
        raise DataError(f"posterior_predictive: {family.name} is not conjugate and the run recorded no cluster "
                        "parameters (theta_*); sample it with kernel='subcluster' and record_parameters=True")
    return {k[len("theta_"):]: np.asarray(part[k]) for k in names}


def _sampler(bound: BoundModel, capacity: int, recorded: bool):
    """One draw: `(key, z, theta or None) -> (x_rep (N, D), number of proposal draws)`."""
    family, x, shift = bound.family, jnp.asarray(bound.x), bound.shift
    totals = jnp.sum(jnp.asarray(bound.observed_x, x.dtype), axis=1) if family.data_kind == "count" else None

    def points(key, theta, z):
        if totals is None:
            return family.sample_points(key, theta, z)
        return family.sample_points(key, theta, z, num_trials=totals)

    def one(key, z, theta):
        k_theta, k_x = jax.random.split(key)
        stats = segment_stats(family, x, z, capacity)
        if not recorded:
            drawn = translated_params(family, family.posterior_draw(k_theta, stats), shift)
            return points(k_x, drawn, z), jnp.zeros((), jnp.int32)
        fallback = translated_params(family, family.params_of(family.draw_proposal(k_theta, stats)), shift)
        missing = jnp.zeros(capacity, bool)
        for value in theta.values():
            missing = missing | jnp.any(jnp.isnan(value.reshape(capacity, -1)), axis=1)
        filled = {name: jnp.where(missing.reshape((capacity,) + (1,) * (value.ndim - 1)), fallback[name], value)
                  for name, value in theta.items()}
        used = missing & (stats.n > 0)
        return points(k_x, filled, z), jnp.sum(used).astype(jnp.int32)

    return one


def posterior_predictive(idata, model=None, *, num_draws: int | None = None, seed: int = 0):
    """Replicated data for the kept draws of a run, in a `posterior_predictive` group.

    Parameters
    ----------
    idata : InferenceData
        A run of [`dpppl.sample`][dpppl.sample] (its labels `z`, its observed data and, for a
        non-conjugate family, its recorded `theta_*`).
    model : Model, BoundModel or str, optional
        The model the run sampled; by default the model-file text the run recorded
        (`attrs["model_source"]`), which a model built in Python does not have.
    num_draws : int, optional
        Draws kept per chain, evenly spaced (default: all, thinned to at most
        `OUTPUT_BUDGET` = 2^25 numbers of replicated data in all).
    seed : int

    Returns
    -------
    InferenceData
        `idata` with the group `posterior_predictive` added (replacing one it had): the
        data variable (`x`, dims chain, draw, point, dim), the draw coordinate the kept
        draws' indices. ArviZ's `az.plot_ppc(idata)` compares it with `observed_data`.
        See the module docstring for the draw.
    """
    if not is_inference_data(idata):
        raise DataError("posterior_predictive needs the InferenceData returned by dpppl.sample")
    model = _model_of(idata, model)
    spec = as_model(model)
    _refuse(spec)
    bound = bind_to_run(model if isinstance(model, BoundModel) else spec, idata)
    family = bound.family
    z = np.asarray(group(idata, PARTITION_GROUPS["posterior"])["z"])
    chains, draws, n = z.shape
    if n != bound.num_points:
        raise DataError(f"the run's labels cover {n} points but its data have {bound.num_points}")
    dim = bound.x.shape[1]
    kept = _kept_draws(num_draws, chains, draws, n * dim)
    z = z[:, kept].reshape(-1, n)
    recorded = not family.conjugate
    if recorded:
        theta = {k: v[:, kept].reshape((z.shape[0],) + v.shape[2:]) for k, v in _recorded_params(idata, family).items()}
        capacity = next(iter(theta.values())).shape[1]
    else:
        z, counts = compact_labels(z)
        capacity, theta = counts.shape[1], {}
    one = _sampler(bound, capacity, recorded)
    per_draw = n * dim + capacity * (dim * dim + dim)
    batch = int(max(1, min(z.shape[0], BATCH_BUDGET // per_draw)))
    keys = jax.random.split(jax.random.key(seed), z.shape[0])
    dtype = jnp.asarray(bound.x).dtype
    run = jax.jit(lambda k, labels, th: jax.lax.map(lambda a: one(*a), (k, labels, th), batch_size=batch))
    x_rep, proposal_draws = run(keys, jnp.asarray(z, jnp.int32), jax.tree.map(lambda v: jnp.asarray(v, dtype), theta))
    x_rep = stored_data(family, np.asarray(x_rep).reshape(chains, len(kept), n, dim))
    name = spec.data.name
    attrs = {"proposal_draws": int(np.sum(proposal_draws)), "seed": seed}
    return with_groups(idata, {"posterior_predictive": {name: x_rep}},
                       coords={"draw": kept, "point": np.arange(n), "dim": np.arange(dim)},
                       dims={name: ["point", "dim"]}, attrs=attrs)


__all__ = ["posterior_predictive"]
