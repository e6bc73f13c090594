"""The model language: model files, the Python equivalent, syntax variants and errors."""

import math
import pathlib

import numpy as np
import pytest

from dpppl.dsl import load, parse
from dpppl.dsl.parser import bind_data
from dpppl.models.mixture import DPMixture, PitmanYorMixture, PseudoParticleMixture, StickBreakingMixture
from dpppl.models.mixture import DataDecl, Model
from dpppl.errors import ModelError
from dpppl.families import (BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart,
                            NormalKnownCov)
from dpppl.priors import CRP, Gamma, Hyperprior, PitmanYor
from dpppl.families import GeneralizedMallows, NormalLogNormal
import dpppl
from tests.helpers.nonconjugate import X_SMALL

MODELS = pathlib.Path(__file__).resolve().parents[2] / "models"
RNG = np.random.default_rng(1)
DATA = {
    "real": RNG.normal(size=(30, 2)) + np.repeat([[0.0, 0.0], [5.0, 5.0]], 15, axis=0),
    "count": RNG.poisson(3.0, size=(30, 6)).astype(float),
    "binary": RNG.integers(0, 2, size=(30, 4)).astype(float),
    "ranking": np.array([np.r_[RNG.permutation(5)[:t], -np.ones(5 - t)] for t in RNG.integers(1, 6, 30)]),
}
NIW_FILE = NormalInverseWishart(mu0="mean(x)", kappa0=0.1, nu0="D + 2", psi0="cov(x) / 10")

# each shipped model file and the same model built in Python
EQUIVALENTS = {
    "gaussian_niw.dp": DPMixture(Gamma(1.0, 1.0), NIW_FILE),
    "galaxies_fixed.dp": DPMixture(Gamma(2.0, 4.0), NormalInverseWishart(mu0=20_000.0, kappa0=0.01, nu0=4.0,
                                                                        psi0=2e6)),
    "gaussian_known.dp": DPMixture(1.0, NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=100.0)),
    "gaussian_diag.dp": DPMixture(
        Gamma(1.0, 1.0), NormalGamma(mu0="mean(x)", kappa0=0.1, a0=2.0, b0="var(x) / 10")),
    "multinomial.dp": DPMixture(Gamma(1.0, 1.0), DirichletMultinomial(beta=0.5)),
    "bernoulli.dp": DPMixture(Gamma(1.0, 1.0), BetaBernoulli(a=1.0, b=1.0)),
    "pitman_yor.dp": PitmanYorMixture(0.25, Gamma(1.0, 1.0), NIW_FILE),
    "stick_breaking.dp": StickBreakingMixture(a=0.75, b="1 + i * 0.25", component=NIW_FILE),
    "pseudo_particles.dp": PseudoParticleMixture(0.2, NIW_FILE, num_sticks=10),
    "rankings.dp": DPMixture(Gamma(1.0, 1.0), GeneralizedMallows(nu=1.0, r=1.0)),
    "gaussian_lognormal.dp": DPMixture(Gamma(1.0, 1.0), NormalLogNormal(
        m0="mean(x)", s0="sqrt(var(x))", l0="log(var(x)) / 2 - log(3)", t0=1.0)),
    "galaxies.dp": Model(CRP(Gamma(2.0, 4.0)), NormalInverseWishart(mu0="m", kappa0="1 / tau", nu0=4.0, psi0=2e6),
                         hyperpriors={"m": Hyperprior("Normal", (0.0, math.sqrt(1000) * 1000)),
                                      "tau": Hyperprior("InverseGamma", (0.5, 50.0))}),
    "dpdensity.dp": Model(CRP(Gamma(2.0, 1.0)), NormalInverseWishart(mu0="m1", kappa0="k0", nu0=4.0, psi0="s"),
                          hyperpriors={"m1": Hyperprior("Normal", (0.0, math.sqrt(100000))),
                                       "k0": Hyperprior("Gamma", (0.5, 50.0)), "s": Hyperprior("Gamma", (2.0, 1.0))}),
}


def assert_same_model(model, expected, x):
    """Equal priors, data kinds, component classes and random hyperparameters, and equal
    hyperparameters once bound to ``x``."""
    assert model.prior == expected.prior
    assert model.data.kind == expected.data.kind
    assert type(model.component) is type(expected.component)
    assert model.hyperpriors == expected.hyperpriors and model.random_fields() == expected.random_fields()
    got, want = model.bind(x).family, expected.bind(x).family  # random hyperparameters at their priors' medians
    for field in got.__dataclass_fields__:
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-12,
                                   err_msg=field)


