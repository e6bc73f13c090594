"""The interface every component family implements (conjugate ones, and what differs for the others).

A family is a frozen dataclass whose fields are its hyperparameters. Fields may hold
numbers, arrays, `None` (a documented data-dependent default) or expression strings
such as `"cov(x) / 10"` (see `dpppl.core.expressions`). `Family.resolve`
returns a copy whose fields are all numeric arrays for a given data set; every other
method assumes a resolved family and is a pure JAX function. A family is a pytree whose
numbers are leaves: compiled programs take a resolved family as an argument (traced), so its
methods must not turn hyperparameters into Python numbers.

Sufficient statistics are a `NamedTuple` of arrays whose first field is `n`, the
number of points (a float holding an integer). Statistics are additive: the statistics
of a union of disjoint sets are the element-wise sums, so adding or removing a point is
`stats + point_stats(x_i)` or `stats - point_stats(x_i)` and never a recomputation
(`add_point`). Every method is vectorised over leading axes of `stats`: a
partition keeps one row per cluster slot, and empty slots hold zeros, whose marginal is
the prior's.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Optional, Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core.expressions import Expr, Resolved, data_environment, evaluate, float_limits, parse_expression
from dpppl.core.pytrees import register_attributes
from dpppl.core.summaries import RowSummaries
from dpppl.errors import DataError, HyperparameterError

Stats = Any  # a NamedTuple of arrays with first field ``n``
PredictiveParams = Any  # pytree of arrays, leading axes as the stats they came from


class Family:
    """Base class of conjugate component families.

    Subclasses are frozen dataclasses and implement the methods below. `data_kind`
    is one of `"real"`, `"count"`, `"binary"` and says which data declaration
    (`real[N, D]`, `count[N, V]`, `binary[N, D]`) the family observes.

    A family with `conjugate = False` ([`NormalLogNormal`][dpppl.families.NormalLogNormal]) has no
    `log_marginal`, predictive or `posterior_draw`; it offers instead unconstrained
    parameters `u` and `params_of(u)`, `log_prior(u)`, `prior_draw`,
    `log_likelihood_of_stats(u, stats)` and a data-driven proposal
    (`proposal`, `log_proposal`, `draw_proposal`), which the kernels that instantiate
    parameters use ([`dpppl.kernels.subcluster.parameter_moves`][dpppl.kernels.subcluster.parameter_moves]).
    """

    name: ClassVar[str]
    data_kind: ClassVar[str]
    #: name of the observation distribution in the model language (``x[i] ~ Normal(...)``)
    observation: ClassVar[str]
    #: whether the parameters integrate out in closed form (``log_marginal`` exists)
    conjugate: ClassVar[bool] = True
    #: the only kernels that can sample this family (None: every kernel that applies to the prior)
    kernels: ClassVar[Optional[tuple]] = None
    #: hyperparameters that are points in data space, moved with the data by `translated`
    locations: ClassVar[tuple[str, ...]] = ()
    #: entries of drawn parameters (`posterior_draw`, `params_of`) that are points in data space
    parameter_locations: ClassVar[tuple[str, ...]] = ()

    #: the hyperparameters that may be random (a model-file name with a prior, `m ~ Normal(0, 10)`), by
    #: the support their values need: `"real"` or `"positive"` (`dpppl.priors.hyperpriors.SUPPORTS`)
    random_supports: ClassVar[dict[str, str]] = {}
    #: hyperparameters whose conditional given the clusters' parameters is closed-form under the named
    #: prior (`{"mu0": "Normal"}`); such a family has `mean_precision` (`dpppl.kernels.hyperparameters`)
    conjugate_hyperparameters: ClassVar[dict[str, str]] = {}

    #: numeric attributes that are structure, not leaves: they fix the shapes of what the family
    #: computes (`dpppl.core.pytrees.register_attributes`), so a new value compiles a new program
    static_attributes: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        """Every family is a pytree (`dpppl.core.pytrees.register_attributes`): a resolved family's
        hyperparameters are leaves, so a compiled program takes them as arguments; the family's
        class and its non-numeric attributes (an item count, a static option) are its structure."""
        super().__init_subclass__(**kwargs)
        register_attributes(cls)

    # ----- host side -------------------------------------------------------------
    def check_data(self, x: np.ndarray) -> np.ndarray:
        """Validate a 2-D data array for this family; return it converted to float.

        Raises [`DataError`][dpppl.errors.DataError] naming the first offending row and
        column. The generic check (finite values) is done by the caller; this one, for real
        data, bounds |x| by sqrt(max / N) (max the largest number of the run's float dtype,
        1.8e308 in float64, 3.4e38 in float32): the Gaussian families sum x^2 over up to N
        points, which overflows beyond it.
        """
        x = np.asarray(x, dtype=float)
        if self.data_kind == "real":
            bound = np.sqrt(float_limits().max / max(x.shape[0], 1))
            check_entries(self.name, x, np.abs(x) <= bound,
                          f"at most {bound:.4g} in absolute value (beyond it the sum of x^2 over the "
                          f"{x.shape[0]} points overflows {float_limits().dtype}; rescale the data)")
        return x

    def resolve(self, x: np.ndarray) -> "Family":
        """A copy with every hyperparameter a numeric array fitted to `x` (N, D).

        `None` hyperparameters take the family's documented defaults; expression
        strings are evaluated with `dpppl.core.expressions.evaluate` against the
        data summaries of `x`.
        """
        raise NotImplementedError

    @property
    def dim(self) -> int:
        """Data dimension D of a resolved family."""
        raise NotImplementedError

    # ----- JAX side (resolved families only) ---------------------------------------
    def empty_stats(self, shape: tuple[int, ...] = ()) -> Stats:
        """Zero statistics with leading `shape` (e.g. `(capacity,)`)."""
        raise NotImplementedError

    def point_stats(self, x: jax.Array) -> Stats:
        """Statistics of points `x` of shape (..., D): one row per point."""
        raise NotImplementedError

    def weighted_stats(self, x: jax.Array, weights: jax.Array) -> Stats:
        """sum_i weights_i * point_stats(x_i) over points `x` (B, D). Families with large
        per-point statistics (a Gaussian's D x D outer products) override it with matrix
        products that never form the per-point values."""
        return jax.tree.map(lambda p: jnp.tensordot(weights.astype(p.dtype), p, axes=1), self.point_stats(x))

    def log_marginal(self, stats: Stats) -> jax.Array:
        """log p(x_c) of a set of points with the parameters integrated out."""
        raise NotImplementedError

    def predictive_params(self, stats: Stats) -> PredictiveParams:
        """Quantities that make `log_predictive` cheap for each row of `stats`."""
        raise NotImplementedError

    def log_predictive(self, params: PredictiveParams, x: jax.Array) -> jax.Array:
        """log p(x | x_c) for one point `x` (D,) against every row of `params`.

        Equal to `log_marginal(stats + point_stats(x)) - log_marginal(stats)`.
        """
        raise NotImplementedError

    def posterior_draw(self, rng_key: jax.Array, stats: Stats) -> Any:
        """Draw parameters from p(theta | x_c) for each row of `stats`."""
        raise NotImplementedError

    def log_likelihood(self, params: Any, x: jax.Array) -> jax.Array:
        """log p(x_i | theta_k): `x` (N, D), params with leading K -> (N, K)."""
        raise NotImplementedError

    def sample_points(self, rng_key: jax.Array, params: Any, labels: jax.Array) -> jax.Array:
        """Draw one point per entry of `labels` (any shape) from f(x | theta_label):
        returns `labels.shape + (D,)`. Used to simulate data from the compiled model."""
        raise NotImplementedError

    # ----- NumPyro side -------------------------------------------------------------
    def numpyro_sample_params(self, num_components: int) -> Any:
        """Inside a NumPyro model: sample `num_components` parameter sets from the
        prior with `numpyro.sample` sites named `theta_*`; return the parameters."""
        raise NotImplementedError


def add_point(stats: Stats, k: jax.Array, point: Stats, sign: float | jax.Array = 1.0) -> Stats:
    """Add (`sign=1`) or remove (`sign=-1`) one point's statistics to row `k`."""
    return jax.tree.map(lambda s, p: s.at[k].add(sign * p), stats, point)


def take(stats: Stats, k: jax.Array) -> Stats:
    """Row `k` (an index or an index array) of per-cluster statistics."""
    return jax.tree.map(lambda s: s[k], stats)


SEGMENT_BUDGET = 2**22  # per-point statistics formed at once, in numbers (32 MB in float64)


def segment_sums(per_point, x: jax.Array, labels: jax.Array, num_segments: int, block: int | None = None):
    """Sums of `per_point(x_i)` (a tree of arrays with leading axis N) over the points
    of each segment; labels `>= num_segments` are dropped.

    Points are taken `block` at a time (default: as many as fit in `SEGMENT_BUDGET`
    numbers of per-point values), so that for example the N x D x D outer products of a
    Gaussian family never exist all at once; data that fit in one block take one pass.
    """
    n = x.shape[0]
    one = jax.eval_shape(per_point, x[:1])
    if block is None:
        size = sum(int(np.prod(leaf.shape[1:])) for leaf in jax.tree.leaves(one))
        block = max(256, SEGMENT_BUDGET // max(size, 1))
    if n <= block:
        return jax.tree.map(lambda p: jax.ops.segment_sum(p, labels, num_segments=num_segments), per_point(x))
    num_blocks = -(-n // block)
    pad = num_blocks * block - n
    xb = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1)).reshape((num_blocks, block) + x.shape[1:])
    lb = jnp.pad(labels, (0, pad), constant_values=num_segments).reshape(num_blocks, block)

    def add_block(total, args):
        part = jax.tree.map(lambda p: jax.ops.segment_sum(p, args[1], num_segments=num_segments),
                            per_point(args[0]))
        return jax.tree.map(jnp.add, total, part), None

    empty = jax.tree.map(lambda leaf: jnp.zeros((num_segments,) + leaf.shape[1:], leaf.dtype), one)
    return jax.lax.scan(add_block, empty, (xb, lb))[0]


def segment_sums_by_sorting(weighted_sums, x: jax.Array, labels: jax.Array, num_segments: int, block: int):
    """The sums of `segment_sums`, for statistics whose per-point values are large.

    `weighted_sums(x_block, w)` returns sum_i w_i s(x_i) over a block of points (a tree
    of arrays), computed by the family as matrix products
    (`Family.weighted_stats`), so no per-point value is formed. The points are
    sorted by label; the sum over the first r sorted points is the prefix sum of whole
    blocks' totals plus one block's first points (weights 1 then 0), and a segment's sum
    is the difference of that prefix at its two boundaries. Cost: one pass of block
    products over the points and `num_segments + 1` masked block products; labels
    `>= num_segments` are dropped. The differences are taken in the statistics' dtype:
    keep it float64 for large N.
    """
    n = x.shape[0]
    order = jnp.argsort(labels)
    sorted_labels = labels[order]
    num_blocks = -(-n // block)
    blocks = jnp.pad(x[order], [(0, num_blocks * block - n)] + [(0, 0)] * (x.ndim - 1)).reshape(
        (num_blocks, block) + x.shape[1:])
    ones = jnp.ones(block, x.dtype)
    totals = jax.lax.map(lambda xb: weighted_sums(xb, ones), blocks)
    prefix = jax.tree.map(lambda t: jnp.concatenate([jnp.zeros_like(t[:1]), jnp.cumsum(t, axis=0)]), totals)
    bounds = jnp.searchsorted(sorted_labels, jnp.arange(num_segments + 1), side="left")

    def prefix_at(row):
        b = row // block
        first = (jnp.arange(block) < row % block).astype(x.dtype)
        partial = weighted_sums(blocks[jnp.minimum(b, num_blocks - 1)], first)
        return jax.tree.map(lambda p, q: p[b] + q, prefix, partial)

    at = jax.lax.map(prefix_at, bounds)
    return jax.tree.map(lambda a: a[1:] - a[:-1], at)


def segment_stats(family: Family, x: jax.Array, labels: jax.Array, capacity: int) -> Stats:
    """Per-cluster statistics of points `x` with `labels` in `[0, capacity)`.

    Used once when a state is built from labels; kernels then update statistics
    incrementally. Labels equal to `capacity` or more are dropped (unassigned points).
    Summed block by block for large data (`segment_sums`).
    """
    return segment_sums(family.point_stats, x, labels, capacity)


def resolve_fields(family: Family, x: np.ndarray, defaults: dict[str, Any]) -> dict[str, Resolved]:
    """Evaluate a family's hyperparameter fields against data `x`.

    `defaults` maps a field name to its default (an expression string or a number)
    used where the field is `None`. Returns each value with the expression it came from;
    the caller checks shapes and ranges with `check_hyper`, whose errors name that expression.
    """
    env = None
    out = {}
    for f in dataclasses.fields(family):
        value = getattr(family, f.name)
        default = value is None
        if default:
            value = defaults[f.name]
        if not isinstance(value, (str, Expr)):  # a number or an array, checked by check_hyper
            out[f.name] = Resolved(value)
            continue
        expr = parse_expression(value) if isinstance(value, str) else value
        env = env if env is not None else data_environment(x)
        out[f.name] = Resolved(evaluate(expr, env), expr, default)
    return out


def scale_matrix(owner: str, name: str, resolved: Resolved, dim: int) -> Resolved:
    """A (D, D) matrix hyperparameter (`psi0`) as its owner `owner` takes it: a scalar s (or a
    one-entry vector) stands for s I, the identity scaled (so `psi0 = 1` is I, not a matrix of
    ones); a matrix is passed on for `check_hyper` to check. A vector of several entries is a
    [`HyperparameterError`][dpppl.errors.HyperparameterError] saying to write `diag(...)`
    (broadcast to rows, it would be a matrix of repeated rows)."""
    shape = np.shape(resolved.value)
    if shape == () or shape == (1,):
        return dataclasses.replace(resolved, value=np.reshape(np.asarray(resolved.value, dtype=float), ()) *
                                   np.eye(dim))
    if len(shape) == 1:
        raise HyperparameterError(
            f"{owner}: hyperparameter {name} is a ({dim}, {dim}) matrix, got a vector of shape {shape}"
            f"{resolved.origin()}; write diag(...) for a diagonal matrix, or a number s for s times the identity",
            owner=owner, name=name)
    return resolved


def squared_deviations(family_name: str, x: np.ndarray, mu0: np.ndarray, name: str = "mu0") -> np.ndarray:
    """sum_i (x_id - mu0_d)^2 per dimension d, in float64: the largest sum of squared
    deviations any cluster of `x` holds. Raises
    [`HyperparameterError`][dpppl.errors.HyperparameterError] naming the prior mean `name`
    when it overflows the run's float dtype (a prior mean far outside the data's scale). `x` may be
    the rows' summaries (`RowSummaries`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        squares = x.squared_deviations(mu0) if isinstance(x, RowSummaries) else np.sum((x - mu0) ** 2, axis=0)
    if not np.all(squares <= float_limits().max):
        raise HyperparameterError(
            f"{family_name}: hyperparameter {name} = {mu0} is so far from the data that sum (x - {name})^2 "
            f"overflows {float_limits().dtype}", owner=family_name, name=name)
    return squares


def check_entries(family_name: str, x: np.ndarray, ok: np.ndarray, requirement: str) -> None:
    """Raise [`DataError`][dpppl.errors.DataError] at the first entry of `x` (N, D) where
    `ok` is false, naming its row, column and value (0-based)."""
    bad = ~ok
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataError(
            f"{family_name}: data must be {requirement}; row {r}, column {c} holds {float(x[r, c]):g}"
            f" ({int(bad.sum())} bad values in all)")


def log_clipped(p: jax.Array) -> jax.Array:
    """`log p` with `p` clipped below at the smallest positive float.

    Probabilities drawn from a Dirichlet or Beta with small concentrations can underflow
    to exactly 0; a finite log keeps `0 * log p` at 0 in matrix products.
    """
    return jnp.log(jnp.maximum(p, jnp.finfo(jnp.result_type(p)).tiny))


def cluster_log_marginals(family, stats) -> jax.Array:
    """log p(x_c) per row of `stats`: the family's closed form, or for a non-conjugate
    family its numerical `log_marginal_numerical`."""
    return family.log_marginal(stats) if family.conjugate else family.log_marginal_numerical(stats)


def stored_data(family: Family, x) -> np.ndarray:
    """Simulated data `x` as integers (int64) for every `Family.data_kind` but real (counts,
    binary values, rankings), which `sample_points` may draw as floats; real data unchanged."""
    x = np.asarray(x)
    return x if family.data_kind == "real" else np.rint(x).astype(np.int64)


def translated(family: Family, shift) -> Family:
    """The family of the data `x - shift`: a copy of a resolved family whose location
    hyperparameters (`Family.locations`) are minus `shift` (D,).

    A location family's density depends on a point x and a location m only through
    x - m, so p(x - c | m - c, rest) = p(x | m, rest) with no Jacobian: every marginal,
    predictive and log joint is unchanged, while the statistics of x - c keep their
    digits when the data sit far from the origin (sum (x - c)(x - c)^T does not cancel
    what sum x x^T loses). Drawn locations are then in the frame of x - c
    (`translated_params` moves them back). A family without locations, or `shift` None,
    is returned as it is.
    """
    if shift is None or not family.locations:
        return family
    return with_locations(family, [np.asarray(getattr(family, name)) - shift for name in family.locations])


def with_locations(family: Family, values) -> Family:
    """A copy of `family` whose location hyperparameters (`Family.locations`, in that order)
    are `values` (arrays, or traced values inside `jit`), every other attribute kept, those
    set after resolve too (CoupledGaussian's time covariance)."""
    out = copy.copy(family)
    for name, value in zip(family.locations, values):
        object.__setattr__(out, name, value)
    return out


def with_hyperparameters(family: Family, values: dict) -> Family:
    """A copy of a resolved family whose hyperparameters named in `values` take those values
    (traced scalars or arrays, inside `jit`), each shaped as the resolved one: a scalar stands for
    the same value in every entry of a vector, and for the identity scaled of a (D, D) matrix (as
    `scale_matrix` reads a number given for `psi0`). Every other attribute is kept."""
    out = copy.copy(family)
    for name, value in values.items():
        value = jnp.asarray(value)
        shape = np.shape(getattr(family, name))
        if value.ndim == 0 and len(shape) == 2:
            value = value * jnp.eye(shape[0], dtype=value.dtype)
        object.__setattr__(out, name, jnp.broadcast_to(value, shape))
    return out


def translated_params(family: Family, params: dict, shift) -> dict:
    """Drawn parameters of the frame `x - shift` (a dict such as `posterior_draw` returns,
    numbers or traced arrays) in the frame of x: the entries named by
    `Family.parameter_locations` plus `shift`."""
    if shift is None:
        return params
    return {name: value + shift if name in family.parameter_locations else value
            for name, value in params.items()}
