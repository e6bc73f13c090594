"""Hyperparameter expressions: a small, safe language evaluated against the data.

A hyperparameter of a component family may be an expression of the data instead of a
number, for example `psi0 = cov(x) / 10` or `nu0 = D + 2`. Expressions are parsed by
the `expression` rule of the model grammar (`grammar.lark`, shared with the model
files) into an immutable tree of `Expr` nodes; nothing is ever passed to Python's
`eval`.

Syntax
    numbers (`2`, `0.5`, `1e-3`); `+ - * /`; `^` or `**` (power, right
    associative, binding tighter than unary minus: `-2^2 == -4`); parentheses; vector
    literals `[1, 2, 3]` (nested for matrices: `[[1, 0], [0, 1]]`); names; calls of
    the functions below.

Names (bound by `data_environment`)
    `x` the data, an (N, D) array; `N` the number of points; `D` the number of
    columns; `V` the same as `D` (the vocabulary size of count data).

Functions (each takes one argument)
    `mean`, `var`, `sd`, `min`, `max`, `sum`
        reduce over the first axis (over the points for `x`, giving a (D,) vector; a
        vector gives a scalar). `var` and `sd` use `ddof=1`.
    `cov`
        `np.cov(x, rowvar=False, ddof=1)`, always a (D, D) matrix (also for D = 1).
    `sqrt`, `log`, `exp`
        element-wise.
    `eye(n)`, `ones(n)`, `zeros(n)`
        the n x n identity, a vector of n ones or n zeros; n is a positive integer.
    `diag`
        a vector to a diagonal matrix, a matrix to its diagonal.

Semantics and errors
    Arithmetic is element-wise; the operands must have equal shapes or one must be a
    scalar (no other broadcasting: `cov(x) + mean(x)` is an error). Problems raise
    [`ModelError`][dpppl.errors.ModelError] naming the problem and, for expressions parsed
    from text, the line and column: syntax errors, an unknown name or function (with a
    close-match suggestion), a wrong number of arguments, mismatched shapes, and a result
    that is not finite (`log(0)`, `1 / 0`), and an array past `MAX_ELEMENTS` elements
    (`eye(100000000)`; checked before it is built). The sample statistics `var`, `sd` and
    `cov` of fewer than two points are undefined and raise
    [`DataError`][dpppl.errors.DataError]: the model is fine, the data are too few.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from typing import Any, Callable, Iterator, Mapping, Optional

import lark
import jax.numpy as jnp
import numpy as np
from lark import Transformer, v_args
from lark.exceptions import VisitError

from dpppl.config import float_dtype
from dpppl.core.summaries import RowSummaries
from dpppl.errors import DataError, HyperparameterError, ModelError

# ---------------------------------------------------------------------------- positions


@dataclasses.dataclass(frozen=True)
class Source:
    """The text an expression or model was parsed from, and its name (a file or
    `"<string>"`), for error messages."""

    name: str
    text: str

    def end(self) -> "Span":
        """The position just after the last non-blank character: where errors about
        something missing point."""
        lines = self.text.rstrip().splitlines() or [""]
        return Span(self, len(lines), len(lines[-1]) + 1)


@dataclasses.dataclass(frozen=True)
class Span:
    """A 1-based `line` and `column` in a `Source`: where errors point."""

    source: Source
    line: int
    column: int

    def error(self, message: str, cls: type = ModelError) -> Exception:
        """An exception of class `cls` at this position (a caret excerpt for
        [`ModelError`][dpppl.ModelError]; `file:line:column:` before the message otherwise)."""
        if issubclass(cls, ModelError):
            return cls(message, source=self.source.name, line=self.line, column=self.column,
                       text=self.source.text)
        return cls(f"{self.source.name}:{self.line}:{self.column}: {message}")


def located(span: Optional[Span], message: str, cls: type = ModelError) -> Exception:
    """An exception at `span`, or without a position when `span` is `None`."""
    return cls(message) if span is None else span.error(message, cls)


def suggest(name: str, candidates) -> str:
    """`" (did you mean 'x'?)"` for the closest candidate, or `""`."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


# ---------------------------------------------------------------------------- the tree

_ATOM, _POWER, _UNARY, _PRODUCT, _SUM = 5, 4, 3, 2, 1
_PRECEDENCE = {"+": _SUM, "-": _SUM, "*": _PRODUCT, "/": _PRODUCT, "^": _POWER}
_VERBS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "^": "raise"}


