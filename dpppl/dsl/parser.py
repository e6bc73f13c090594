"""The model-file parser: text in the dpppl model language to a [`Model`][dpppl.models.mixture.Model].

A model file has one statement per line; `#` starts a comment::

    data x : real[N, D]                 # the data: kind real, count or binary
    alpha ~ Gamma(1, 1)                 # or: alpha = 2.0 (a fixed concentration)
    z ~ CRP(alpha)                      # or: z ~ PitmanYor(discount = 0.25, alpha = alpha)
    theta[k] ~ NormalInverseWishart(mu0 = mean(x), kappa0 = 0.1, nu0 = D + 2, psi0 = cov(x))
    x[i] ~ Normal(theta[z[i]])

Statements
    `data NAME : KIND[dims]`
        declares the data; KIND is `real`, `count` or `binary`; one dimension
        (`real[N]`, 1-D data) or two (`real[N, D]`); a dimension is a name or a
        positive integer. The first dimension name is an alias of `N`, the second of
        `D`. It may name its data, used when none are given
        (`dpppl.sample(model)`, `dpppl sample MODEL` without `--data`):
        `data x : real[N] = dataset("galaxies")` (a data set by name, with keyword
        options that are fixed numbers: `dataset("w2", n = 1000)`) or
        `data x : real[N, D] = file("points.csv")` (relative to the model file, inside its
        directory tree unless `allow_paths` allows more); see
        `dpppl.dsl.data`. Nothing is read when the model is parsed.
    `NAME = expr`
        a constant: a number for a concentration or discount, or any hyperparameter
        expression, usable by name in later lines.
    `NAME ~ Gamma(shape, rate)`
        a random concentration (resampled during inference).
    `NAME ~ Normal(loc, scale)` (or `Gamma`, `InverseGamma`, `HalfNormal`, `LogNormal`, `Uniform`,
    `Beta`, `Exponential`: `HYPERPRIORS`)
        a random hyperparameter of the base measure, used by name in the component's
        hyperparameters (`mu0 = m`); its support must fit theirs (`Family.random_supports`).
    `z ~ CRP(alpha)` / `z ~ PitmanYor(discount, alpha)`
        the partition prior; `alpha` is a number, a constant or a Gamma-distributed name.
    `z ~ StickBreaking(a, b)` / `z ~ PseudoParticles(gamma, num_sticks)`
        a stick-breaking prior on explicit labels (Porteous et al. 2006): a, b, gamma are
        expressions of the stick index `i` (`b = theta + i * d`), numbers, or vector
        literals (a finite sequence of sticks).
    `theta[k] ~ PRIOR(...)` and `x[i] ~ OBSERVATION(theta[z[i]], ...)`
        the component prior and the observation model, a conjugate pair from
        `COMPONENTS` (e.g. `Dirichlet` with `Multinomial`).

Names are free (`y`, `c`, `phi`, `j`, ...) but must be used consistently; the
data declaration may stand anywhere, any other name must be defined before it is used.
Arguments are positional (in the order of the family's fields) or keyword; an omitted
hyperparameter takes the family's default. Hyperparameters are expressions
(`dpppl.core.expressions`) of the data (by its declared name), `N`, `D`, `V` and
constants; they stay expressions in the model and are evaluated by `Family.resolve` when
data are bound, where the data are always called `x` (references to the declared data
name and dimension names are rewritten).

The grammar knows only calls with positional and keyword expression arguments; which
distributions exist and what they build is decided by the tables below, so a new prior or
family is a new table entry.

Every problem raises [`ModelError`][dpppl.errors.ModelError] with the file, the 1-based line and
column, a caret excerpt and what was expected.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np
from lark import v_args
from lark.exceptions import VisitError

from dpppl import families
from dpppl.datasets.bundled import available as available_datasets
from dpppl.datasets.bundled import option_names
from dpppl.datasets.files import read_data, read_rankings
from dpppl.dsl.data import SOURCES, DataSource
from dpppl.errors import ArgumentError, DataError, HyperparameterError, ModelError
from dpppl.priors.crp import CRP, Gamma, PitmanYor
from dpppl.priors.hyperpriors import DISTRIBUTIONS, SUPPORTS, Hyperprior
from dpppl.priors.stick_breaking import StickBreaking
from dpppl.priors.ddp import DDP
from dpppl.families.coupled import CoupledGaussian
from dpppl.core.expressions import (BinOp, Call, Expr, ExprBuilder, Index, Name, Number, Source, Span,
                                    TRACED_FUNCTIONS, check_traced, parse_rule, suggest)
from dpppl.models.ddp import DDPBound, DDPModel
from dpppl.models.mixture import DATA_KINDS, BoundModel, DataDecl, Model

# ---------------------------------------------------------------------------- tables


@dataclasses.dataclass(frozen=True)
class PartitionRule:
    """A partition prior `z ~ NAME(...)`: its class, whose init fields are the
    arguments, and which of them may be a name with a Gamma prior (the others are
    fixed numbers)."""

    prior: type
    random: tuple[str, ...] = ("alpha",)
    indexed: tuple[str, ...] = ()
    """Arguments that are expressions of the stick index `i` (stick-breaking priors)."""
    params: Optional[tuple[str, ...]] = None
    """The argument names, when they are not the init fields of `prior`."""


@dataclasses.dataclass(frozen=True)
class ComponentRule:
    """A conjugate pair `theta[k] ~ PRIOR(...)` / `x[i] ~ observation(theta[z[i]], ...)`.

    `family` names the class in `dpppl.families` (imported when used);
    `observation_params` are the family fields given on the observation line, the
    other fields are the prior's arguments, in field order.
    """

    family: str
    observation: str
    observation_params: tuple[str, ...] = ()

    def family_class(self) -> type:
        """The component family class."""
        return getattr(families, self.family)

    def prior_params(self) -> tuple[str, ...]:
        """The arguments of the component prior, in the family's field order."""
        return tuple(f.name for f in dataclasses.fields(self.family_class())
                     if f.name not in self.observation_params)


PARTITION_PRIORS: dict[str, PartitionRule] = {
    "CRP": PartitionRule(CRP),
    "PitmanYor": PartitionRule(PitmanYor),
    "StickBreaking": PartitionRule(StickBreaking, random=(), indexed=("a", "b"), params=("a", "b")),
    "PseudoParticles": PartitionRule(StickBreaking.pseudo_particles, random=(), indexed=("gamma",),
                                     params=("gamma", "num_sticks")),
    "DDP": PartitionRule(DDP, random=(), indexed=("a", "b"), params=("a", "b")),
}
"""Partition priors by name."""

