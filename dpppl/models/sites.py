"""A DP mixture as sites of a user-written NumPyro model: a partition and its collapsed likelihood.

    def model(x, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0))
        dpppl.dp_mixture("resid", mixture, obs=y - x * beta)   # DP-mixture errors

[`Partition`][dpppl.models.sites.Partition] is a NumPyro distribution over the label vectors of
N points whose density is the exchangeable partition probability function of a CRP or Pitman-Yor
prior (Pitman 2006, eq. 3.6; `dpppl.priors.crp`):

    p(C | alpha, d) = prod_{j=1}^{K-1} (alpha + j d) / (alpha + 1)_{N-1} * prod_{c in C} (1 - d)_{|c| - 1},

the probability of the *set partition* C that the labels represent, whatever their numbering
(a value is any labelling with labels in [0, N); draws are canonical: 0..K-1 by first
appearance). [`CollapsedMixture`][dpppl.models.sites.CollapsedMixture] is the law of the values
y (N,) or (N, D) given the labels, with every cluster's parameters integrated out against the
conjugate prior G_0 of a component family:

    log p(y | C) = sum_{c in C} log p(y_c),    p(y_c) = int prod_{i in c} f(y_i | theta) G_0(d theta),

the family's closed-form `log_marginal` of the cluster's sufficient statistics. The statistics
are sums over points (`segment_stats`), so the density is differentiable in y wherever the
family's data are continuous: NUTS can move whatever y depends on (regression coefficients,
random intercepts) while a partition kernel moves the labels
([`dpppl.PartitionGibbs`][dpppl.run.partition_gibbs.PartitionGibbs]). Sampling either site
simulates from the prior: labels by sequential seating, and values by drawing each cluster's
parameters from G_0 and each point from f(. | theta_{z_i}), which is how
`numpyro.infer.Predictive` simulates a model that holds them.

[`dp_mixture`][dpppl.models.sites.dp_mixture] writes the three sites of a dpppl model
(`DPMixture`, `PitmanYorMixture`) inside a NumPyro model: `{name}_alpha` when alpha has a
Gamma prior (a continuous site, moved by the inner kernel given the partition), `{name}_{h}` for
each random hyperparameter h of the base measure (`m ~ Normal(0, 10)`, `mu0 = m`; a continuous
site with its prior, the family at its value), `{name}_labels` and `name`.

The family's hyperparameters must be numbers: a data-dependent default (`var(x) / 10`) would
change as the values move, so it is refused with an error naming the field.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from dpppl.core import numerics_random as random
from dpppl.core.expressions import depends_on_data
from dpppl.errors import DataError, HyperparameterError, ModelError
from dpppl.families.base import Family, cluster_log_marginals, segment_stats
from dpppl.models.compile import family_at_hyperparameters
from dpppl.priors.crp import PitmanYor

LABELS_SUFFIX = "_labels"
ALPHA_SUFFIX = "_alpha"


def exchangeable_prior(prior, where: str = "Partition") -> PitmanYor:
    """The CRP / Pitman-Yor prior of `prior` (a prior, or a dpppl model holding one); a clear
    ModelError for a labelled stick-breaking prior or anything else."""
    prior = getattr(prior, "prior", prior)  # a dpppl Model holds its prior
    if isinstance(prior, PitmanYor):
        return prior
    if getattr(prior, "labelled", False):
        raise ModelError(f"{where}: the prior {prior.describe()} is on explicit labels (stick-breaking), whose law "
                         "is not a function of the partition alone; a partition site takes an exchangeable prior: "
                         "dpppl.CRP(alpha=...) or dpppl.PitmanYor(discount=..., alpha=...)")
    raise ModelError(f"{where}: prior must be dpppl.CRP(...), dpppl.PitmanYor(...) or a model built by "
                     f"dpppl.DPMixture / dpppl.PitmanYorMixture, got {prior!r}")


def canonical_in_jit(labels, capacity: int):
    """Labels renumbered 0..K-1 in order of first appearance (traceable); `labels` lie in
    [0, capacity)."""
    n = labels.shape[-1]
    first = jax.ops.segment_min(jnp.arange(n), labels, num_segments=capacity)  # n+ for empty slots
    rank = jnp.argsort(jnp.argsort(first))  # occupied slots first, by first appearance
    return rank[labels].astype(jnp.int32)


class Partition(dist.Distribution):
    """A NumPyro distribution over the partitions of `num_points` points (see the module docstring).

    Parameters
    ----------
    prior : CRP, PitmanYor, or a model built by DPMixture / PitmanYorMixture
        The exchangeable partition prior. A labelled stick-breaking prior raises ModelError.
    num_points : int
    alpha : float or array, optional
        The concentration, overriding the prior's. Required when the prior's alpha is a
        `dpppl.Gamma` (sample it as a site and pass it here; `dp_mixture` does).

    Notes
    -----
    `log_prob(z)` is the log EPPF of the partition z represents (labels in [0, N), any
    numbering); `sample` draws canonical labels (0..K-1 by first appearance) by sequential
    seating. The event shape is (num_points,), integer valued.
    """

    pytree_data_fields = ("alpha",)
    pytree_aux_fields = ("prior", "num_points")

    def __init__(self, prior, num_points: int, *, alpha=None, validate_args=None):
        self.prior = exchangeable_prior(prior)
        if isinstance(num_points, bool) or not isinstance(num_points, (int, np.integer)) or num_points < 1:
            raise ModelError(f"Partition: num_points must be a positive integer, got {num_points!r}")
        self.num_points = int(num_points)
        if alpha is None:
            if self.prior.alpha_is_random:
                raise ModelError(f"Partition: the prior {self.prior.describe()} has a Gamma prior on alpha; sample "
                                 "alpha as a site and pass it (Partition(prior, N, alpha=alpha)), or use "
                                 "dpppl.dp_mixture, which does")
            alpha = self.prior.alpha
        self.alpha = jnp.asarray(alpha, dtype=jnp.result_type(float))
        super().__init__(batch_shape=(), event_shape=(self.num_points,), validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.independent(constraints.integer_interval(0, self.num_points - 1), 1)

    def log_prob(self, value):
        value = jnp.asarray(value, jnp.int32)

        def one(z):
            counts = jax.ops.segment_sum(jnp.ones(z.shape, self.alpha.dtype), z, num_segments=self.num_points)
            return self.prior.log_eppf(counts, self.alpha)

        return _over_leading(one, value, 1)

    def sample(self, key, sample_shape=()):
        n = self.num_points
        keys = random.split(key, int(np.prod(sample_shape, dtype=int)))
        z = jax.vmap(lambda k: self.prior.draw_labels(k, n, n + 1, self.alpha))(keys)
        return z.reshape(tuple(sample_shape) + (n,))


def _over_leading(fn, value, event_ndim: int):
    """`fn` of one event, mapped over the leading (sample) axes of `value`."""
    lead = value.shape[:value.ndim - event_ndim]
    if not lead:
        return fn(value)
    flat = value.reshape((-1,) + value.shape[value.ndim - event_ndim:])
    return jax.vmap(fn)(flat).reshape(lead)


def _dim_of(component: Family) -> Optional[int]:
    """D from the shapes of a family's hyperparameters (the first axis of an array-valued one),
    or None when every one is a scalar."""
    dims = [np.shape(getattr(component, f.name))[0] for f in dataclasses.fields(component)
            if not isinstance(getattr(component, f.name), str) and np.ndim(getattr(component, f.name)) >= 1]
    return max(dims) if dims else None


def resolved_family(component, num_points: int, dim: Optional[int] = None) -> tuple[Family, int, bool]:
    """`(family, D, flat)`: `component` (a family, or a dpppl model holding one, its random
    hyperparameters at their initial values: `Model.initial_component`) resolved with
    its own hyperparameters for `num_points` points of D dimensions; `flat` when the values are
    (N,) rather than (N, D) (no `dim` given and every hyperparameter a scalar). Raises
    ModelError for a non-conjugate family, HyperparameterError naming a hyperparameter that
    defaults from the data."""
    component = component.initial_component() if hasattr(component, "initial_component") else \
        getattr(component, "component", component)
    if not isinstance(component, Family):
        raise ModelError(f"CollapsedMixture: component must be a dpppl component family "
                         f"(e.g. dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=4.0)), got {component!r}")
    if not component.conjugate:
        raise ModelError(f"CollapsedMixture: {component.name} has no closed-form marginal likelihood; a collapsed "
                         "mixture site needs a conjugate family (NormalKnownCov, NormalInverseWishart, NormalGamma, "
                         "DirichletMultinomial, BetaBernoulli)")
    if component.data_kind not in ("real", "count", "binary"):
        raise ModelError(f"CollapsedMixture: {component.name} observes {component.data_kind} data; a collapsed "
                         "mixture site takes real, count or binary values")
    free = [f.name for f in dataclasses.fields(component) if depends_on_data(getattr(component, f.name))]
    if free:
        defaults = getattr(component, "defaults", {})
        said = ", ".join(f"{name} (default {defaults[name]!r})" if name in defaults else name for name in free)
        raise HyperparameterError(
            f"{component.name}: hyperparameter(s) {said} default from the data, which move inside a NumPyro "
            f"model; give {', '.join(free)} explicitly, e.g. {component.name}({free[0]}=...)",
            owner=component.name, name=free[0])
    inferred = _dim_of(component)
    flat = dim is None and inferred is None
    d = int(dim if dim is not None else (inferred or 1))
    probe = np.full((num_points, d), 1.0 if component.data_kind == "count" else 0.0)
    return component.resolve(probe), d, flat


class CollapsedMixture(dist.Distribution):
    """The values of `labels`' clusters with every cluster's parameters integrated out
    (see the module docstring): `log_prob(y) = sum_c log p(y_c)`, differentiable in y for
    the Gaussian families.

    Parameters
    ----------
    component : Family, or a dpppl model holding one
        A conjugate family whose hyperparameters are all given (none defaulting from data).
    labels : int array (N,)
        Each point's cluster (any numbering in [0, N)), usually the value of a
        [`Partition`][dpppl.models.sites.Partition] site.
    dim : int, optional
        D when the values are (N, D); default: from the hyperparameters' shapes, and (N,)
        values when every hyperparameter is a scalar.
    num_trials : int, optional
        Total count of each simulated vector (DirichletMultinomial only, for `sample`).
    hyperparameters : dict, optional
        The values of the model's random hyperparameters of the base measure by name (traced
        scalars; required when `component` is a model with some: sample them as sites, as
        `dp_mixture` does); the family is the resolved one at those values.
    """

    pytree_data_fields = ("labels", "family")
    pytree_aux_fields = ("dim", "flat", "num_trials", "random")

    def __init__(self, component, labels, *, dim: Optional[int] = None, num_trials: Optional[int] = None,
                 hyperparameters: Optional[dict] = None, validate_args=None):
        if jnp.ndim(labels) != 1:
            raise ModelError(f"CollapsedMixture: labels must be a vector (N,), got shape {jnp.shape(labels)}")
        n = int(jnp.shape(labels)[0])
        priors = dict(getattr(component, "hyperpriors", {}))
        missing = sorted(set(priors) - set(hyperparameters or {}))
        if missing:
            raise ModelError(f"CollapsedMixture: the model has random hyperparameters ({', '.join(priors)}); sample "
                             f"them as sites and pass their values (hyperparameters={{'{missing[0]}': ...}}), or use "
                             f"dpppl.dp_mixture, which does")
        self.family, self.dim, self.flat = resolved_family(component, n, dim)
        if priors:
            self.family = family_at_hyperparameters(component, self.family, hyperparameters, self.dim)
        #: the names of the random hyperparameters the family is at (a partition kernel cannot follow them)
        self.random = tuple(priors)
        self.labels = labels  # kept as given: PartitionGibbs links it to its Partition site by identity
        self.num_trials = num_trials
        super().__init__(batch_shape=(), event_shape=(n,) if self.flat else (n, self.dim),
                         validate_args=validate_args)

    @property
    def num_points(self) -> int:
        return self.event_shape[0]

    @constraints.dependent_property(is_discrete=False, event_dim=2)
    def support(self):
        kind = self.family.data_kind
        base = (constraints.real if kind == "real" else constraints.nonnegative_integer if kind == "count"
                else constraints.boolean)
        return constraints.independent(base, len(self.event_shape))

    def points(self, value):
        """Values as the family's (N, D) points."""
        return value[..., None] if self.flat else value

    def log_prob(self, value):
        labels = jnp.asarray(self.labels, jnp.int32)
        n = self.num_points

        def one(y):
            stats = segment_stats(self.family, self.points(y), labels, n)
            return jnp.sum(jnp.where(stats.n > 0, cluster_log_marginals(self.family, stats), 0.0))

        return _over_leading(one, jnp.asarray(value, jnp.result_type(float)), len(self.event_shape))

    def sample(self, key, sample_shape=()):
        labels = jnp.asarray(self.labels, jnp.int32)
        n, family = self.num_points, self.family
        extra = {} if self.num_trials is None else {"num_trials": self.num_trials}

        def one(k):
            k_theta, k_x = random.split(k)
            theta = family.posterior_draw(k_theta, family.empty_stats((n,)))  # empty statistics: G_0
            return family.sample_points(k_x, theta, labels, **extra).reshape(self.event_shape)

        keys = random.split(key, int(np.prod(sample_shape, dtype=int)))
        return jax.vmap(one)(keys).reshape(tuple(sample_shape) + self.event_shape)