@dataclasses.dataclass(frozen=True, repr=False)
class Expr:
    """A node of an expression tree.

    Nodes compare equal when their structure is equal; `span` (where the node was
    written) and `text` (the exact source text) take no part in comparisons.
    `str(expr)` gives the source text of a parsed expression, or the canonical
    `render` of a built or rewritten one; parsing either gives back an equal tree.
    """

    span: Optional[Span] = dataclasses.field(default=None, compare=False, kw_only=True)
    text: Optional[str] = dataclasses.field(default=None, compare=False, kw_only=True)

    precedence = _ATOM

    def evaluate(self, env: Mapping[str, Any]) -> np.ndarray:
        """The value of the expression with the names bound by `env`."""
        raise NotImplementedError

    def children(self) -> tuple["Expr", ...]:
        """The direct sub-expressions."""
        return ()

    def walk(self) -> Iterator["Expr"]:
        """This node and every node below it, parents first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def names(self) -> frozenset[str]:
        """The free names the expression uses (function names excluded)."""
        return frozenset(node.name for node in self.walk() if isinstance(node, Name))

    def check(self) -> "Expr":
        """Raise [`ModelError`][dpppl.ModelError] for an unknown function or a wrong number of
        arguments anywhere in the tree; return the expression."""
        for node in self.walk():
            if isinstance(node, Call):
                node.function()
        return self

    def substitute(self, mapping: Mapping[str, "Expr"]) -> "Expr":
        """A copy with each name in `mapping` replaced by its expression.

        A replacement without a position takes the position of the name it replaces.
        Rewritten nodes lose their source text, so `str` renders them canonically.
        """
        if not self.names() & mapping.keys():
            return self
        return self._map(lambda child: child.substitute(mapping))

    def _map(self, fn: Callable[["Expr"], "Expr"]) -> "Expr":
        """A copy with `fn` applied to every direct sub-expression, without text
        (a leaf has none and is returned as it is)."""
        return self

    def error(self, message: str, cls: type = ModelError) -> Exception:
        """An exception about this node, positioned when the node came from text."""
        return located(self.span, message, cls)

    def render(self) -> str:
        """The canonical text of the expression (what `str` gives without source)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text if self.text is not None else self.render()

    def __repr__(self) -> str:
        return f"parse_expression({str(self)!r})"

    def _finite(self, value) -> np.ndarray:
        """`value` as a float array; raise if it holds an infinity or a NaN."""
        value = np.asarray(value, dtype=float)
        if not np.all(np.isfinite(value)):
            raise self.error(f"'{self}' is not finite: {value}")
        return value


def _wrap(expr: Expr, min_precedence: int) -> str:
    """The canonical text of a sub-expression, in parentheses below `min_precedence`."""
    text = expr.render()
    return f"({text})" if expr.precedence < min_precedence else text


@dataclasses.dataclass(frozen=True, repr=False)
class Number(Expr):
    """A number literal."""

    value: float

    def evaluate(self, env):
        return np.asarray(self.value, dtype=float)

    def render(self):
        v = float(self.value)
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)

    @property
    def precedence(self):
        return _UNARY if self.value < 0 else _ATOM


@dataclasses.dataclass(frozen=True, repr=False)
class Name(Expr):
    """A name: `x`, `N`, `D`, `V` in hyperparameters; any name in a model."""

    name: str

    def evaluate(self, env):
        if self.name not in env:
            raise self.error(f"unknown name '{self.name}'{suggest(self.name, env)}; the names "
                             f"are {', '.join(sorted(env))}")
        value = env[self.name]
        return value if isinstance(value, RowSummaries) else np.asarray(value, dtype=float)

    def substitute(self, mapping):
        if self.name not in mapping:
            return self
        new = mapping[self.name]
        return new if new.span is not None else dataclasses.replace(new, span=self.span)

    def render(self):
        return self.name


