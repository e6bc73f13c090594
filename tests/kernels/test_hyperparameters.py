"""Random hyperparameters of the base measure: the family at the state's values, the collapsed `lp`,
the slice update, and what refuses them (issue 31). Enumeration checks are in
tests/statistical/test_hyperparameter_exactness.py."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from numpyro.distributions import constraints
from numpyro.infer import Predictive
from scipy import stats

import dpppl
from dpppl.errors import ArgumentError, KernelError, ModelError
from dpppl.kernels.hyperparameters import (build_hyperparameter_kernel, collapsed_log_likelihood,
                                          conjugate_fields, slice_update)
from dpppl.priors.hyperpriors import Hyperprior
from dpppl.diagnostics.arviz_compat import group
from dpppl.run.portable import Reader, Writer
from tests.helpers.jaxprs import count_primitive
from tests.run.runs import assert_same_run, stop_at_chunk

X = np.array([[0.3, 1.0], [0.5, 1.4], [2.0, -1.0], [2.2, -0.7], [4.0, 0.1]])
RANDOM = """data x : real[N, D]
m ~ Normal(0, 10)
t ~ Gamma(2, 4)
s ~ InverseGamma(3, 2)
z ~ CRP(1.0)
theta[k] ~ NormalInverseWishart(mu0 = m, kappa0 = t, nu0 = 4, psi0 = 2 * s)
x[i] ~ Normal(theta[z[i]])
"""
FIXED = RANDOM.replace("mu0 = m, kappa0 = t, nu0 = 4, psi0 = 2 * s", "mu0 = 1.5, kappa0 = 0.3, nu0 = 4, psi0 = 1.6")
VALUES = {"m": 1.5, "t": 0.3, "s": 0.8}


def test_the_family_at_the_hyperparameters_is_the_family_resolved_at_those_values():
    """`lp` of a state at m = 1.5, t = 0.3, s = 0.8 is the fixed model's `lp` (mu0 = 1.5 moved to the
    translated frame, psi0 = 2 s I) plus the three priors' log densities."""
    model = dpppl.parse(RANDOM)
    assert model.hyperpriors == {"m": Hyperprior("Normal", (0, 10)), "t": Hyperprior("Gamma", (2, 4)),
                                 "s": Hyperprior("InverseGamma", (3, 2))}
    random, fixed = model.bind(X), dpppl.parse(FIXED).bind(X)
    labels = jnp.array([0, 0, 1, 1, 2])
    state = random.state_from_labels(None, labels, 6)
    assert set(state.hyper) == {"m", "t", "s"}
    state = state._replace(hyper={k: jnp.asarray(v) for k, v in VALUES.items()})
    priors = sum(float(stats_prior.logpdf(VALUES[name])) for name, stats_prior in
                 (("m", stats.norm(0, 10)), ("t", stats.gamma(2, scale=1 / 4)), ("s", stats.invgamma(3, scale=2))))
    expected = float(fixed.lp(fixed.state_from_labels(None, labels, 6))) + priors
    assert float(random.lp(state)) == pytest.approx(expected, rel=1e-12)


def test_chains_start_at_the_priors_medians():
    state = dpppl.parse(RANDOM).bind(X).empty_state(4)
    assert {k: float(v) for k, v in state.hyper.items()} == pytest.approx(
        {"m": 0.0, "t": stats.gamma(2, scale=1 / 4).median(), "s": stats.invgamma(3, scale=2).median()})


@pytest.mark.parametrize("distribution, params", [
    ("Normal", (1.5, 3.0)), ("Gamma", (0.7, 3.3)), ("InverseGamma", (0.5, 50.0)), ("HalfNormal", (2.0,)),
    ("LogNormal", (0.3, 1.2)), ("Uniform", (0.1, 0.7)), ("Beta", (0.5, 0.3)), ("Exponential", (3.0,))])
def test_every_hyperprior_starts_at_its_median(distribution, params):
    """`initial_value` (scipy.stats' quantile formulas on `scipy.special`, so a run does not import
    `scipy.stats`) is scipy.stats' median of the same distribution, to the last bit: chains start where
    they did."""
    prior = Hyperprior(distribution, params)
    assert prior.initial_value == float(prior.scipy().median())


