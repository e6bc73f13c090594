"""The scikit-learn-style estimator (dpppl.estimators)."""

import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group


def test_gaussian_mixture_estimator():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.normal((-3, 0), 0.5, (20, 2)), rng.normal((3, 1), 0.5, (20, 2))])
    est = dpppl.DPGaussianMixture(num_warmup=20, num_samples=100, seed=1)
    with pytest.raises(AttributeError, match="not fitted"):
        est.predict(x)
    labels = est.fit_predict(x)
    assert est.n_clusters_ == 2 and est.n_features_in_ == 2
    assert dpppl.metrics.adjusted_rand_index(labels, np.repeat([0, 1], 20)) == 1.0
    new = np.array([[-3.0, 0.0], [3.0, 1.0], [0.0, 30.0]])
    proba = est.predict_proba(new)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(est.predict(new), [labels[0], labels[-1], 2])
    scores = est.score_samples(new)
    assert scores[2] < scores[0] - 20 and est.score(new) == pytest.approx(scores.mean())
    diag = dpppl.DPGaussianMixture(covariance_type="diag", alpha=1.0, num_warmup=5, num_samples=20).fit(x)
    assert "alpha" not in group(diag.idata_, "posterior") and diag.predict_proba(x).shape[0] == 40


def test_estimator_parameters_and_sklearn_clone():
    base = pytest.importorskip("sklearn.base")
    est = dpppl.DPGaussianMixture(alpha=2.0, num_samples=50)
    assert est.get_params()["alpha"] == 2.0 and est.get_params()["covariance_type"] == "full"
    copy = base.clone(est)
    assert copy is not est and copy.get_params() == est.get_params()
    assert est.set_params(kernel="gibbs+splitmerge", seed=3) is est and est.seed == 3
    with pytest.raises(ValueError, match="invalid parameter"):
        est.set_params(n_components=3)
    with pytest.raises(ValueError, match="covariance_type"):
        dpppl.DPGaussianMixture(covariance_type="spherical").fit(np.zeros((5, 2)))
    assert "DPGaussianMixture(covariance_type='full'" in repr(copy)

