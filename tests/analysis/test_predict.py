"""Prediction for new points (dpppl.analysis.predict)."""

import numpy as np
import pytest

import dpppl
from dpppl.analysis.predict import Predictor
from dpppl.testing import exact_posterior, set_partitions


@pytest.mark.parametrize("model", [
    dpppl.PitmanYorMixture(0.3, 0.8, dpppl.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0,
                                                                 psi0=np.eye(2))),
    dpppl.DPMixture(1.3, dpppl.NormalKnownCov(sigma2=0.5, mu0=0.0, tau2=2.0)),
], ids=["py-niw", "dp-known"])
def test_predict_matches_enumeration_of_the_augmented_data(model):
    """With every partition of the training points weighted by its exact posterior, the
    membership probabilities and the predictive density are exact: compare them with
    the enumeration of all partitions of training + new point (dpppl.log_joint)."""
    rng = np.random.default_rng(2)
    n = 4
    x, x_new = rng.normal(size=(n, 2)), 2 * rng.normal(size=(3, 2))
    exact = exact_posterior(model, x)
    clustering = np.array([0, 0, 1, 2])
    alpha = model.prior.initial_alpha
    pred = Predictor(model.bind(x), exact.partitions, alpha, clustering, log_weights=exact.log_prob)(x_new)
    # log p(x) = log p(x, C) - log p(C | x) for any partition C (here all in one cluster)
    log_evidence = dpppl.log_joint(model, x, np.zeros(n, int)) - exact.log_prob[0]
    augmented = set_partitions(n + 1)
    for m in range(x_new.shape[0]):
        x_aug = np.vstack([x, x_new[m]])
        exact_aug = exact_posterior(model, x_aug)
        w = exact_aug.prob
        expected = np.zeros(4)
        for p, wp in zip(augmented, w):
            mates = np.nonzero(p[:n] == p[n])[0]
            if mates.size == 0:
                expected[3] += wp
            else:  # a random mate of the new point lies in summary cluster k
                expected[:3] += wp * np.bincount(clustering[mates], minlength=3) / mates.size
        np.testing.assert_allclose(pred.proba[m], expected, atol=1e-12)
        log_marginal = dpppl.log_joint(model, x_aug, np.zeros(n + 1, int)) - exact_aug.log_prob[0]
        assert pred.log_density[m] == pytest.approx(log_marginal - log_evidence, abs=1e-10)


@pytest.fixture(scope="module")
def blobs_run():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-4, 0.6, (15, 1)), rng.normal(4, 0.6, (15, 1))])
    model = dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), dpppl.NormalKnownCov(sigma2=0.4, mu0=0.0, tau2=16.0))
    idata = dpppl.sample(model, x, num_warmup=20, num_samples=200, num_chains=2, seed=0, progress_bar=False)
    return model, x, idata