def test_one_model_file_per_family():
    assert sorted(p.name for p in MODELS.glob("*.dp")) == sorted(EQUIVALENTS)


@pytest.mark.parametrize("name", sorted(EQUIVALENTS))
def test_model_file_parses_resolves_and_equals_python(name):
    path = MODELS / name
    model = load(path)
    assert model.path == str(path) and model.source == path.read_text()
    assert model.source.startswith(f"# {name} — ")  # a header that teaches the model
    x = DATA[model.data.kind] if model.data.source is None else bind_data(model)[0]  # the file's own data
    bound = model.bind(x)
    assert bound.family.dim == x.shape[1]
    assert_same_model(model, EQUIVALENTS[name], x)


def test_model_from_the_design_notes():
    model = parse("""
# models/gaussian_niw.dp — DP mixture of full-covariance Gaussians
data x : real[N, D]
alpha ~ Gamma(1, 1)            # or: alpha = 2.0  (a fixed concentration)
z ~ CRP(alpha)                 # or CRP(2.0)
theta[k] ~ NormalInverseWishart(mu0 = mean(x), kappa0 = 0.1, nu0 = D + 2, psi0 = cov(x))
x[i] ~ Normal(theta[z[i]])
""")
    expected = DPMixture(Gamma(1.0, 1.0), NormalInverseWishart(
        mu0="mean(x)", kappa0=0.1, nu0="D + 2", psi0="cov(x)"))
    assert_same_model(model, expected, DATA["real"])
    assert model.data == DataDecl("x", "real", ("N", "D"), line=3, column=1)
    assert model.path is None


def test_omitted_hyperparameters_take_the_family_defaults():
    x = DATA["real"]
    for component in ["NormalInverseWishart()", "NormalGamma()", "Normal()"]:
        model = parse(f"data x : real[N, D]\nz ~ CRP()\ntheta[k] ~ {component}\n"
                      f"x[i] ~ Normal(theta[z[i]])")
        family = type(model.component)
        assert model.component == family()
        assert_same_model(model, DPMixture(1.0, family()), x)


@pytest.mark.parametrize("text, expected", [
    ("alpha = 2.0\nz ~ CRP(alpha)", CRP(alpha=2.0)),
    ("z ~ CRP(2.0)", CRP(alpha=2.0)),
    ("z ~ CRP(alpha = 1 / 2)", CRP(alpha=0.5)),
    ("a = 3\nz ~ CRP(a - 1)", CRP(alpha=2.0)),
    ("z ~ PitmanYor(0.25, 1.0)", PitmanYor(0.25, 1.0)),
    ("alpha ~ Gamma(2, rate = 0.5)\nz ~ PitmanYor(discount = 0.25, alpha = alpha)",
     PitmanYor(0.25, Gamma(2.0, 0.5))),
    ("z ~ PitmanYor(alpha = 3)", PitmanYor(0.0, 3.0)),
])
def test_partition_priors(text, expected):
    model = parse(f"data x : real[N, D]\n{text}\ntheta[k] ~ NormalInverseWishart()\n"
                  f"x[i] ~ Normal(theta[z[i]])")
    assert model.prior == expected
    assert type(model.prior) is type(expected)


def test_any_identifiers_and_rewritten_data_names():
    model = parse(
        "data y : real[M, 2]      # another data name, dimension names M and 2\n"
        "s = cov(y) / M\n"
        "c ~ PitmanYor(0.5, 1)\n"
        "phi[j] ~ NormalInverseWishart(mean(y), 1 / M, 2 + 2, s + eye(2))\n"
        "y[n] ~ Normal(phi[c[n]])\n")
    assert model.data == DataDecl("y", "real", ("M", 2), line=1, column=1)
    assert str(model.component.mu0) == "mean(x)"  # evaluated against x, the bound data
    assert model.component.nu0 == 4.0  # constants are folded
    x = DATA["real"]
    expected = PitmanYorMixture(0.5, 1.0, NormalInverseWishart(
        mu0="mean(x)", kappa0=1 / 30, nu0=4.0, psi0="cov(x) / N + eye(2)"))
    assert_same_model(model, expected, x)