MATRIX_HYPERPRIORS = {
    "MultivariateNormal": "give each entry of a vector mean its own prior, m1 ~ Normal(0, 10), m2 ~ Normal(0, 10), "
                          "and write mu0 = [m1, m2]",
    "Wishart": "give a scalar scale of a fixed matrix a prior, s ~ Gamma(2, 1), and write psi0 = s * cov0",
    "InverseWishart": "give a scalar scale of a fixed matrix a prior, s ~ Gamma(2, 1), and write psi0 = s * cov0",
}
"""Priors of vector or matrix hyperparameters that a model may not use yet, with what to write instead."""

CONCENTRATION_PRIORS: dict[str, type] = {"Gamma": Gamma}
"""Priors of a random concentration (`alpha ~ Gamma(1, 1)`) by name."""

HYPERPRIORS = DISTRIBUTIONS
"""Priors of a random hyperparameter of the base measure (`m ~ Normal(0, 1000)`, then `mu0 = m`) by
name, with NumPyro's parametrisations (`dpppl.priors.hyperpriors`); `Gamma` serves both."""

RESERVED = ("alpha", "num_clusters", "largest_cluster", "entropy", "lp", "cluster_sizes", "z")
"""Names of the `posterior` group's own variables, which a random hyperparameter (recorded there
under its name) may not take."""

COMPONENTS: dict[str, ComponentRule] = {
    "NormalInverseWishart": ComponentRule("NormalInverseWishart", "Normal"),
    "NormalGamma": ComponentRule("NormalGamma", "Normal"),
    "NormalLogNormal": ComponentRule("NormalLogNormal", "Normal"),
    "Normal": ComponentRule("NormalKnownCov", "Normal", observation_params=("sigma2",)),
    "Dirichlet": ComponentRule("DirichletMultinomial", "Multinomial"),
    "Beta": ComponentRule("BetaBernoulli", "Bernoulli"),
    "CoupledGaussian": ComponentRule("CoupledGaussian", "Normal"),
    "MallowsPrior": ComponentRule("GeneralizedMallows", "GeneralizedMallows"),
}
"""Component priors by name, each with its observation distribution and family."""

OBSERVATIONS = frozenset(rule.observation for rule in COMPONENTS.values())
"""Observation distributions (`x[i] ~ NAME(theta[z[i]])`)."""

BUILTINS = {"N": "the number of points", "D": "the number of columns",
            "V": "the number of columns (of count data)"}
"""Names every hyperparameter expression may use."""

_ROLES = (  # (what, names, example) for messages about a distribution in the wrong place
    ("partition prior", PARTITION_PRIORS, "z ~ CRP(alpha)"),
    ("concentration prior", CONCENTRATION_PRIORS, "alpha ~ Gamma(1, 1)"),
    ("component prior", COMPONENTS, "theta[k] ~ NormalInverseWishart()"),
    ("observation", OBSERVATIONS, "x[i] ~ Normal(theta[z[i]])"),
    ("hyperprior", HYPERPRIORS, "m ~ Normal(0, 10)"),
)

# ---------------------------------------------------------------------------- statements


@dataclasses.dataclass(frozen=True)
class DataStatement:
    """`data NAME : KIND[dims] (of expr)?`."""

    name: Name
    kind: Name
    dims: tuple[Expr, ...]
    of: Optional[Expr]
    span: Span
    by: Optional[Name] = None  # ``by t``: the points' time
    source: Optional["_SourceClause"] = None  # ``= dataset("galaxies")``: the data's source


@dataclasses.dataclass(frozen=True)
class _SourceClause:
    """`= NAME("text", option = expr, ...)` in a data declaration."""

    func: Name
    target: str
    target_span: Span
    options: tuple[Any, ...]  # Keyword nodes


@dataclasses.dataclass(frozen=True)
class Assignment:
    """`NAME = expr`."""

    name: Name
    value: Expr


@dataclasses.dataclass(frozen=True)
class Sampling:
    """`NAME ~ dist(...)` or `NAME[index] ~ dist(...)`."""

    name: Name
    index: Optional[Name]
    dist: Call


@dataclasses.dataclass(frozen=True)
class _ByClause:
    """`by NAME` in a data declaration."""

    name: Name


@v_args(meta=True)
class StatementBuilder(ExprBuilder):
    """Extends the expression builder with the statement rules of the model grammar."""

    def model(self, meta, children):
        return children

    def data_decl(self, meta, children):
        source = children.pop() if isinstance(children[-1], _SourceClause) else None
        by = children.pop() if isinstance(children[-1], _ByClause) else None
        name, kind, dims, *of = children
        return DataStatement(self._name(name), self._name(kind), dims, of[0] if of else None,
                             self._span(meta), by.name if by else None, source)

    def by_clause(self, meta, children):
        return _ByClause(self._name(children[0]))

    def data_source(self, meta, children):
        func, target, *options = children
        return _SourceClause(self._name(func), str(target)[1:-1], self._span(target), tuple(options))

    def source_option(self, meta, children):
        return self.keyword(meta, children)

    def dims(self, meta, children):
        return tuple(children)

    def assignment(self, meta, children):
        name, value = children
        return Assignment(self._name(name), value)

    def sampling(self, meta, children):
        (name, index), dist = children
        return Sampling(name, index, dist)

    def target(self, meta, children):
        name, *index = children
        return self._name(name), self._name(index[0]) if index else None


class _Placed(Exception):
    """Carries an error the builder raised, already placed in the whole text, past `_LineBuilder`'s re-placing."""

    def __init__(self, error: Exception):
        super().__init__(error)
        self.error = error


class _LineBuilder(StatementBuilder):
    """A `StatementBuilder` for one line of a model (every statement is one line): `source` is that
    line alone, which is what lark and `parse_rule`'s syntax and nesting errors see; the positions
    the built statements carry are in `whole`, the model's text, at line `line`."""

    def __init__(self, whole: Source):
        super().__init__(whole)
        self.whole = whole
        self.line, self.offset = 1, 0  # the line's number and where it starts in whole.text

    def at(self, line: int, offset: int, text: str) -> "_LineBuilder":
        self.line, self.offset, self.source = line, offset, Source(self.whole.name, text)
        return self

    def _span(self, item) -> Span:
        return Span(self.whole, item.line + self.line - 1, item.column)

    def _text(self, meta) -> str:
        return self.whole.text[meta.start_pos + self.offset:meta.end_pos + self.offset]

    def transform(self, tree):
        try:
            return super().transform(tree)
        except VisitError as exc:  # raised with a position in the whole text: not to be moved
            raise _Placed(exc.orig_exc) from None


