"""The model spec: one representation built from Python or parsed from a model file.

A [`Model`][dpppl.models.mixture.Model] is a partition prior (CRP / Pitman-Yor), a component family and a data
declaration. [`Model.bind`][dpppl.models.mixture.Model.bind] validates a data set against it and resolves the
data-dependent hyperparameters, giving a [`BoundModel`][dpppl.models.mixture.BoundModel] that kernels consume.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core.compiled import on_target
from dpppl.core.expressions import Expr, Number, Span, parse_expression
from dpppl.core.fingerprint import fingerprint
from dpppl.core.points import num_real, real_rows
from dpppl.core.pytrees import register_attributes
from dpppl.core.state import PartitionState
from dpppl.core.summaries import RowSummaries
from dpppl.errors import DataError, HyperparameterError, ModelError
from dpppl.families.base import Family, cluster_log_marginals, segment_stats, translated
from dpppl.models.compile import compile_numpyro, family_at_hyperparameters
from dpppl.models.rankings import rankings
from dpppl.models.seating import sequential_prediction
from dpppl.priors.crp import CRP, Concentration, Gamma, PitmanYor
from dpppl.priors.hyperpriors import Hyperprior
from dpppl.priors.stick_breaking import StickBreaking

DATA_KINDS = ("real", "count", "binary", "ranking")
HYPERPARAMETER_KERNELS = ("gibbs", "splitmerge", "perm-move", "perm-every", "perm")
"""The kernels that sample a model with random hyperparameters: collapsed moves whose state holds
no instantiated parameters, run at the state's hyperparameters beside the hyperparameter move."""
DISCOUNT_KERNELS = ("gibbs", "splitmerge")
"""The partition kernels that run at a random Pitman-Yor discount (a traced value of the state)."""