@pytest.mark.parametrize("kind, component, observation, family", [
    ("real[N, D]", "NormalInverseWishart(mean(x), 1, D + 1, eye(D))", "Normal(theta[z[i]])",
     NormalInverseWishart("mean(x)", 1.0, "D + 1", "eye(D)")),
    ("real[N, D]", "NormalGamma(0, 1, 2, 3)", "Normal(theta[z[i]])",
     NormalGamma(0.0, 1.0, 2.0, 3.0)),
    ("real[N, D]", "Normal(0, 100)", "Normal(theta[z[i]], 1)", NormalKnownCov(1.0, 0.0, 100.0)),
    ("real[N, D]", "Normal(tau2 = var(x))", "Normal(theta[z[i]], sigma2 = var(x) / 4)",
     NormalKnownCov(sigma2="var(x) / 4", tau2="var(x)")),
    ("count[N, V]", "Dirichlet(ones(V) / 2)", "Multinomial(theta[z[i]])",
     DirichletMultinomial("ones(V) / 2")),
    ("binary[N, D]", "Beta(2, b = 0.5)", "Bernoulli(theta[z[i]])", BetaBernoulli(2.0, 0.5)),
])
def test_positional_and_keyword_arguments_for_every_family(kind, component, observation, family):
    model = parse(f"data x : {kind}\nz ~ CRP(1)\ntheta[k] ~ {component}\nx[i] ~ {observation}")
    assert_same_model(model, DPMixture(1.0, family), DATA[model.data.kind])


def test_layout_comments_blank_lines_and_crlf():
    text = ("\r\n  # a comment\r\ndata x:real[N,D]   # trailing comment\r\n\r\n\r\n"
            "z~CRP(1)\r\n  theta[k] ~ Beta()\r\nx[i]~Bernoulli(theta[z[i]])")
    with pytest.raises(ModelError) as info:  # Beta is for binary data
        parse(text)
    assert (info.value.line, info.value.column) == (7, 14)
    model = parse(text.replace("real", "binary"))
    assert model.component == BetaBernoulli() and model.data.line == 3


def test_one_dimensional_and_fixed_size_data():
    model = parse("data x : real[N]\nz ~ CRP(1)\n"
                  "theta[k] ~ NormalGamma()\nx[i] ~ Normal(theta[z[i]])")
    bound = model.bind(DATA["real"][:, 0])
    assert bound.x.shape == (30, 1) and bound.family.dim == 1
    model = parse("data x : count[N, 6]\nz ~ CRP(1)\ntheta[k] ~ Dirichlet()\n"
                  "x[i] ~ Multinomial(theta[z[i]])")
    assert model.data.dims == ("N", 6)
    model.bind(DATA["count"])


def test_expression_errors_at_bind_time_point_into_the_file(tmp_path):
    path = tmp_path / "bad.dp"
    path.write_text("data x : real[N, D]\nz ~ CRP(1)\n"
                    "theta[k] ~ NormalInverseWishart(psi0 = cov(x) + mean(x))\n"
                    "x[i] ~ Normal(theta[z[i]])\n")
    model = load(path)  # shapes are only known with data
    with pytest.raises(ModelError) as info:
        model.bind(DATA["real"])
    err = info.value
    assert (err.source, err.line, err.column) == (str(path), 3, 47)
    assert "cannot add shapes (2, 2) and (2,)" in str(err)


H = "data x : real[N, D]\nz ~ CRP(1.0)\n"
R = "data x : real[N]\nz ~ CRP(1.0)\n"  # the head of a model to which random hyperparameters are added
C = "theta[k] ~ NormalInverseWishart()\n"
O = "x[i] ~ Normal(theta[z[i]])\n"