def test_predict_from_a_run(blobs_run):
    model, x, idata = blobs_run
    new = np.array([[-4.0], [4.0], [40.0], [0.0]])
    pred = dpppl.predict(idata, model, new)
    k = int(pred.clustering.max()) + 1
    assert pred.proba.shape == (4, k + 1) and pred.log_density.shape == (4,)
    np.testing.assert_allclose(pred.proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(pred.clustering, dpppl.point_estimate(idata, "vi"))
    assert k == 2
    left, right = pred.clustering[0], pred.clustering[-1]
    assert pred.proba[0, left] > 0.95 and pred.proba[1, right] > 0.95
    assert pred.proba[2, -1] > 0.99                        # far from the data: a new cluster
    assert pred.log_density[2] < pred.log_density[0] - 10
    # with the training partition as the summary, averaging the draws' own clusters
    same = dpppl.predict(idata, model.bind(x), new, clustering="dahl")
    np.testing.assert_allclose(same.log_density, pred.log_density, rtol=1e-12)


def test_posterior_predictive_density_integrates_to_one(blobs_run):
    model, _, idata = blobs_run
    grid = np.linspace(-60, 60, 4001)[:, None]
    density = np.exp(dpppl.predict(idata, model, grid, clustering=np.zeros(30, int)).log_density)
    assert np.trapezoid(density, grid[:, 0]) == pytest.approx(1.0, abs=1e-6)


def test_predict_binds_to_the_run_data(run):
    """The conftest run's data and prior with hyperparameters from the data: its shapes, so its programs."""
    x = run[1]
    model = dpppl.DPMixture(0.7, dpppl.NormalInverseWishart())   # data-dependent hyperparameters
    idata = dpppl.sample(model, x, num_warmup=2, num_samples=10, num_chains=2, init="single", progress_bar=False)
    new = np.zeros((2, 2))
    a = dpppl.predict(idata, model, new, clustering="best")
    b = dpppl.predict(idata, model.bind(x), new, clustering="best")
    np.testing.assert_allclose(a.proba, b.proba)
    with pytest.raises(dpppl.DataError, match="differ"):
        dpppl.predict(idata, model.bind(x + 1), new)
    with pytest.raises(dpppl.DataError, match="columns"):
        dpppl.predict(idata, model, np.zeros((2, 3)))
    with pytest.raises(dpppl.DataError, match="non-finite"):
        dpppl.predict(idata, model, np.array([[np.nan, 0.0]]))
    with pytest.raises(dpppl.DataError, match="one label per training point"):
        dpppl.predict(idata, model, new, clustering=np.zeros(5, int))



def test_prediction_is_the_same_on_shifted_data():
    """A translation-invariant model (mu0 = mean(x)): predicting x_new + c from training
    data x + c gives the probabilities and densities of x_new from x, to float64 rounding
    (the new points are translated like the training points before any cast)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(-4, 0.6, (15, 1)), rng.normal(4, 0.6, (15, 1))])
    x_new = np.array([[-4.0], [0.5], [4.2], [30.0]])
    model = dpppl.DPMixture(1.0, dpppl.NormalKnownCov())
    draws = np.stack([np.repeat([0, 1], 15), np.zeros(30, int), np.arange(30) % 3])
    clustering = np.repeat([0, 1], 15)
    plain = Predictor(model.bind(x), draws, 1.0, clustering)(x_new)
    shifted = Predictor(model.bind(x + 1e6), draws, 1.0, clustering)(x_new + 1e6)
    np.testing.assert_allclose(shifted.proba, plain.proba, rtol=0, atol=1e-8)
    np.testing.assert_allclose(shifted.log_density, plain.log_density, rtol=0, atol=1e-6)


@pytest.mark.parametrize("model", [
    dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), dpppl.NormalGamma(mu0=0.0, kappa0=0.2, a0=2.0, b0=0.3)),
    dpppl.PitmanYorMixture(0.25, 0.7, dpppl.NormalKnownCov(sigma2=0.5, mu0=0.0, tau2=2.0)),
], ids=["dp-normal-gamma", "py-known"])
def test_draw_log_predictive_is_the_crp_mixture_of_marginal_ratios(model):
    """Per draw, with its own values: sum_c (|c| - d) / (alpha + N) p(v_c + v*) / p(v_c)
    + (alpha + K d) / (alpha + N) p(v*), each p a closed-form marginal (Family.log_marginal,
    not the predictive the function uses), for 1-D values given as (S, N) and new values
    shared or per draw."""
    rng = np.random.default_rng(5)
    values = rng.normal(size=(3, 6))
    labels = np.array([[0, 0, 1, 1, 2, 0], [4, 4, 4, 4, 4, 4], [0, 1, 2, 3, 4, 5]])
    alpha = np.array([0.5, 1.0, 2.5])
    new = np.array([-1.0, 0.3, 4.0])
    family = model.component.resolve(np.zeros((1, 1)))
    d = model.prior.discount

    def log_marginal(v):
        stats = family.point_stats(np.asarray(v, float)[:, None])
        return float(family.log_marginal(type(stats)(*[np.sum(leaf, axis=0) for leaf in stats])))

    expected = np.zeros((3, 3))
    for s in range(3):
        clusters = [values[s][labels[s] == c] for c in np.unique(labels[s])]
        for m, v_new in enumerate(new):
            terms = [np.log(len(c) - d) + log_marginal(np.r_[c, v_new]) - log_marginal(c) for c in clusters]
            terms.append(np.log(alpha[s] + d * len(clusters)) + log_marginal([v_new]))
            expected[s, m] = np.logaddexp.reduce(terms) - np.log(alpha[s] + 6)
    got = dpppl.analysis.draw_log_predictive(model, values, labels, alpha, new)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    per_draw = dpppl.analysis.draw_log_predictive(model, values, labels, alpha, np.tile(new, (3, 1)))
    np.testing.assert_allclose(per_draw, expected, rtol=1e-9)
    np.testing.assert_allclose(dpppl.analysis.log_mean_exp(got), np.log(np.exp(expected).mean(axis=0)), rtol=1e-12)


def test_draw_log_predictive_needs_numeric_hyperparameters():
    with pytest.raises(dpppl.ModelError, match=r"NormalGamma: hyperparameter\(s\) mu0 .*, b0 .* default from the data"):
        dpppl.analysis.draw_log_predictive(dpppl.DPMixture(1.0, dpppl.NormalGamma()), np.zeros((2, 3)),
                                           np.zeros((2, 3), int), 1.0, np.zeros(2))