@dataclasses.dataclass(frozen=True)
class DataDecl:
    """`data x : real[N, D]`: name, kind and declared dimensions.

    `dims` holds ints (a fixed size) or names (`"N"`, `"D"`, `"V"`: bound to the
    data's shape). A declaration with one dimension (`real[N]`) accepts 1-D data.
    """

    name: str = "x"
    kind: str = "real"
    dims: tuple = ("N", "D")
    # where the declaration sits in a model file, for errors
    line: Optional[int] = None
    column: Optional[int] = None
    # ``data x : real[N, D] by t``: the name of each point's time (a DDP model's slices)
    by: Optional[str] = None
    #: ``ranking[N] of n``: the number of items (None: from the data)
    of: Optional[int] = None
    #: ``= dataset("galaxies")`` / ``= file("points.csv")``: where the data come from when none are
    #: given (a `dpppl.dsl.data.DataSource`, loaded by `dpppl.dsl.parser.bind_data`), or None; not
    #: part of the model's law, so not compared (a model runs the same compiled code on any data source)
    source: Any = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class Model:
    """A Dirichlet-process mixture model.

    Build with [`DPMixture`][dpppl.models.mixture.DPMixture] /
    [`PitmanYorMixture`][dpppl.models.mixture.PitmanYorMixture] or [`dpppl.load`][dpppl.load].
    """

    prior: PitmanYor
    component: Family
    data: DataDecl = DataDecl()
    source: Optional[str] = None
    path: Optional[str] = None
    #: where each hyperparameter was written, by (prior or family name, hyperparameter name):
    #: filled by the parser, used by `located`
    spans: Mapping[tuple[str, str], Span] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    #: the random hyperparameters of the base measure by name, each with its prior (`m ~ Normal(0, 10)`
    #: in a model file); the component's hyperparameters use them by name (`mu0 = m`), and the
    #: hyperparameter move (`dpppl.kernels.hyperparameters`) samples them
    hyperpriors: Mapping[str, Hyperprior] = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self):
        if not isinstance(self.component, Family):
            raise ModelError(
                f"component must be a dpppl component family (e.g. dpppl.families.NormalInverseWishart()), "
                f"got {self.component!r}")
        if self.data.kind != self.component.data_kind:
            raise ModelError(
                f"{self.component.name} observes {self.component.data_kind} data but the data "
                f"are declared {self.data.kind}", source=self.path, line=self.data.line,
                column=self.data.column, text=self.source)
        used = set().union(*(expr.names() for expr in self.random_fields().values()),
                           {self.prior.random_discount})
        unused = [name for name in self.hyperpriors if name not in used]
        if unused:
            raise ModelError(f"random hyperparameter '{unused[0]}' is used by no hyperparameter of the "
                             f"{self.component.name} component", source=self.path, text=self.source)

    def random_fields(self) -> dict[str, Expr]:
        """The component's hyperparameters that are expressions of random hyperparameters
        (`hyperpriors`), by field name, each with its expression."""
        if not self.hyperpriors:
            return {}
        out = {}
        for f in dataclasses.fields(self.component):
            value = getattr(self.component, f.name)
            expr = parse_expression(value) if isinstance(value, str) else value
            if isinstance(expr, Expr) and expr.names() & self.hyperpriors.keys():
                out[f.name] = expr
        return out

    def bind(self, x, summaries: RowSummaries | None = None) -> "BoundModel":
        """Validate `x` against the model; check the prior's hyperparameters for these N
        points and resolve the component's; translate data and family by `data_shift` (see
        `BoundModel`). With `summaries` (those of a data set `x` is part of: the rows of every
        process of a multi-process run, `dpppl.run.distributed`), the prior's checks, the
        hyperparameters and the shift are those of the summarised data set, not of `x`. Raises
        DataError (a [`HyperparameterError`][dpppl.errors.HyperparameterError] for a hyperparameter
        out of range)."""
        arr = validate_data(x, self.data, self.component)
        rows = arr if summaries is None else summaries
        component = self.initial_component()
        with self.located():
            self.prior.check_hyperparameters(rows.shape[0])
            family = component.resolve(rows)
        shift = data_shift(family, rows)
        return BoundModel(self, arr if shift is None else arr - shift, translated(family, shift), shift, arr)

    def initial_component(self) -> Family:
        """The component with each random hyperparameter at its initial value (its prior's median,
        `Hyperprior.initial_value`), ready to resolve: what `bind` resolves and the compiled model
        (`dpppl.models.compile.prior_family`) simulates with before moving to drawn values."""
        start = {name: Number(prior.initial_value) for name, prior in self.hyperpriors.items()}
        return dataclasses.replace(self.component, **{name: expr.substitute(start)
                                                      for name, expr in self.random_fields().items()})

    @contextlib.contextmanager
    def located(self):
        """Re-raise a [`HyperparameterError`][dpppl.errors.HyperparameterError] raised inside at
        the hyperparameter's expression in the model file, when the model came from one."""
        try:
            yield
        except HyperparameterError as error:
            span = self.spans.get((error.owner, error.name))
            if span is None or error.line is not None:
                raise
            raise error.at(span.source.name, span.line, span.column, span.source.text) from None

    def numpyro_model(self, truncation: int = 20):
        """The model compiled to a NumPyro model function `f(x)` (truncated
        stick-breaking, assignments summed out). See `dpppl.models.compile`."""
        return compile_numpyro(self, truncation)

    def refuses_kernel(self, name: str) -> Optional[str]:
        """Why kernel `name` cannot sample this model, or None. A family without a
        closed-form marginal names the only kernels that can (`Family.kernels`); random
        hyperparameters are sampled beside the collapsed partition kernels
        (`HYPERPARAMETER_KERNELS`) or as sites of the compiled model by `nuts`."""
        discount = self.prior.random_discount
        if discount is not None and name not in DISCOUNT_KERNELS + ("nuts",):
            return (f"the random discount '{discount}' is sampled beside {' and '.join(DISCOUNT_KERNELS)} (their "
                    f"hybrids too) or by nuts; {name} runs at a fixed discount")
        if self.hyperpriors and name not in HYPERPARAMETER_KERNELS + ("nuts",):
            return (f"random hyperparameters ({', '.join(self.hyperpriors)}) are sampled beside the collapsed "
                    f"partition kernels or by nuts; use one of {', '.join(HYPERPARAMETER_KERNELS)}, their hybrids, "
                    f"or nuts")
        only = self.component.kernels
        if only is not None and name not in only:
            return (f"{self.component.name} has no closed-form marginal likelihood; use one of "
                    f"{', '.join(only)}")
        return None

    def describe(self) -> str:
        hyper = "".join(f", {name} ~ {prior.describe()}" for name, prior in self.hyperpriors.items())
        return f"{self.prior.describe()} mixture of {self.component.name}{hyper}"