@pytest.mark.parametrize("text, line, column, message", [
    # syntax
    ("data x : real[N, D]\nz ~ CRP(1.0\n", 2, 12, "unexpected end of line; expected ')' or ','"),
    ("data x : real[N D]\n", 1, 17, "unexpected 'D'; expected ']' or ','"),
    ("data x real[N, D]\n", 1, 8, "unexpected 'real'; expected ':'"),
    ("z ~~ CRP()\n", 1, 4, "unexpected '~'; expected a name"),
    ("z ~ 3\n", 1, 5, "unexpected '3'; expected a name"),
    (H + "theta[k] ~ NormalInverseWishart(kappa0 = 0.1 $)\n", 3, 46,
     "unexpected character '$'; expected one of ')', ',', '[' or an operator"),
    (H + "theta[k] ~ NormalInverseWishart(kappa0 = 1, 2)\n" + O, 3, 45,
     "positional argument after a keyword argument"),
    # unknown distributions
    (H + "theta[k] ~ NormalInverseWishar()\n" + O, 3, 12,
     "unknown component prior 'NormalInverseWishar' (did you mean 'NormalInverseWishart'?)"),
    ("data x : real[N, D]\nz ~ CPR(1.0)\n", 2, 5,
     "unknown partition prior, concentration prior or hyperprior 'CPR' (did you mean 'CRP'?)"),
    (H + C + "x[i] ~ Normall(theta[z[i]])\n", 4, 8,
     "unknown observation 'Normall' (did you mean 'Normal'?)"),
    ("data x : real[N, D]\nz[i] ~ CRP(1.0)\n", 2, 8,
     "CRP is a partition prior (as in 'z ~ CRP(alpha)'), not a component prior"),
    ("data x : real[N, D]\ntheta ~ NormalGamma()\n", 2, 9, "NormalGamma is a component prior"),
    # arguments
    (H + "theta[k] ~ NormalInverseWishart(kapa0 = 1)\n" + O, 3, 33,
     "NormalInverseWishart(mu0, kappa0, nu0, psi0) has no argument 'kapa0' "
     "(did you mean 'kappa0'?)"),
    (H + "theta[k] ~ NormalInverseWishart(1, 2, 3, 4, 5)\n" + O, 3, 45,
     "too many positional arguments: NormalInverseWishart(mu0, kappa0, nu0, psi0) takes 4"),
    (H + "theta[k] ~ NormalInverseWishart(0, kappa0 = 1, mu0 = 2)\n" + O, 3, 48,
     "argument 'mu0' of NormalInverseWishart is given twice"),
    (H + "theta[k] ~ Normal(tau2 = 1, tau2 = 2)\n", 3, 29,
     "argument 'tau2' of Normal is given twice"),
    (H + C + "x[i] ~ Normal(theta[z[i]], 1)\n", 4, 28,
     "too many positional arguments: Normal(theta[z[i]]) takes 1"),
    (H + "theta[k] ~ Normal()\nx[i] ~ Normal(theta[z[i]], sigma = 1)\n", 4, 28,
     "Normal(theta[z[i]], sigma2) has no argument 'sigma' (did you mean 'sigma2'?)"),
    ("data x : real[N, D]\nz ~ CRP(1, 2)\n", 2, 12,
     "too many positional arguments: CRP(alpha) takes 1"),
    ("data x : real[N, D]\nalpha ~ Gamma(1, scale = 2)\n", 2, 18,
     "Gamma(shape, rate) has no argument 'scale'"),
    # undefined names
    ("data x : real[N, D]\nalpha ~ Gamma(1, 1)\nz ~ CRP(alpah)\n", 3, 9,
     "undefined name 'alpah' (did you mean 'alpha'?)"),
    ("data x : real[N, D]\nz ~ CRP(alpha)\nalpha ~ Gamma(1, 1)\n", 2, 9,
     "'alpha' is used before it is defined (line 3)"),
    ("data y : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NormalGamma(mu0 = mean(x))\n", 3, 35,
     "undefined name 'x' (the data are called 'y')"),
    (H + "theta[k] ~ NormalGamma(mu0 = mean(xs))\n", 3, 35,
     "undefined name 'xs' (did you mean 'x'?)"),
    (H + "theta[k] ~ NormalGamma(mu0 = meen(x))\n", 3, 30,
     "unknown function 'meen' (did you mean 'mean'?)"),
    (H + "theta[k] ~ NormalGamma(mu0 = mean(x, x))\n", 3, 30, "mean() takes 1 argument, got 2"),
    (H + C + "x[i] ~ Normal(theta[w[i]])\n", 4, 21, "undefined name 'w'"),
    # names defined twice
    ("data x : real[N, D]\nalpha = 1\nalpha ~ Gamma(1, 1)\n", 3, 1,
     "'alpha' is already defined at line 2"),
    ("data x : real[N, D]\nx = 2\n", 2, 1, "'x' is already defined at line 1"),
    ("data x : real[M, M]\n", 1, 18, "'M' is already defined at line 1"),
    ("data x : real[N, D]\ndata y : real[N, D]\n", 2, 1,
     "a model has one data declaration; 'x' is already declared at line 1"),
    (H + "w ~ CRP(2.0)\n", 3, 1,
     "a model has one partition prior; 'z' is already defined at line 2"),
    (H + C + "phi[k] ~ NormalGamma()\n" + O, 4, 1,
     "a model has one component prior; 'theta' is already defined at line 3"),
    (H + C + O + O, 5, 1, "'x' is already observed at line 4"),
    ("data x : real[N, D]\nN = 3\n", 2, 1, "'N' is a built-in name (the number of points)"),
    # missing statements (reported at the end of the text)
    ("z ~ CRP(1.0)\n", 1, 13,
     "missing data declaration: expected a line such as 'data x : real[N, D]'"),
    ("", 1, 1, "missing data declaration"),
    ("data x : real[N, D]\n" + C + "  # end\n", 3, 8,
     "missing partition prior: expected a line such as 'z ~ CRP(alpha)'"),
    ("data x : count[N, V]\nz ~ CRP(1)\n", 2, 11,
     "missing component prior: expected a line such as 'theta[k] ~ Dirichlet()'"),
    ("data y : real[N, D]\nc ~ CRP(1)\nphi[k] ~ NormalGamma()\n", 3, 23,
     "missing observation: expected a line such as 'y[i] ~ Normal(phi[c[i]])'"),
    ("data x : real[N, D]\n" + C + O, 3, 21,
     "undefined name 'z': no partition prior is defined before this line (a line such as "
     "'z ~ CRP(alpha)')"),
    ("data x : real[N, D]\n" + C + O + "z ~ CRP(1)\n", 3, 21,
     "'z' is used before it is defined (line 4)"),
    (H + O, 3, 15, "undefined name 'theta': no component prior is defined before this line"),
    # observation and component do not fit
    (H + C + "x[i] ~ Bernoulli(theta[z[i]])\n", 4, 8,
     "Bernoulli observations do not fit the NormalInverseWishart prior of 'theta'; "
     "expected x[i] ~ Normal(theta[z[i]])"),
    (H + "theta[k] ~ Dirichlet()\nx[i] ~ Multinomial(theta[z[i]], 3)\n", 3, 12,
     "Dirichlet components observe count data, but 'x' is declared real (line 1); "
     "for real data use NormalInverseWishart or NormalGamma or Normal"),
    ("data x : count[N, V]\nz ~ CRP(1.0)\n" + C + O, 3, 12,
     "NormalInverseWishart components observe real data, but 'x' is declared count"),
    ("data x : binary[N, D]\nz ~ CRP(1.0)\ntheta[k] ~ Normal()\n", 3, 12,
     "for binary data use Beta"),
    # indices
    (H + C + "x[i] ~ Normal(theta[z[j]])\n", 4, 23,
     "index 'j' does not match the observation's index 'i'; expected theta[z[i]]"),
    (H + C + "x[i] ~ Normal(theta)\n", 4, 15,
     "expected theta[z[i]] (the parameter of point i's cluster)"),
    (H + C + "x[i] ~ Normal(theta[i])\n", 4, 15, "got 'theta[i]'"),
    (H + C + "x[i] ~ Normal(z[theta[i]])\n", 4, 15,
     "'z' is the partition, not the component parameter"),
    (H + "a = 1\n" + C + "x[i] ~ Normal(a[z[i]])\n", 5, 15, "'a' is a constant, not the component"),
    (H + C + "x[i] ~ Normal()\n", 4, 8, "Normal needs the parameter of point i's cluster"),
    (H + C + "x ~ Normal(theta[z[i]])\n", 4, 1, "the observation of 'x' needs an index"),
    (H + "theta[k] ~ NormalGamma(mu0 = x[1])\n", 3, 30, "'x[1]' has no value here"),
    # data declarations
    ("data x : reel[N, D]\n", 1, 10, "unknown data kind 'reel' (did you mean 'real'?)"),
    ("data x : real[N, D] of 20\n", 1, 24, "real data take no 'of' clause"),
    ("data x : real[N, D, 3]\n", 1, 21, "real data have one or two dimensions"),
    ("data x : real[N, 2.5]\n", 1, 18, "a dimension must be a name or a positive integer, got 2.5"),
    ("data x : real[D, N]\n", 1, 15,
     "'D' is the number of columns; the first dimension counts the points"),
    # values
    ("data x : real[N, D]\nalpha ~ Gamma(1, 1)\nz ~ CRP(alpha)\n"
     "theta[k] ~ NormalGamma(kappa0 = alpha)\n", 4, 33,
     "'alpha' is the concentration (line 3); a random variable is either the concentration or a hyperparameter"),
    ("data x : real[N, D]\nz ~ CRP(N)\n", 2, 9,
     "the concentration must be a fixed number, but 'N'"),
    ("data x : real[N, D]\nalpha = mean(x)\nz ~ CRP(alpha)\n", 3, 9,
     "the concentration must be a fixed number, but 'alpha' depends on the data"),
    ("data x : real[N, D]\nalpha ~ Gamma(1, 1)\nz ~ CRP(2 * alpha)\n", 3, 13,
     "the concentration must be a fixed number, but 'alpha' is a random variable"),
    ("data x : real[N, D]\nalpha ~ Gamma(1, 1)\nz ~ PitmanYor(alpha, alpha)\n", 3, 15,
     "the discount of PitmanYor must be in [0, 1), but 'alpha' may not be: it has a Gamma prior"),
    ("data x : real[N, D]\nz ~ CRP([1, 2])\n", 2, 9,
     "the concentration must be a number, got shape (2,)"),
    ("data x : real[N, D]\nz ~ PitmanYor(1.5, 1)\n", 2, 5,
     "PitmanYor: discount must be in [0, 1), got 1.5"),
    ("data x : real[N, D]\nalpha ~ Gamma(-1, 1)\n", 2, 9, "Gamma: shape must be a positive number"),
    (H + "theta[k] ~ NormalGamma(mu0 = [1, 2] + [1, 2, 3])\n", 3, 37,
     "cannot add shapes (2,) and (3,)"),
    (H + "theta[k] ~ NormalGamma(kappa0 = 1 / 0)\n", 3, 35, "division by zero"),
    ("data x : real[N, D]\nc = log(0)\n", 2, 5, "'log(0)' is not finite"),
    # random hyperparameters of the base measure (issue 31)
    (R + "m ~ Normal(0, 10)\ntheta[k] ~ NormalInverseWishart(kappa0 = m)\n", 4, 42,
     "kappa0 of NormalInverseWishart must be positive, but 'm' may not be: 'm' has a Normal prior, whose support "
     "is the real line"),
    (R + "s ~ Uniform(-1, 1)\ntheta[k] ~ NormalInverseWishart(psi0 = 2 * s)\n", 4, 44,
     "psi0 of NormalInverseWishart must be positive, but '2 * s' may not be: 's' has a Uniform prior, whose "
     "support is a bounded interval"),
    (R + "s ~ Gamma(1, 1)\ntheta[k] ~ NormalInverseWishart(psi0 = 1 - s)\n", 4, 40,
     "psi0 of NormalInverseWishart must be positive, but '1 - s' is not positive for every value of s"),
    (R + "m ~ Normol(0, 10)\n", 3, 5,
     "unknown partition prior, concentration prior or hyperprior 'Normol' (did you mean 'Normal'?)"),
    (R + "theta[k] ~ NormalInverseWishart(kappa0 = t)\nt ~ Gamma(1, 1)\n", 3, 42,
     "'t' is used before it is defined (line 4)"),
    ('data x : real[N] = dataset("galaxies", scale = s)\nz ~ CRP(1.0)\ns ~ Gamma(1, 1)\n', 1, 48,
     "'s' is a random variable (line 3); the data statement takes fixed numbers only"),
    (R + "t ~ Gamma(1, 1)\ntheta[k] ~ NormalInverseWishart(nu0 = t)\n", 4, 39,
     "nu0 of NormalInverseWishart cannot be random ('t' is a random variable); the hyperparameters of "
     "NormalInverseWishart that may be random are: mu0, kappa0, psi0"),
    (R + "m ~ Normal(0, 1)\ntheta[k] ~ NormalInverseWishart(mu0 = m + mean(x))\n", 4, 39,
     "'m + mean(x)' uses the random variable 'm' and the data"),
    (R + "t ~ Gamma(1, 1)\ntheta[k] ~ NormalInverseWishart(kappa0 = mean(t))\n", 4, 42,
     "'mean(t)' cannot take a random hyperparameter (t)"),
    (R + "m ~ Normal(0, 1)\nu = 2 * m\n", 4, 9, "'m' is a random variable; a hyperparameter may use"),
    ("data x : real[N]\nm ~ Normal(0, 1)\nz ~ CRP(m)\n", 3, 9,
     "the concentration's prior must be Gamma(shape, rate); 'm' has a Normal prior"),
    (R + "lp ~ Gamma(1, 1)\ntheta[k] ~ NormalInverseWishart(kappa0 = lp)\n", 4, 42,
     "'lp' is taken there; rename it"),
    (R + "m ~ Normal(0)\n", 3, 5, "Normal(loc, scale) needs scale"),
    (R + "m ~ HalfNormal(-1)\n", 3, 5, "HalfNormal: scale must be a positive number, got -1.0"),
    (R + "psi ~ Wishart(4, 1)\n", 3, 7, "Wishart priors on a vector or a matrix hyperparameter are not supported; "
     "give a scalar scale of a fixed matrix a prior, s ~ Gamma(2, 1), and write psi0 = s * cov0"),
    (R + "m ~ MultivariateNormal([0, 0], 1)\n", 3, 5, "MultivariateNormal priors on a vector or a matrix "
     "hyperparameter are not supported; give each entry of a vector mean its own prior"),
    # a random Pitman-Yor discount (issue 31): its prior must lie in [0, 1)
    ("data x : real[N]\nd ~ Normal(0, 1)\nz ~ PitmanYor(discount = d, alpha = 1)\n", 3, 26,
     "the discount of PitmanYor must be in [0, 1), but 'd' may not be: it has a Normal prior, whose support is "
     "the real line; give it a Beta prior, or Uniform(low, high) with 0 <= low < high <= 1"),
    ("data x : real[N]\nd ~ Uniform(0, 2)\nz ~ PitmanYor(d, 1)\n", 3, 15,
     "the discount of PitmanYor must be in [0, 1), but 'd' may not be: it has a Uniform prior, whose support is "
     "(0, 2)"),
    ("data x : real[N]\nd ~ Gamma(1, 1)\nz ~ PitmanYor(d, 1)\n", 3, 15,
     "'d' may not be: it has a Gamma prior, whose support is the positive reals"),
    ("data x : real[N]\nd ~ Beta(1, 1)\nz ~ PitmanYor(d, 0)\n", 3, 5,
     "PitmanYor: alpha must be positive or Gamma(shape, rate) when the discount is random ('d': alpha > -discount "
     "for every discount in [0, 1)), got 0.0"),
    ("data x : real[N]\nd ~ Beta(1, 1)\nz ~ PitmanYor(d, 1)\ntheta[k] ~ NormalInverseWishart(kappa0 = d)\n", 4, 42,
     "'d' is the discount (line 3); a random variable is either the discount or a hyperparameter, not both"),
    ("data x : real[N]\nz ~ PitmanYor(d, 1)\nd ~ Beta(1, 1)\n", 2, 15, "'d' is used before it is defined (line 3)"),
])
def test_errors_name_line_column_and_what_was_expected(text, line, column, message):
    with pytest.raises(ModelError) as info:
        parse(text)
    err = info.value
    assert (err.source, err.line, err.column) == ("<string>", line, column), str(err)
    assert message in str(err)
    lines = text.splitlines()
    if line <= len(lines):  # the caret excerpt
        assert str(err).endswith(f"\n    {lines[line - 1]}\n    {' ' * (column - 1)}^")