def _statements(source: Source) -> list:
    """The statements of a model, parsed one line at a time (a statement never spans lines; blank
    and comment lines are skipped unparsed), so that parsing costs the same for every line, however
    long the file. A name defined a second time is reported at once, at its second definition
    (`_Definitions`), before the lines after it are parsed."""
    builder, definitions, statements, offset = _LineBuilder(source), _Definitions(), [], 0
    for number, line in enumerate(source.text.split("\n"), start=1):
        text = line.strip()
        if text and not text.startswith("#"):
            try:
                parsed = parse_rule(line + "\n", "model", builder.at(number, offset, line))
            except _Placed as placed:
                raise placed.error from None
            except ModelError as error:  # a syntax or nesting error, placed in the line alone
                raise ModelError(error.bare_message, source=source.name, line=number, column=error.column,
                                 text=source.text) from None
            for statement in parsed:
                definitions.add(statement)
            statements += parsed
        offset += len(line) + 1
    return statements


class _Definitions:
    """The names statements define, in the order of the text: a second definition of a name (or a
    second data declaration, or a partition or component prior of the first one's name) raises what the
    model builder would, when it is seen. Observation lines define nothing; the builder checks the rest
    (a component prior's name against other names, priors of different names)."""

    def __init__(self):
        self.lines: dict[str, int] = {}
        self.roles: dict[str, DataStatement | Sampling] = {}  # the first statement of each role

    def add(self, s):
        if isinstance(s, DataStatement):
            first = self.roles.setdefault("data", s)
            if first is not s:
                raise s.span.error(f"a model has one data declaration; '{first.name.name}' is already declared at "
                                   f"line {first.span.line}")
            names = [s.name, *(d for d in s.dims if isinstance(d, Name)), s.of, s.by]
        elif isinstance(s, Assignment):
            names = [s.name]
        elif _is_observation(s) or ("data" in self.roles and self.roles["data"].name.name == s.name.name):
            return
        elif s.index is not None:  # a component prior: its name is checked against others by the builder
            self._one("component", s)
            return
        else:
            if s.dist.func in PARTITION_PRIORS:
                self._one("partition", s)
            names = [s.name]
        for name in names:
            if not isinstance(name, Name) or name.name in BUILTINS:
                continue
            if name.name in self.lines:
                raise name.error(f"'{name.name}' is already defined at line {self.lines[name.name]}")
            self.lines[name.name] = name.span.line

    def _one(self, role: str, s: Sampling):
        """A model's one partition or component prior: the same name defined again raises."""
        first = self.roles.setdefault(role, s)
        if first is not s and first.name.name == s.name.name:
            raise s.name.error(f"a model has one {role} prior; '{first.name.name}' is already defined at "
                               f"line {first.name.span.line}")


# ---------------------------------------------------------------------------- building


@dataclasses.dataclass(frozen=True)
class _Definition:
    """A name in scope: its `kind` (data, dimension, constant, random, partition,
    component), where it was defined and its value (the expression of a constant, the
    prior of a random concentration, the name a dimension aliases)."""

    kind: str
    span: Span
    value: Any = None


_KINDS = {"data": "the data", "dimension": "a data dimension", "constant": "a constant",
          "random": "a random variable", "partition": "the partition",
          "component": "the component parameter", "time": "the data's time"}