def model_structure(model: Model):
    """What a compiled program of a bound model depends on in its unresolved model: the model's
    class, its prior (its values included: they are constants of the programs) and its data
    declaration, the component's class, and the random hyperparameters' priors and the expressions
    that use them (constants of the programs too); not the component's hyperparameters (the bound
    model's resolved family carries them as leaves), the model file's text or positions."""
    decl = model.data
    prior = model.prior  # a pytree prior's numbers are the bound model's leaves (`partition_prior`), else constants
    leaves = jax.tree.leaves(prior)
    prior_key = fingerprint(prior) if len(leaves) == 1 and leaves[0] is prior else jax.tree.structure(prior)
    return (type(model).__qualname__, prior_key, (decl.name, decl.kind, decl.dims, decl.by, decl.of),
            type(model.component).__qualname__, fingerprint(dict(model.hyperpriors)),
            tuple((name, expr.render()) for name, expr in model.random_fields().items()))


@register_attributes(static_keys={"model": model_structure})
@dataclasses.dataclass(frozen=True)
class BoundModel:
    """A model with validated data and a resolved component family: the target
    (`dpppl.core.protocols.Target`) of a mixture with collapsed parameters.

    States hold labels and per-slot sufficient statistics; `lp` is the collapsed log
    joint: the prior's `log_eppf` of the slot counts (the EPPF of the partition, or for
    sticks on explicit labels the probability of the labelled assignment) plus
    sum_c log p(x_c) plus log p(alpha).

    Kernels work in a translated frame: `x` is the validated data `observed_x` minus
    `shift` (D,), the data mean, taken in float64 on the host before any cast to float32,
    and `family` is the resolved family with its locations (`Family.locations`, e.g.
    `mu0`) minus `shift` as well (`translated`). For a location family
    p(x - c | mu0 - c) = p(x | mu0), so `lp`, `log_joint_of_labels` and every kernel's law
    are those of the model on `observed_x`; only the rounding differs: statistics such as
    sum x x^T of data far from the origin lose digits that those of x - c keep
    (`docs/numerics.md`). A family without locations has `shift` None and `x` is
    `observed_x`. What a user sees is in the data's frame: `observed`, `numpyro_model`,
    `data_family`, and locations recorded by kernels (`translated_params`).
    """

    model: Model
    x: np.ndarray
    family: Family
    shift: Optional[np.ndarray]
    observed_x: Optional[np.ndarray]
    #: with `padded`: the number of real points (an int32 array, a leaf), the first rows of `x`; in a run
    #: over several processes one count per process, the first rows of each process's segment of `x`
    #: (`dpppl.core.points`, `dpppl.run.distributed`)
    num_valid: Any = None
    #: with `at_hyperparameters`: the value of a random Pitman-Yor discount (a leaf)
    discount: Any = None
    #: the model's partition prior, whose concentration is a leaf (`dpppl.priors.crp`): `prior` reads it
    partition_prior: Any = None

    def __post_init__(self):
        if self.partition_prior is None:
            object.__setattr__(self, "partition_prior", self.model.prior)

    @property
    def prior(self) -> PitmanYor:
        """The model's partition prior; a random discount at `discount`, else at its initial value (its
        prior's median), as `family` is (`PitmanYor.at_discount`)."""
        prior = self.partition_prior
        name = prior.random_discount
        if name is None:
            return prior
        return prior.at_discount(self.model.hyperpriors[name].initial_value if self.discount is None
                                 else self.discount)

    @property
    def points(self):
        """The number of real points: `num_points`, or `num_valid` (traced in a compiled
        program) when the points are padded to a shape class."""
        if self.num_valid is None:
            return self.num_points
        return self.num_valid if np.ndim(self.num_valid) == 0 else num_real(self.num_valid, self.num_points)

    def padded(self, size: int) -> "BoundModel":
        """This target with its points padded to `size` rows (zeros) and `num_valid` the real
        count: what a compiled program of a kernel that takes masked points runs on, the same
        program for every number of points padded to `size` (`dpppl.run.runner`). The padded
        points have the label -1 in a state (no slot: never counted) and no kernel visits them.
        `observed_x` is left out (the data as given are the host's, not the program's)."""
        extra = size - self.num_points
        return dataclasses.replace(self, x=np.concatenate([self.x, np.zeros((extra,) + self.x.shape[1:],
                                                                            self.x.dtype)]),
                                   observed_x=None, num_valid=np.int32(self.num_points))

    @property
    def num_points(self) -> int:
        return int(self.x.shape[0])

    @property
    def data_family(self) -> Family:
        """The resolved family in the data's frame (locations as resolved, up to rounding)."""
        return translated(self.family, None if self.shift is None else -self.shift)

    def translate(self, points: np.ndarray) -> np.ndarray:
        """Points of the data's frame (M, D) in the frame of `x`: `points - shift`."""
        return points if self.shift is None else points - self.shift

    def numpyro_model(self, truncation: int = 20):
        """The compiled NumPyro model with this data's resolved hyperparameters, in the
        data's frame (call it with `observed_x` or other points like them)."""
        return compile_numpyro(self.model, truncation, family=self.data_family)

    def nuts_model(self, truncation: int):
        """What `kernel="nuts"` runs: the compiled model in this target's frame (on `x`, with
        `family`) and the arguments `(x,)` that condition it on the data."""
        return compile_numpyro(self.model, truncation, family=self.family, shift=self.shift), (jnp.asarray(self.x),)

    def lp_of_draw(self, labels, draw: dict, capacity: int):
        """`lp` of a draw of the compiled model: the collapsed log joint of its partition
        `labels` (each point's most probable component) at the draw's `alpha` when alpha has
        a prior and at the draw's random hyperparameters (sites under their names), whose
        priors' densities `lp` includes; the draw's component parameters integrate out (traceable)."""
        state = self.state_from_labels(None, labels, capacity)
        if "alpha" in draw:
            state = state._replace(alpha=draw["alpha"].astype(state.alpha.dtype))
        state = state._replace(hyper={name: draw[name].astype(value.dtype) for name, value in state.hyper.items()})
        return self.lp(state)

    # ----- random hyperparameters of the base measure ------------------------------------
    @property
    def moves(self) -> tuple[str, ...]:
        """The moves this target asks every kernel to append beside its prior's (`prior.moves`):
        `"hyperparameters"` when the model has random hyperparameters."""
        return ("hyperparameters",) if self.model.hyperpriors else ()

    def initial_hyperparameters(self) -> dict:
        """Each random hyperparameter's value when chains start (its prior's median,
        `Hyperprior.initial_value`, at which `family` is resolved), in the data's dtype."""
        dtype = jnp.asarray(self.x).dtype
        return {name: jnp.asarray(prior.initial_value, dtype) for name, prior in self.model.hyperpriors.items()}

    def at_hyperparameters(self, values: dict) -> "BoundModel":
        """This target with its family at the random hyperparameters `values` (a dict of traced
        scalars, such as `state.hyper`): each field of `Model.random_fields` evaluated at them
        (`evaluate_traced`, with `D` and `V` the data's columns), locations moved to the frame of
        `x` (minus `shift`), shaped as the resolved field (`with_hyperparameters`), and a random
        Pitman-Yor discount at its value (`prior`). Traceable; the target itself when the model has none."""
        if not self.model.hyperpriors:
            return self
        name = self.model.prior.random_discount
        return dataclasses.replace(self, family=family_at_hyperparameters(self.model, self.family, values,
                                                                          self.x.shape[1], self.shift),
                                   discount=None if name is None else values[name])

    def log_prior_hyperparameters(self, values: dict):
        """sum_j log p(h_j) of the random hyperparameters `values` under their priors (0 without)."""
        return sum((prior.log_prob(values[name]) for name, prior in self.model.hyperpriors.items()),
                   jnp.zeros(()))

    # ----- the target protocol (traceable, one chain) ------------------------------
    def empty_state(self, capacity: int) -> PartitionState:
        dtype = jnp.asarray(self.x).dtype
        unassigned = jnp.where(real_rows(self.num_valid, self.num_points), 0, -1).astype(jnp.int32)
        return PartitionState(unassigned, self.family.empty_stats((capacity,)),
                              jnp.asarray(self.prior.initial_alpha, dtype), jnp.zeros((), bool),
                              hyper=self.initial_hyperparameters())

    def state_from_labels(self, key, labels, capacity: int) -> PartitionState:
        return state_from_labels(self.family, self.x, labels, capacity, self.prior.initial_alpha)._replace(
            hyper=self.initial_hyperparameters())

    def seat(self, key, state: PartitionState) -> PartitionState:
        """Sequential prediction; a non-conjugate family has no closed-form predictive, so
        its chains start from one cluster."""
        if not self.family.conjugate:
            return self.state_from_labels(key, jnp.zeros(self.num_points, jnp.int32), state.stats.n.shape[-1])
        return sequential_prediction(self, key, state, jnp.asarray(self.x))

    def draw_labels(self, key, capacity: int):
        return self.prior.draw_labels(key, self.num_points, capacity,
                                      jnp.asarray(self.prior.initial_alpha, jnp.asarray(self.x).dtype))

    def lp(self, state: PartitionState):
        """The collapsed log joint (`log_joint`) at the state's random hyperparameters, plus their
        priors' log densities."""
        at = self.at_hyperparameters(state.hyper)
        return log_joint(at.family, at.prior, state) + self.log_prior_hyperparameters(state.hyper)

    # ----- the target protocol (host) -----------------------------------------------
    def log_joint_of_labels(self, labels) -> jax.Array:
        """log p(x, z) of labels as a state holds them, at the prior's initial alpha and
        without alpha's prior density (what [`dpppl.log_joint`][dpppl.log_joint] reports); random
        hyperparameters of the base measure are at their initial values (their priors' medians),
        without their densities."""
        capacity = int(np.max(labels)) + 1
        return on_target("log_joint_of_labels", self, functools.partial(_log_joint_of_labels, capacity=capacity),
                         capacity)(jnp.asarray(labels))

    def max_slots(self) -> int:
        return self.prior.max_slots(self.num_points)

    def min_slots(self) -> int:
        return self.prior.min_slots(self.num_points)

    def observed(self) -> dict:
        """The data as validated, in their own frame."""
        return {self.model.data.name: self.observed_x}