def test_load_names_the_file_in_errors(tmp_path):
    path = tmp_path / "typo.dp"
    path.write_text("data x : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NIW()\n")
    with pytest.raises(ModelError) as info:
        load(path)
    assert info.value.source == str(path)
    assert str(info.value).startswith(f"{path}:3:12: unknown component prior 'NIW'")


def test_cr_only_line_endings_and_bytes_parse_like_newlines():
    text = "data x : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NormalInverseWishart()\nx[i] ~ Normal(theta[z[i]])\n"
    expected = parse(text)
    for variant in (text.replace("\n", "\r"), text.replace("\n", "\r\n"), text.encode("utf-8"),
                    bytearray(b"\xef\xbb\xbf" + text.encode("utf-8"))):
        model = parse(variant)
        assert (model.prior, model.component, model.data) == (expected.prior, expected.component, expected.data)
        assert model.source == text
    assert dpppl.dsl.parser.as_model(text.replace("\n", "\r")).data == expected.data
    with pytest.raises(ModelError) as info:  # positions still count CR-only lines
        parse("data x : real[N, D]\rz ~ CRP(1)\rtheta[k] ~ NIWW()\r")
    assert (info.value.line, info.value.column) == (3, 12)


@pytest.mark.parametrize("text, message", [
    (None, "the model text must be a str (or UTF-8 bytes), got NoneType"),
    (3, "the model text must be a str (or UTF-8 bytes), got int"),
    (b"data x : real[N, D]\n# caf\xe9\n", "<string>: the model is not UTF-8 text (invalid continuation byte"),
])
def test_model_text_that_is_not_text_is_a_model_error(text, message):
    with pytest.raises(ModelError) as info:
        parse(text)
    assert str(info.value).startswith(message)