class _ModelBuilder:
    """Checks the statements of one model file and builds its [`Model`][dpppl.dsl.parser.Model]."""

    def __init__(self, source: Source, statements: list, allowed: tuple[str, ...] = ()):
        self.source = source
        self.allowed = allowed  # directories outside the model's tree that file() may read (allow_paths)
        self.statements = statements
        self.scope: dict[str, _Definition] = {}
        # where each name is first defined anywhere in the file, for "used before" errors
        self.first_definition: dict[str, int] = {}
        self.random_lines: dict[str, int] = {}  # where each name first defined by `NAME ~ ...` is
        for s in reversed(statements):
            self.first_definition[s.name.name] = s.name.span.line
            if isinstance(s, Sampling) and s.index is None:
                self.random_lines[s.name.name] = s.name.span.line
        self.data: Optional[DataDecl] = None
        self.prior = None
        self.partition: Optional[Sampling] = None
        self.component: Optional[Sampling] = None
        self.component_args: dict[str, Any] = {}
        self.observation: Optional[Sampling] = None
        self.observation_args: dict[str, Any] = {}
        # where each hyperparameter is written, by (prior or family name, argument): Model.spans
        self.spans: dict[tuple[str, str], Span] = {}
        self.gamma_spans: dict[str, dict[tuple[str, str], Span]] = {}  # by the random concentration's name
        self.hyperpriors: dict[str, Hyperprior] = {}  # the random hyperparameters the component uses, by name
        self.concentrations: dict[str, Name] = {}  # the random names used as a concentration, where
        self.discount: Optional[Name] = None  # the random variable used as the Pitman-Yor discount, where

    # ----- the whole model ------------------------------------------------------------
    def build(self) -> Model:
        data_statements = [s for s in self.statements if isinstance(s, DataStatement)]
        if not data_statements:
            raise self.source.end().error(
                "missing data declaration: expected a line such as 'data x : real[N, D]'")
        first = data_statements[0]
        if len(data_statements) > 1:
            raise data_statements[1].span.error(
                f"a model has one data declaration; '{first.name.name}' is already declared "
                f"at line {first.span.line}")
        self.data = self._data(first)
        for s in self.statements:
            if isinstance(s, Assignment):
                self._define(s.name, "constant", self._constant(s.value))
            elif isinstance(s, Sampling) and s.name.name == self.data.name:
                self._observation(s)
            elif isinstance(s, Sampling) and _is_observation(s):
                raise s.name.error(f"'{s.name.name}[{s.index.name}]' is observed here, but the data are named "
                                   f"'{self.data.name}' (line {self.data.line}); the observation line is "
                                   f"'{self.data.name}[{s.index.name}] ~ {s.dist.func}(...)'")
            elif isinstance(s, Sampling) and s.index is not None:
                self._component(s)
            elif isinstance(s, Sampling):
                self._random(s)
        self._check_complete()
        rule = COMPONENTS[self.component.dist.func]
        family = rule.family_class()(**self.component_args, **self.observation_args)
        self._check_time(first, family)
        model_class = DDPModel if isinstance(self.prior, DDP) else Model
        extra = {"hyperpriors": self.hyperpriors} if self.hyperpriors else {}
        return model_class(prior=self.prior, component=family, data=self.data, source=self.source.text,
                           spans=self.spans, **extra)

    def _check_time(self, data: DataStatement, family):
        """Time-indexed data ('by t'), a DDP prior and CoupledGaussian components go together."""
        ddp = isinstance(self.prior, DDP)
        if data.by is not None and not ddp:
            raise data.by.error(f"time-indexed data ('by {data.by.name}') need a dependent DP: "
                                f"'{self.partition.name.name} ~ DDP(a, b)' with CoupledGaussian components")
        if ddp and data.by is None:
            raise self.partition.dist.error(f"a DDP needs time-indexed data: declare "
                                            f"'data {self.data.name} : real[N, D] by t'")
        coupled = isinstance(family, CoupledGaussian)
        if ddp != coupled:
            raise self.component.dist.error(
                "CoupledGaussian components need a DDP partition prior" if coupled else
                f"a DDP needs CoupledGaussian components (means coupled over time), e.g. "
                f"'{self.component.name.name}[k] ~ CoupledGaussian(a = 1, beta = 0.005, delta = 1)'")

    def _check_complete(self):
        """Raise for a missing partition prior, component prior or observation line."""
        end = self.source.end()
        if self.partition is None:
            raise end.error("missing partition prior: expected a line such as 'z ~ CRP(alpha)'")
        if self.component is None:
            fitting = self._fitting_components()
            raise end.error(f"missing component prior: expected a line such as "
                            f"'theta[k] ~ {fitting[0]}()' (for {self.data.kind} data: "
                            f"{', '.join(fitting)})")
        if self.observation is None:
            obs = COMPONENTS[self.component.dist.func].observation
            raise end.error(f"missing observation: expected a line such as "
                            f"'{self.data.name}[i] ~ {obs}({self.component.name.name}"
                            f"[{self.partition.name.name}[i]])'")

    def _fitting_components(self) -> list[str]:
        """The component priors that observe the declared kind of data."""
        return [name for name, rule in COMPONENTS.items()
                if rule.family_class().data_kind == self.data.kind]

    # ----- names ---------------------------------------------------------------------
    def _define(self, name: Name, kind: str, value: Any = None):
        """Bring `name` into scope; a built-in or an already defined name raises."""
        if name.name in BUILTINS:
            raise name.error(f"'{name.name}' is a built-in name ({BUILTINS[name.name]}) and "
                             f"cannot be defined")
        if name.name in self.scope:
            raise name.error(f"'{name.name}' is already defined at line "
                             f"{self.scope[name.name].span.line}")
        self.scope[name.name] = _Definition(kind, name.span, value)

    def _lookup(self, name: Name) -> _Definition:
        """The definition of `name`; raises if it is undefined or defined later."""
        if name.name in self.scope:
            return self.scope[name.name]
        if name.name in self.first_definition:
            raise name.error(f"'{name.name}' is used before it is defined (line "
                             f"{self.first_definition[name.name]})")
        hint = suggest(name.name, [*self.scope, *BUILTINS])
        if name.name == "x" and self.data is not None:
            hint = f" (the data are called '{self.data.name}')"
        raise name.error(f"undefined name '{name.name}'{hint}")

    def _expression(self, expr: Expr, what: Optional[str] = None, random_ok: bool = False) -> Expr:
        """Check a hyperparameter expression and rewrite it for evaluation against
        `x`: the data name becomes `x`, dimension names `N` / `D`, constants
        their expressions. With `what` (e.g. `"alpha"`) it must be a fixed number:
        it may not use the data. With `random_ok` (a component hyperparameter) it may use
        random variables, which stay names."""
        for node in expr.walk():
            if isinstance(node, Index):
                raise node.error(f"'{node}' has no value here: indexing is only used in the "
                                 f"observation line, e.g. {self.data.name}[i] ~ "
                                 f"Normal(theta[z[i]])")
        expr.check()
        mapping = {}
        for node in expr.walk():
            if not isinstance(node, Name):
                continue
            if node.name in BUILTINS and what is None:
                continue
            d = None if node.name in BUILTINS else self._lookup(node)
            if d is not None and d.kind == "constant":
                mapping[node.name] = d.value
            elif what is not None:
                raise node.error(f"{what} must be a fixed number, but '{node.name}' is "
                                 f"{_KINDS[d.kind] if d else BUILTINS[node.name]}")
            elif d.kind == "data":
                mapping[node.name] = Name("x")
            elif d.kind == "dimension":
                mapping[node.name] = Name(d.value)
            elif d.kind == "random" and random_ok:
                continue
            else:
                raise node.error(f"'{node.name}' is {_KINDS[d.kind]}; a hyperparameter may use "
                                 f"numbers, constants, the data '{self.data.name}' and N, D, V")
        rewritten = expr.substitute({k: v for k, v in mapping.items() if v != Name(k)})
        if what is not None and rewritten.names():  # through a constant
            raise expr.error(f"{what} must be a fixed number, but '{expr}' depends on the data")
        return rewritten

    def _constant(self, expr: Expr) -> Expr:
        """The rewritten expression of `NAME = expr`, evaluated now when it does not
        use the data so that its errors show even if the name is never used."""
        expr = self._expression(expr)
        if not expr.names():
            expr.evaluate({})
        return expr

    def _number(self, expr: Expr, what: str) -> float:
        """A fixed number (a constant expression): a discount, a concentration, a Gamma
        shape or rate."""
        value = self._expression(expr, what).evaluate({})
        if value.ndim:
            raise expr.error(f"{what} must be a number, got shape {value.shape}")
        return float(value)

    def _hyperparameter(self, expr: Expr, field: str, family: type) -> Any:
        """The component hyperparameter `field` of `family`: a float when constant and scalar, otherwise an
        expression evaluated when data are bound (constant ones are evaluated now, so
        their errors show at once), or an expression of random hyperparameters (`_random_hyperparameter`)."""
        written = expr
        expr = self._expression(expr, random_ok=True)
        random = {name for name in expr.names() if name in self.scope and self.scope[name].kind == "random"}
        if random:
            return self._random_hyperparameter(written, expr, random, field, family)
        if expr.names():
            return expr
        value = expr.evaluate({})
        return float(value) if value.ndim == 0 else expr

    def _random_hyperparameter(self, written: Expr, expr: Expr, random: set, field: str, family: type) -> Expr:
        """`field = expr` of `family` where `expr` uses the random variables `random`: checked that the
        field may be random (`Family.random_supports`), that `expr` uses no data and no function
        the move cannot trace (`check_traced`), and that its values fit the field's support (a
        positive field needs an expression positive on every value of its priors: a product, sum or
        quotient of positive terms, a power of one, `sqrt` or `exp`). Records the priors used."""
        supports = family.random_supports
        first = next(node for node in written.walk() if isinstance(node, Name) and node.name in random)
        if field not in supports:
            may = ", ".join(supports) if supports else "none"
            raise first.error(f"{field} of {family.name} cannot be random ('{first.name}' is a random variable); "
                              f"the hyperparameters of {family.name} that may be random are: {may}")
        other = sorted(expr.names() - random - {"D", "V"})
        if other:
            raise first.error(f"'{written}' uses the random variable '{first.name}' and "
                              f"{'the data' if other[0] == 'x' else repr(other[0])}: an expression of a random "
                              f"hyperparameter may use numbers, constants, other random variables and D")
        check_traced(expr, frozenset(random))
        for name in sorted(random):
            if self.discount is not None and name == self.discount.name:
                raise first.error(f"'{name}' is the discount (line {self.discount.span.line}); a random variable is "
                                  f"either the discount or a hyperparameter, not both")
            if name in self.concentrations:
                raise first.error(f"'{name}' is the concentration (line {self.concentrations[name].span.line}); "
                                  f"a random variable is either the concentration or a hyperparameter, not both")
            if name in RESERVED:
                raise first.error(f"a random hyperparameter is recorded in the posterior under its name, and "
                                  f"'{name}' is taken there; rename it")
            value = self.scope[name].value
            self.hyperpriors[name] = (Hyperprior("Gamma", (value.shape, value.rate)) if isinstance(value, Gamma)
                                      else value)
        if supports[field] == "positive" and not self._positive(written):
            bad = next((node for node in written.walk() if isinstance(node, Name) and node.name in random
                        and self.hyperpriors[node.name].interval[0] < 0), None)
            if bad is None:
                raise _start(written).error(
                    f"{field} of {family.name} must be positive, but '{written}' is not positive for every value of "
                    f"{', '.join(sorted(random))} (products, quotients, sums and powers of positive terms are)")
            prior = self.hyperpriors[bad.name]
            raise bad.error(f"{field} of {family.name} must be positive, but '{written}' may not be: '{bad.name}' "
                            f"has a {prior.distribution} prior, whose support is {SUPPORTS[prior.support]}; give it "
                            f"a prior on the positive reals (Gamma, InverseGamma, HalfNormal, LogNormal, Exponential)")
        return expr

    def _positive(self, expr: Expr) -> bool:
        """Whether `expr` (as written) is positive for every value of the random variables' priors: a
        random variable whose prior lies on the positive reals, a part without random variables whose
        value is positive (a positive definite matrix; `eye(n)`, `ones(n)`), and sums, products,
        quotients and powers of such parts, `sqrt` of one and `exp` of anything."""
        if not any(isinstance(node, Name) and node.name in self.hyperpriors for node in expr.walk()):
            if isinstance(expr, Call) and expr.func in ("eye", "ones"):
                return True
            try:
                value = self._expression(expr).evaluate({})
            except (ModelError, DataError):  # uses the data or D: not known to be positive here
                return False
            return bool(np.all(np.linalg.eigvalsh(value) > 0) if value.ndim == 2 else np.all(value > 0))
        if isinstance(expr, Name):
            return self.hyperpriors[expr.name].interval[0] >= 0
        if isinstance(expr, BinOp):
            if expr.op == "^":
                return self._positive(expr.left)
            return expr.op in "+*/" and self._positive(expr.left) and self._positive(expr.right)
        if isinstance(expr, Call) and expr.func in TRACED_FUNCTIONS:
            return expr.func == "exp" or self._positive(expr.args[0])
        return False

    # ----- statements ----------------------------------------------------------------
    def _data(self, s: DataStatement) -> DataDecl:
        """`data x : real[N, D]`: check the kind and dimensions, define the names."""
        kind = s.kind.name
        if kind not in DATA_KINDS:
            raise s.kind.error(f"unknown data kind '{kind}'{suggest(kind, DATA_KINDS)}; expected "
                               f"one of {', '.join(DATA_KINDS)}")
        of = None
        if s.of is not None and kind != "ranking":
            raise s.of.error(f"{kind} data take no 'of' clause")
        if s.of is not None:  # ranking[N] of 20, or of n (a name bound to the number of items)
            if isinstance(s.of, Number):
                if s.of.value < 2 or not s.of.value.is_integer():
                    raise s.of.error(f"the number of items must be an integer >= 2, got {s.of}")
                of = int(s.of.value)
            elif isinstance(s.of, Name):
                self._define(s.of, "dimension", "n")
            else:
                raise s.of.error("'of' takes the number of items: a positive integer or a name")
        if kind == "ranking" and len(s.dims) != 1:
            raise s.dims[-1].error("ranking data have one dimension: ranking[N] of n")
        if len(s.dims) > 2:
            raise s.dims[2].error(f"{kind} data have one or two dimensions: {kind}[N] or "
                                  f"{kind}[N, D]")
        self._define(s.name, "data")
        dims = []
        for axis, dim in enumerate(s.dims):
            alias = ("N", "D")[axis]
            if isinstance(dim, Number):
                if dim.value < 1 or not dim.value.is_integer():
                    raise dim.error(f"a dimension must be a name or a positive integer, got {dim}")
                dims.append(int(dim.value))
            elif dim.name in BUILTINS and (dim.name == "N") != (axis == 0):
                raise dim.error(f"'{dim.name}' is {BUILTINS[dim.name]}; "
                                f"{'the first' if axis == 0 else 'the second'} dimension counts "
                                f"the {'points' if axis == 0 else 'columns'}")
            else:
                if dim.name not in BUILTINS:
                    self._define(dim, "dimension", alias)
                dims.append(dim.name)
        if s.by is not None:
            self._define(s.by, "time")
        return DataDecl(s.name.name, kind, tuple(dims), s.span.line, s.span.column,
                        by=s.by.name if s.by is not None else None, of=of,
                        source=None if s.source is None else self._source(s))

    def _source(self, s: DataStatement) -> DataSource:
        """`= dataset("name", option = number, ...)` or `= file("path")`: checked, not read
        (a file's path is resolved against the model file's directory)."""
        clause = s.source
        func = clause.func.name
        if func not in SOURCES:
            raise clause.func.error(f"unknown data source '{func}'{suggest(func, SOURCES)}; expected "
                                    + " or ".join(SOURCES.values()))
        if not clause.target.strip():
            raise clause.target_span.error(f"{func}() needs a {'data set name' if func == 'dataset' else 'file name'}")
        line = self.source.text.splitlines()[s.span.line - 1].split("#")[0].strip()
        where = f"{self.source.name}:{s.span.line}"
        if func == "file":
            if clause.options:
                raise clause.options[0].span.error("file() takes no options: it reads the whole file")
            suffixes = (".csv", ".tsv", ".txt", ".npy", ".npz")
            if Path(clause.target).suffix.lower() not in suffixes:
                raise clause.target_span.error(f"file '{clause.target}' has no data file extension; expected "
                                               f"one of {', '.join(suffixes)}")
            base = os.path.abspath(os.path.dirname(self.source.name) if self.source.name != "<string>" else "")
            absolute = os.path.isabs(clause.target)
            return DataSource("file", os.path.abspath(os.path.join(base, clause.target)), (), where, line,
                              root=None if absolute else base, allowed=self.allowed)
        names = available_datasets()
        if clause.target.lower() not in names:
            hint = suggest(clause.target.lower(), names)
            raise clause.target_span.error(f"unknown data set '{clause.target}'{hint}; the data sets are "
                                           f"{', '.join(names)} (or name a file: file(\"points.csv\"))")
        allowed = option_names(clause.target)
        options = []
        for kw in clause.options:
            if kw.name not in allowed:
                takes = f"its options are {', '.join(allowed)}" if allowed else "it takes no options"
                raise kw.span.error(f"data set '{clause.target}' has no option '{kw.name}'"
                                    f"{suggest(kw.name, allowed)}; {takes}")
            if kw.name in dict(options):
                raise kw.span.error(f"option '{kw.name}' of {func}() is given twice")
            for node in kw.value.walk():
                if isinstance(node, Name) and node.name in self.random_lines:
                    raise node.error(f"'{node.name}' is a random variable (line {self.random_lines[node.name]}); the "
                                     f"data statement takes fixed numbers only")
            value = self._number(kw.value, f"option '{kw.name}'")
            options.append((kw.name, int(value) if value.is_integer() else value))
        return DataSource("dataset", clause.target.lower(), tuple(options), where, line)

    def _random(self, s: Sampling):
        """`z ~ CRP(...)`, `z ~ PitmanYor(...)` or `alpha ~ Gamma(...)`."""
        func = s.dist.func
        if func in PARTITION_PRIORS:
            if self.partition is not None:
                raise s.name.error(f"a model has one partition prior; '{self.partition.name.name}'"
                                   f" is already defined at line {self.partition.name.span.line}")
            rule = PARTITION_PRIORS[func]
            args = self._bind(s.dist, rule.params or _init_fields(rule.prior))
            values = {p: (self._concentration(e) if p in rule.random else
                          self._stick_parameter(e, p) if p in rule.indexed else
                          self._discount(e, func) if p == "discount" else self._number(e, p))
                      for p, e in args.items()}
            self.prior = _construct(s.dist, rule.prior, values, args)
            self.spans.update(self._spans(self.prior.name, args))
            for p in rule.random:
                if isinstance(args.get(p), Name):
                    self.spans.update(self.gamma_spans.get(args[p].name, {}))
            self.partition = s
            self._define(s.name, "partition")
        elif func in CONCENTRATION_PRIORS:
            cls = CONCENTRATION_PRIORS[func]
            args = self._bind(s.dist, _init_fields(cls))
            prior = _construct(s.dist, cls, {p: self._number(e, p) for p, e in args.items()}, args)
            self._define(s.name, "random", prior)
            self.gamma_spans[s.name.name] = self._spans(func, args)
        elif func in HYPERPRIORS:
            params = HYPERPRIORS[func].params
            args = self._bind(s.dist, params)
            missing = [p for p in params if p not in args]
            if missing:
                raise s.dist.error(f"{func}({', '.join(params)}) needs {', '.join(missing)}")
            values = {p: self._number(e, p) for p, e in args.items()}
            prior = _construct(s.dist, Hyperprior, {"distribution": func,
                                                    "params": tuple(values[p] for p in params)}, args)
            self._define(s.name, "random", prior)
        elif func in MATRIX_HYPERPRIORS:
            raise s.dist.error(f"{func} priors on a vector or a matrix hyperparameter are not supported; "
                               f"{MATRIX_HYPERPRIORS[func]}")
        else:
            raise _unknown(s.dist, "partition prior, concentration prior or hyperprior",
                           [*PARTITION_PRIORS, *CONCENTRATION_PRIORS,
                            *(name for name in HYPERPRIORS if name not in CONCENTRATION_PRIORS)])

    def _stick_parameter(self, expr: Expr, what: str):
        """A stick parameter of `StickBreaking(a, b)` / `PseudoParticles(gamma)`: an
        expression of the stick index `i` (1, 2, ...), numbers and constants; a number
        or a vector literal (a finite sequence of sticks) when it does not use `i`."""
        if "i" in self.scope:
            raise expr.error(f"'i' is the stick index in {what}, but it is defined as a name at "
                             f"line {self.scope['i'].span.line}; rename that name")
        for node in expr.walk():
            if isinstance(node, Index):
                raise node.error(f"'{node}' has no value here: {what} is an expression of the "
                                 f"stick index i, e.g. theta + i * d")
        expr.check()
        mapping = {}
        for node in expr.walk():
            if not isinstance(node, Name) or node.name == "i":
                continue
            d = None if node.name in BUILTINS else self._lookup(node)
            if d is None or d.kind != "constant" or d.value.names():
                what_it_is = (BUILTINS[node.name] if d is None else
                              "a constant that depends on the data" if d.kind == "constant" else _KINDS[d.kind])
                raise node.error(f"{what} may use the stick index i, numbers and fixed constants, but "
                                 f"'{node.name}' is {what_it_is}")
            mapping[node.name] = d.value
        expr = expr.substitute(mapping)
        if expr.names():
            return expr
        value = expr.evaluate({})
        return float(value) if value.ndim == 0 else tuple(float(v) for v in np.ravel(value))

    def _concentration(self, expr: Expr):
        """A concentration: a fixed number, or the name of a Gamma-distributed variable."""
        if isinstance(expr, Name) and expr.name not in BUILTINS:
            d = self._lookup(expr)
            if d.kind == "random" and not isinstance(d.value, Gamma):
                raise expr.error(f"the concentration's prior must be Gamma(shape, rate); '{expr.name}' has a "
                                 f"{d.value.distribution} prior")
            if d.kind == "random":
                if expr.name in self.hyperpriors:
                    raise expr.error(f"'{expr.name}' is a hyperparameter of the components; a random variable is "
                                     f"either the concentration or a hyperparameter, not both")
                self.concentrations[expr.name] = expr
                return d.value
        return self._number(expr, "the concentration")

    def _discount(self, expr: Expr, func: str):
        """A Pitman-Yor discount: a fixed number, or the name of a random variable whose prior lies in
        [0, 1) (a Beta, or a Uniform(low, high) with 0 <= low < high <= 1), recorded as a random
        hyperparameter and returned as its name (`PitmanYor.random_discount`)."""
        if not (isinstance(expr, Name) and expr.name not in BUILTINS and self._lookup(expr).kind == "random"):
            return self._number(expr, "discount")
        prior = self._lookup(expr).value
        if isinstance(prior, Gamma):
            prior = Hyperprior("Gamma", (prior.shape, prior.rate))
        low, high = prior.interval
        if low < 0 or high > 1:
            support = f"({low:g}, {high:g})" if prior.support == "interval" else SUPPORTS[prior.support]
            raise expr.error(f"the discount of {func} must be in [0, 1), but '{expr.name}' may not be: it has a "
                             f"{prior.distribution} prior, whose support is {support}; give it a Beta prior, or "
                             f"Uniform(low, high) with 0 <= low < high <= 1")
        if expr.name in self.hyperpriors:
            raise expr.error(f"'{expr.name}' is a hyperparameter of the components; a random variable is either the "
                             f"discount or a hyperparameter, not both")
        if expr.name in RESERVED:
            raise expr.error(f"a random discount is recorded in the posterior under its name, and '{expr.name}' is "
                             f"taken there; rename it")
        self.hyperpriors[expr.name] = prior
        self.discount = expr
        return expr.name

    def _component(self, s: Sampling):
        """`theta[k] ~ PRIOR(...)`."""
        func = s.dist.func
        if func not in COMPONENTS:
            raise _unknown(s.dist, "component prior", COMPONENTS)
        if self.component is not None:
            raise s.name.error(f"a model has one component prior; '{self.component.name.name}' "
                               f"is already defined at line {self.component.name.span.line}")
        rule = COMPONENTS[func]
        kind = rule.family_class().data_kind
        if kind != self.data.kind:
            raise s.dist.error(
                f"{func} components observe {kind} data, but '{self.data.name}' is declared "
                f"{self.data.kind} (line {self.data.line}); for {self.data.kind} data use "
                f"{' or '.join(self._fitting_components())}")
        args = self._bind(s.dist, rule.prior_params())
        self.component_args = {p: self._hyperparameter(e, p, rule.family_class()) for p, e in args.items()}
        self.spans.update(self._spans(rule.family_class().name, args))
        self.component = s
        self._define(s.name, "component")

    def _observation(self, s: Sampling):
        """`x[i] ~ OBSERVATION(theta[z[i]], ...)`."""
        x, func = s.name.name, s.dist.func
        if s.index is None:
            raise s.name.error(f"the observation of '{x}' needs an index: {x}[i] ~ ...")
        if self.observation is not None:
            raise s.name.error(f"'{x}' is already observed at line "
                               f"{self.observation.name.span.line}")
        if func not in OBSERVATIONS:
            raise _unknown(s.dist, "observation", sorted(OBSERVATIONS))
        if not s.dist.args:
            raise s.dist.error(f"{func} needs the parameter of point {s.index.name}'s cluster as "
                               f"its first argument, e.g. {func}(theta[z[{s.index.name}]])")
        self._reference(s.dist.args[0], s.index)
        theta = self.component.name.name
        rule = COMPONENTS[self.component.dist.func]
        if rule.observation != func:
            raise s.dist.error(
                f"{func} observations do not fit the {self.component.dist.func} prior of "
                f"'{theta}'; expected {x}[{s.index.name}] ~ {rule.observation}({s.dist.args[0]})")
        args = self._bind(s.dist, rule.observation_params, leading=(str(s.dist.args[0]),))
        self.observation_args = {p: self._hyperparameter(e, p, rule.family_class()) for p, e in args.items()}
        self.spans.update(self._spans(rule.family_class().name, args))
        self.observation = s

    def _reference(self, ref: Expr, index: Name):
        """Check `theta[z[i]]`: the component parameter, indexed by the partition at
        the observation's own index."""
        i = index.name
        theta = self.component.name.name if self.component else "theta"
        z = self.partition.name.name if self.partition else "z"
        expected = f"{theta}[{z}[{i}]] (the parameter of point {i}'s cluster)"
        if not (isinstance(ref, Index) and isinstance(ref.base, Name)
                and isinstance(ref.index, Index) and isinstance(ref.index.base, Name)
                and isinstance(ref.index.index, Name)):
            raise ref.error(f"expected {expected}, got '{ref}'")
        for name, kind, defined, example in (
                (ref.base, "component", self.component, "theta[k] ~ NormalInverseWishart()"),
                (ref.index.base, "partition", self.partition, "z ~ CRP(alpha)")):
            if defined is None and name.name not in self.first_definition:
                raise name.error(f"undefined name '{name.name}': no {kind} prior is defined "
                                 f"before this line (a line such as '{example}')")
            d = self._lookup(name)
            if d.kind != kind:
                raise name.error(f"'{name.name}' is {_KINDS[d.kind]}, not {_KINDS[kind]}; "
                                 f"expected {expected}")
        j = ref.index.index
        if j.name != i:
            raise j.error(f"index '{j.name}' does not match the observation's index '{i}'; "
                          f"expected {expected}")

    def _spans(self, owner: str, args: dict[str, Expr]) -> dict[tuple[str, str], Span]:
        """Where the value of each argument of a prior or family `owner` is written, by
        `(owner, argument)`: the start of the argument, or of a constant's definition when the
        argument is its name."""
        spans = {}
        for name, expr in args.items():
            d = self.scope.get(expr.name) if isinstance(expr, Name) else None
            spans[(owner, name)] = _start(d.value if d is not None and d.kind == "constant" else expr)
        return spans

    @staticmethod
    def _bind(call: Call, params, leading=()) -> dict[str, Expr]:
        """Match the arguments of `call` to `params` (after `leading` positional
        ones, already handled): too many positional, unknown or repeated keywords raise."""
        signature = f"{call.func}({', '.join([*leading, *params])})"
        positional = call.args[len(leading):]
        if len(positional) > len(params):
            raise positional[len(params)].error(
                f"too many positional arguments: {signature} takes "
                f"{len(leading) + len(params)}")
        bound = dict(zip(params, positional))
        for kw in call.keywords:
            if kw.name not in params:
                raise kw.span.error(f"{signature} has no argument '{kw.name}'"
                                    f"{suggest(kw.name, params)}")
            if kw.name in bound:
                raise kw.span.error(f"argument '{kw.name}' of {call.func} is given twice")
            bound[kw.name] = kw.value
        return bound


