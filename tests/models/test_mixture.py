"""Model.bind checks every hyperparameter before any sampling: the probe of issue 20.

Each case is a model file of `models/` or `examples/` with one hyperparameter (or the data)
made extreme; `dpppl.sample` must raise a dpppl error that names the hyperparameter, its
value and its place in the file, and never reach a sampling backend.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import dpppl
import dpppl.run.driver
from dpppl.errors import HyperparameterError

ROOT = pathlib.Path(__file__).resolve().parents[2]

rng = np.random.default_rng(0)
REAL = np.concatenate([rng.normal(-3, 1, (10, 2)), rng.normal(3, 1, (10, 2))])
COUNT = rng.integers(0, 5, (20, 6)).astype(float)
RANKS = np.array([rng.permutation(5) for _ in range(12)], float)
TIMES = np.repeat(np.arange(4.0), 5)


def edited(path: str, old: str, new: str) -> str:
    """The text of a model file with `old` replaced by `new` on its first statement line that holds it."""
    lines = (ROOT / path).read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if not line.lstrip().startswith("#") and old in line)
    lines[at] = lines[at].replace(old, new, 1)
    return "".join(lines)


# (case, model file, old text, new text, data, hyperparameter named, text the error points at, kernel)
PROBE = [
    ("alpha = 1e-320", "models/gaussian_known.dp", "alpha = 1.0", "alpha = 1e-320", REAL, "alpha", "1e-320", "gibbs"),
    ("alpha ~ Gamma(1, 1e-320)", "models/gaussian_niw.dp", "alpha ~ Gamma(1, 1)", "alpha ~ Gamma(1, 1e-320)", REAL,
     "rate", "1e-320", "gibbs"),
    ("kappa0 = 1e308", "models/gaussian_niw.dp", "kappa0 = 0.1", "kappa0 = 1e308", REAL, "kappa0", "1e308", "gibbs"),
    ("nu0 = D + 1e308", "models/gaussian_niw.dp", "nu0 = D + 2", "nu0 = D + 1e308", REAL, "nu0", "D + 1e308",
     "gibbs"),
    ("tau2 = 1e308", "models/gaussian_known.dp", "tau2 = 100", "tau2 = 1e308", REAL, "tau2", "1e308", "gibbs"),
    ("sigma2 = 1e-320", "models/gaussian_known.dp", "sigma2 = 1)", "sigma2 = 1e-320)", REAL, "sigma2", "1e-320",
     "gibbs"),
    ("Dirichlet(beta = 1e-320)", "models/multinomial.dp", "beta = 0.5", "beta = 1e-320", COUNT, "beta", "1e-320",
     "gibbs"),
    ("PitmanYor(discount = 1e-320)", "models/pitman_yor.dp", "discount = 0.25", "discount = 1e-320", REAL,
     "discount", "1e-320", "gibbs"),
    ("MallowsPrior(r = 1e308)", "models/rankings.dp", "r = 1)", "r = 1e308)", RANKS, "r", "1e308", "mallows-slice"),
    ("DDP(a = 1e308)", "examples/ddp.dp", "DDP(a = 1", "DDP(a = 1e308", (REAL, TIMES), "a", "1e308", "ddp"),
    ("heavy-tailed sticks, theta = 1e308", "models/stick_breaking.dp", "theta = 1\n", "theta = 1e308\n", REAL, "b",
     "theta + i * d", "sbgibbs"),
    ("heavy-tailed sticks, theta = 1000", "models/stick_breaking.dp", "theta = 1\n", "theta = 1000\n", REAL, "b",
     "theta + i * d", "sbgibbs"),
]


@pytest.fixture
def no_sampling(monkeypatch):
    """Every sampling backend replaced by one that fails the test."""
    def backend(*args, **kwargs):
        raise AssertionError("sampling started")

    for name in dpppl.run.driver.BACKENDS:
        monkeypatch.setitem(dpppl.run.driver.BACKENDS, name, backend)


@pytest.mark.parametrize("case, path, old, new, data, name, at, kernel", PROBE, ids=[c[0] for c in PROBE])
def test_degenerate_hyperparameters_are_errors_at_their_place_in_the_file(
        tmp_path, no_sampling, case, path, old, new, data, name, at, kernel):
    model_file = tmp_path / "model.dp"
    model_file.write_text(edited(path, old, new))
    with pytest.raises(HyperparameterError) as info:
        dpppl.sample(dpppl.load(model_file), data, kernel=kernel, num_warmup=1, num_samples=1, progress_bar=False)
    error = info.value
    assert isinstance(error, dpppl.ModelError) and isinstance(error, dpppl.DataError)
    assert error.name == name
    assert f"hyperparameter {name} " in str(error) or "the sticks' tail is too heavy" in str(error)
    lines = model_file.read_text().splitlines()
    assert error.source == str(model_file)
    assert lines[error.line - 1][error.column - 1:].startswith(at), (lines[error.line - 1], error.column)


def test_data_that_overflow_the_known_covariance_model_are_a_data_error(no_sampling):
    model = dpppl.load(ROOT / "models/gaussian_known.dp")
    with pytest.raises(dpppl.DataError, match=r"data must be at most 2\.\d+e\+153 in absolute value .*row 0, "
                                              r"column 0 holds -2\.87\d*e\+300"):
        dpppl.sample(model, REAL * 1e300, num_warmup=1, num_samples=1, progress_bar=False)


def test_an_expression_of_the_data_says_the_data_produced_the_value():
    model = dpppl.parse("data y : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NormalInverseWishart(psi0 = cov(y) / 10)\n"
                        "y[i] ~ Normal(theta[z[i]])\n", source="m.dp")
    collinear = np.column_stack([np.arange(10.0), 2 * np.arange(10.0)])
    with pytest.raises(HyperparameterError) as info:
        model.bind(collinear)
    assert (info.value.source, info.value.line, info.value.column) == ("m.dp", 3, 40)
    assert ("NormalInverseWishart: hyperparameter psi0 must be positive definite, got [[0.9167, 1.8333], "
            "[1.8333, 3.6667]] (the expression 'cov(x) / 10' produced it from these data): a singular matrix, "
            "eigenvalues from") in str(info.value)
    with pytest.raises(HyperparameterError, match=r"\(its default 'cov\(x\) / 10' produced it from these data\)"):
        dpppl.DPMixture(1.0, dpppl.NormalInverseWishart()).bind(collinear)


def test_a_constant_is_located_at_its_definition_and_python_models_are_checked_too():
    text = edited("models/gaussian_known.dp", "alpha = 1.0", "alpha = 1e-320")
    with pytest.raises(HyperparameterError) as info:
        dpppl.parse(text).bind(REAL)
    line = text.splitlines()[info.value.line - 1]
    assert line.startswith("alpha = ") and line[info.value.column - 1:] == "1e-320"
    with pytest.raises(HyperparameterError, match="CRP: hyperparameter alpha must be at least 2.225e-308") as info:
        dpppl.DPMixture(1e-320, dpppl.NormalKnownCov()).bind(REAL)
    assert info.value.line is None


EXTREME_BUT_VALID = [
    ("alpha = 1e-300", "models/gaussian_known.dp", "alpha = 1.0", "alpha = 1e-300", REAL),
    ("alpha = 1e15", "models/gaussian_known.dp", "alpha = 1.0", "alpha = 1e15", REAL),
    ("kappa0 = 1e-300", "models/gaussian_niw.dp", "kappa0 = 0.1", "kappa0 = 1e-300", REAL),
    ("tau2 = 1e300", "models/gaussian_known.dp", "tau2 = 100", "tau2 = 1e300", REAL),
    ("beta = 1e-300", "models/multinomial.dp", "beta = 0.5", "beta = 1e-300", COUNT),
    ("data * 1e150 under data-scaled hyperparameters", "models/gaussian_niw.dp", "kappa0", "kappa0",
     REAL * 1e150),
]


@pytest.mark.parametrize("case, path, old, new, data", EXTREME_BUT_VALID, ids=[c[0] for c in EXTREME_BUT_VALID])
def test_extreme_but_valid_values_bind_with_a_finite_log_joint(case, path, old, new, data):
    target = dpppl.parse(edited(path, old, new)).bind(data)
    assert np.isfinite(float(target.log_joint_of_labels(np.repeat([0, 1], 10))))


RANK_MODEL = "data x : {decl}\nz ~ CRP(1)\ntheta[k] ~ {prior}()\nx[i] ~ {obs}(theta[z[i]])\n"
RANK_CASES = {"real": ("NormalGamma", "Normal", REAL), "count": ("Dirichlet", "Multinomial", COUNT),
              "binary": ("Beta", "Bernoulli", (COUNT > 2).astype(float))}


@pytest.mark.parametrize("kind", sorted(RANK_CASES))
def test_the_declared_rank_and_fixed_dimensions_hold_at_bind(kind):
    """`x : real[N]` takes (N,) and (N, 1) and refuses (N, 2); a dimension written as a number must match."""
    prior, obs, x = RANK_CASES[kind]
    one = dpppl.parse(RANK_MODEL.format(decl=f"{kind}[N]", prior=prior, obs=obs))
    assert one.bind(x[:, 0]).x.shape == one.bind(x[:, :1]).x.shape == (len(x), 1)
    with pytest.raises(dpppl.DataError) as info:
        one.bind(x)
    width = x.shape[1]
    assert str(info.value) == (f"data 'x' has {width} columns (shape ({len(x)}, {width})), but the model declares "
                               f"'x : {kind}[N]' (line 1): one value per point, shape (N,) or (N, 1); for {width} "
                               f"columns declare 'x : {kind}[N, D]'")
    with pytest.raises(dpppl.DataError, match=r"must be \(N,\) or \(N, 1\) as declared 'x : .*\[N\]' \(line 1\), "
                                              r"got 3-D"):
        one.bind(x[:, :1, None])
    fixed = dpppl.parse(RANK_MODEL.format(decl=f"{kind}[N, {width + 1}]", prior=prior, obs=obs))
    with pytest.raises(dpppl.DataError) as info:
        fixed.bind(x)
    assert str(info.value) == (f"data 'x' has {width} columns (shape ({len(x)}, {width})), but the model declares "
                               f"{width + 1} ('x : {kind}[N, {width + 1}]' (line 1))")


def test_the_galaxies_model_on_two_dimensional_data_names_the_dimensions():
    model = dpppl.load(ROOT / "models" / "galaxies.dp")
    with pytest.raises(dpppl.DataError, match=r"data 'x' has 2 columns \(shape \(272, 2\)\), but the model declares "
                                              r"'x : real\[N\]' \(line \d+\)"):
        dpppl.sample(model, "faithful", num_warmup=1, num_samples=1, progress_bar=False)
