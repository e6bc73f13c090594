"""Plot functions (dpppl.analysis.plots)."""


import matplotlib

matplotlib.use("Agg")

import numpy as np

import dpppl
from dpppl.analysis.partitions import (point_estimate)
from dpppl.diagnostics.arviz_compat import group


# ----------------------------------------------------------------------- plots ---
def test_plot_functions_draw(run, tmp_path):
    import matplotlib.pyplot as plt

    _, _, idata = run
    ax = dpppl.plot_coclustering(idata)
    assert ax.images and ax.images[0].get_array().shape == (24, 24)
    ax = dpppl.plot_clusters(idata, estimate="dahl")
    assert len(ax.collections) == point_estimate(idata, "dahl").max() + 1
    ax = dpppl.plot_clusters(idata, data=np.asarray(group(idata, "observed_data")["x"])[:, 0])
    assert ax.patches
    ax = dpppl.plot_num_clusters(idata)
    assert ax.patches
    ax = dpppl.plot_log_joint({"a": idata, "b": idata})
    assert len(ax.lines) == 4
    prior = dpppl.sample_prior(dpppl.DPMixture(1.0, dpppl.NormalKnownCov(1.0, 0.0, 1.0)), 30, num_samples=200)
    axes = dpppl.plot_cluster_sizes(prior)
    assert len(axes) == 2
    plt.close("all")