def DPMixture(alpha: Concentration = 1.0, component: Family = None, *, data: DataDecl = None) -> Model:
    """Dirichlet-process mixture: `z ~ CRP(alpha)`, `theta_k ~ component`.

    Parameters
    ----------
    alpha : float or Gamma, default 1.0
        Concentration; a [`Gamma`][dpppl.models.mixture.Gamma] prior makes it resampled (Escobar & West 1995).
    component : Family
        A component family such as `NormalInverseWishart()`.
    """
    return _mixture(CRP(alpha=alpha), component, data)


def PitmanYorMixture(discount: float = 0.0, alpha: Concentration = 1.0, component: Family = None,
                     *, data: DataDecl = None) -> Model:
    """Pitman-Yor mixture: `z ~ PY(discount, alpha)`, `theta_k ~ component`."""
    return _mixture(PitmanYor(discount=discount, alpha=alpha), component, data)


def StickBreakingMixture(a=1.0, b=1.0, component: Family = None, *, data: DataDecl = None,
                         check: bool = True) -> Model:
    """Stick-breaking mixture on explicit labels: V_i ~ Beta(a_i, b_i), theta_i ~ component
    (Porteous et al. 2006, sec. 3). `a`, `b`: numbers, finite sequences (ending with
    b_L = 0), vectorised callables of the 1-based stick index array, or expressions of
    `i` such as `"0.75 + i * 0.25"`; see [`StickBreaking`][dpppl.priors.StickBreaking]."""
    return _mixture(StickBreaking(a=a, b=b, check=check), component, data)


