"""A scikit-learn-style Dirichlet-process Gaussian mixture.

``DPGaussianMixture`` wraps :func:`dpppl.sample`, :func:`dpppl.point_estimate` and
:class:`dpppl.analysis.predict.Predictor` behind the estimator interface scikit-learn
users expect (``fit``, ``predict``, ``predict_proba``, ``score_samples``, ``score``,
``fit_predict``, ``get_params``, ``set_params``), without depending on scikit-learn:
constructor arguments are stored unchanged, so ``sklearn.base.clone`` works.
Unlike ``sklearn.mixture.BayesianGaussianMixture`` (variational, truncated), it samples
the exact collapsed posterior over partitions, and ``predict_proba`` has one column per
cluster of the point estimate plus a last column for "a new cluster".
"""

from __future__ import annotations

import inspect

import numpy as np

from dpppl.analysis.partitions import point_estimate, posterior_draws
from dpppl.analysis.predict import Predictor, alpha_draws
from dpppl.families import NormalGamma, NormalInverseWishart
from dpppl.models.mixture import DPMixture
from dpppl.priors import Gamma
from dpppl.run.driver import sample

COVARIANCE_TYPES = ("full", "diag")


class DPGaussianMixture:
    """Dirichlet-process mixture of Gaussians, fitted by MCMC over partitions.

    Parameters
    ----------
    covariance_type : {"full", "diag"}, default "full"
        ``"full"``: Normal-Inverse-Wishart components; ``"diag"``: Normal-Gamma
        (independent dimensions). Their hyperparameters take the data-dependent defaults
        of :class:`dpppl.NormalInverseWishart` / :class:`dpppl.NormalGamma`.
    alpha : float or None, default None
        A fixed concentration, or None for alpha ~ Gamma(1, 1), resampled.
    kernel : str, default "gibbs"
        Any kernel or hybrid of :func:`dpppl.sample`.
    num_warmup, num_samples, num_chains, seed
        As in :func:`dpppl.sample`.
    estimate : {"vi", "dahl", "best"}, default "vi"
        The point estimate (:func:`dpppl.point_estimate`) that defines the clusters.

    Attributes
    ----------
    labels_ : ndarray (N,)
        The point estimate of the training points' clusters.
    n_clusters_ : int
    idata_ : InferenceData
        The posterior draws.
    model_ : Model
    n_features_in_ : int
    """

    def __init__(self, covariance_type="full", alpha=None, kernel="gibbs", num_warmup=200,
                 num_samples=500, num_chains=1, seed=0, estimate="vi"):
        self.covariance_type = covariance_type
        self.alpha = alpha
        self.kernel = kernel
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.seed = seed
        self.estimate = estimate

    # ----- scikit-learn parameter protocol -------------------------------------------
    @classmethod
    def _param_names(cls):
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep=True):
        """Constructor arguments by name (``deep`` is accepted for compatibility)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor arguments; returns ``self``."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ----- fitting ------------------------------------------------------------------------
    def _model(self):
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}")
        component = NormalInverseWishart() if self.covariance_type == "full" else NormalGamma()
        alpha = Gamma(1.0, 1.0) if self.alpha is None else self.alpha
        return DPMixture(alpha, component)

    def fit(self, X, y=None):
        """Sample the posterior of the clustering of ``X`` (N, D); ``y`` is ignored."""

        model = self._model()
        bound = model.bind(X)
        idata = sample(model, bound.x, kernel=self.kernel, num_warmup=self.num_warmup,
                       num_samples=self.num_samples, num_chains=self.num_chains, seed=self.seed,
                       progress_bar=False)
        self.model_, self.idata_ = model, idata
        self.labels_ = point_estimate(idata, self.estimate, seed=self.seed)
        self.n_clusters_ = int(self.labels_.max()) + 1
        self.n_features_in_ = bound.x.shape[1]
        self._predictor = Predictor(bound, posterior_draws(idata), alpha_draws(idata, bound), self.labels_)
        return self

    def _fitted(self):
        if not hasattr(self, "_predictor"):
            raise AttributeError(f"this {type(self).__name__} is not fitted yet: call fit(X) first")
        return self._predictor

    def fit_predict(self, X, y=None):
        """Fit and return the point estimate ``labels_`` of the training points."""
        return self.fit(X).labels_

    def predict_proba(self, X):
        """(M, n_clusters_ + 1) posterior probabilities of joining each cluster of
        ``labels_``, last column a new cluster (:func:`dpppl.predict`)."""
        return self._fitted()(X).proba

    def predict(self, X):
        """The most probable cluster of each point: 0..n_clusters_-1, or n_clusters_ for
        a new cluster."""
        return np.argmax(self.predict_proba(X), axis=1)

    def score_samples(self, X):
        """log p(x* | training data), the posterior predictive log density, per point."""
        return self._fitted()(X).log_density

    def score(self, X, y=None):
        """Mean posterior predictive log density of the points of ``X``."""
        return float(np.mean(self.score_samples(X)))


__all__ = ["DPGaussianMixture"]
