"""Figures of a run (matplotlib, imported on first use): the functions of
[`dpppl.analysis.plots`][dpppl.analysis.plots] under their documented path, so that
`from dpppl.plots import plot_coclustering` works."""

from dpppl.analysis.plots import (plot_cluster_sizes, plot_clusters, plot_coclustering, plot_log_joint,
                                  plot_num_clusters, plot_ppc, plot_trace)

__all__ = ["plot_cluster_sizes", "plot_clusters", "plot_coclustering", "plot_log_joint", "plot_num_clusters",
           "plot_ppc", "plot_trace"]
