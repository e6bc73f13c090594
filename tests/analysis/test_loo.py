"""The pointwise log_likelihood group (dpppl.run.output): the conditional predictive
log p(x_i | x_-i, z_-i, alpha) per draw, so that PSIS-LOO targets p(x_i | x_-i)."""

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import arviz, group, to_arviz
from dpppl.families.base import segment_stats
from dpppl.run import output
from dpppl.testing.exact import set_partitions
from tests.helpers.jaxprs import count_primitive

NKC = dpppl.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0)
CASES = [
    ("DP, two groups", dpppl.DPMixture(1.0, NKC), [[-2.1], [-1.9], [-2.0], [2.0], [1.8], [2.2]]),
    ("Pitman-Yor, spread", dpppl.PitmanYorMixture(0.3, 0.5, NKC), [[-1.0], [-0.4], [0.1], [0.6], [1.5], [3.0]]),
    # three sticks (b_3 = 0): labelled assignments, 3^5 of them
    ("stick-breaking, 3 sticks", dpppl.StickBreakingMixture((1.0, 2.0, 1.0), (1.0, 1.0, 0.0), NKC),
     [[-2.0], [-1.7], [0.2], [2.1], [2.4]]),
]


def _assignments(prior, n: int) -> np.ndarray:
    """Every labelling to enumerate: the set partitions of n points (exchangeable prior), or every
    assignment of n points to the sticks of a finite stick-breaking prior (labels matter)."""
    if prior.labelled:
        return np.array(list(itertools.product(range(prior.num_sticks), repeat=n)))
    return set_partitions(n)


@jax.jit
def _log_joints(bound, parts):
    """log p(x, z) of every labelling `parts` (B, n) of the points `bound.x` (n, D): the prior's
    probability of it (the EPPF at the fixed alpha, or the labelled law) times the collapsed
    marginals of the clusters."""
    def one(z):
        stats = segment_stats(bound.family, jnp.asarray(bound.x), z, z.shape[0])
        marg = jnp.where(stats.n > 0, bound.family.log_marginal(stats), 0.0)
        return bound.prior.log_eppf(stats.n, bound.prior.initial_alpha) + jnp.sum(marg)

    return jax.vmap(one)(parts)


def _log_evidence(bound, rows) -> float:
    """log p(x_rows) by enumerating every partition of the rows."""
    sub = dataclasses.replace(bound, x=bound.x[rows], observed_x=None)
    return float(jax.nn.logsumexp(_log_joints(sub, jnp.asarray(_assignments(bound.prior, len(rows)), jnp.int32))))


def _exact_posterior_draws(bound, num, rng):
    parts = _assignments(bound.prior, bound.num_points)
    logp = np.asarray(_log_joints(bound, jnp.asarray(parts, jnp.int32)))
    prob = np.exp(logp - logp.max())
    return parts[rng.choice(len(parts), size=num, p=prob / prob.sum())]


@pytest.mark.parametrize("name, model, x", CASES, ids=[c[0] for c in CASES])
def test_psis_loo_of_each_point_is_the_exact_leave_one_out_predictive(name, model, x):
    """Draws of z from the exact posterior (enumerated), the run's pointwise log likelihood of
    each, then ArviZ's PSIS-LOO: each point's elpd_loo_i matches log p(x_i | x_-i) = log p(x) -
    log p(x_-i), both by enumeration (of partitions, or of labelled assignments to the sticks).
    Threshold: 4 Monte Carlo standard errors of the importance-sampling estimate (delta method on
    the mean of the ratios 1 / p(x_i | x_-i, z_-i)), plus 0.01 for Pareto smoothing."""
    bound = model.bind(np.asarray(x, float))
    n, s = bound.num_points, 4000
    z = _exact_posterior_draws(bound, s, np.random.default_rng(1))[None]
    ll = output.pointwise_log_likelihood(bound, z, np.full((1, s), bound.prior.initial_alpha), {})
    assert ll.shape == (1, s, n)
    idata = to_arviz({"posterior": {"num_clusters": z.max(-1) + 1.0}, "log_likelihood": {"x": ll}},
                     dims={"x": ["point"]})
    loo = arviz().loo(idata, pointwise=True)
    assert loo.n_data_points == n
    full = _log_evidence(bound, np.arange(n))
    for i in range(n):
        exact = full - _log_evidence(bound, np.delete(np.arange(n), i))
        ratios = np.exp(-(ll[0, :, i] - ll[0, :, i].max()))
        se = ratios.std() / (ratios.mean() * np.sqrt(s))
        assert abs(float(loo.loo_i[i]) - exact) < 4 * se + 0.01, (i, float(loo.loo_i[i]), exact, se)