@dataclasses.dataclass(frozen=True, repr=False)
class Vector(Expr):
    """A vector literal `[a, b, ...]`; nested vectors make matrices."""

    items: tuple[Expr, ...]

    def evaluate(self, env):
        values = [item.evaluate(env) for item in self.items]
        shapes = {v.shape for v in values}
        if len(shapes) > 1:
            raise self.error(f"the items of '{self}' have different shapes: "
                             f"{', '.join(str(v.shape) for v in values)}")
        return np.stack(values)

    def children(self):
        return self.items

    def _map(self, fn):
        return dataclasses.replace(self, items=tuple(map(fn, self.items)), text=None)

    def render(self):
        return "[" + ", ".join(item.render() for item in self.items) + "]"


@dataclasses.dataclass(frozen=True)
class Keyword:
    """A keyword argument `name = value` of a `Call`."""

    name: str
    value: Expr
    span: Optional[Span] = dataclasses.field(default=None, compare=False)

    def render(self) -> str:
        """The canonical text `name = value`."""
        return f"{self.name} = {self.value.render()}"


@dataclasses.dataclass(frozen=True)
class Function:
    """A function of the expression language: `nargs` arguments, implementation
    `fn(call, *values)` (`call` is the `Call` node, for errors)."""

    nargs: int
    fn: Callable[..., np.ndarray]


@dataclasses.dataclass(frozen=True, repr=False)
class Call(Expr):
    """A call `f(a, b, key = c)`: a function in an expression, a distribution in a
    model statement (which interprets `args` and `keywords` itself)."""

    func: str
    args: tuple[Expr, ...] = ()
    keywords: tuple[Keyword, ...] = ()

    def function(self) -> Function:
        """The called function of the expression language; raises [`ModelError`][dpppl.ModelError]
        if there is none by that name or the arguments do not fit it."""
        if self.func not in FUNCTIONS:
            raise self.error(f"unknown function '{self.func}'{suggest(self.func, FUNCTIONS)}; "
                             f"the functions are {', '.join(sorted(FUNCTIONS))}")
        f = FUNCTIONS[self.func]
        if self.keywords:
            raise located(self.keywords[0].span, f"{self.func}() takes no keyword arguments")
        if len(self.args) != f.nargs:
            raise self.error(f"{self.func}() takes {f.nargs} argument{'s' * (f.nargs != 1)}, "
                             f"got {len(self.args)}")
        return f

    def evaluate(self, env):
        f = self.function()
        values = [arg.evaluate(env) for arg in self.args]
        with np.errstate(all="ignore"):
            return self._finite(f.fn(self, *values))

    def children(self):
        return self.args + tuple(k.value for k in self.keywords)

    def _map(self, fn):
        keywords = tuple(dataclasses.replace(k, value=fn(k.value)) for k in self.keywords)
        return dataclasses.replace(self, args=tuple(map(fn, self.args)), keywords=keywords,
                                   text=None)

    def render(self):
        args = [a.render() for a in self.args] + [k.render() for k in self.keywords]
        return f"{self.func}({', '.join(args)})"


@dataclasses.dataclass(frozen=True, repr=False)
class BinOp(Expr):
    """`left op right` with `op` one of `+ - * / ^` (`**` is read as `^`)."""

    op: str
    left: Expr
    right: Expr

    @property
    def precedence(self):
        return _PRECEDENCE[self.op]

    def evaluate(self, env):
        a, b = self.left.evaluate(env), self.right.evaluate(env)
        if a.shape != b.shape and a.ndim and b.ndim:
            raise self.error(
                f"cannot {_VERBS[self.op]} shapes {a.shape} and {b.shape} in '{self}': "
                f"the operands must have equal shapes or one must be a scalar")
        if self.op == "/" and np.any(b == 0):
            raise self.error(f"division by zero in '{self}'")
        with np.errstate(all="ignore"):
            value = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
                     "^": np.power}[self.op](a, b)
        return self._finite(value)

    def children(self):
        return (self.left, self.right)

    def _map(self, fn):
        return dataclasses.replace(self, left=fn(self.left), right=fn(self.right), text=None)

    def render(self):
        p = self.precedence
        if self.op == "^":  # right associative; the exponent may be a unary minus
            return f"{_wrap(self.left, _ATOM)} ^ {_wrap(self.right, _UNARY)}"
        return f"{_wrap(self.left, p)} {self.op} {_wrap(self.right, p + 1)}"