def _is_observation(s: Sampling) -> bool:
    """Whether `s` reads as an observation line, `y[i] ~ Normal(theta[z[i]])`: an indexed name and a
    first argument indexed by an index (component priors take none)."""
    ref = s.dist.args[0] if s.dist.args else None
    return s.index is not None and isinstance(ref, Index) and isinstance(ref.index, Index)


def _init_fields(cls: type) -> tuple[str, ...]:
    """The constructor arguments of a dataclass, in order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _construct(call: Call, cls: type, values: dict, args: dict[str, Expr]):
    """`cls(**values)`, with the validation errors of `cls` placed at `call`, or at the
    argument a [`HyperparameterError`][dpppl.errors.HyperparameterError] names."""
    try:
        return cls(**values)
    except HyperparameterError as exc:
        span = (_start(args[exc.name]) if exc.name in args else None) or call.span
        raise exc.at(span.source.name, span.line, span.column, span.source.text) from None
    except ModelError as exc:
        raise call.error(exc.bare_message) from None


def _start(expr: Expr) -> Span:
    """Where `expr` begins (a binary operation's own position is its operator's)."""
    while isinstance(expr, BinOp):
        expr = expr.left
    return expr.span


def _unknown(call: Call, role: str, names) -> ModelError:
    """The error for a distribution that is not a `role`: a hint when it is a
    distribution of another role, else a close-match suggestion."""
    for other, table, example in _ROLES:
        if call.func in table:
            return call.error(f"{call.func} is {_article(other)} {other} (as in '{example}'), "
                              f"not {_article(role)} {role}")
    return call.error(f"unknown {role} '{call.func}'{suggest(call.func, names)}; expected one "
                      f"of {', '.join(names)}")


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def parse(text: str, source: str = "<string>", allow_paths=None) -> Model:
    """Parse a model in the dpppl model language.

    Parameters
    ----------
    text : str or bytes
        The model. Bytes are decoded as UTF-8; line endings `\\r\\n` and `\\r` are read as `\\n`.
    source : str, default "<string>"
        A name for the text in error messages (a file name); a `file()` data source is read
        relative to its directory (to the working directory for `"<string>"`) and only inside
        that directory tree (`dpppl.dsl.data`).
    allow_paths : path or sequence of paths, optional
        Directories outside that tree (or named by an absolute path) that `file()` may read.
        [`ArgumentError`][dpppl.errors.ArgumentError] for one that is not an existing directory.

    Returns
    -------
    Model
        With `source` the text (its line endings made `\\n`). Raises
        [`ModelError`][dpppl.errors.ModelError] naming the line, column and what was expected,
        or for text that is neither a str nor UTF-8 bytes.
    """
    text = _model_text(text, source)
    src = Source(source, text)
    allowed = allowed_directories(allow_paths)
    with _collection_paused():
        return _ModelBuilder(src, _statements(src), allowed).build()


@contextlib.contextmanager
def _collection_paused():
    """Python's cyclic garbage collector off (as it was, after): parsing makes many small objects
    and keeps the statements, and the collections they trigger walk everything kept so far, which
    made parsing time grow with the square of the file's length."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def allowed_directories(allow_paths) -> tuple[str, ...]:
    """`allow_paths` (None, a path or a sequence of paths) as absolute directory paths;
    ArgumentError for anything else or a path that is not an existing directory."""
    if allow_paths is None:
        return ()
    paths = [allow_paths] if isinstance(allow_paths, (str, os.PathLike)) else allow_paths
    try:
        paths = list(paths)
    except TypeError:
        raise ArgumentError(f"allow_paths must be a directory or a list of directories, got "
                            f"{type(allow_paths).__name__}") from None
    out = []
    for path in paths:
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentError(f"allow_paths must hold directory paths, got {type(path).__name__} {path!r}")
        if not os.path.isdir(path):
            raise ArgumentError(f"allow_paths: {os.fspath(path)} is not an existing directory")
        out.append(os.path.abspath(path))
    return tuple(out)