def test_a_model_file_run_has_a_pointwise_group_az_loo_counts():
    x = np.concatenate([np.linspace(-3, -2, 10), np.linspace(2, 3, 10)])[:, None]
    idata = dpppl.sample("models/gaussian_known.dp", x, kernel="gibbs", num_samples=20, num_warmup=10,
                         num_chains=1, progress_bar=False)
    ll = group(idata, "log_likelihood")["x"]
    assert ll.dims == ("chain", "draw", "point") and ll.shape == (1, 20, 20)
    assert np.all(np.isfinite(ll.values))
    assert arviz().loo(idata).n_data_points == 20
    off = dpppl.sample("models/gaussian_known.dp", x, kernel="gibbs", num_samples=20, num_warmup=10,
                       num_chains=1, progress_bar=False, log_likelihood=False)
    assert "log_likelihood" not in off.groups()


def test_a_run_s_pointwise_group_computed_chunk_by_chunk_holds_the_values_of_its_draws(monkeypatch):
    """The pointwise log likelihood of each chunk's kept draws is computed while the run goes on
    (`PointwiseParts`; here chunks of one iteration, gathered three at a time): the group holds, bit for
    bit, the values of the run's draws computed together."""
    from dpppl.diagnostics.arviz_compat import partition_group  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    monkeypatch.setattr(runner, "CHUNK_SECONDS", 0.0)  # one iteration a chunk
    monkeypatch.setattr(output.PointwiseParts, "PART_DRAWS", 3)  # parts of 3 draws, the last of 2
    parts = []
    part = output.PointwiseParts._part
    monkeypatch.setattr(output.PointwiseParts, "_part", lambda self: parts.append(
        sum(r["z"].shape[1] for r in self.pending)) or part(self))
    x = np.concatenate([np.linspace(-3, -2, 10), np.linspace(2, 3, 10)])[:, None]
    model = dpppl.load("models/gaussian_known.dp")
    idata = dpppl.sample(model, x, kernel="gibbs", num_samples=20, num_warmup=10, num_chains=1, progress_bar=False)
    assert parts == [3] * 6 + [2]
    bound, z = model.bind(x), partition_group(idata)["z"].values
    hyper = {k: idata.posterior[k].values for k in model.hyperpriors}
    expected = output.pointwise_log_likelihood(bound, z, np.full(z.shape[:2], bound.prior.initial_alpha), hyper)
    np.testing.assert_array_equal(group(idata, "log_likelihood")["x"].values, expected)


def test_the_option_is_checked_before_sampling(monkeypatch):
    x = np.zeros((4, 1))
    with pytest.raises(dpppl.ArgumentError, match="log_likelihood must be True, False or 'auto', got 'yes'"):
        dpppl.sample("models/gaussian_known.dp", x, log_likelihood="yes")
    with pytest.raises(dpppl.ArgumentError, match="log_likelihood=True: NormalLogNormal has no closed-form "
                                                  "posterior predictive"):
        dpppl.sample("models/gaussian_lognormal.dp", np.arange(4.0)[:, None], log_likelihood=True)
    with pytest.raises(dpppl.ArgumentError, match="log_likelihood=True: kernel='nuts' records each point's most "
                                                  "probable component"):
        dpppl.sample("models/gaussian_known.dp", x, kernel="nuts", log_likelihood=True)
    monkeypatch.setattr(output, "LOG_LIKELIHOOD_BUDGET", 10)
    with pytest.warns(RuntimeWarning, match="no log_likelihood group: chains x draws x points = 16 values"):
        assert not output.check_log_likelihood("auto", None, 16)
    assert output.check_log_likelihood(True, None, 16)


