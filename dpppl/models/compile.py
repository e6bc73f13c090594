"""Compile a model spec to a NumPyro model: truncated stick-breaking, labels summed out.

With T sticks, v_k ~ Beta(1 - d, alpha + k d) for k = 1..T-1 (d = 0 for a DP; for a
[`StickBreaking`][dpppl.priors.StickBreaking] prior v_k ~ Beta(a_k, b_k), and a finite prior of L
sticks is compiled with T = min(T, L), exact when T = L since V_L = 1),
w_k = v_k prod_{j<k} (1 - v_j) and w_T = prod_{j<T} (1 - v_j) (Ishwaran & James 2001;
Porteous et al. 2006, sec. 2), theta_k from the component prior, and each point has the
mixture density sum_k w_k f(x_i | theta_k). The labels are summed out so the model runs
under NUTS; the deterministic site `assignment` holds each point's most probable
component, which is how `kernel="nuts"` reports a partition per draw.

The pieces (`truncated`, `sample_weights`, `FamilyMixture`, `observe_mixture`) also
build the truncated dependent DP of `dpppl.models.ddp_compile`, with one set of sticks
per time slice and per-point weights.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from dpppl.errors import DataError


def stick_breaking_weights(v):
    """Weights (T,) from T-1 stick proportions `v`: w_k = v_k prod_{j<k} (1 - v_j)."""
    one_minus = jnp.concatenate([jnp.ones(v.shape[:-1] + (1,), v.dtype), jnp.cumprod(1 - v, axis=-1)], axis=-1)
    return jnp.concatenate([v, jnp.ones(v.shape[:-1] + (1,), v.dtype)], axis=-1) * one_minus


class FamilyMixture(dist.Distribution):
    """The mixture sum_k w_k f(x | theta_k) of one dpppl component family.

    `weights` (T,) are shared by every point (batch shape ()), or `weights` (N, T) are
    each point's own (batch shape (N,)); `family` is anything with `dim`,
    `log_likelihood(params, x)` -> (N, T) and `sample_points(key, params, labels)`.
    """

    support = constraints.real_vector

    def __init__(self, weights, params, family, *, validate_args=None):
        self.weights, self.params, self.family = weights, params, family
        super().__init__(batch_shape=jnp.shape(weights)[:-1], event_shape=(family.dim,),
                         validate_args=validate_args)

    def component_log_prob(self, value):
        """log w_k + log f(x_i | theta_k), shape (N, T)."""
        flat = jnp.reshape(value, (-1, self.family.dim))
        out = jnp.log(self.weights) + self.family.log_likelihood(self.params, flat)
        return jnp.reshape(out, jnp.shape(value)[:-1] + (self.weights.shape[-1],))

    def log_prob(self, value):
        return jax.nn.logsumexp(self.component_log_prob(value), axis=-1)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        k_z, k_x = jax.random.split(key)
        z = jax.random.categorical(k_z, jnp.log(self.weights), shape=shape)
        return self.family.sample_points(k_x, self.params, z)


def truncated(truncation: int, prior) -> int:
    """The number of sticks to compile: `truncation` (an integer >= 2, else ValueError), and
    at most the L sticks of a finite labelled prior (exact there, since V_L = 1)."""
    if isinstance(truncation, bool) or not isinstance(truncation, int) or truncation < 2:
        raise ValueError(f"truncation must be an integer >= 2, got {truncation!r}")
    if prior.labelled and prior.num_sticks is not None:
        return min(truncation, prior.num_sticks)
    return truncation


def sample_weights(prior, truncation: int, alpha=None, batch: tuple = ()):
    """Inside a NumPyro model: the site `v` of T - 1 stick proportions (leading axes
    `batch`, independent) and the deterministic site `weights` (batch + (T,)).

    v_k ~ Beta(a_k, b_k) for a labelled prior (`StickBreaking.sticks`),
    else Beta(1 - d, alpha + k d) at the concentration `alpha`.
    """
    if prior.labelled:
        a, b = prior.sticks(truncation - 1)
        sticks = dist.Beta(jnp.asarray(a), jnp.asarray(b))
    else:
        k = jnp.arange(1, truncation)
        sticks = dist.Beta(1.0 - prior.discount, alpha + k * prior.discount)
    v = numpyro.sample("v", sticks.expand(tuple(batch) + (truncation - 1,)).to_event(len(batch) + 1))
    return numpyro.deterministic("weights", stick_breaking_weights(v))


def observe_mixture(name: str, mixture: FamilyMixture, x, num_points: int) -> None:
    """Inside a NumPyro model: the `num_points` points (site `name`, observed when `x` is
    given) from `mixture`, and the deterministic site `assignment`, each point's most
    probable component."""
    with numpyro.plate("point", num_points):
        obs = numpyro.sample(name, mixture, obs=x)
        numpyro.deterministic("assignment", jnp.argmax(mixture.component_log_prob(obs), axis=-1))


def compile_numpyro(model, truncation: int, family=None):
    """A NumPyro model `f(x=None, num_points=None)` for `model` with `truncation` sticks.

    `family` is a resolved family, in the frame of the data the model is called with;
    when None the model's family is resolved against the `x` it is called with (which
    must then be concrete, not traced), in that data's frame.
    """
    prior = model.prior
    name = model.data.name
    truncation = truncated(truncation, prior)

    def dp_mixture(x=None, num_points=None):
        fam = family
        if fam is None:
            if x is None or isinstance(x, jax.core.Tracer):
                raise DataError("this model's hyperparameters depend on the data: call "
                                "model.bind(x).numpyro_model(truncation) to fix them first")
            fam = model.bind(np.asarray(x)).data_family
        if x is not None:
            x = jnp.asarray(x)
            num_points = x.shape[0]
        elif num_points is None:
            raise ValueError("give the data x, or num_points to simulate from the prior")
        alpha = None
        if prior.alpha_is_random:
            alpha = numpyro.sample("alpha", dist.Gamma(prior.alpha.shape, prior.alpha.rate))
        elif not prior.labelled:
            alpha = prior.alpha
        w = sample_weights(prior, truncation, alpha)
        observe_mixture(name, FamilyMixture(w, fam.numpyro_sample_params(truncation), fam), x, num_points)

    dp_mixture.truncation = truncation
    return dp_mixture
