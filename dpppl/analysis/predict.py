"""Posterior prediction for new points: which cluster they join, and their density.

Given a posterior draw of the training partition z (and alpha), the collapsed model
seats a new point x* exactly as collapsed Gibbs seats a point (Neal 2000, alg. 3):

    p(x*, z* = c | z, x) = (|c| - d) / (alpha + N) * p(x* | x_c)      (existing c),
    p(x*, z* = new | z, x) = (alpha + K d) / (alpha + N) * p(x*)       (a new cluster),

with p(x* | x_c) the family's posterior predictive (`family.log_predictive` on the
cluster's statistics) and (|c| - d, alpha + K d) the CRP / Pitman-Yor seat weights
(`prior.log_seat_weights`). Summing over c gives p(x* | z, x), and averaging over the
draws the posterior predictive density p(x* | x) = E[p(x* | z, x) | x].

Membership is reported against one *summary* clustering c-hat of the training points
(a point estimate, or any labels): the probability that x* joins summary cluster k is
the probability that it joins an existing cluster and that a member of that cluster
drawn uniformly at random lies in k,

    q_s(k) = sum_c p(z* = c | z_s, x, x*) |c ∩ k| / |c|,   q_s(new) = p(z* = new | z_s, x, x*),

so that a draw equal to c-hat gives back the seat probabilities. Because x* itself
informs the training partition, the posterior probability is a ratio of averages over
draws z_s ~ p(z | x), not an average of ratios:

    P(k | x*, x) = sum_s w_s p(x* | z_s, x) q_s(k) / sum_s w_s p(x* | z_s, x),

with weights w_s = 1 for posterior draws (other weights, e.g. exact posterior
probabilities of enumerated partitions, can be given). This is consistent as the number
of draws grows and exact when the draws are every partition weighted by its posterior.
Each new point is predicted on its own (new points do not see one another).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.config import in_x64
from dpppl.diagnostics.arviz_compat import group
from dpppl.dsl.parser import as_model
from dpppl.models.mixture import BoundModel, validate_data
from dpppl.errors import DataError
from dpppl.models.sites import resolved_family
from dpppl.families.base import segment_stats
from dpppl.core.state import canonical_labels
from dpppl.priors.stick_breaking import refuse_labelled
from dpppl.analysis.partitions import is_inference_data, run_variable, point_estimate, posterior_draws
from dpppl.diagnostics.summaries import as_label_array, compact_labels


class Prediction(NamedTuple):
    """Result of [`predict`][dpppl.analysis.predict.predict].

    - **proba** - (M, K + 1): P(new point m joins summary cluster k | x*, x) for the K
      clusters of `clustering`, and in the last column P(it opens a new cluster).
      Rows sum to one.
    - **log_density** - (M,): the posterior predictive log density log p(x*_m | x).
    - **clustering** - (N,): the summary clustering of the training points (labels
      0..K-1 in order of first appearance) that the columns of `proba` refer to.
    """

    proba: np.ndarray
    log_density: np.ndarray
    clustering: np.ndarray


def bind_to_run(model, idata) -> BoundModel:
    """The model bound to the training data stored in `idata`'s `observed_data`.

    `model` is a Model (or a model-file path), bound here so that data-dependent
    hyperparameters are resolved exactly as when sampling; or a BoundModel, which must
    hold the same data as the run.
    """
    if not is_inference_data(idata):
        raise DataError("predict needs the InferenceData returned by dpppl.sample")
    name = (model.model if isinstance(model, BoundModel) else as_model(model)).data.name
    x = run_variable(idata, name, group="observed_data")
    if isinstance(model, BoundModel):
        if model.observed_x.shape != x.shape or not np.allclose(model.observed_x, x):
            raise DataError("the bound model's data differ from the data the run was sampled on")
        return model
    return as_model(model).bind(x)


def alpha_draws(idata, bound: BoundModel) -> np.ndarray:
    """The concentration of every draw (S,): sampled values, or the fixed alpha."""
    post = group(idata, "posterior")
    if "alpha" in post:
        return np.asarray(post["alpha"], dtype=float).reshape(-1)
    return np.full(posterior_draws(idata).shape[0], bound.prior.initial_alpha)


class Predictor:
    """Membership probabilities and predictive densities of new points (module docstring).

    Parameters
    ----------
    bound : BoundModel
        The model bound to the training data.
    draws : array_like of int (S, N)
        Partitions of the training points.
    alpha : array_like (S,)
        The concentration of each draw.
    clustering : array_like of int (N,)
        The summary clustering whose clusters the probabilities refer to.
    log_weights : array_like (S,), optional
        Unnormalised log weights of the draws (default: equal).

    Notes
    -----
    Calling the predictor on new data (M, D) returns a [`Prediction`][dpppl.analysis.predict.Prediction]. The work is
    one jitted scan over draws, O(S M K_max) predictive evaluations. New points are given
    in the data's frame and translated like the training points
    (`BoundModel.translate`, in float64) before the cast to the working dtype.
    """

    def __init__(self, bound: BoundModel, draws, alpha, clustering, log_weights=None):
        refuse_labelled(bound.prior, "predict")
        labels, counts = compact_labels(as_label_array(draws).reshape(-1, bound.num_points))
        s = labels.shape[0]
        c = _summary_labels(clustering, bound.num_points)
        alpha = np.broadcast_to(np.asarray(alpha, dtype=float), (s,))
        log_weights = np.zeros(s) if log_weights is None else np.asarray(log_weights, dtype=float)
        if log_weights.shape != (s,):
            raise DataError(f"log_weights must have shape ({s},), got {log_weights.shape}")
        self.bound, self.clustering = bound, c
        dtype = jnp.asarray(bound.x).dtype
        self._inputs = (jnp.asarray(labels, jnp.int32), jnp.asarray(alpha, dtype), jnp.asarray(log_weights, dtype))
        self._capacity = counts.shape[1]
        self._fn = None  # the jitted scan, built on first call (and again after unpickling)

    def __getstate__(self):
        # The jitted closure cannot be pickled; everything it is built from can.
        return {k: v for k, v in self.__dict__.items() if k != "_fn"}

    def __setstate__(self, state):
        self.__dict__.update(state, _fn=None)

    def _compiled(self):
        if self._fn is None:
            dtype = self._inputs[1].dtype
            onehot = jax.nn.one_hot(self.clustering, int(self.clustering.max()) + 1, dtype=dtype)
            self._fn = jax.jit(_build(self.bound, self._capacity, onehot))
        return self._fn

    def __call__(self, new_data) -> Prediction:
        decl = self.bound.model.data
        x_new = validate_data(new_data, dataclasses.replace(decl, dims=("M",) + tuple(decl.dims[1:])),
                              self.bound.family)
        if x_new.shape[1] != self.bound.x.shape[1]:
            raise DataError(f"new data have {x_new.shape[1]} columns, the training data {self.bound.x.shape[1]}")
        # into the frame the training points are held in, in float64 before any cast
        x_new = self.bound.translate(x_new)
        proba, log_density = self._compiled()(*self._inputs, jnp.asarray(x_new, self._inputs[1].dtype))
        return Prediction(np.asarray(proba), np.asarray(log_density), self.clustering)


def _summary_labels(clustering, n) -> np.ndarray:
    c = as_label_array(clustering)
    if c.shape != (n,):
        raise DataError(f"the clustering must have one label per training point ({n},), got shape {c.shape}")
    return canonical_labels(c)


@in_x64
def seat_log_joint(family, prior, x, z, alpha, x_new, capacity: int):
    """log p(x*_m, z* = c | z, x) for new points `x_new` (M, D) given the labels `z` (N,) of
    points `x` (N, D): one column per slot c < `capacity` (weights (|c| - d) / (alpha + N)
    times `family.log_predictive`; -inf for empty slots) and a last column for a new cluster
    ((alpha + K d) / (alpha + N) times the prior predictive). Returns (joint (M, C + 1), the
    slot statistics). Traceable; `family` resolved."""
    stats = segment_stats(family, x, z, capacity)
    log_existing, log_new = prior.log_seat_weights(stats.n, alpha)
    params = family.predictive_params(stats)
    prior_params = family.predictive_params(family.empty_stats(()))
    log_pred = jax.vmap(lambda xs: family.log_predictive(params, xs))(x_new)           # (M, C)
    log_pred_new = jax.vmap(lambda xs: family.log_predictive(prior_params, xs))(x_new)  # (M,)
    joint = jnp.concatenate([log_existing + log_pred, (log_new + log_pred_new)[:, None]], axis=1)
    return joint - jnp.log(alpha + x.shape[0]), stats


@in_x64
def draw_log_predictive(model, values, labels, alpha, new_values) -> np.ndarray:
    """log p(v*_m | z_s, v_s) per draw s: the predictive density of new values of a DP site
    given each draw's values and partition (module docstring, summed over seats).

    For a DP mixture *inside* a NumPyro model (regression residuals, random intercepts) the
    values of the site change from draw to draw, so each draw brings its own `values`:

        p(v* | z_s, v_s) = sum_c (|c| - d) / (alpha_s + N) p(v* | v_{s,c}) + (alpha_s + K d) / (alpha_s + N) p(v*),

    with p(v* | v_c) the family's posterior predictive (`Family.log_predictive`). The
    posterior predictive density of v* is the average over draws, `log_mean_exp(out, axis=0)`.

    Parameters
    ----------
    model : Model
        The site's mixture (`dpppl.DPMixture(alpha, component)`, as given to `dpppl.dp_mixture`),
        every hyperparameter a number: a HyperparameterError names those that default from the data.
        A labelled (stick-breaking) prior is refused.
    values : array (S, N) or (S, N, D)
        The site's values in each draw.
    labels : array of int (S, N)
        Each draw's partition of the N values (any integer labels).
    alpha : float or array (S,)
        The concentration of each draw.
    new_values : array (M,) or (S, M) for values (S, N); (M, D) or (S, M, D) for values (S, N, D)
        The new values, the same for every draw or one set per draw.

    Returns
    -------
    ndarray (S, M)
    """
    refuse_labelled(model.prior, "draw_log_predictive")
    values, new = np.asarray(values, dtype=float), np.asarray(new_values, dtype=float)
    one_dim = values.ndim == 2  # one-dimensional values: new values (M,) or (S, M)
    if one_dim:
        values, new = values[..., None], new[..., None]
    if values.ndim != 3:
        raise DataError(f"values must have shape (S, N) or (S, N, D), got {values.shape}")
    s, n, d = values.shape
    labels, _ = compact_labels(as_label_array(labels).reshape(-1, n))
    if labels.shape[0] != s:
        raise DataError(f"labels have {labels.shape[0]} draws but values {s}")
    new = np.broadcast_to(new, (s,) + new.shape) if new.ndim == 2 else new
    if new.ndim != 3 or new.shape[0] != s or new.shape[2] != d:
        shapes = f"(M,) or ({s}, M)" if one_dim else f"(M, {d}) or ({s}, M, {d})"
        raise DataError(f"new_values must have shape {shapes}, got {np.shape(new_values)}")
    family, _, _ = resolved_family(model, n, dim=d)  # as the site resolved it: numeric hyperparameters only
    alpha = jnp.broadcast_to(jnp.asarray(alpha, dtype=float), (s,))

    def one(args):
        v, z, a, v_new = args
        joint, _ = seat_log_joint(family, model.prior, v, z, a, v_new, n + 1)
        return jax.nn.logsumexp(joint, axis=1)

    return np.asarray(jax.jit(lambda *a: jax.lax.map(one, a))(jnp.asarray(values), jnp.asarray(labels, jnp.int32),
                                                              alpha, jnp.asarray(new)))


def log_mean_exp(a, axis=0) -> np.ndarray:
    """log mean exp(a) along `axis`, computed stably: the log of a Monte Carlo average of
    densities given on the log scale (a posterior predictive density from per-draw ones)."""
    a = np.asarray(a, dtype=float)
    return np.logaddexp.reduce(a, axis=axis) - np.log(a.shape[axis])


def _build(bound: BoundModel, capacity: int, summary_onehot):
    family, prior = bound.family, bound.prior
    x = jnp.asarray(bound.x)

    def one_draw(z, alpha, x_new):
        """log p(x* | z, x) (M,) and membership q(k) (M, K + 1) for one draw."""
        joint, stats = seat_log_joint(family, prior, x, z, alpha, x_new, capacity)
        log_density = jax.nn.logsumexp(joint, axis=1)
        seat = jnp.exp(joint - log_density[:, None])                                        # (M, C + 1)
        overlap = jax.nn.one_hot(z, capacity, dtype=x.dtype).T @ summary_onehot              # (C, K)
        share = overlap / jnp.maximum(stats.n, 1.0)[:, None]
        return log_density, jnp.concatenate([seat[:, :-1] @ share, seat[:, -1:]], axis=1)

    def run(labels, alphas, log_weights, x_new):
        m = x_new.shape[0]

        def body(carry, inputs):
            top, total, weighted = carry
            z, alpha, log_w = inputs
            log_density, membership = one_draw(z, alpha, x_new)
            log_term = log_w + log_density
            new_top = jnp.maximum(top, log_term)
            scale, w = jnp.exp(top - new_top), jnp.exp(log_term - new_top)
            return (new_top, total * scale + w, weighted * scale[:, None] + w[:, None] * membership), None

        k = summary_onehot.shape[1]
        init = (jnp.full((m,), -jnp.inf, x.dtype), jnp.zeros((m,), x.dtype), jnp.zeros((m, k + 1), x.dtype))
        (top, total, weighted), _ = jax.lax.scan(body, init, (labels, alphas, log_weights))
        log_density = top + jnp.log(total) - jax.nn.logsumexp(log_weights)
        return weighted / total[:, None], log_density

    return run


@in_x64
def predict(idata, model, new_data, *, clustering="vi", seed: int = 0) -> Prediction:
    """Cluster membership probabilities and posterior predictive density of new points.

    Parameters
    ----------
    idata : InferenceData
        A run of [`dpppl.sample`][dpppl.sample] (its draws of `z`, `alpha` and its observed data).
    model : Model, BoundModel or str
        The model the run sampled. A Model is bound to the run's observed data, so
        data-dependent hyperparameters are those of the run.
    new_data : array_like (M, D)
        Points to predict.
    clustering : {"vi", "dahl", "best"} or array of int (N,)
        The summary clustering of the training points that the probabilities refer to:
        a [`dpppl.point_estimate`][dpppl.point_estimate] method or labels.
    seed : int
        Seed of the point-estimate search.

    Returns
    -------
    Prediction
        `proba` (M, K + 1), rows summing to one, the last column a new cluster;
        `log_density` (M,) = log p(x* | x); `clustering` (N,). See the module docstring.
    """
    bound = bind_to_run(model, idata)
    draws = posterior_draws(idata)
    if draws.shape[1] != bound.num_points:
        raise DataError(f"the run's labels cover {draws.shape[1]} points but its data have {bound.num_points}")
    if isinstance(clustering, str):
        clustering = point_estimate(idata, clustering, seed=seed)
    return Predictor(bound, draws, alpha_draws(idata, bound), clustering)(new_data)


__all__ = ["Prediction", "Predictor", "alpha_draws", "bind_to_run", "draw_log_predictive", "log_mean_exp", "predict",
           "seat_log_joint"]