def dp_mixture(name: str, model, obs=None, num_points: Optional[int] = None, *, dim: Optional[int] = None):
    """Inside a NumPyro model: a DP (or Pitman-Yor) mixture of `model`'s component over the
    values `name`; returns the values.

    Sites: `{name}_alpha ~ Gamma(shape, rate)` when `model`'s alpha is a `dpppl.Gamma` (a
    continuous site: the inner kernel of `PartitionGibbs` moves it given the partition through
    the EPPF), `{name}_{h} ~` its prior for each random hyperparameter h of the base measure
    (`model.hyperpriors`), `{name}_labels ~ Partition(prior, N, alpha=...)` and
    `name ~ CollapsedMixture(model, labels, hyperparameters=...)` (the family at the drawn values),
    observed when `obs` is given. With `obs=None`
    the values are a latent continuous site (e.g. DP random intercepts) that NUTS moves; under
    `numpyro.infer.Predictive` every site is simulated from the prior.

    Parameters
    ----------
    name : str
    model : Model
        Built by `dpppl.DPMixture` / `dpppl.PitmanYorMixture` with a conjugate component whose
        hyperparameters are given (not data defaults).
    obs : array (N,) or (N, D), optional
    num_points : int, optional
        N when `obs` is None.
    dim : int, optional
        D of (N, D) values (default: from `obs`, else from the hyperparameters' shapes).
    """
    prior = exchangeable_prior(model, "dp_mixture")
    component = getattr(model, "component", None)
    if component is None:
        raise ModelError(f"dp_mixture: model must be built by dpppl.DPMixture or dpppl.PitmanYorMixture, got {model!r}")
    if obs is not None:
        obs = jnp.asarray(obs)
        if obs.ndim not in (1, 2):
            raise DataError(f"dp_mixture {name!r}: the values must be (N,) or (N, D), got shape {tuple(obs.shape)}")
        if num_points is not None and num_points != obs.shape[0]:
            raise ModelError(f"dp_mixture: num_points={num_points} but obs has {obs.shape[0]} points")
        num_points = int(obs.shape[0])
        if dim is None and obs.ndim == 2:
            dim = int(obs.shape[1])
    elif num_points is None:
        raise ModelError("dp_mixture: give the values obs=..., or num_points=N for a latent site")
    alpha = None
    if prior.alpha_is_random:
        alpha = numpyro.sample(name + ALPHA_SUFFIX, dist.Gamma(prior.alpha.shape, prior.alpha.rate))
    values = {h: numpyro.sample(f"{name}_{h}", p.numpyro()) for h, p in getattr(model, "hyperpriors", {}).items()}
    labels = numpyro.sample(name + LABELS_SUFFIX, Partition(prior, num_points, alpha=alpha))
    try:
        mixture = CollapsedMixture(model, labels, dim=dim, hyperparameters=values)
    except HyperparameterError as e:
        if obs is None:
            raise
        raise DataError(f"dp_mixture {name!r}: the values have shape {tuple(obs.shape)}: {e}") from None
    if obs is not None and tuple(obs.shape) != mixture.event_shape:
        raise DataError(f"dp_mixture {name!r}: the values have shape {tuple(obs.shape)}, but {mixture.family.name}'s "
                        f"hyperparameters are {mixture.dim}-dimensional: expected shape {mixture.event_shape}")
    return numpyro.sample(name, mixture, obs=obs)


