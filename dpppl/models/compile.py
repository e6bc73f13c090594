"""Compile a model spec to a NumPyro model: truncated stick-breaking, labels summed out.

With T sticks, v_k ~ Beta(1 - d, alpha + k d) for k = 1..T-1 (d = 0 for a DP; for a
[`StickBreaking`][dpppl.priors.StickBreaking] prior v_k ~ Beta(a_k, b_k), and a finite prior of L
sticks is compiled with T = min(T, L), exact when T = L since V_L = 1),
w_k = v_k prod_{j<k} (1 - v_j) and w_T = prod_{j<T} (1 - v_j) (Ishwaran & James 2001;
Porteous et al. 2006, sec. 2), theta_k from the component prior, and each point has the
mixture density sum_k w_k f(x_i | theta_k). The labels are summed out so the model runs
under NUTS; the deterministic site `assignment` holds each point's most probable
component, which is how `kernel="nuts"` reports a partition per draw.

Prior simulation (`f(None, num_points=N)`, e.g. under `numpyro.infer.Predictive`) needs
resolved hyperparameters. A bound model has them; an unbound one takes them by the rule of
[`prior_family`][dpppl.models.compile.prior_family]: the data the model file carries
(`data x : real[N] = dataset("galaxies")`), else hyperparameters that are all numbers, with
the dimension D declared (`real[N, 2]`) or given (`f(None, num_points=N, dim=2)`); a
hyperparameter that defaults from the data (`mean(x)`, `cov(x) / 10`) is an error naming it.
Count vectors need their totals: `f(None, num_points=N, num_trials=T)`.

The pieces (`truncated`, `sample_weights`, `FamilyMixture`, `observe_mixture`) also
build the truncated dependent DP of `dpppl.models.ddp_compile`, with one set of sticks
per time slice and per-point weights.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.util import validate_sample

from dpppl.core import numerics_random as random
from dpppl.core.expressions import depends_on_data, evaluate_traced
from dpppl.errors import ArgumentError, DataError, ModelError, check_positive_int
from dpppl.families.base import with_hyperparameters


def stick_breaking_weights(v):
    """Weights (T,) from T-1 stick proportions `v`: w_k = v_k prod_{j<k} (1 - v_j).

    The products are exp of the partial sums of log(1 - v_j), one product with a triangular matrix
    of ones: `jnp.cumprod` lowers to a scan whose derivative is several more, hundreds of
    instructions of every compiled NUTS step for the T sticks."""
    upper = jnp.triu(jnp.ones((v.shape[-1],) * 2, v.dtype))  # column k sums j <= k
    one_minus = jnp.concatenate([jnp.ones(v.shape[:-1] + (1,), v.dtype), jnp.exp(jnp.log1p(-v) @ upper)], axis=-1)
    return jnp.concatenate([v, jnp.ones(v.shape[:-1] + (1,), v.dtype)], axis=-1) * one_minus


class StickBeta(dist.Beta):
    """Beta(1, b), the law of a DP's stick proportions, drawn by inversion: P(V <= v) =
    1 - (1 - v)^b, so V = 1 - (1 - U)^{1/b} = -expm1(log1p(-U) / b) for U ~ Uniform[0, 1).

    One uniform per draw where `dist.Beta` draws two Gamma variates, each a rejection loop
    that dominates the compiled program. Support and the clipping of draws to [tiny, 1 - eps]
    are `dist.Beta`'s, the density too, written for a = 1 (`log_prob`).
    """

    def __init__(self, concentration0, *, validate_args=None):
        super().__init__(1.0, concentration0, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        u = random.uniform(key, sample_shape + self.batch_shape)
        v = -jnp.expm1(jnp.log1p(-u) / self.concentration0)
        return jnp.clip(v, jnp.finfo(v.dtype).tiny, 1 - jnp.finfo(v.dtype).eps)

    @validate_sample
    def log_prob(self, value):
        """log b + (b - 1) log(1 - v): `dist.Beta`'s log density at a = 1, where its normaliser
        log Gamma(1 + b) - log Gamma(1) - log Gamma(b) is log b, without the log-gamma functions
        (and their gradients), which are most of a compiled NUTS step's model code."""
        b = self.concentration0
        return jnp.log(b) + (b - 1) * jnp.log1p(-value)