def test_the_slice_update_leaves_its_target_invariant_when_the_step_budget_binds():
    """From exact draws of N(0, 1), one update with a narrow interval (w = 0.1) and m = 4 steps (the
    budget binds at almost every update) keeps the law: the random split of the budget between the
    sides makes the update reversible."""
    keys = jax.random.split(jax.random.key(0), 2)
    start = jax.random.normal(keys[0], (20000,))
    update = jax.vmap(lambda k, u: slice_update(k, u, lambda v: -0.5 * v**2, 0.1, max_steps=4))
    moved = np.asarray(update(jax.random.split(keys[1], start.shape[0]), start))
    assert np.mean(np.abs(moved - np.asarray(start)) > 0) > 0.99
    assert stats.kstest(moved, "norm").pvalue > 1e-3


def test_the_slice_update_holds_one_copy_of_its_log_density():
    """The level, both step-outs and the shrinkage evaluate the log density at one place of the
    program (a random hyperparameter's density holds every cluster's marginal likelihood: four
    copies of it were four copies of that sum in the compiled chunk)."""
    jaxpr = jax.make_jaxpr(lambda k, u: slice_update(k, u, lambda v: -jnp.cosh(v), 0.5))(jax.random.key(0), 0.3)
    assert count_primitive(jaxpr.jaxpr, "cosh") == 1


def test_the_hyperparameter_move_holds_one_copy_of_the_marginal_likelihoods():
    """m, t and s are updated by one loop over them: the traced step holds the clusters' marginal
    likelihoods once (with the priors' densities), not once per hyperparameter."""
    x = np.random.default_rng(0).normal(size=(12, 2))
    bound = dpppl.parse(RANDOM).bind(x)
    state = bound.empty_state(4)
    step = build_hyperparameter_kernel(bound).step
    in_step = count_primitive(jax.make_jaxpr(lambda k, s: step(k, s, x))(jax.random.key(0), state).jaxpr, "lgamma")
    once = count_primitive(jax.make_jaxpr(lambda s: collapsed_log_likelihood(bound, s, s.hyper))(state).jaxpr, "lgamma")
    priors = sum(count_primitive(jax.make_jaxpr(prior.log_prob_unconstrained)(0.3).jaxpr, "lgamma")
                 for prior in bound.model.hyperpriors.values())
    assert once > 0 and in_step == once + priors


def test_kernels_that_instantiate_parameters_refuse_random_hyperparameters_and_nuts_takes_them():
    model = dpppl.parse(RANDOM)
    with pytest.raises(KernelError, match="kernel 'subcluster' does not apply to this model: random "
                                          r"hyperparameters \(m, t, s\) are sampled beside the collapsed partition "
                                          "kernels or by nuts"):
        dpppl.kernels.check_applies("subcluster", model)
    dpppl.kernels.check_applies("nuts", model)  # no error: they are sites of the compiled model


FIELDS = ("mu0", "kappa0", "nu0", "psi0")


def traced_compiled(fn, x):
    """What the trace of a compiled model on `x` at the hyperparameters VALUES (other sites drawn) says,
    traced once (not op by op): each hyperparameter site's support and log density at its value, and
    the fields of the family the data site uses."""
    sites = {}

    def run(x):
        conditioned = numpyro.handlers.substitute(numpyro.handlers.seed(fn, 0), data=VALUES)
        tr = numpyro.handlers.trace(conditioned).get_trace(x)
        sites.update({name: (tr[name]["type"], tr[name]["is_observed"], tr[name]["fn"].support) for name in VALUES})
        family = tr["x"]["fn"].base_dist.family  # the point plate expands the mixture
        return ({name: tr[name]["fn"].log_prob(tr[name]["value"]) for name in VALUES},
                {field: getattr(family, field) for field in FIELDS})

    log_probs, fields = jax.jit(run)(x)
    return sites, log_probs, fields


def test_each_random_hyperparameter_is_a_site_of_the_compiled_model_with_its_prior():
    """A site under its name with its prior's support and density; the family the data site uses is
    the fixed model's at those values, in the data's frame (`numpyro_model`) and in NUTS's translated
    frame (`nuts_model`)."""
    model = dpppl.parse(RANDOM)
    random, fixed = model.bind(X), dpppl.parse(FIXED).bind(X)
    sites, log_probs, fields = traced_compiled(random.numpyro_model(4), X)
    supports = {"m": constraints.real, "t": constraints.positive, "s": constraints.positive}
    for name, support in supports.items():
        assert sites[name] == ("sample", False, support)
        assert float(log_probs[name]) == pytest.approx(float(model.hyperpriors[name].log_prob(VALUES[name])),
                                                       rel=1e-12)
    compiled, args = random.nuts_model(4)
    for got, want in ((fields, fixed.data_family), (traced_compiled(compiled, *args)[2], fixed.family)):
        for field in FIELDS:
            np.testing.assert_allclose(got[field], getattr(want, field), rtol=1e-12, atol=1e-12)