@dataclasses.dataclass(frozen=True, repr=False)
class Neg(Expr):
    """Unary minus."""

    operand: Expr

    precedence = _UNARY

    def evaluate(self, env):
        return np.asarray(-self.operand.evaluate(env))

    def children(self):
        return (self.operand,)

    def _map(self, fn):
        return dataclasses.replace(self, operand=fn(self.operand), text=None)

    def render(self):
        return f"-{_wrap(self.operand, _UNARY)}"


@dataclasses.dataclass(frozen=True, repr=False)
class Index(Expr):
    """`base[index]`: only meaningful in a model's observation line
    (`x[i] ~ Normal(theta[z[i]])`); it has no value as a hyperparameter."""

    base: Expr
    index: Expr

    def evaluate(self, env):
        raise self.error(f"'{self}' has no value here: indexing is only used in the "
                         f"observation line, e.g. x[i] ~ Normal(theta[z[i]])")

    def children(self):
        return (self.base, self.index)

    def _map(self, fn):
        return dataclasses.replace(self, base=fn(self.base), index=fn(self.index), text=None)

    def render(self):
        return f"{_wrap(self.base, _ATOM)}[{self.index.render()}]"


# ---------------------------------------------------------------------------- functions


def _reduction(numpy_fn, min_rows: int = 1) -> Function:
    """A reduction over the first axis; a sample statistic needs `min_rows` rows."""

    def fn(call, a):
        if a.ndim == 0:
            raise call.error(f"{call.func}() needs a vector or a matrix, got a scalar")
        if a.shape[0] < min_rows:
            raise call.error(f"{call.func}() needs at least {min_rows} points, got {a.shape[0]}",
                             DataError)
        return numpy_fn(a, axis=0)

    return Function(1, fn)


MAX_ELEMENTS = 10**8
"""The most elements an array built by an expression may have (0.8 GB of float64): far more
than any hyperparameter needs (a D x D matrix for D = 10,000), and checked before the array
is built, so that `eye(100000000)` is a [`ModelError`][dpppl.ModelError] at once rather than
numpy's `MemoryError` or an exhausted machine."""


def _check_built(call, shape: tuple[int, ...]) -> None:
    """Raise a [`ModelError`][dpppl.ModelError] at `call` when the array of `shape` it would
    build has more than `MAX_ELEMENTS` elements."""
    size = 1
    for extent in shape:
        size *= int(extent)
    if size > MAX_ELEMENTS:
        raise call.error(f"'{call}' would build a {' x '.join(map(str, shape))} array ({size:.3g} elements, "
                         f"{size * 8 / 1e9:.3g} GB); an array built in a model has at most {MAX_ELEMENTS:,} "
                         f"elements ({MAX_ELEMENTS * 8 / 1e9:g} GB)")


def _cov(call, a):
    """The (D, D) sample covariance of the rows of `a` (a vector is one column)."""
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise call.error(f"cov() needs a matrix (points x dimensions), got shape {a.shape}")
    if a.shape[0] < 2:
        raise call.error(f"cov() needs at least 2 points, got {a.shape[0]}", DataError)
    _check_built(call, (a.shape[1], a.shape[1]))
    return np.atleast_2d(np.cov(a, rowvar=False, ddof=1))


def _size(call, a, ndim: int) -> int:
    """The argument n of `eye` (`ndim` 2: n x n) or of `ones` and `zeros` (`ndim` 1): a positive
    integer, within `MAX_ELEMENTS`."""
    if a.ndim != 0 or a < 1 or a != np.round(a):
        raise call.error(f"{call.func}() needs a positive integer, got {a}")
    _check_built(call, (int(a),) * ndim)
    return int(a)


def _diag(call, a):
    """`np.diag`: a vector to a diagonal matrix, a matrix to its diagonal."""
    if a.ndim not in (1, 2):
        raise call.error(f"diag() needs a vector or a matrix, got shape {a.shape}")
    if a.ndim == 1:
        _check_built(call, a.shape * 2)
    return np.diag(a)


