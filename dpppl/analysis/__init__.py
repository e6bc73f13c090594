"""Analysis of runs: label-invariant summaries, co-clustering, point estimates of the
clustering, agreement metrics, prediction for new points, prior simulation and plots.

Modules: :mod:`~dpppl.analysis.summaries`, :mod:`~dpppl.analysis.partitions`,
:mod:`~dpppl.analysis.metrics` (also ``dpppl.metrics``), :mod:`~dpppl.analysis.predict`,
:mod:`~dpppl.analysis.estimator`, :mod:`~dpppl.analysis.prior`,
:mod:`~dpppl.analysis.plots` (also ``dpppl.plots``; matplotlib is imported on first use).
"""

from . import metrics, plots
from .estimator import DPGaussianMixture
from .partitions import coclustering, expected_vi, point_estimate, salso, vi_lower_bound
from .plots import plot_cluster_sizes, plot_clusters, plot_coclustering, plot_log_joint, plot_num_clusters
from .predict import Prediction, predict
from .prior import expected_num_clusters, sample_prior
from .summaries import label_summaries
from .association import association_variance

__all__ = ["DPGaussianMixture", "Prediction", "coclustering", "expected_num_clusters", "expected_vi",
           "label_summaries", "metrics", "plot_cluster_sizes", "plot_clusters", "plot_coclustering",
           "plot_log_joint", "plot_num_clusters", "plots", "point_estimate", "predict", "salso",
           "sample_prior", "vi_lower_bound", "association_variance"]