class DPSite(NamedTuple):
    """A partition site of a traced model and the collapsed-mixture site over its labels."""

    labels: str
    values: str
    partition: Any   # the Partition distribution (prior, alpha)
    mixture: Any     # the CollapsedMixture distribution (family, dim, flat)
    value: Any       # the mixture site's values


def partition_site_names(model_trace) -> tuple[str, ...]:
    """Names of the unobserved [`Partition`][dpppl.models.sites.Partition] sample sites of a
    trace (a `numpyro.infer.Gibbs` site selector)."""
    return tuple(name for name, site in model_trace.items()
                 if site["type"] == "sample" and not site["is_observed"] and isinstance(site["fn"], Partition))


def dp_sites(model_trace, names=None) -> tuple[DPSite, ...]:
    """Each Partition site of a trace named in `names` (default: the latent ones; a Gibbs
    block's own sites are conditioned, so observed, in the traces it makes) with the one
    CollapsedMixture site over its labels (the mixture's `labels` are the Partition site's value
    object; with one of each they pair). Raises ModelError when a partition has no collapsed
    mixture or more than one."""
    parts = partition_site_names(model_trace) if names is None else tuple(names)
    mixes = [name for name, site in model_trace.items()
             if site["type"] == "sample" and isinstance(site["fn"], CollapsedMixture)]
    out = []
    for p in parts:
        value = model_trace[p]["value"]
        linked = [m for m in mixes if model_trace[m]["fn"].labels is value]
        if not linked and len(parts) == 1 and len(mixes) == 1:
            linked = mixes
        if len(linked) != 1:
            raise ModelError(f"partition site {p!r} needs exactly one CollapsedMixture site over its labels (pass "
                             f"the site's value itself as labels), found {linked or 'none'}")
        m = linked[0]
        if model_trace[m]["fn"].random:
            raise ModelError(f"partition site {p!r}: the family of {m!r} is at random hyperparameters "
                             f"({', '.join(model_trace[m]['fn'].random)}), which PartitionGibbs does not follow yet "
                             f"(its partition kernel runs at one family); fix them to numbers in the model")
        if model_trace[m]["fn"].num_points != model_trace[p]["fn"].num_points:
            raise ModelError(f"site {m!r} has {model_trace[m]['fn'].num_points} points but its partition {p!r} "
                             f"has {model_trace[p]['fn'].num_points}")
        out.append(DPSite(p, m, model_trace[p]["fn"], model_trace[m]["fn"], model_trace[m]["value"]))
    return tuple(out)


__all__ = ["CollapsedMixture", "DPSite", "Partition", "canonical_in_jit", "dp_mixture", "dp_sites",
           "exchangeable_prior", "partition_site_names", "resolved_family"]
