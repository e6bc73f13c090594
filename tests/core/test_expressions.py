"""Hyperparameter expressions: parsing, evaluation against numpy, errors with positions; range checks."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln

import dpppl.config
from dpppl.core.expressions import (FUNCTIONS, BinOp, Name, Number, Resolved, check_hyper, count_limit,
                                    data_environment, evaluate, float_limits, parse_expression)
from dpppl.errors import DataError, HyperparameterError, ModelError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(25, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, -2.0]
ENV = data_environment(X)


@pytest.mark.parametrize("text, expected", [
    ("mean(x)", X.mean(axis=0)),
    ("cov(x)", np.cov(X, rowvar=False, ddof=1)),
    ("cov(x) / 10", np.cov(X, rowvar=False) / 10),
    ("var(x)", X.var(axis=0, ddof=1)),
    ("sd(x)", X.std(axis=0, ddof=1)),
    ("min(x)", X.min(axis=0)),
    ("max(x)", X.max(axis=0)),
    ("sum(x)", X.sum(axis=0)),
    ("sum(mean(x))", X.mean(axis=0).sum()),
    ("sqrt(var(x))", np.sqrt(X.var(axis=0, ddof=1))),
    ("log(N)", np.log(25)),
    ("exp(-1)", np.exp(-1)),
    ("eye(D)", np.eye(3)),
    ("ones(D) * 2", np.full(3, 2.0)),
    ("zeros(V)", np.zeros(3)),
    ("diag(var(x))", np.diag(X.var(axis=0, ddof=1))),
    ("diag(cov(x))", np.diag(np.cov(X, rowvar=False))),
    ("D + 2", 5.0),
    ("N", 25.0),
    ("1 - 2 - 3", -4.0),
    ("8 / 4 / 2", 1.0),
    ("2 + 3 * 4", 14.0),
    ("(2 + 3) * 4", 20.0),
    ("-2^2", -4.0),
    ("(-2)^2", 4.0),
    ("2^3^2", 512.0),
    ("2**-1", 0.5),
    ("+3", 3.0),
    ("1e-3 * 2", 0.002),
    (".5", 0.5),
    ("[1, 2, 3] * 2", [2.0, 4.0, 6.0]),
    ("[[1, 0], [0, 1]]", np.eye(2)),
    ("[mean(x), mean(x)]", np.stack([X.mean(axis=0)] * 2)),
    ("mean(x) - 1", X.mean(axis=0) - 1),
    ("cov(x) + eye(D)", np.cov(X, rowvar=False) + np.eye(3)),
])
def test_evaluate_matches_numpy(text, expected):
    value = evaluate(text, ENV)
    assert isinstance(value, np.ndarray) and value.dtype == float
    np.testing.assert_allclose(value, expected, rtol=1e-12)


def test_cov_is_two_dimensional_for_one_column():
    env = data_environment(X[:, 0])  # 1-D data are one column
    assert env["D"] == 1 and env["x"].shape == (25, 1)
    cov = evaluate("cov(x)", env)
    assert cov.shape == (1, 1)
    np.testing.assert_allclose(cov[0, 0], X[:, 0].var(ddof=1))


@pytest.mark.parametrize("text", ["cov(x)", "var(x)", "sd(x)"])
def test_sample_statistics_of_one_point_raise_data_error(text):
    with pytest.raises(DataError, match="at least 2 points, got 1"):
        evaluate(text, data_environment(X[:1]))


def test_data_environment():
    env = data_environment(X)
    assert env["N"] == 25 and env["D"] == env["V"] == 3
    np.testing.assert_array_equal(env["x"], X)
    with pytest.raises(DataError, match="2-D"):
        data_environment(np.zeros((2, 2, 2)))


def test_evaluate_accepts_expressions_strings_and_numbers():
    expr = parse_expression("D + 2")
    assert evaluate(expr, ENV) == evaluate("D + 2", ENV) == 5.0
    np.testing.assert_array_equal(evaluate([1, 2], ENV), [1.0, 2.0])


@pytest.mark.parametrize("text", ["cov(x) / 10", "D+2", "-2^2", "2**-1", "[[1,0],[0,1]]",
                                  "mean( x )", "(1 + 2) * 3", "1e-3"])
def test_str_gives_back_the_source_and_render_round_trips(text):
    expr = parse_expression(text)
    assert str(expr) == text
    assert parse_expression(expr.render()) == expr
    assert repr(expr) == f"parse_expression({text!r})"


@pytest.mark.parametrize("text, canonical", [
    ("D+2", "D + 2"), ("2^3^2", "2 ^ 3 ^ 2"), ("(2^3)^2", "(2 ^ 3) ^ 2"),
    ("-(1+2)*3", "-(1 + 2) * 3"),
    ("1-(2-3)", "1 - (2 - 3)"), ("(1-2)-3", "1 - 2 - 3"), ("2**-1", "2 ^ -1"), ("0.50", "0.5"),
])
def test_render_is_canonical_with_minimal_parentheses(text, canonical):
    assert parse_expression(text).render() == canonical


def test_structure_names_and_equality():
    expr = parse_expression("cov(x) / (N - 1)")
    assert isinstance(expr, BinOp) and expr.op == "/"
    assert expr.names() == {"x", "N"}
    assert expr == parse_expression("cov( x )/(N-1)")  # positions and text do not count
    assert parse_expression("2 ** 3") == parse_expression("2 ^ 3")
    assert parse_expression("mean(x)").names() == {"x"}  # function names are not names


def test_substitute_renames_and_keeps_positions():
    expr = parse_expression("mean(y) + M")
    renamed = expr.substitute({"y": Name("x"), "M": Name("N")})
    assert renamed == parse_expression("mean(x) + N")
    assert str(renamed) == "mean(x) + N"  # rewritten: rendered, not the old text
    assert renamed.left.args[0].span == expr.left.args[0].span
    assert expr.substitute({"q": Number(1.0)}) is expr


def test_every_function_is_documented():
    import dpppl.core.expressions as module

    for name in FUNCTIONS:
        assert f"`{name}" in module.__doc__


@pytest.mark.parametrize("text, column, message", [
    ("meen(x)", 1, "unknown function 'meen' (did you mean 'mean'?)"),
    ("2 * mean(x, x)", 5, "mean() takes 1 argument, got 2"),
    ("mean(x, ddof = 1)", 9, "mean() takes no keyword arguments"),
    ("f(a = 1, 2)", 10, "positional argument after a keyword argument"),
    ("1 +", 4, "unexpected end of input; expected one of a name, a number"),
    ("(1", 3, "unexpected end of input; expected ')'"),
    ("1 @ 2", 3, "unexpected character '@'; expected one of '[', an operator or end of input"),
    ("1 2", 3, "unexpected '2'"),
    ("1e999", 1, "number 1e999 is too large"),
])
def test_parse_errors_have_positions(text, column, message):
    with pytest.raises(ModelError) as info:
        parse_expression(text)
    err = info.value
    assert (err.source, err.line, err.column) == ("<expression>", 1, column)
    assert message in str(err)
    assert str(err).endswith("\n    " + text + "\n    " + " " * (column - 1) + "^")


@pytest.mark.parametrize("text, column, message", [
    ("mean(q) + 1", 6, "unknown name 'q'; the names are D, N, V, x"),
    ("mean(xx)", 6, "unknown name 'xx' (did you mean 'x'?)"),
    ("mean(x) + cov(x)", 9, "cannot add shapes (3,) and (3, 3) in 'mean(x) + cov(x)'"),
    ("[1, 2] * [1, 2, 3]", 8, "cannot multiply shapes (2,) and (3,)"),
    ("1 / (N - 25)", 3, "division by zero in '1 / (N - 25)'"),
    ("2 * log(N - 25)", 5, "'log(N - 25)' is not finite"),
    ("sqrt(-1)", 1, "'sqrt(-1)' is not finite"),
    ("eye(2.5)", 1, "eye() needs a positive integer, got 2.5"),
    ("ones(0)", 1, "ones() needs a positive integer"),
    ("[1, [1, 2]]", 1, "the items of '[1, [1, 2]]' have different shapes"),
    ("mean(3)", 1, "mean() needs a vector or a matrix, got a scalar"),
    ("diag(1)", 1, "diag() needs a vector or a matrix"),
    ("x[1]", 1, "'x[1]' has no value here"),
])
def test_evaluation_errors_have_positions(text, column, message):
    expr = parse_expression(text)  # parses: names and shapes are only known with data
    with pytest.raises(ModelError) as info:
        expr.evaluate(ENV)
    assert (info.value.line, info.value.column) == (1, column)
    assert message in str(info.value)


def test_built_expression_errors_have_no_position():
    expr = BinOp("+", Name("q"), Number(1.0))
    assert str(expr) == "q + 1"
    with pytest.raises(ModelError) as info:
        expr.evaluate(ENV)
    assert info.value.line is None and "unknown name 'q'" in str(info.value)


def test_family_defaults_are_expressions():
    from dpppl.families import NormalInverseWishart

    family = NormalInverseWishart(kappa0="1 / N").resolve(X)
    np.testing.assert_allclose(family.mu0, X.mean(axis=0))
    np.testing.assert_allclose(family.psi0, np.cov(X, rowvar=False) / 10)
    np.testing.assert_allclose(family.nu0, 5.0)
    np.testing.assert_allclose(family.kappa0, 1 / 25)


# ----- hyperparameter ranges -------------------------------------------------------------------


def test_the_float_limits_are_where_xla_breaks():
    limits = float_limits()
    assert limits.dtype == np.dtype(dpppl.config.float_dtype())
    dtype = limits.dtype.type
    # subnormal numbers are 0 to XLA on the CPU: their log is -inf, hence the smallest normal as lower bound
    assert jnp.log(dtype(limits.tiny / 4)) == -jnp.inf and jnp.isfinite(jnp.log(dtype(limits.tiny)))
    # the count limit is the first count that one more observation leaves unchanged ...
    c = dtype(count_limit())
    assert c + dtype(1) == c and c / 2 + dtype(1) > c / 2
    # ... and log Gamma (JAX's float64 version overflows from 2^512) is finite there
    assert jnp.isfinite(gammaln(jnp.asarray(count_limit(), limits.dtype)))


@pytest.mark.parametrize("value, rule, message", [
    (1e-320, dict(positive=True), r"must be at least 2\.225e-308 \(the smallest normal float64 number; XLA"),
    (0.0, dict(count=True), r"must be > 0, got 0"),
    (1e16, dict(count=True), r"must be below 9\.007e\+15, where adding one observation to a count no longer "),
    (np.inf, {}, r"is not finite"),
    (1.0, dict(greater_than=1.0), r"must be > 1"),
    ([1.0, 3.0], dict(at_most=(2.0, "why")), r"must be at most 2 \(why\), got 3 at index 1 of \[1\., 3\.\]"),
    ([[1.0, 0.0], [0.0, 1e-17]], dict(pos_def=True), r"condition number below 1 / \(D eps\)"),
    ("one", {}, r"must be a number or an array of numbers, got 'one'"),
])
def test_check_hyper_names_the_owner_the_hyperparameter_and_the_value(value, rule, message):
    with pytest.raises(HyperparameterError, match=r"^Fam: hyperparameter h " + "(.*)" + message) as info:
        check_hyper("Fam", "h", value, **rule)
    assert (info.value.owner, info.value.name) == ("Fam", "h")


def test_check_hyper_says_which_expression_produced_the_value_and_whether_from_the_data():
    expr = parse_expression("cov(x) / 10")
    x = np.column_stack([np.arange(5.0), np.arange(5.0)])
    value = Resolved(evaluate(expr, data_environment(x)), expr)
    with pytest.raises(HyperparameterError, match=r"got \[\[0\.25, 0\.25\], \[0\.25, 0\.25\]\] \(the expression "
                                                  r"'cov\(x\) / 10' produced it from these data\): a singular"):
        check_hyper("Fam", "psi0", value, pos_def=True)
    with pytest.raises(HyperparameterError, match=r"\(its default '1 / 0\.5' produced it\)$"):
        check_hyper("Fam", "h", Resolved(2.0, parse_expression("1 / 0.5"), default=True), at_most=(1.0, "why"))


@pytest.mark.parametrize("text, column, shape", [
    ("eye(100000000)", 1, "100000000 x 100000000 array (1e+16 elements, 8e+07 GB)"),
    ("sum(ones(10000000000))", 5, "10000000000 array (1e+10 elements, 80 GB)"),
    ("2 * zeros(100000001)", 5, "100000001 array (1e+08 elements, 0.8 GB)"),
    ("diag(ones(20000))", 1, "20000 x 20000 array (4e+08 elements, 3.2 GB)"),
])
def test_arrays_past_the_size_limit_are_refused_before_they_are_built(text, column, shape):
    """`eye(100000000)` raised numpy's MemoryError at load (issue 30): the size is checked first."""
    with pytest.raises(ModelError) as info:
        parse_expression(text).evaluate(ENV)
    assert (info.value.line, info.value.column) == (1, column)
    limit = "an array built in a model has at most 100,000,000 elements (0.8 GB)"
    assert shape in str(info.value) and limit in str(info.value)


def test_an_array_past_the_size_limit_in_a_model_file_names_its_line_and_column():
    text = ("data x : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NormalInverseWishart(psi0 = eye(100000000))\n"
            "x[i] ~ Normal(theta[z[i]])\n")
    with pytest.raises(ModelError) as info:
        dpppl.parse(text).bind(np.zeros((5, 2)))
    assert (info.value.line, info.value.column) == (3, 40)
    assert "'eye(100000000)' would build a 100000000 x 100000000 array" in str(info.value)