def _log_gm(ranking, sigma, theta):
    """log GM(ranking | sigma, theta) by its definition (docs/rankings.md): at stage j the code
    s_j counts the unranked items sigma puts ahead of ranking[j]; psi_m = sum_{k<=m} e^(-theta_j k)."""
    n, remaining, total = len(sigma), list(sigma), 0.0
    for j, item in enumerate(int(v) for v in ranking[: min(int(np.sum(ranking >= 0)), n - 1)]):
        s = remaining.index(item)
        total -= theta[j] * s + np.log(np.sum(np.exp(-theta[j] * np.arange(n - j))))
        remaining.remove(item)
    return total


def test_a_rankings_run_has_each_point_s_density_under_its_own_cluster():
    """Generalized Mallows: log GM(x_i | sigma_(z_i), theta_(z_i)) of the recorded parameters, as a
    NumPy recomputation from the run's records gives it at the last draw; az.loo sees N points."""
    rng = np.random.default_rng(0)
    x = np.array([rng.permutation(4) for _ in range(8)], float)
    x[2, 2:] = -1  # a top-2 ranking
    idata = dpppl.sample("models/rankings.dp", x, kernel="mallows-slice", num_samples=5, num_warmup=2,
                         num_chains=1, progress_bar=False)
    ll = group(idata, "log_likelihood")["r"]
    assert ll.dims == ("chain", "draw", "point") and ll.shape == (1, 5, 8)
    part = group(idata, "posterior_partition")
    assert "theta" not in group(idata, "posterior")  # per cluster: out of ArviZ's default summaries
    z, slot = part["z"].values[0, -1], list(part["gm_cluster_slot"].values[0, -1])
    sigma, theta = part["sigma"].values[0, -1], part["theta"].values[0, -1]
    expected = [_log_gm(x[i], sigma[slot.index(z[i])], theta[slot.index(z[i])]) for i in range(8)]
    assert np.allclose(ll.values[0, -1], expected, rtol=1e-10)
    assert arviz().loo(idata).n_data_points == 8


def test_recorded_cluster_finds_each_label_among_the_recorded_slots():
    z = np.array([[[3, 0, 3, 5]]])
    assert output.recorded_cluster(z, np.array([[[0, 3, -1]]])).tolist() == [[[1, 0, 1, -1]]]


@pytest.mark.parametrize("num_cov", [1, 2])
def test_ddp_pointwise_density_is_each_point_s_atom_at_its_slice(num_cov):
    """log N(x_i; mu_(z_i, t_i), Sigma_(z_i, s(t_i))) of recorded atoms, against SciPy, with one
    covariance per label (shared) or one per slice."""
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(1)
    x, slices = rng.normal(size=(5, 2)), np.array([0, 1, 1, 0, 1])
    z = rng.integers(0, 3, (2, 3, 5))
    mu = rng.normal(size=(2, 3, 3, 2, 2))
    a = rng.normal(size=(2, 3, 3, num_cov, 2, 2))
    cov = a @ np.swapaxes(a, -1, -2) + np.eye(2)
    ll = output.ddp_log_likelihood(x, slices, z, mu, cov)
    assert ll.shape == (2, 3, 5)
    for c, d, i in itertools.product(range(2), range(3), range(5)):
        k, t = z[c, d, i], slices[i]
        expected = multivariate_normal(mu[c, d, k, t], cov[c, d, k, t if num_cov == 2 else 0]).logpdf(x[i])
        assert ll[c, d, i] == pytest.approx(expected, rel=1e-10)


def test_the_conditional_predictive_holds_one_copy_of_each_family_function():
    """`conditional_log_predictive` calls the family's log marginal once (the slots and the points
    without themselves, stacked) and its predictive parameters once (the slots and an empty cluster):
    the compiled pointwise program holds as many log-gamma functions as one call of each, not two."""
    model = dpppl.load("models/gaussian_niw.dp")
    bound = model.bind(np.array([[0.1, 1.0], [0.3, 1.2], [2.0, -1.0], [2.4, -0.8]]))
    family, x, z = bound.family, jnp.asarray(bound.x), jnp.array([0, 0, 1, 1], jnp.int32)

    def lgammas(fn, *args):
        return count_primitive(jax.make_jaxpr(fn)(*args).jaxpr, "lgamma")

    stats = segment_stats(family, x, z, 4)
    one_each = lgammas(family.log_marginal, stats) + lgammas(family.predictive_params, stats)
    assert one_each > 0
    assert lgammas(lambda x, z: output.conditional_log_predictive(family, bound.prior, x, z, 1.0, 4), x, z) == one_each