def test_model_files_missing_directories_and_latin1_are_model_errors(tmp_path):
    latin1 = tmp_path / "latin1.dp"
    latin1.write_bytes("# mod\u00e8le\ndata x : real[N, D]\n".encode("latin-1"))
    for path, message in ((latin1, "not UTF-8 text (invalid continuation byte at byte 5); save the model "
                                   "file as UTF-8"),
                          (tmp_path / "missing.dp", "no such model file"),
                          (tmp_path, "is a directory, not a model file")):
        with pytest.raises(ModelError) as info:
            load(path)
        assert str(info.value) == f"{path}: {message}" and info.value.source == str(path)
        with pytest.raises(ModelError, match="model"):  # a path given to dpppl.sample
            dpppl.sample(str(path), DATA["real"], progress_bar=False)


def test_model_language_declares_it():
    model = dpppl.parse("""
        data x : real[N, D]
        z ~ CRP(1.0)
        theta[k] ~ NormalLogNormal(m0 = mean(x), s0 = 2, l0 = log(0.5), t0 = 0.5)
        x[i] ~ Normal(theta[z[i]])
    """)
    bound = model.bind(X_SMALL)
    assert isinstance(bound.family, dpppl.NormalLogNormal)
    np.testing.assert_allclose(np.asarray(bound.family.l0), [np.log(0.5)])


