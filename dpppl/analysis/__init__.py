"""Analysis of runs: co-clustering and point estimates of the clustering, agreement
metrics, prediction for new points, association variance across runs, and plots.

Modules: `partitions`, [`metrics`][dpppl.analysis.metrics] (also
`dpppl.metrics`), [`predict`][dpppl.analysis.predict], [`ppc`][dpppl.analysis.ppc] (posterior predictive
checks), `association`,
[`plots`][dpppl.analysis.plots] (also `dpppl.plots`; matplotlib is imported on first use).
Label-invariant summaries of draws are in `dpppl.diagnostics.summaries`, prior
simulation in `dpppl.simulate`, the scikit-learn estimator in `dpppl.estimators`.
"""

from dpppl.analysis import metrics, plots
from dpppl.analysis.association import association_variance
from dpppl.analysis.partitions import coclustering, expected_vi, point_estimate, salso, vi_lower_bound
from dpppl.analysis.plots import (plot_cluster_sizes, plot_clusters, plot_coclustering, plot_log_joint,
                                  plot_num_clusters)
from dpppl.analysis.ppc import posterior_predictive
from dpppl.analysis.predict import Prediction, draw_log_predictive, log_mean_exp, predict
from dpppl.diagnostics.summaries import label_summaries

__all__ = ["Prediction", "association_variance", "coclustering", "expected_vi", "label_summaries", "metrics",
           "plot_cluster_sizes", "plot_clusters", "plot_coclustering", "plot_log_joint", "plot_num_clusters",
           "plots", "point_estimate", "draw_log_predictive", "log_mean_exp", "posterior_predictive", "predict",
           "salso", "vi_lower_bound"]
