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



def _made_up_run(chains=3, draws=200, points=6):
    """An InferenceData of `chains` chains of random partitions, made without sampling."""
    from dpppl.diagnostics.arviz_compat import to_arviz
    from dpppl.diagnostics.summaries import label_summaries

    rng = np.random.default_rng(0)
    z = rng.integers(0, 3, size=(chains, draws, points)).astype(np.int32)
    summaries = label_summaries(z)
    lp = rng.normal(size=(chains, draws))
    posterior = {k: v for k, v in summaries.items() if k != "cluster_sizes"} | {"alpha": rng.gamma(2.0, size=(
        chains, draws)), "lp": lp}
    return to_arviz({"posterior": posterior, "posterior_partition": {"z": z, "cluster_sizes": summaries[
        "cluster_sizes"]}, "sample_stats": {"lp": lp}}, dims={"z": ["point"], "cluster_sizes": ["cluster"]},
        attrs={"kernel": "gibbs", "exact": 1})


def test_trace_and_autocorrelation_fit_a_screen_and_name_the_chains():
    import matplotlib.pyplot as plt

    from dpppl.analysis.plots import MAX_LAG, plot_trace

    idata = _made_up_run()
    axes = plot_trace(idata)
    width, height = axes[0, 0].figure.get_size_inches()
    assert width <= 12 and height <= 10, (width, height)  # four variables: not 22 x 22 inches
    assert [ax.get_title() for ax in axes[:, 1]] == [f"{v}: chains 0, 1, 2" for v in
                                                     ("num_clusters", "largest_cluster", "entropy", "alpha")]
    legend = axes[0, 1].get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == ["0", "1", "2"]
    plt.close("all")
    axes = plot_trace(idata, kind="autocorr")
    assert axes.shape == (2, 2) and tuple(axes[0, 0].figure.get_size_inches()) == (11.0, 4.8)
    for ax, name in zip(axes.flat, ("num_clusters", "largest_cluster", "entropy", "alpha")):
        assert ax.get_title() == f"{name}: chains 0, 1, 2" and "\n" not in ax.get_title()
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["chain 0", "chain 1", "chain 2"]
        assert len(ax.lines) == 4 and len(ax.lines[0].get_xdata()) == MAX_LAG + 1  # 3 chains and the zero line
        assert ax.lines[0].get_ydata()[0] == 1.0
    one = plot_trace(idata.isel(chain=[1]), ["num_clusters"], kind="autocorr")
    assert one.shape == (1, 1) and one[0, 0].get_title() == "num_clusters: chain 1"
    plt.close("all")
