"""A scikit-learn estimator: a Dirichlet-process Gaussian mixture.

`DPGaussianMixture` wraps [`dpppl.sample`][dpppl.sample], [`dpppl.point_estimate`][dpppl.point_estimate] and
[`dpppl.analysis.predict.Predictor`][dpppl.analysis.predict.Predictor] behind scikit-learn's estimator interface
(`fit`, `predict`, `predict_proba`, `score_samples`, `score`, `fit_predict`,
`get_params`, `set_params`, `__sklearn_tags__`, `__sklearn_is_fitted__`) and passes
scikit-learn's `check_estimator` (`tests/test_estimators.py`), without making
scikit-learn a dependency of dpppl: see the class docstring.
Unlike `sklearn.mixture.BayesianGaussianMixture` (variational, truncated), it samples
the exact collapsed posterior over partitions, and `predict_proba` has one column per
cluster of the point estimate plus a last column for "a new cluster".
"""

from __future__ import annotations

import functools
import inspect
import sys

import numpy as np

from dpppl.analysis.partitions import point_estimate, posterior_draws
from dpppl.analysis.predict import Predictor, alpha_draws
from dpppl.config import in_x64
from dpppl.errors import ArgumentError, DataError, DPPPLError
from dpppl.families import NormalGamma, NormalInverseWishart
from dpppl.models.mixture import DPMixture
from dpppl.priors import Gamma
from dpppl.run.driver import sample

COVARIANCE_TYPES = ("full", "diag")


class NotFittedError(DPPPLError, ValueError, AttributeError):
    """A method that needs a fitted estimator was called before `fit`.

    When scikit-learn is installed, the error raised is also a
    `sklearn.exceptions.NotFittedError` (both derive from ValueError and
    AttributeError), so `except NotFittedError` works with either class.
    """

    def __reduce__(self):
        return _not_fitted_error, self.args


class DataTypeError(DataError, TypeError):
    """Data whose values are not numbers (an object array holding a dict, ...)."""


@functools.cache
def _not_fitted_error_type() -> type:
    try:
        from sklearn.exceptions import NotFittedError as SklearnNotFittedError
    except ImportError:
        return NotFittedError
    return type("NotFittedError", (NotFittedError, SklearnNotFittedError),
                {"__module__": __name__, "__doc__": NotFittedError.__doc__})


def _not_fitted_error(*args) -> NotFittedError:
    return _not_fitted_error_type()(*args)


def _is_sparse(x) -> bool:
    sparse = sys.modules.get("scipy.sparse")  # a scipy sparse input means scipy.sparse is loaded
    return sparse is not None and sparse.issparse(x)