def _model_text(text, source: str) -> str:
    """The model text as a str with `\\n` line endings; ModelError for anything but a str or UTF-8 bytes."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ModelError(f"{source}: the model is not UTF-8 text ({e.reason} at byte {e.start})",
                             source=source) from None
    if not isinstance(text, str):
        raise ModelError(f"the model text must be a str (or UTF-8 bytes), got {type(text).__name__}",
                         source=source)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def load(path: str | os.PathLike, data=None, allow_paths=None):
    """Read and parse a model file (see [`parse`][dpppl.dsl.parser.parse]); the model's `path` is `path`.

    Data the file names with `file("...")` are read only inside the model file's directory tree,
    or inside a directory of `allow_paths` (a path or a list of paths: the directories you allow,
    `dpppl.dsl.data`).

    With `data` (an array, or a data set name or file as `dpppl.sample` takes them), the model
    bound to them (`model.bind(x)`, a [`BoundModel`][dpppl.BoundModel]), which every entry point
    taking `(model, data)` accepts alone: `dpppl.sample(dpppl.load(path, data=x))`. A model
    file may also name its own data (`data x : real[N] = dataset("galaxies")`), used when none
    are given ([`bind_data`][dpppl.dsl.parser.bind_data]).

    A missing file, a directory or a file that is not UTF-8 text raises
    [`ModelError`][dpppl.errors.ModelError] naming the file."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ModelError(f"{path}: is a directory, not a model file", source=path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ModelError(f"{path}: no such model file", source=path) from None
    except OSError as e:
        raise ModelError(f"{path}: cannot read the model file: {e.strerror or e}", source=path) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ModelError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); save the model file as "
                         "UTF-8", source=path) from None
    model = dataclasses.replace(parse(text, source=path, allow_paths=allow_paths), path=path)
    return model if data is None else bind_data(model, data)[1]


