"""Analysis of runs: label-invariant summaries, co-clustering, point estimates of the
clustering, agreement metrics, prediction for new points, prior simulation and plots.

Modules: :mod:`~dpppl.diagnostics.summaries`, :mod:`~dpppl.analysis.partitions`,
:mod:`~dpppl.analysis.metrics` (also ``dpppl.metrics``), :mod:`~dpppl.analysis.predict`,
:mod:`~dpppl.estimators`, :mod:`~dpppl.simulate`,
:mod:`~dpppl.analysis.plots` (also ``dpppl.plots``; matplotlib is imported on first use).
"""

from dpppl.analysis import metrics, plots
from dpppl.estimators import DPGaussianMixture
from dpppl.analysis.partitions import coclustering, expected_vi, point_estimate, salso, vi_lower_bound
from dpppl.analysis.plots import (plot_cluster_sizes, plot_clusters, plot_coclustering, plot_log_joint,
    plot_num_clusters)
from dpppl.analysis.predict import Prediction, predict
from dpppl.simulate import expected_num_clusters, sample_prior
from dpppl.diagnostics.summaries import label_summaries
from dpppl.diagnostics.association import association_variance

__all__ = ["DPGaussianMixture", "Prediction", "coclustering", "expected_num_clusters", "expected_vi",
           "label_summaries", "metrics", "plot_cluster_sizes", "plot_clusters", "plot_coclustering",
           "plot_log_joint", "plot_num_clusters", "plots", "point_estimate", "predict", "salso",
           "sample_prior", "vi_lower_bound", "association_variance"]