def test_the_lp_of_a_nuts_draw_includes_the_hyperpriors():
    """`lp_of_draw` (what `kernel="nuts"` records) at the draw's hyperparameters is the fixed model's
    collapsed joint of the partition plus the priors' log densities."""
    model = dpppl.parse(RANDOM)
    random, fixed = model.bind(X), dpppl.parse(FIXED).bind(X)
    labels = jnp.array([0, 0, 1, 1, 2])
    priors = sum(float(prior.log_prob(VALUES[name])) for name, prior in model.hyperpriors.items())
    expected = float(fixed.lp_of_draw(labels, {}, 6)) + priors
    draw = {name: jnp.asarray(value) for name, value in VALUES.items()}
    assert float(random.lp_of_draw(labels, draw, 6)) == pytest.approx(expected, rel=1e-12)


def test_predictive_draws_the_hyperparameters_from_their_priors():
    """The prior predictive: each hyperparameter's draws have its prior's mean within Monte Carlo error
    (4 standard errors). (With data, tests/models/test_model_files.py draws them for the model files.)"""
    text = ("data x : real[N]\nm ~ Normal(0, 10)\nt ~ Gamma(2, 4)\ns ~ InverseGamma(3, 2)\nz ~ CRP(1.0)\n"
            "theta[k] ~ Normal(mu0 = m, tau2 = t)\nx[i] ~ Normal(theta[z[i]], sigma2 = s)\n")  # cheaper than NIW
    fn = dpppl.parse(text).numpyro_model(2)
    moments = {"m": stats.norm(0, 10), "t": stats.gamma(2, scale=1 / 4), "s": stats.invgamma(3, scale=2)}
    num = 2000
    draws = Predictive(fn, num_samples=num)(jax.random.key(7), None, num_points=3)
    assert np.asarray(draws["x"]).shape == (num, 3, 1)
    for name, law in moments.items():
        assert abs(float(np.mean(draws[name])) - law.mean()) < 4 * law.std() / np.sqrt(num), name


def test_a_model_with_random_hyperparameters_is_plain_data():
    """A checkpoint saves the model as plain data (`dpppl.run.portable`): its priors come back."""
    model = dpppl.parse(RANDOM)
    writer = Writer()
    tree = writer.describe(model)
    back = Reader(writer.arrays).value(tree)
    assert back.hyperpriors == model.hyperpriors and back.random_fields() == model.random_fields()


def test_an_unknown_distribution_or_wrong_parameters_of_a_hyperprior_raise():
    with pytest.raises(ModelError, match="unknown hyperprior 'Cauchy'"):
        Hyperprior("Cauchy", (0, 1))
    with pytest.raises(ModelError, match=r"Uniform: low must be below high, got low = 2.0, high = 1.0"):
        Hyperprior("Uniform", (2, 1))


def test_models_with_random_hyperparameters_stay_hashable():
    model = dpppl.parse(RANDOM)
    assert hash(model) == hash(dpppl.parse(RANDOM)) and model == dpppl.parse(RANDOM)
    assert model != dpppl.parse(RANDOM.replace("Normal(0, 10)", "Normal(0, 11)"))


def test_sample_prior_draws_the_hyperparameters_and_the_data_at_them():
    """Each draw's m is in `prior` (its prior's mean within Monte Carlo error) and its data are drawn at
    it: with clusters' means within sqrt(0.01) of m and points within sqrt(0.01) of their mean, every
    simulated point lies near its draw's m."""
    text = ("data x : real[N, D]\nm ~ Normal(0, 10)\nz ~ CRP(1.0)\n"
            "theta[k] ~ Normal(mu0 = m, tau2 = 0.01)\nx[i] ~ Normal(theta[z[i]], sigma2 = 0.01)\n")
    num = 2000
    idata = dpppl.sample_prior(dpppl.parse(text), 4, num_samples=num, dim=2)
    m = np.asarray(group(idata, "prior")["m"])[0]
    assert abs(float(np.mean(m))) < 4 * 10 / np.sqrt(num) and float(np.std(m)) > 5
    x = np.asarray(group(idata, "prior_predictive")["x"])[0]
    assert np.max(np.abs(x - m[:, None, None])) < 1.5