FUNCTIONS: dict[str, Function] = {
    "mean": _reduction(np.mean),
    "var": _reduction(lambda a, axis: np.var(a, axis=axis, ddof=1), min_rows=2),
    "sd": _reduction(lambda a, axis: np.std(a, axis=axis, ddof=1), min_rows=2),
    "min": _reduction(np.min),
    "max": _reduction(np.max),
    "sum": _reduction(np.sum),
    "cov": Function(1, _cov),
    "sqrt": Function(1, lambda call, a: np.sqrt(a)),
    "log": Function(1, lambda call, a: np.log(a)),
    "exp": Function(1, lambda call, a: np.exp(a)),
    "eye": Function(1, lambda call, a: np.eye(_size(call, a, 2))),
    "ones": Function(1, lambda call, a: np.ones(_size(call, a, 1))),
    "zeros": Function(1, lambda call, a: np.zeros(_size(call, a, 1))),
    "diag": Function(1, _diag),
}
"""The functions of the expression language, by name."""


# ---------------------------------------------------------------------------- parsing


@functools.cache
def grammar() -> lark.Lark:
    """The LALR parser of `grammar.lark` with start symbols `model` and
    `expression`."""
    return lark.Lark.open("grammar.lark", rel_to=__file__, parser="lalr",
                          start=["model", "expression"], propagate_positions=True)


_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "CARET", "POW"}
_WORDS = {"NAME": "a name", "NUMBER": "a number", "STRING": "a quoted string", "_NL": "end of line",
          "$END": "end of input"}
_ORDER = ["NAME", "NUMBER", "STRING", "RPAR", "RSQB", "COMMA", "EQUAL", "TILDE", "COLON", "LPAR", "LSQB",
          "MINUS", "PLUS", "operator", "_NL", "$END"]


def _terminal(name: str) -> str:
    if name in _WORDS:
        return _WORDS[name]
    if name == "operator":
        return "an operator"
    try:
        return f"'{grammar().get_terminal(name).pattern.value}'"
    except KeyError:
        return name