def test_a_labelled_prior_s_clusters_renumbered_keep_their_labels_seat_weights():
    """A stick-breaking draw whose clusters sit at labels 0, 5 and 9 of 16: the pointwise predictive
    on the clusters renumbered 0..2 with their labels passed as `slot` (what `pointwise_log_likelihood`
    runs, its cost following the clusters) equals the one on the labels themselves (16 slots)."""
    model = dpppl.load("models/stick_breaking.dp")
    rng = np.random.default_rng(3)
    bound = model.bind(rng.normal(size=(7, 2)))
    x, labels = jnp.asarray(bound.x), np.array([5, 0, 9, 5, 0, 9, 9])

    def predictive(z, capacity, slot=None, num_labels=None):
        """One compiled program, as `pointwise_log_likelihood` runs it (op by op, a fresh process
        compiles some 150 small programs per call)."""
        return jax.jit(lambda z, slot: output.conditional_log_predictive(
            bound.family, bound.prior, x, z, 1.0, capacity, slot, num_labels))(jnp.asarray(z), slot)

    on_labels = predictive(labels, 16)
    clusters, slot, capacity, num_labels = output.slot_labels(bound.prior, labels[None], 7)
    assert capacity == output.MIN_SLOTS and num_labels >= 16 and list(slot[0, :3]) == [0, 5, 9]
    renumbered = predictive(clusters[0], capacity, jnp.asarray(slot[0]), num_labels)
    np.testing.assert_allclose(renumbered, on_labels, rtol=1e-12)


def _draws_of_many_sizes(n, rng):
    """Labels (1, 12, n) of draws with 1 to 12 clusters (several `SLOT_CHUNK` blocks), shuffled."""
    sizes = rng.permutation(np.arange(1, 13))
    return np.stack([rng.permutation(np.arange(n) % k) * 3 for k in sizes])[None]  # labels 0, 3, 6, ...


def test_each_draw_s_predictive_runs_over_its_own_clusters_in_blocks():
    """`pointwise_log_likelihood` runs the draws in order of their number of clusters, each block
    over the slots its draws fill (`SLOT_CHUNK` at a time): every draw's values, back in the run's
    order, are those of `conditional_log_predictive` over all 32 slots of that draw alone."""
    model = dpppl.load("models/gaussian_niw.dp")
    rng = np.random.default_rng(5)
    bound = model.bind(rng.normal(size=(30, 2)))
    z, alpha = _draws_of_many_sizes(30, rng), rng.gamma(2.0, size=(1, 12))
    assert output.SLOT_CHUNK < 12 < output.MIN_SLOTS
    ll = output.pointwise_log_likelihood(bound, z, alpha, {})
    clusters, _, capacity, _ = output.slot_labels(bound.prior, z[0], 30)
    every_slot = jax.jit(jax.vmap(lambda labels, a: output.conditional_log_predictive(
        bound.family, bound.prior, jnp.asarray(bound.x), labels, a, capacity)))
    np.testing.assert_allclose(ll[0], every_slot(jnp.asarray(clusters), jnp.asarray(alpha[0])), rtol=1e-12)


def test_a_run_s_pointwise_program_compiles_while_its_chains_run():
    """`prepare_pointwise` compiles, in a thread, the program `pointwise_log_likelihood` then runs on
    the run's draws (fewer than `MIN_SLOTS` clusters): that call lowers nothing."""
    from tests.run.test_compile_once import lowerings  # noqa: PLC0415

    model = dpppl.load("models/gaussian_niw.dp")
    rng = np.random.default_rng(6)
    bound = model.bind(rng.normal(size=(40, 2)))
    z = _draws_of_many_sizes(40, rng)[:, :7]  # 7 draws: blocks of 8, a program of no other test
    alpha = rng.gamma(2.0, size=(1, 7))
    compiling = output.prepare_pointwise(bound, 7)
    assert compiling is not None
    output.settle(compiling)
    with lowerings() as programs:
        ll = output.pointwise_log_likelihood(bound, z, alpha, {})
    assert programs == [] and np.all(np.isfinite(ll))