def PseudoParticleMixture(gamma, component: Family = None, *, num_sticks=None,
                          data: DataDecl = None) -> Model:
    """The pseudo-particle stick-breaking mixture of eq. (7): a_i = gamma_i,
    b_i = sum_{j>i} gamma_j; see `pseudo_particles`."""
    return _mixture(StickBreaking.pseudo_particles(gamma, num_sticks), component, data)


def _mixture(prior, component, data):
    if component is None:
        raise ModelError("a mixture needs a component family, e.g. component=dpppl.families.NormalInverseWishart()")
    if data is None:
        data = DataDecl(kind=component.data_kind if isinstance(component, Family) else "real")
    return Model(prior=prior, component=component, data=data)


def data_shift(family: Family, x: np.ndarray) -> Optional[np.ndarray]:
    """The translation c of `BoundModel`: the mean of the data `x` (N, D), computed in
    float64, for a family with locations (then the translated data x - c have mean 0 up
    to rounding); None for a family without (counts, binary data, rankings)."""
    return np.mean(x, axis=0, dtype=np.float64) if family.locations else None


def check_not_masked(x, name: str) -> None:
    """Raise DataError for a NumPy masked array with masked entries (`np.asarray` would drop
    the mask and use the values under it); an array with nothing masked passes."""
    if not isinstance(x, np.ma.MaskedArray):
        return
    mask = np.ma.getmaskarray(x)
    if mask.any():
        index = tuple(int(i) for i in np.argwhere(mask)[0])
        where = ", ".join(f"{axis} {i}" for axis, i in zip(("row", "column"), index)) if mask.ndim <= 2 \
            else f"index {index}"
        raise DataError(f"data '{name}' is a masked array with {int(mask.sum())} masked value(s), the first "
                        f"at {where}; the models take no missing values: drop those points or fill "
                        "them (x.filled(value))")