# ---------------------------------------------------------------------------- model language, NumPyro


def test_model_language_stick_index_expressions_and_errors():
    text = """data x : real[N]
d = 0.5
theta = 2
z ~ StickBreaking(a = 1 - d, b = theta + i * d)
mu[k] ~ Normal(mu0 = 0, tau2 = 4)
x[j] ~ Normal(mu[z[j]], sigma2 = 0.3)
"""
    model = dpppl.parse(text)
    a, b = model.prior.sticks(4)
    np.testing.assert_allclose(a, 0.5)
    np.testing.assert_allclose(b, 2 + 0.5 * np.arange(1, 5))
    finite = dpppl.parse(text.replace("StickBreaking(a = 1 - d, b = theta + i * d)",
                                      "PseudoParticles(gamma = [1, 0.5, 2])"))
    assert finite.prior.num_sticks == 3
    with pytest.raises(dpppl.ModelError, match="'x' is the data"):
        dpppl.parse(text.replace("theta + i * d", "theta + mean(x)"))
    with pytest.raises(dpppl.ModelError, match="'i' is the stick index"):
        dpppl.parse(text.replace("d = 0.5", "d = 0.5\ni = 3"))
    with pytest.raises(dpppl.ModelError, match="do not sum to one"):
        dpppl.parse(text.replace("theta + i * d", "theta + i^2"))