def _expected(names) -> str:
    names = set(names)
    if {"STAR", "SLASH"} <= names:  # after an operand: any binary operator
        names = (names - _OPERATORS) | {"operator"}
    ordered = sorted(names, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    items = [_terminal(n) for n in ordered]
    if len(items) == 1:
        return items[0]
    return ("one of " if len(items) > 2 else "") + ", ".join(items[:-1]) + " or " + items[-1]


def syntax_error(exc: lark.UnexpectedInput, source: Source) -> ModelError:
    """Translate a lark parse error into a [`ModelError`][dpppl.ModelError] that names what was
    found and what was expected, with line, column and a caret excerpt."""
    interactive = getattr(exc, "interactive_parser", None)
    # LALR merges states, so exc.expected may list tokens of other contexts; the
    # interactive parser tells exactly which tokens the parser accepts here
    expected = (interactive.accepts() if interactive is not None
                else getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    token = getattr(exc, "token", None)
    span = Span(source, exc.line, exc.column)
    if isinstance(exc, lark.UnexpectedCharacters):
        found = f"character '{exc.char}'"
    elif token is None or token.type == "$END":
        found, span = "end of input", source.end()
    elif token.type == "_NL":
        found = "end of line"
    else:
        found = f"'{token}'"
    message = f"syntax error: unexpected {found}"
    if expected:
        message += f"; expected {_expected(expected)}"
    return span.error(message)


@v_args(meta=True)
class ExprBuilder(Transformer):
    """Turn a lark parse tree into `Expr` nodes carrying their positions.

    The model parser extends it with the statement rules.
    """

    def __init__(self, source: Source):
        super().__init__(visit_tokens=False)
        self.source = source

    def _span(self, item) -> Span:
        """The position of a token or of a tree's meta."""
        return Span(self.source, item.line, item.column)

    def _text(self, meta) -> str:
        """The source text a tree spans."""
        return self.source.text[meta.start_pos:meta.end_pos]

    def expression(self, meta, children):
        return children[0]

    def number(self, meta, children):
        (tok,) = children
        value = float(tok)
        if not np.isfinite(value):
            raise self._span(tok).error(f"number {tok} is too large")
        return Number(value, span=self._span(tok), text=str(tok))

    def _name(self, tok) -> Name:
        """A `Name` for a NAME token."""
        return Name(str(tok), span=self._span(tok), text=str(tok))

    def name(self, meta, children):
        return self._name(children[0])

    def binary(self, meta, children):
        left, op, right = children
        return BinOp("^" if op == "**" else str(op), left, right, span=self._span(op),
                     text=self._text(meta))

    def neg(self, meta, children):
        op, operand = children
        return Neg(operand, span=self._span(op), text=self._text(meta))

    def pos(self, meta, children):
        return children[1]

    def index(self, meta, children):
        base, index = children
        return Index(base, index, span=self._span(meta), text=self._text(meta))

    def vector(self, meta, children):
        return Vector(tuple(children), span=self._span(meta), text=self._text(meta))

    def keyword(self, meta, children):
        tok, value = children
        return Keyword(str(tok), value, span=self._span(tok))

    def call(self, meta, children):
        tok, *arguments = children
        args, keywords = [], []
        for arg in arguments:
            if isinstance(arg, Keyword):
                keywords.append(arg)
            elif keywords:
                raise arg.error("positional argument after a keyword argument")
            else:
                args.append(arg)
        return Call(str(tok), tuple(args), tuple(keywords), span=self._span(tok),
                    text=self._text(meta))


MAX_NESTING = 200
"""The deepest a parse tree may nest (a statement takes a few levels, and each operator of a
chain such as `1 + 1 + ...` one more): deeper text is refused before Python's recursion limit."""


def check_nesting(tree: lark.Tree, source: Source) -> None:
    """Raise [`ModelError`][dpppl.ModelError] at the first node nested deeper than
    `MAX_NESTING` (walked without recursion, so any depth is measured)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            meta = node.meta
            span = Span(source, meta.line, meta.column) if not meta.empty else source.end()
            raise span.error(f"the text here is nested more than {MAX_NESTING} levels deep (a chain of about "
                             f"{MAX_NESTING} operators); compute the value outside the model and "
                             "pass it as a number or data")
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, lark.Tree))


def parse_rule(text: str, start: str, builder: ExprBuilder):
    """Parse `text` from the grammar rule `start` and transform it with `builder`;
    syntax errors become [`ModelError`][dpppl.ModelError], and errors the builder raises are passed
    on as they are."""
    try:
        tree = grammar().parse(text, start=start)
    except lark.UnexpectedInput as exc:
        raise syntax_error(exc, builder.source) from None
    check_nesting(tree, builder.source)
    try:
        return builder.transform(tree)
    except VisitError as exc:
        raise exc.orig_exc from None


@functools.lru_cache(maxsize=512)
def parse_expression(text: str) -> Expr:
    """Parse a hyperparameter expression such as `"cov(x) / 10"`.

    Unknown functions and wrong numbers of arguments are reported here; names are only
    known when the expression is evaluated. Raises [`ModelError`][dpppl.ModelError] with the column
    of the problem in `text`.
    """
    source = Source("<expression>", text)
    return parse_rule(text, "expression", ExprBuilder(source)).check()


def evaluate(expr: Expr | str | float | np.ndarray, env: Mapping[str, Any]) -> np.ndarray:
    """Evaluate an expression (an `Expr` or its text) with the names in `env`
    (see `data_environment`); numbers and arrays are returned as float arrays."""
    if isinstance(expr, str):
        expr = parse_expression(expr)
    if isinstance(expr, Expr):
        return expr.evaluate(env)
    return np.asarray(expr, dtype=float)


TRACED_FUNCTIONS: dict[str, Callable] = {"sqrt": jnp.sqrt, "log": jnp.log, "exp": jnp.exp}
"""The functions an expression of a random hyperparameter may apply to it (element-wise, traced)."""

_TRACED_OPERATORS = {"+": jnp.add, "-": jnp.subtract, "*": jnp.multiply, "/": jnp.divide, "^": jnp.power}


def check_traced(expr: Expr, random: frozenset[str]) -> None:
    """Raise [`ModelError`][dpppl.ModelError] at the first part of `expr` that cannot take the
    random hyperparameters `random` (names): a function other than those of `TRACED_FUNCTIONS`
    applied to an expression of one. What `evaluate_traced` evaluates passes."""
    if not expr.names() & random or isinstance(expr, (Name, Neg, BinOp, Vector)):
        for child in expr.children():
            check_traced(child, random)
        return
    if isinstance(expr, Call) and expr.func in TRACED_FUNCTIONS:
        check_traced(expr.args[0], random)
        return
    used = ", ".join(sorted(expr.names() & random))
    raise expr.error(f"'{expr}' cannot take a random hyperparameter ({used}): an expression of one may use + - * / ^, "
                     f"numbers, constants and {', '.join(TRACED_FUNCTIONS)}")


def evaluate_traced(expr: Expr, values: Mapping[str, Any], env: Mapping[str, Any]):
    """The value of `expr` (a `jax.Array`, traceable) with the names of `values` bound to their
    (traced) values; the parts that use none of them are evaluated by `Expr.evaluate` against
    `env`. `expr` has passed `check_traced`."""
    if not expr.names() & values.keys():
        return jnp.asarray(expr.evaluate(env))
    if isinstance(expr, Name):
        return jnp.asarray(values[expr.name])
    if isinstance(expr, Neg):
        return -evaluate_traced(expr.operand, values, env)
    if isinstance(expr, BinOp):
        return _TRACED_OPERATORS[expr.op](evaluate_traced(expr.left, values, env),
                                          evaluate_traced(expr.right, values, env))
    if isinstance(expr, Vector):
        return jnp.stack([evaluate_traced(item, values, env) for item in expr.items])
    return TRACED_FUNCTIONS[expr.func](evaluate_traced(expr.args[0], values, env))


def data_environment(x: np.ndarray) -> dict[str, Any]:
    """The names an expression may use for data `x` of shape (N, D) (a 1-D array is
    one column): `x`, `N`, `D` and its alias `V`. `x` may be the rows' summaries
    (`dpppl.core.summaries.RowSummaries`, what a run over several processes resolves from)."""
    if isinstance(x, RowSummaries):
        n, d = x.shape
        return {"x": x, "N": n, "D": d, "V": d}
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DataError(f"data for expressions must be a 2-D array (N, D), got shape {x.shape}")
    n, d = x.shape
    return {"x": x, "N": n, "D": d, "V": d}


# ---------------------------------------------------------------------------- ranges


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A hyperparameter's value and the expression it was evaluated from: `expr` is None for a
    number given as such; `default` says the expression is the documented default."""

    value: Any
    expr: Optional[Expr] = None
    default: bool = False

    def origin(self) -> str:
        """Where the value came from, for error messages: `""` for a number given as such."""
        if self.expr is None:
            return ""
        what = f"its default '{self.expr}'" if self.default else f"the expression '{self.expr}'"
        data = " from these data" if "x" in self.expr.names() else ""  # not only their shape (N, D, V)
        return f" ({what} produced it{data})"


def float_limits() -> np.finfo:
    """`np.finfo` of the run's float dtype (float64, or float32 with `DPPPL_X64=0`)."""
    return np.finfo(float_dtype())


def count_limit() -> float:
    """2 / eps of the run's float dtype (2^53 in float64, 2^24 in float32): the first count c with
    c + 1 == c. A pseudo-count or concentration at or above it no longer changes when one
    observation is added to it (kappa0 + 1, alpha + N, a_i + N_i), so the data drop out of the
    densities; `gammaln` (which JAX's float64 version overflows from 2^512) never sees it."""
    return float(2 / float_limits().eps)


def _show(value: np.ndarray) -> str:
    if value.ndim == 0:
        return f"{float(value):.6g}"
    return np.array2string(value, precision=4, threshold=8, separator=", ").replace("\n", "")


def depends_on_data(value) -> bool:
    """Whether a hyperparameter needs the data: a default (None) or an expression of
    `x` or `N` (`D` alone is fixed by the data's dimension)."""
    if isinstance(value, str):
        value = parse_expression(value)
    return value is None or (isinstance(value, Expr) and bool(value.names() & {"x", "N"}))


def check_hyper(owner: str, name: str, value, *, shape=None, positive: bool = False, count: bool = False,
                greater_than: Optional[float] = None, at_least: Optional[tuple] = None,
                at_most: Optional[tuple] = None, pos_def: bool = False) -> np.ndarray:
    """Check one hyperparameter and return it as a float array (a scalar broadcast to `shape`).

    `value` is a number, an array or a `Resolved` (whose expression the error names). Every
    entry must be finite in the run's float dtype (`float_limits`). Then, in order:

    - `positive`: > 0, and at least the smallest normal number tiny (2.2e-308 in float64,
      1.2e-38 in float32): XLA on the CPU computes with smaller (subnormal) numbers as 0, so
      log(1e-320) is -inf there;
    - `greater_than = c`: > c, and at least c + tiny;
    - `count`: positive and below `count_limit()` (a pseudo-count or a concentration);
    - `at_least`, `at_most`: `(bound, why)`, a bound derived from where the densities break
      (`bound` may be an array broadcast against the value);
    - `pos_def`: a symmetric matrix whose eigenvalues are at least tiny and whose condition
      number is below 1 / (D eps): beyond it its Cholesky factor, and every density that uses
      it, is dominated by rounding.

    Raises [`HyperparameterError`][dpppl.errors.HyperparameterError] naming `owner`, `name`,
    the value (its first offending entry for an array) and, for a `Resolved` value, the
    expression that produced it and whether it was computed from the data.
    """
    resolved = value if isinstance(value, Resolved) else Resolved(value)

    def fail(problem: str, bad=None, detail: str = ""):
        got = _show(v)
        if bad is not None and v.size > 1 and np.any(v != v.ravel()[0]):
            index = np.unravel_index(int(np.argmax(bad)), v.shape)
            got = f"{_show(v[index])} at index {', '.join(map(str, index))} of {got}"
        return HyperparameterError(f"{owner}: hyperparameter {name} {problem}, got {got}{resolved.origin()}{detail}",
                                   owner=owner, name=name)

    try:
        v = np.asarray(resolved.value, dtype=float)
    except (TypeError, ValueError):
        raise HyperparameterError(f"{owner}: hyperparameter {name} must be a number or an array of numbers, "
                                  f"got {resolved.value!r}", owner=owner, name=name) from None
    if shape is not None:
        try:
            v = np.broadcast_to(v, shape).copy()
        except ValueError:
            raise fail(f"has shape {v.shape}, expected a scalar or shape {tuple(shape)}") from None
    limits = float_limits()
    tiny = f"the smallest normal {limits.dtype} number; XLA computes with smaller ones as 0"
    checks = [(~np.isfinite(v), "is not finite"),
              (np.abs(v) > limits.max, f"must be at most {limits.max:.4g} in absolute value (the largest "
                                       f"{limits.dtype} number)")]
    if positive or count:
        checks += [(v <= 0, "must be > 0"), (v < limits.tiny, f"must be at least {limits.tiny:.4g} ({tiny})")]
    if greater_than is not None:
        checks += [(v <= greater_than, f"must be > {greater_than:g}"),
                   (v - greater_than < limits.tiny, f"must exceed {greater_than:g} by at least {limits.tiny:.4g} "
                                                    f"({tiny})")]
    if count:
        checks.append((v >= count_limit(), f"must be below {count_limit():.4g}, where adding one observation to a "
                                           f"count no longer changes it in {limits.dtype} (the data would drop out "
                                           "of the densities)"))
    for bound, sign in ((at_least, -1), (at_most, 1)):
        if bound is not None:
            limit = np.broadcast_to(np.asarray(bound[0], dtype=float), v.shape)
            bad = sign * v > sign * limit
            shown = _show(limit[np.unravel_index(int(np.argmax(bad)), v.shape)] if v.ndim else limit)
            checks.append((bad, f"must be at {'least' if sign < 0 else 'most'} {shown} ({bound[1]})"))
    for bad, problem in checks:
        if np.any(bad):
            raise fail(problem, bad)
    if pos_def:
        if not np.allclose(v, v.T):
            raise fail("must be symmetric")
        eig = np.linalg.eigvalsh(v)
        rounding = v.shape[0] * limits.eps * np.max(np.abs(eig))
        kind = "a singular" if abs(eig[0]) <= rounding else "an indefinite" if eig[0] < 0 else "a nearly singular"
        detail = f": {kind} matrix, eigenvalues from {eig[0]:.4g} to {eig[-1]:.4g}"
        if eig[0] <= 0:
            raise fail("must be positive definite", detail=detail)
        if eig[0] < limits.tiny or eig[0] < rounding:
            raise fail(f"must be positive definite with a condition number below 1 / (D eps) = "
                       f"{1 / (v.shape[0] * limits.eps):.4g} in {limits.dtype}", detail=detail)
    return v


__all__ = ["check_traced", "evaluate_traced", "TRACED_FUNCTIONS",
           "depends_on_data", "Expr", "Number", "Name", "Vector", "Call", "Keyword", "BinOp", "Neg", "Index",
           "MAX_ELEMENTS", "FUNCTIONS", "parse_expression", "evaluate", "data_environment", "Resolved", "check_hyper",
           "float_limits", "count_limit"]