def validate_data(x, decl: DataDecl, family: Family) -> np.ndarray:
    """Check data against a declaration and a family; return a float (N, D) array.

    The declared rank holds: a declaration with one dimension (`real[N]`) takes (N,) or (N, 1)
    data and refuses more columns; `real[N, D]` also takes (N,) data as one column (not so
    count and binary data, whose columns are categories); a dimension written as a number
    (`real[N, 2]`, `real[100, D]`) must match. Errors name the declaration and the shape.

    A bad value is located as every data error locates it: `row r, column c`, counting
    from 0 (`x[r, c]`); a file reader ([`dpppl.datasets.read_data`][dpppl.datasets.read_data]) adds the file and
    its line.
    """
    name = decl.name
    if x is None:
        raise DataError(f"data '{name}' is missing")
    if decl.kind == "ranking":  # top-t rankings, padded (N, n) layout: see dpppl.models.rankings
        n_items = decl.of if decl.of is not None else family.n_items
        return family.check_data(rankings(x, n_items=n_items, name=name).x)
    check_not_masked(x, name)
    try:
        arr = np.asarray(x)
    except Exception as e:  # ragged lists and the like
        raise DataError(f"data '{name}' cannot be read as an array: {e}") from None
    if arr.dtype.kind == "c":
        raise DataError(f"data '{name}' is complex (dtype {arr.dtype}); the models take real data: pass "
                        f"x.real (or np.column_stack([x.real, x.imag]) for two real columns)")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise DataError(f"data '{name}' must be numeric, got dtype {arr.dtype}")
    declared = f"{decl.kind}[{', '.join(map(str, decl.dims))}]"
    where = f" (line {decl.line})" if decl.line else ""
    if arr.ndim == 1 and (len(decl.dims) == 1 or (decl.kind == "real" and decl.dims[1] in ("D", 1))):
        arr = arr[:, None]
    if len(decl.dims) == 1 and arr.ndim == 2 and arr.shape[1] != 1:
        raise DataError(
            f"data '{name}' has {arr.shape[1]} columns (shape {arr.shape}), but the model declares "
            f"'{name} : {declared}'{where}: one value per point, shape (N,) or (N, 1); for {arr.shape[1]} "
            f"columns declare '{name} : {decl.kind}[{decl.dims[0]}, D]'")
    if arr.ndim != 2:
        shape = "(N,) or (N, 1)" if len(decl.dims) == 1 else "a 2-D array (points x dimensions)"
        raise DataError(f"data '{name}' must be {shape} as declared '{name} : {declared}'{where}, got {arr.ndim}-D "
                        f"with shape {arr.shape}")
    if arr.shape[0] == 0:
        raise DataError(f"data '{name}' is empty (0 points)")
    if arr.shape[1] == 0:
        raise DataError(f"data '{name}' has 0 dimensions")
    for axis, dim in enumerate(decl.dims[:2]):
        if isinstance(dim, int) and arr.shape[axis] != dim:
            raise DataError(
                f"data '{name}' has {arr.shape[axis]} {('point', 'column')[axis]}{'' if arr.shape[axis] == 1 else 's'} "
                f"(shape {arr.shape}), "
                f"but the model declares {dim} ('{name} : {declared}'{where})")
    arr = arr.astype(float)
    bad = ~np.isfinite(arr)
    if bad.any():
        r, c = (int(i) for i in np.argwhere(bad)[0])
        raise DataError(f"data '{name}' has a non-finite value ({arr[r, c]}) at row {r}, column {c} "
                        f"({name}[{r}, {c}]; {int(bad.sum())} in all)")
    return family.check_data(arr)