@pytest.mark.parametrize("terms", [250, 5000])
def test_deeply_nested_expressions_are_a_model_error_not_a_recursion_error(terms):
    chain = " + ".join(["1"] * terms)
    src = f"data x : real[N, D]\nz ~ CRP({chain})\ntheta[k] ~ NormalInverseWishart()\nx[i] ~ Normal(theta[z[i]])\n"
    with pytest.raises(dpppl.ModelError, match=r"<string>:2:\d+: .*nested more than 200 levels"):
        dpppl.parse(src)
    # a long but shallow enough chain still parses
    assert dpppl.parse(src.replace(chain, " + ".join(["1"] * 150))).prior.alpha is not None


@pytest.mark.parametrize("num_sticks", ["1e9", "1e308"])
def test_huge_num_sticks_is_a_model_error_before_any_array_is_made(num_sticks):
    src = (f"data x : real[N, D]\nz ~ PseudoParticles(gamma = 1, num_sticks = {num_sticks})\n"
           "theta[k] ~ NormalInverseWishart()\nx[i] ~ Normal(theta[z[i]])\n")
    with pytest.raises(dpppl.ModelError, match=r"<string>:2:5: .*num_sticks = 1e\+(09|308) is more labels .*at most"):
        dpppl.parse(src)


def test_a_name_defined_twice_is_reported_before_the_lines_after_it_are_parsed():
    """The second definition raises at once: a syntax error further down is not reached."""
    text = "data x : real[N, D]\na = 1\na = 2\n" + "c = (\n" * 3 + "z ~ CRP(1)\n"
    with pytest.raises(ModelError) as info:
        parse(text)
    assert (info.value.line, info.value.column, info.value.bare_message) == (3, 1, "'a' is already defined at line 2")
    with pytest.raises(ModelError) as info:  # the syntax error is reported where it is, in the whole text
        parse(text.replace("a = 2", "b = 2"))
    assert (info.value.line, info.value.column) == (4, 6) and "syntax error" in info.value.bare_message


def test_an_observation_of_a_name_that_is_not_the_data_names_the_data():
    text = "data y : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NormalInverseWishart()\nx[i] ~ Normal(theta[z[i]])\n"
    for lines in (text, text.replace("theta[k] ~ NormalInverseWishart()\nx[i] ~ Normal(theta[z[i]])",
                                     "x[i] ~ Normal(theta[z[i]])\ntheta[k] ~ NormalInverseWishart()")):
        with pytest.raises(ModelError) as info:
            parse(lines)
        assert info.value.column == 1 and lines.splitlines()[info.value.line - 1].startswith("x[i]")
        assert info.value.bare_message == ("'x[i]' is observed here, but the data are named 'y' (line 1); the "
                                           "observation line is 'y[i] ~ Normal(...)'")