def test_a_run_with_random_hyperparameters_resumes_from_its_checkpoint_as_if_never_stopped(tmp_path, monkeypatch):
    """The hyperparameters are in the chain states a checkpoint saves (`PartitionState.hyper`): a run
    stopped at its fifth chunk (a kept draw) and resumed makes the draws of the run that was not stopped, m and
    t in `posterior` included."""
    model, x = dpppl.parse(RANDOM), X
    options = dict(kernel="gibbs", num_warmup=2, num_samples=4, num_chains=2, seed=5, progress_bar=False)
    expected = dpppl.sample(model, x, **options)
    assert {"m", "t", "s"} <= set(group(expected, "posterior").data_vars)
    path = tmp_path / "run.ckpt"
    stop_at_chunk(monkeypatch, 5)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        dpppl.sample(model, x, checkpoint=path, **options)
    monkeypatch.undo()
    assert_same_run(dpppl.resume(path, progress_bar=False), expected)


@pytest.mark.parametrize("kind, component, observation, values", [
    ("real[N, D]", "Normal(mu0 = {m}, tau2 = {t})", "Normal(theta[z[i]], sigma2 = {s})",
     {"m": -0.4, "t": 2.5, "s": 0.7}),
    ("real[N, D]", "NormalGamma(mu0 = {m}, kappa0 = {t}, a0 = 2 + {s}, b0 = {s} / 2)", "Normal(theta[z[i]])",
     {"m": 0.8, "t": 0.3, "s": 1.7}),
    ("binary[N, D]", "Beta(a = {t}, b = {s})", "Bernoulli(theta[z[i]])", {"t": 0.6, "s": 2.2}),
    ("count[N, D]", "Dirichlet(beta = {t} * {s})", "Multinomial(theta[z[i]])", {"t": 0.6, "s": 2.2}),
])
def test_every_family_with_random_hyperparameters_scores_as_the_fixed_family(kind, component, observation, values):
    """`lp` at given values is the fixed model's plus the priors' densities, for each family that takes
    random hyperparameters (an expression of two of them included)."""
    priors = {"m": "Normal(0, 3)", "t": "Gamma(2, 1)", "s": "LogNormal(0, 1)"}
    head = f"data x : {kind}\nz ~ CRP(1.0)\n"
    lines = "theta[k] ~ " + component + "\nx[i] ~ " + observation + "\n"
    model = dpppl.parse(head + "".join(f"{name} ~ {priors[name]}\n" for name in values)
                        + lines.format(**{name: name for name in values}))
    reference = dpppl.parse(head + lines.format(**{name: repr(value) for name, value in values.items()}))
    assert set(model.hyperpriors) == set(values) and not reference.hyperpriors
    x = X if kind.startswith("real") else np.minimum(np.abs(X).round(), 1 if kind.startswith("binary") else 9)
    labels = jnp.array([0, 0, 1, 1, 2])
    random_bound, fixed_bound = model.bind(x), reference.bind(x)
    state = random_bound.state_from_labels(None, labels, 6)._replace(
        hyper={k: jnp.asarray(v) for k, v in values.items()})
    densities = sum(float(model.hyperpriors[name].log_prob(value)) for name, value in values.items())
    # each lp one compiled program, as a kernel runs it (op by op, a fresh process compiles a program per operation)
    expected = float(jax.jit(fixed_bound.lp)(fixed_bound.state_from_labels(None, labels, 6))) + densities
    assert float(jax.jit(random_bound.lp)(state)) == pytest.approx(expected, rel=1e-12)


def test_a_random_scale_of_a_fixed_matrix():
    """`psi0 = s * c` with `c` a constant positive definite matrix (negative entries allowed) and
    `psi0 = s * eye(D)` are positive for every s > 0; a matrix that is not positive definite is not."""
    head = "data x : real[N, D]\nz ~ CRP(1.0)\ns ~ Gamma(2, 2)\nc = [[1, -0.5], [-0.5, 1]]\n"
    tail = "x[i] ~ Normal(theta[z[i]])\n"
    for psi0, expected in (("s * c", [[1.0, -0.5], [-0.5, 1.0]]), ("s * eye(D)", np.eye(2))):
        target = dpppl.parse(head + f"theta[k] ~ NormalInverseWishart(psi0 = {psi0})\n" + tail).bind(X)
        family = target.at_hyperparameters({"s": jnp.asarray(3.0)}).family
        np.testing.assert_allclose(family.psi0, 3.0 * np.asarray(expected), rtol=1e-15)
    with pytest.raises(ModelError, match=r"psi0 of NormalInverseWishart must be positive, but 's \* \[\[1, 2\], "
                                         r"\[2, 1\]\]' is not positive for every value of s"):
        dpppl.parse(head + "theta[k] ~ NormalInverseWishart(psi0 = s * [[1, 2], [2, 1]])\n" + tail)