class ExponentialGamma(dist.Gamma):
    """Gamma(1, rate), drawn as an Exponential(rate) variate E / rate, E = -log1p(-U): the same
    law with one uniform instead of a Gamma rejection loop; support is `dist.Gamma`'s, the density
    too, written for shape 1 (`log_prob`)."""

    def __init__(self, rate, *, validate_args=None):
        super().__init__(1.0, rate, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        return jax.random.exponential(key, sample_shape + self.batch_shape) / self.rate

    @validate_sample
    def log_prob(self, value):
        """log rate - rate x: `dist.Gamma`'s log density at shape 1, without its log-gamma function."""
        return jnp.log(self.rate) - self.rate * value


def gamma_distribution(shape, rate) -> dist.Gamma:
    """Gamma(shape, rate) as a NumPyro distribution; with shape 1 (a number) an `ExponentialGamma`."""
    if not isinstance(shape, jax.core.Tracer) and np.ndim(shape) == 0 and float(shape) == 1.0:
        return ExponentialGamma(rate)
    return dist.Gamma(shape, rate)


class FamilyMixture(dist.Distribution):
    """The mixture sum_k w_k f(x | theta_k) of one dpppl component family.

    `weights` (T,) are shared by every point (batch shape ()), or `weights` (N, T) are
    each point's own (batch shape (N,)); `family` is anything with `dim`,
    `log_likelihood(params, x)` -> (N, T) and `sample_points(key, params, labels)`.
    `num_trials` (the total of each count vector) is passed to `sample_points` when given.
    `scalar=True` (a one-dimensional family only) makes each point a scalar (event shape ())
    instead of a vector of one (event shape (1,)): the `real[N]` data given as an (N,) array.
    """

    def __init__(self, weights, params, family, *, num_trials=None, scalar: bool = False, validate_args=None):
        self.weights, self.params, self.family, self.num_trials = weights, params, family, num_trials
        self.scalar = scalar
        super().__init__(batch_shape=jnp.shape(weights)[:-1], event_shape=() if scalar else (family.dim,),
                         validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.real if self.scalar else constraints.real_vector

    def component_log_prob(self, value):
        """log w_k + log f(x_i | theta_k), shape (N, T)."""
        value = value[..., None] if self.scalar else value
        flat = jnp.reshape(value, (-1, self.family.dim))
        out = jnp.log(self.weights) + self.family.log_likelihood(self.params, flat)
        return jnp.reshape(out, jnp.shape(value)[:-1] + (self.weights.shape[-1],))

    def log_prob(self, value):
        return jax.nn.logsumexp(self.component_log_prob(value), axis=-1)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        k_z, k_x = random.split(key)
        z = jax.random.categorical(k_z, jnp.log(self.weights), shape=shape)
        if self.num_trials is None:
            points = self.family.sample_points(k_x, self.params, z)
        else:
            points = self.family.sample_points(k_x, self.params, z, num_trials=self.num_trials)
        return points[..., 0] if self.scalar else points


def truncated(truncation: int, prior) -> int:
    """The number of sticks to compile: `truncation` (an integer >= 2, else
    [`ArgumentError`][dpppl.errors.ArgumentError]), and at most the L sticks of a finite
    labelled prior (exact there, since V_L = 1)."""
    check_positive_int("truncation", truncation, 2)
    if prior.labelled and prior.num_sticks is not None:
        return min(int(truncation), prior.num_sticks)
    return int(truncation)


def sample_weights(prior, truncation: int, alpha=None, batch: tuple = ()):
    """Inside a NumPyro model: the site `v` of T - 1 stick proportions (leading axes
    `batch`, independent) and the deterministic site `weights` (batch + (T,)).

    v_k ~ Beta(a_k, b_k) for a labelled prior (`StickBreaking.sticks`),
    else Beta(1 - d, alpha + k d) at the concentration `alpha` (Beta(1, alpha) for a DP, d = 0,
    drawn by inversion: `StickBeta`).
    """
    if prior.labelled:
        a, b = prior.sticks(truncation - 1)
        sticks = dist.Beta(jnp.asarray(a), jnp.asarray(b))
    elif prior.random_discount is None and prior.discount == 0:
        sticks = StickBeta(jnp.broadcast_to(alpha, (truncation - 1,)))
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


def data_dependent(component) -> list[str]:
    """The hyperparameters of an unresolved family that default from the data: those whose
    value, or default when the value is None (`Family.defaults`), is an expression of `x` or
    `N`. A None default (the number of items, `CoupledGaussian`'s `b` = `a`) is not one."""
    free = []
    for field in dataclasses.fields(component):
        value = getattr(component, field.name)
        if value is None:
            value = getattr(component, "defaults", {}).get(field.name)
            if value is None:
                continue
        if depends_on_data(value):
            free.append(field.name)
    return free


def check_data_shape(name: str, x, dim: int) -> bool:
    """Whether the data `x` of the site `name` are (N,) scalars (True) or (N, D) rows (False) for a
    family of `dim` dimensions; DataError naming the site and both shapes when they fit neither."""
    shape = tuple(jnp.shape(x))
    if len(shape) == 2 and shape[1] == dim:
        return False
    if len(shape) == 1 and dim == 1:
        return True
    expected = "(N,) or (N, 1)" if dim == 1 else f"(N, {dim})"
    raise DataError(f"site '{name}': the data have shape {shape}, the model's points are {dim}-dimensional: "
                    f"expected shape {expected}")


def declared_dim(decl):
    """The data dimension a declaration fixes: 1 for `real[N]`, 2 for `real[N, 2]`, n for
    `ranking[N] of n` with a number n; None when it names a dimension (`real[N, D]`)."""
    if decl.kind == "ranking":
        return decl.of
    if len(decl.dims) == 1:
        return 1
    return decl.dims[1] if isinstance(decl.dims[1], int) else None


def carried_binding(model):
    """`model` bound to the data its model file names (`data x : real[N] = dataset("galaxies")`),
    or None when it names none; an error in those data names the statement."""
    source = model.data.source
    if source is None:
        return None
    with source.located():
        return model.bind(source.load(model.data))


def prior_family(model, dim=None, **resolve_options):
    """The resolved family an unbound `model` simulates data with, in the data's frame.

    The rule for prior simulation: (1) a model file that carries its data
    (`data x : real[N] = dataset("galaxies")`) takes its hyperparameters from them, as
    `model.bind` does; (2) otherwise every hyperparameter must be a number (or an expression
    of `D` alone) and the family is resolved for the dimension `dim`, or the one the data
    declaration fixes (`declared_dim`). ModelError names the hyperparameters that depend on
    the data (bind the model to data, or give them numbers); DataError a missing dimension.
    `resolve_options` go to `Family.resolve` (a DDP family's slice `times`).
    """
    decl = model.data
    carried = carried_binding(model)
    if carried is not None:
        return carried.data_family
    free = data_dependent(model.component)
    if free:
        raise ModelError(
            f"{model.path + ': ' if model.path else ''}{model.component.name}: hyperparameter(s) "
            f"{', '.join(free)} depend on the data, so the model "
            f"cannot simulate data from its prior unbound: bind it to data like those to simulate "
            f"(model.bind(x)), give {', '.join(free)} numbers in the model, or name its data in the model file "
            f"(data {decl.name} : ... = dataset(...))", source=model.path)
    dim = declared_dim(decl) if dim is None else dim
    if dim is None:
        declared = f"{decl.kind}[{', '.join(map(str, decl.dims))}]"
        raise DataError(f"the dimension of '{decl.name}' is not declared ({declared}): give dim (its number of "
                        f"{'items' if decl.kind == 'ranking' else 'columns'}) to simulate data from the prior")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise DataError(f"dim must be a positive integer, got {dim!r}")
    with model.located():
        return model.initial_component().resolve(np.zeros((1, int(dim))), **resolve_options)


def check_num_trials(family, num_trials):
    """`num_trials` for simulating `family`'s data: required for count vectors (whose totals
    the model does not describe), refused for other data."""
    if family.data_kind == "count" and num_trials is None:
        raise DataError(f"{family.name}: simulating count vectors needs their totals: give num_trials "
                        f"(an integer, or one per point), e.g. f(None, num_points=N, num_trials=100)")
    if family.data_kind != "count" and num_trials is not None:
        raise DataError(f"num_trials is the total of simulated count vectors; {family.name} observes "
                        f"{family.data_kind} data")
    return num_trials


def family_at_hyperparameters(model, family, values: dict, dim: int, shift=None):
    """The resolved `family` of `model` at its random hyperparameters `values` (a dict by name of
    traced scalars): each field of `Model.random_fields` evaluated at them (`evaluate_traced`,
    with `D` and `V` the data's `dim` columns), locations moved to the frame `x - shift` when
    `shift` is given, shaped as the resolved field (`with_hyperparameters`). Traceable; `family`
    itself when the model has none. What `BoundModel.at_hyperparameters`, the compiled model and
    `dpppl.sample_prior` run the family at."""
    fields = model.random_fields()
    if not fields:
        return family
    env = {"D": dim, "V": dim}
    new = {name: evaluate_traced(expr, values, env) for name, expr in fields.items()}
    for name in family.locations:
        if name in new and shift is not None:
            new[name] = new[name] - shift
    return with_hyperparameters(family, new)


def compile_numpyro(model, truncation: int, family=None, shift=None):
    """A NumPyro model `f(x=None, num_points=None, *, dim=None, num_trials=None)` for
    `model` with `truncation` sticks.

    `family` is a resolved family, in the frame of the data the model is called with
    (`shift` is that frame's translation, `BoundModel.shift`, None for the data's own frame);
    when None the model's family is resolved against the `x` it is called with (which
    must then be concrete, not traced), in that data's frame, and without `x` by the rule
    of `prior_family` (`dim` is the dimension there). `f(None, num_points=N)` simulates N
    points; `num_trials` is the total of each simulated count vector (count data only). One-
    dimensional data (`real[N]`) may be given as (N,) or (N, 1), and the site's values have the
    shape given; data of another shape are a DataError naming the site and the shapes
    (`check_data_shape`).

    Each random hyperparameter of the base measure (`model.hyperpriors`) is a sample site under
    its name with its prior (`Hyperprior.numpyro`), drawn before the sticks, and the family is
    the resolved one at the drawn values (`family_at_hyperparameters`: the mapping the
    partition kernels use), so NUTS moves them and `Predictive` simulates them.
    """
    prior = model.prior
    name = model.data.name
    truncation = truncated(truncation, prior)

    def dp_mixture(x=None, num_points=None, *, dim=None, num_trials=None):
        fam = family
        if fam is None and x is None:
            fam = prior_family(model, dim)
        elif fam is None:
            if isinstance(x, jax.core.Tracer):
                raise DataError("this model's hyperparameters depend on the data: call "
                                "model.bind(x).numpyro_model(truncation) to fix them first")
            fam = model.bind(np.asarray(x)).data_family
        scalar = False
        if x is not None:
            x = jnp.asarray(x)
            scalar = check_data_shape(name, x, fam.dim)
            num_points = x.shape[0]
            num_trials = None
        elif num_points is None:
            raise ArgumentError("give the data x, or num_points to simulate from the prior")
        else:
            num_trials = check_num_trials(fam, num_trials)
        values = {h: numpyro.sample(h, p.numpyro()) for h, p in model.hyperpriors.items()}
        fam = family_at_hyperparameters(model, fam, values, fam.dim, shift if family is not None else None)
        discount = prior.random_discount
        partition = prior if discount is None else prior.at_discount(values[discount])  # sticks at the drawn d
        alpha = None
        if prior.alpha_is_random:
            alpha = numpyro.sample("alpha", gamma_distribution(prior.alpha.shape, prior.alpha.rate))
        elif not prior.labelled:
            alpha = prior.alpha
        w = sample_weights(partition, truncation, alpha)
        mixture = FamilyMixture(w, fam.numpyro_sample_params(truncation), fam, num_trials=num_trials, scalar=scalar)
        observe_mixture(name, mixture, x, num_points)

    dp_mixture.truncation = truncation
    return dp_mixture