__all__ = ["DataDecl", "Model", "BoundModel", "model_structure", "DPMixture", "PitmanYorMixture", "Gamma",
           "validate_data", "StickBreakingMixture", "PseudoParticleMixture", "check_not_masked", "data_shift"]


def state_from_labels(family, x, z, capacity: int, alpha: float) -> PartitionState:
    """Build a state from labels `z` in `[0, capacity)` (traceable; see
    `canonical_labels` to bring arbitrary labels into range on the host)."""
    z = jnp.asarray(z, jnp.int32)
    stats = segment_stats(family, jnp.asarray(x), z, capacity)
    return PartitionState(z, stats, jnp.asarray(alpha, dtype=jnp.asarray(x).dtype), jnp.zeros((), bool))


def _log_joint_of_labels(target: BoundModel, labels, capacity: int):
    state = target.state_from_labels(None, labels, capacity)
    return target.prior.log_eppf(state.stats.n, state.alpha) + jnp.sum(
        cluster_log_marginals(target.family, state.stats))


def log_joint(family, prior, state: PartitionState) -> jax.Array:
    """Collapsed log p(x, z, alpha): EPPF(z | alpha) + sum_c log p(x_c) + log p(alpha).

    For an exchangeable prior this is the probability of the set partition, not of one
    labelling of it; for sticks on explicit labels, of the labelled assignment (p(x_c)
    from `cluster_log_marginals`).
    """
    counts = state.stats.n
    lm = jnp.where(counts > 0, cluster_log_marginals(family, state.stats), 0.0)
    return prior.log_eppf(counts, state.alpha) + jnp.sum(lm) + prior.log_prior_alpha(state.alpha)