def test_the_move_is_appended_after_a_random_scan_hybrid():
    """Under `schedule="random"` the hybrid's parts share the iterations and the hyperparameter move
    runs every iteration after them; the weights are one per part of the hybrid."""
    target = dpppl.parse(RANDOM).bind(X)
    kernel = dpppl.kernels.build("gibbs+splitmerge", target, schedule="random", weights=[1, 2])
    assert [part.name for part in kernel.parts] == ["gibbs+splitmerge", "hyperparameters"] and kernel.exact
    with pytest.raises(KernelError, match=r"weights must have one entry per part of the hybrid \(2\), got 3"):
        dpppl.kernels.build("gibbs+splitmerge", target, schedule="random", weights=[1, 2, 3])


def test_the_conjugate_route_takes_the_bare_names_with_conjugate_priors_used_once():
    """Escobar & West's route updates `mu0 = m` (Normal prior), `kappa0 = t` and `psi0 = s` (Gamma priors) of
    the Normal-Inverse-Wishart family and NormalKnownCov's `mu0 = m`, and the entries of `mu0 = [m, u]`
    together; an expression, a prior that is not conjugate, a name used in a second field (or twice in
    the vector), a vector with a number in it, or a family without closed-form conditionals keeps the
    slice update."""
    assert conjugate_fields(dpppl.parse(RANDOM)) == {"m": "mu0", "t": "kappa0"}
    assert conjugate_fields(dpppl.parse(RANDOM.replace("mu0 = m,", "mu0 = m + 1,"))) == {"t": "kappa0"}
    assert conjugate_fields(dpppl.parse(RANDOM.replace("t ~ Gamma(2, 4)", "t ~ LogNormal(0, 1)"))) == {"m": "mu0"}
    assert conjugate_fields(dpppl.parse(RANDOM.replace("psi0 = 2 * s", "psi0 = 2 * s * t"))) == {"m": "mu0"}
    assert conjugate_fields(dpppl.parse(RANDOM.replace("s ~ InverseGamma(3, 2)", "s ~ Gamma(3, 2)").replace(
        "psi0 = 2 * s", "psi0 = s"))) == {"m": "mu0", "t": "kappa0", "s": "psi0"}  # the scale s I: Gamma
    head = "data x : real[N, D]\nz ~ CRP(1.0)\nm ~ Normal(0, 3)\nt ~ Gamma(2, 1)\n"
    known = head + "theta[k] ~ Normal(mu0 = m, tau2 = t)\nx[i] ~ Normal(theta[z[i]], sigma2 = 1)\n"
    assert conjugate_fields(dpppl.parse(known)) == {"m": "mu0"}
    diagonal = head + "theta[k] ~ NormalGamma(mu0 = m, kappa0 = t)\nx[i] ~ Normal(theta[z[i]])\n"
    assert conjugate_fields(dpppl.parse(diagonal)) == {}
    # a vector location of bare names with Normal priors, each used once: drawn jointly
    vector = head.replace("t ~ Gamma(2, 1)", "u ~ Normal(1, 2)") + (
        "theta[k] ~ NormalInverseWishart(mu0 = [m, u], nu0 = 4)\nx[i] ~ Normal(theta[z[i]])\n")
    assert conjugate_fields(dpppl.parse(vector)) == {"m": "mu0", "u": "mu0"}
    for other in ("[m, 2 * u]", "[m, 0]", "[m, m]"):
        assert conjugate_fields(dpppl.parse(vector.replace("[m, u]", other).replace(
            "u ~ Normal(1, 2)\n", "u ~ Normal(1, 2)\n" if "u" in other else ""))) == {}


def test_the_hyperparameter_move_option_is_checked_before_sampling():
    """`hyper_move` is an option of the hyperparameter move: a value that is not a move, or the option
    given for a model without random hyperparameters, is refused when the kernel is built."""
    target = dpppl.parse(RANDOM).bind(X)
    assert dpppl.kernels.build("gibbs", target, hyper_move="slice").exact
    with pytest.raises(ArgumentError, match=r"option hyper_move \(the move of the random hyperparameters\) must be "
                                            r"one of 'conjugate', 'slice', got 'gibs'"):
        dpppl.kernels.build("gibbs", target, hyper_move="gibs")
    with pytest.raises(KernelError, match=r"unknown option\(s\) \['hyper_move'\] for kernel 'gibbs'"):
        dpppl.kernels.build("gibbs", dpppl.parse(FIXED).bind(X), hyper_move="slice")