class DPGaussianMixture:
    """Dirichlet-process mixture of Gaussians, fitted by MCMC over partitions.

    A scikit-learn clusterer and density estimator: it passes
    `sklearn.utils.estimator_checks.check_estimator` with one documented departure:
    a 1-D `X` is read as N points of one feature, as everywhere in dpppl, where
    scikit-learn requires 2-D (`check_fit1d`). `predict` returns `n_clusters_` for
    a point most likely to open a new cluster.
    It implements the protocol by hand rather than subclassing
    `sklearn.base.BaseEstimator`, `ClusterMixin` and `DensityMixin`, because
    inheriting needs scikit-learn when the class is defined, that is on `import dpppl`:
    scikit-learn would become a dependency (it is only in the `test` and `bench`
    extras) and importing it costs about 0.7 s on top of dpppl's 1.1 s. What the mixins
    would give is here: `get_params` / `set_params` from the constructor's signature
    (so `sklearn.base.clone` works), `__sklearn_tags__` (a clusterer taking a dense
    2-D array without NaN; it imports scikit-learn only when scikit-learn asks for the
    tags), `__sklearn_is_fitted__` for `check_is_fitted`, `fit_predict` and
    `score`. Because it is not a `ClusterMixin` instance, `check_estimator` skips
    its clustering checks; the test runs them directly.

    Input is checked as scikit-learn's `validate_data` would, with dpppl's errors
    ([`DataError`][dpppl.errors.DataError], a ValueError): `X` must be a dense real array
    (lists, pandas frames and object arrays of numbers are converted; sparse, complex
    and non-numeric input is refused, the last with `DataTypeError`, also a
    TypeError), without NaN or infinity, with at least 2 points to fit (the component
    hyperparameters are set from the data's mean and covariance), and, after fitting,
    `n_features_in_` columns. Methods called before `fit` raise
    `NotFittedError`, which is also scikit-learn's `NotFittedError` when
    scikit-learn is installed. A fitted estimator pickles (the compiled prediction
    function is rebuilt on first use after unpickling).

    Every `fit` on new data compiles the sampler for that data (seconds; see
    `docs/analysis.md`), so many fits on small data cost mostly compilation.

    Parameters
    ----------
    covariance_type : {"full", "diag"}, default "full"
        `"full"`: Normal-Inverse-Wishart components; `"diag"`: Normal-Gamma
        (independent dimensions). Their hyperparameters take the data-dependent defaults
        of [`dpppl.NormalInverseWishart`][dpppl.NormalInverseWishart] / [`dpppl.NormalGamma`][dpppl.NormalGamma].
    alpha : float or None, default None
        A fixed concentration, or None for alpha ~ Gamma(1, 1), resampled.
    kernel : str, default "gibbs"
        Any kernel or hybrid of [`dpppl.sample`][dpppl.sample].
    num_warmup, num_samples, num_chains, seed
        As in [`dpppl.sample`][dpppl.sample].
    estimate : {"vi", "dahl", "best"}, default "vi"
        The point estimate ([`dpppl.point_estimate`][dpppl.point_estimate]) that defines the clusters.

    Attributes
    ----------
    labels_ : ndarray of int (N,)
        The point estimate of the training points' clusters, 0..n_clusters_-1.
    n_clusters_ : int
    idata_ : InferenceData
        The posterior draws.
    model_ : Model
    n_features_in_ : int
        The number of columns of the training data.
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
        """Constructor arguments by name (`deep` is accepted for compatibility)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor arguments; returns `self`."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ArgumentError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __sklearn_tags__(self):
        """scikit-learn's tags (scikit-learn >= 1.6): a clusterer that needs no `y` and
        takes a dense 2-D real array without NaN."""
        from sklearn.utils import InputTags, Tags, TargetTags  # only scikit-learn calls this

        return Tags(estimator_type="clusterer", target_tags=TargetTags(required=False),
                    transformer_tags=None, classifier_tags=None, regressor_tags=None,
                    input_tags=InputTags(two_d_array=True, sparse=False, allow_nan=False))

    def __sklearn_is_fitted__(self):
        return hasattr(self, "_predictor")

    # ----- input ------------------------------------------------------------------------
    def _validate(self, X, *, fitting: bool) -> np.ndarray:
        """`X` as a finite float (N, D) array, with scikit-learn's checks and dpppl's errors."""
        name = type(self).__name__
        if _is_sparse(X):
            raise DataError(f"{name} does not take sparse input ({type(X).__name__}); "
                            f"pass a dense array, e.g. X.toarray()")
        try:
            arr = np.asarray(X)
        except Exception as e:  # ragged lists and the like
            raise DataError(f"X cannot be read as an array: {e}") from None
        if np.iscomplexobj(arr):
            raise DataError(f"Complex data not supported: X has dtype {arr.dtype}; {name} needs real numbers")
        if arr.dtype == object:
            try:
                arr = arr.astype(float)
            except TypeError as e:
                raise DataTypeError(f"X has dtype object with a value that is not a number ({e})") from None
            except ValueError as e:
                raise DataError(f"X has dtype object with a value that is not a number ({e})") from None
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise DataError(f"X must be numeric, got dtype {arr.dtype}")
        one_d = arr.ndim == 1
        if one_d:  # N one-dimensional points, as in dpppl.sample (scikit-learn refuses 1-D)
            arr = arr[:, None]
        if arr.ndim != 2:
            raise DataError(f"X must be a 2-D array (points x features), got {arr.ndim}-D with shape {arr.shape}")
        n, d = arr.shape
        if d == 0:
            raise DataError(f"X has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required by {name}")
        if n == 0:
            raise DataError(f"X has 0 sample(s) (shape={arr.shape}) while a minimum of "
                            f"{2 if fitting else 1} is required by {name}")
        if fitting and n < 2:
            raise DataError(f"X has 1 sample (shape={arr.shape}); {name} needs at least 2 to fit: its "
                            f"component hyperparameters are set from the data's mean and covariance")
        if not fitting and d != self.n_features_in_:
            hint = ("; a 1-D X is read as points of one feature: Reshape your data, e.g. X.reshape(1, -1) "
                    "for a single point" if one_d else "")
            raise DataError(f"X has {d} features, but {name} is expecting {self.n_features_in_} features "
                            f"as input (the training data's columns){hint}")
        arr = arr.astype(float)
        bad = ~np.isfinite(arr)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            what = "NaN" if np.isnan(arr[r, c]) else "infinity"
            raise DataError(f"X contains {what} at row {r}, column {c} ({int(bad.sum())} non-finite "
                            f"value(s) in all); {name} needs finite data")
        return arr

    # ----- fitting ------------------------------------------------------------------------
    def _model(self):
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ArgumentError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}")
        component = NormalInverseWishart() if self.covariance_type == "full" else NormalGamma()
        alpha = Gamma(1.0, 1.0) if self.alpha is None else self.alpha
        return DPMixture(alpha, component)

    @in_x64
    def fit(self, X, y=None):
        """Sample the posterior of the clustering of `X` (N, D); `y` is ignored."""
        model = self._model()
        x = self._validate(X, fitting=True)
        bound = model.bind(x)
        idata = sample(model, x, kernel=self.kernel, num_warmup=self.num_warmup,
                       num_samples=self.num_samples, num_chains=self.num_chains, seed=self.seed,
                       progress_bar=False, log_likelihood=False)  # a fit needs no LOO: one program fewer
        labels = np.asarray(point_estimate(idata, self.estimate, seed=self.seed), dtype=np.int64)
        self.model_, self.idata_, self.labels_ = model, idata, labels
        self.n_clusters_ = int(labels.max()) + 1
        self.n_features_in_ = x.shape[1]
        self._predictor = Predictor(bound, posterior_draws(idata), alpha_draws(idata, bound), labels)
        return self

    @in_x64
    def _predict(self, X):
        if not self.__sklearn_is_fitted__():
            raise _not_fitted_error(f"This {type(self).__name__} instance is not fitted yet: call fit(X) "
                                    f"before using this estimator")
        x = self._validate(X, fitting=False)
        pred = self._predictor(_pad(x))
        return pred._replace(proba=pred.proba[:len(x)], log_density=pred.log_density[:len(x)])

    def fit_predict(self, X, y=None):
        """Fit and return the point estimate `labels_` of the training points."""
        return self.fit(X).labels_

    def predict_proba(self, X):
        """(M, n_clusters_ + 1) posterior probabilities of joining each cluster of
        `labels_`, last column a new cluster ([`dpppl.predict`][dpppl.predict])."""
        return self._predict(X).proba

    def predict(self, X):
        """The most probable cluster of each point: 0..n_clusters_-1, or n_clusters_ for
        a new cluster."""
        return np.argmax(self.predict_proba(X), axis=1)

    def score_samples(self, X):
        """log p(x* | training data), the posterior predictive log density, per point."""
        return self._predict(X).log_density

    def score(self, X, y=None):
        """Mean posterior predictive log density of the points of `X`; `y` is ignored."""
        return float(np.mean(self.score_samples(X)))


def _pad(x: np.ndarray) -> np.ndarray:
    """`x` with rows repeated up to the next power of two (at least 8), so that
    predictions on batches of similar size share one compiled function. Each new point
    is predicted on its own, so the padding changes no result; the caller keeps the
    first `len(x)` rows."""
    m = len(x)
    size = max(8, 1 << (m - 1).bit_length())
    return x if size == m else np.concatenate([x, np.repeat(x[:1], size - m, axis=0)])


__all__ = ["DPGaussianMixture", "DataTypeError", "NotFittedError"]