def as_model(model) -> Model:
    """A model from a model (its data are dropped from a bound one: data are passed
    separately), model-file text or a model-file path."""
    if isinstance(model, Model):
        return model
    if isinstance(model, (BoundModel, DDPBound)):
        return model.model
    if isinstance(model, (str, os.PathLike)):
        text = str(model)
        return parse(text) if "\n" in text or "\r" in text else load(text)
    raise TypeError(f"model must be a dpppl Model or a model-file path, got {type(model).__name__}")


def bind_data(model, data=None) -> tuple[Any, Any]:
    """Bind a model to its data; return `(data, target)`: the data as read (what a checkpoint
    saves) and the bound model.

    Parameters
    ----------
    model : Model, BoundModel, DDPBound or str
        A model (or model-file path), or a model bound to data with `model.bind(x)`.
    data : array-like, str, path-like or None
        The data; explicit data win. A str or path is read as the command line's `--data`
        reads it: a data set name or a CSV/NPY/NPZ file
        ([`read_data`][dpppl.datasets.read_data]; rankings with `read_rankings`). None: the
        data of a bound model, else those the model file names
        (`data x : real[N] = dataset("galaxies")`).

    Raises
    ------
    DataError
        For a model with no data and none given (saying how to give them), and for bad data;
        an error in data a model file names starts with the statement's `file:line`.
    """
    if data is None and isinstance(model, BoundModel):
        return model.observed_x, model
    if data is None and isinstance(model, DDPBound):
        return (model.observed_x, model.t), model
    spec = as_model(model)
    if data is not None:
        if isinstance(data, (str, os.PathLike)):
            data = read_rankings(data) if spec.data.kind == "ranking" else read_data(data)
        return data, spec.bind(data)
    source = spec.data.source
    if source is None:
        raise DataError(missing_data(spec))
    data = source.load(spec.data)
    with source.located():
        return data, spec.bind(data)


def missing_data(model: Model, how: str = "pass them (dpppl.sample(model, x)) or bind them (model.bind(x))") -> str:
    """The message for a model with no data and none given: `how` to give them, or name them
    in the model file."""
    decl = model.data
    where = f"{model.path}:{decl.line}: " if model.path and decl.line else ""
    return (f"{where}no data for '{decl.name}': the model names none and none were given; {how}, or name them in "
            f"the model file: data {decl.name} : ... = file(\"points.csv\") or = dataset(\"galaxies\")")


__all__ = ["allowed_directories", "as_model", "bind_data", "missing_data", "parse", "load", "PARTITION_PRIORS",
           "CONCENTRATION_PRIORS", "HYPERPRIORS",
           "COMPONENTS", "OBSERVATIONS"]
