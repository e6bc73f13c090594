"""Figures for teaching and checking a run (matplotlib; the caller picks the backend).

* [`plot_coclustering`][dpppl.analysis.plots.plot_coclustering] - the posterior similarity matrix, points ordered by a
point
  estimate so that its clusters are blocks on the diagonal, with their borders drawn.
* [`plot_clusters`][dpppl.analysis.plots.plot_clusters] - the data coloured by a point estimate: a histogram stacked by
  cluster with a rug for 1-D data, a scatter for 2-D (two chosen columns for more).
* [`plot_num_clusters`][dpppl.analysis.plots.plot_num_clusters] - the posterior (or prior) distribution of K.
* [`plot_log_joint`][dpppl.analysis.plots.plot_log_joint] - the log joint `lp` against iteration for every chain of
  one or several runs (e.g. one per kernel), to compare burn-in and mixing.
* [`plot_cluster_sizes`][dpppl.analysis.plots.plot_cluster_sizes] - sorted cluster sizes (median and 5-95% band per
rank)
  and the distribution of K, for prior simulations ([`dpppl.sample_prior`][dpppl.sample_prior]) or runs.
* [`plot_ppc`][dpppl.analysis.plots.plot_ppc] - ArviZ's posterior predictive check: replicated
  data sets ([`dpppl.posterior_predictive`][dpppl.posterior_predictive]) against the observed data,
  one panel per data dimension.
* `plot_trace` - ArviZ's trace or autocorrelation plot of label-invariant variables,
  with integer variables (`num_clusters`, `largest_cluster`) drawn as bars.

Every function takes an optional `ax` (or creates a figure) and returns the axes.
"""

from __future__ import annotations

import numpy as np

from dpppl.analysis.ppc import posterior_predictive
from dpppl.diagnostics.arviz_compat import arviz, group, has_group, labels, partition_group
from dpppl.diagnostics.convergence import autocorrelation
from dpppl.errors import ArgumentError, DataError
from dpppl.analysis.partitions import (is_inference_data, run_variable, coclustering, point_estimate,
                                       posterior_draws)
from dpppl.diagnostics.summaries import LABEL_INVARIANT, label_summaries

KINDS = ("trace", "autocorr", "coclustering", "clusters", "k", "lp", "ppc")
SCREEN_WIDTH, PANEL_HEIGHT = 11.0, 2.4
"""Inches of the trace and autocorrelation figures: the width of a laptop screen at 100 dpi, and
the height of one row of panels (four variables fit a screen)."""
MAX_LAG = 100
"""The largest lag `plot_trace(kind="autocorr")` draws."""
PPC_DRAWS = 100
"""Draws per chain replicated by `plot_ppc` for a run with no posterior predictive yet."""


def _axes(ax, figsize=(5.5, 4.5)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _estimate(idata, estimate):
    if estimate is None or isinstance(estimate, str):
        return point_estimate(idata, estimate or "vi")
    return np.asarray(estimate)


def _order(labels):
    """Points grouped by cluster, largest cluster first (stable within a cluster)."""
    sizes = np.bincount(labels)
    rank = np.argsort(np.argsort(-sizes, kind="stable"))
    return np.lexsort((np.arange(labels.size), rank[labels])), np.sort(sizes)[::-1]


def plot_coclustering(idata, estimate=None, ax=None, cmap="viridis"):
    """Heatmap of P(z_i = z_j | x), ordered by `estimate` (a method name or labels;
    default the VI point estimate), with the estimate's clusters outlined."""
    labels = _estimate(idata, estimate)
    psm = coclustering(idata)
    order, sizes = _order(labels)
    ax = _axes(ax)
    image = ax.imshow(psm[np.ix_(order, order)], vmin=0.0, vmax=1.0, cmap=cmap, interpolation="nearest")
    edges = np.concatenate([[0], np.cumsum(sizes)]) - 0.5
    for a, b in zip(edges[:-1], edges[1:]):
        ax.add_patch(_rectangle(a, b))
    ax.figure.colorbar(image, ax=ax, label="P(same cluster)")
    ax.set_xlabel("point (ordered by cluster)")
    ax.set_ylabel("point (ordered by cluster)")
    ax.set_title(f"co-clustering, {sizes.size} clusters in the point estimate")
    return ax


def _rectangle(a, b):
    from matplotlib.patches import Rectangle

    return Rectangle((a, a), b - a, b - a, fill=False, edgecolor="white", linewidth=1.0)


def plot_clusters(idata, estimate=None, data=None, columns=(0, 1), ax=None):
    """The data coloured by the clusters of `estimate` (default the VI point estimate).

    `data` defaults to the run's observed data. 1-D: histogram stacked by cluster with
    a rug; 2-D or more: scatter of `columns`.
    """
    labels = _estimate(idata, estimate)
    x = _observed(idata) if data is None else np.asarray(data, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    if x.shape[0] != labels.size:
        raise DataError(f"{x.shape[0]} data points but {labels.size} labels")
    ax = _axes(ax)
    import matplotlib.pyplot as plt

    colours = plt.get_cmap("tab10" if labels.max() < 10 else "tab20")
    clusters = np.argsort(-np.bincount(labels), kind="stable")
    if x.shape[1] == 1:
        groups = [x[labels == k, 0] for k in clusters]
        ax.hist(groups, bins=min(40, max(10, x.shape[0] // 4)), stacked=True,
                color=[colours(i % colours.N) for i in range(len(groups))],
                label=[f"cluster {i} ({g.size})" for i, g in enumerate(groups)])
        for i, g in enumerate(groups):
            ax.plot(g, np.full(g.size, -0.02), "|", color=colours(i % colours.N),
                    transform=ax.get_xaxis_transform(), clip_on=False)
        ax.set_xlabel("x")
        ax.set_ylabel("count")
    else:
        a, b = columns
        for i, k in enumerate(clusters):
            pts = x[labels == k]
            ax.scatter(pts[:, a], pts[:, b], s=12, color=colours(i % colours.N), label=f"cluster {i} ({len(pts)})")
        ax.set_xlabel(f"x[{a}]")
        ax.set_ylabel(f"x[{b}]")
    if clusters.size <= 12:
        ax.legend(fontsize="small")
    ax.set_title(f"{clusters.size} clusters")
    return ax


def _observed(idata):
    obs = group(idata, "observed_data")
    if not obs.data_vars:
        raise DataError("the InferenceData has no observed data; pass data=")
    return np.asarray(obs[next(iter(obs.data_vars))], dtype=float)


def _run_var(source, name):
    """`name` from a run's posterior or a prior simulation's prior group."""
    for group_name in ("posterior", "prior"):
        try:
            return run_variable(source, name, group=group_name)
        except DataError:
            continue
    raise DataError(f"the InferenceData has no '{name}' in a 'posterior' or 'prior' group")


def _num_clusters(source):
    if is_inference_data(source):
        return _run_var(source, "num_clusters").ravel()
    return label_summaries(posterior_draws(source))["num_clusters"].ravel()


def plot_num_clusters(source, ax=None):
    """Bar chart of P(K = k) over the draws of a run, a prior simulation or labels."""
    k = _num_clusters(source)
    values, counts = np.unique(k, return_counts=True)
    ax = _axes(ax)
    ax.bar(values, counts / k.size, width=0.8, color="tab:blue")
    ax.axvline(k.mean(), color="black", linestyle="--", label=f"mean {k.mean():.2f}")
    ax.set_xlabel("number of clusters K")
    ax.set_ylabel("probability")
    ax.legend()
    return ax


def plot_log_joint(runs, ax=None):
    """`lp` against iteration for every chain of one run or of several.

    `runs` is an InferenceData or a dict `{label: InferenceData}` (e.g. one per
    kernel); each chain is a line, coloured by run.
    """
    runs = runs if isinstance(runs, dict) else {"": runs}
    ax = _axes(ax, figsize=(7, 4))
    import matplotlib.pyplot as plt

    colours = plt.get_cmap("tab10")
    for i, (label, idata) in enumerate(runs.items()):
        lp = np.atleast_2d(run_variable(idata, "lp", group="sample_stats"))
        for c, chain in enumerate(lp):
            ax.plot(np.arange(chain.size), chain, color=colours(i % 10), alpha=0.8, linewidth=0.8,
                    label=(label or "chain") if c == 0 else None)
    ax.set_xlabel("iteration (after warmup)")
    ax.set_ylabel("log joint log p(x, z)")
    if any(runs):
        ax.legend()
    return ax


def plot_cluster_sizes(source, axes=None):
    """Sorted cluster sizes (median and 5-95% band per rank) and the law of K.

    `source`: a [`dpppl.sample_prior`][dpppl.sample_prior] result, a run, or labels (S, N).
    Returns the two axes.
    """
    import matplotlib.pyplot as plt

    z = labels(source) if is_inference_data(source) else source
    sizes = label_summaries(posterior_draws(z))["cluster_sizes"].astype(float)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 4))
    rank = np.arange(1, sizes.shape[1] + 1)
    lo, mid, hi = np.percentile(sizes, [5, 50, 95], axis=0)
    axes[0].fill_between(rank, lo, hi, alpha=0.3, step="mid", label="5-95%")
    axes[0].step(rank, mid, where="mid", label="median")
    axes[0].plot(rank, sizes.mean(axis=0), "o", markersize=3, label="mean")
    axes[0].set_xlabel("cluster rank (largest first)")
    axes[0].set_ylabel("cluster size")
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[0].legend()
    plot_num_clusters(z, ax=axes[1])
    return axes


def plot_trace(idata, var_names=None, kind="trace"):
    """ArviZ's `plot_trace` (`kind="trace"`) or the autocorrelation of each chain (`"autocorr"`)
    of posterior variables, by default the label-invariant ones present, sized for a screen
    (`SCREEN_WIDTH` inches wide, `PANEL_HEIGHT` per row of panels).

    Integer variables stay integers, so the trace plot draws their marginals as histograms
    with one bar per value (as [`plot_num_clusters`][dpppl.analysis.plots.plot_num_clusters] does),
    not as a smooth density; its legend names the chains, and each trace panel's title says
    which chains it draws. The autocorrelation draws one panel per variable, one line per chain
    up to lag `MAX_LAG`, the chains named in the title and the legend. Returns the axes (ArviZ's
    for the trace: a (variables, 2) array; (rows, 2) or (1, 1) for the autocorrelation).
    """
    if kind not in ("trace", "autocorr"):
        raise ArgumentError(f"kind must be 'trace' or 'autocorr', got {kind!r}")
    post = group(idata, "posterior")
    names = list(var_names) if var_names else [v for v in LABEL_INVARIANT if v in post]
    # per-rank or per-slot arrays (cluster_sizes) are in the partition group
    partition = partition_group(idata) if any(v not in post for v in names) else post
    missing = [v for v in names if v not in post and v not in partition]
    if missing:
        available = sorted(set(post.data_vars) | set(partition.data_vars) - {"z"})
        raise DataError(f"no variable(s) {missing} in the run; available: {available}")
    post = post.assign({v: partition[v] for v in names if v not in post})
    ids = [str(c) for c in post["chain"].values]
    chains = ("chain " if len(ids) == 1 else "chains ") + ", ".join(ids)
    if kind == "autocorr":
        return _plot_autocorr(post[names].astype(float), chains)
    shown = post[names]
    # ArviZ draws a histogram for a signed-integer variable and a density for anything else
    shown = shown.assign({v: shown[v].astype(np.int64) for v in names if shown[v].dtype.kind in "bu"})
    axes = arviz().plot_trace(shown, figsize=(SCREEN_WIDTH, PANEL_HEIGHT * len(names)), legend=True,
                              chain_prop="color")
    for ax in axes[:, 1]:
        ax.set_title(f"{ax.get_title()}: {chains}")
    axes[0, 0].figure.tight_layout()  # titles clear of the tick labels above them
    return axes


def _plot_autocorr(post, chains: str):
    """One panel per variable of `post`, two panels a row: each chain's autocorrelation against lag;
    `chains` names the chains in the titles ("chains 0, 1")."""
    import matplotlib.pyplot as plt

    names = list(post.data_vars)
    cols = min(2, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(SCREEN_WIDTH, PANEL_HEIGHT * rows), squeeze=False, sharex=True)
    lags = np.arange(min(MAX_LAG, post.sizes["draw"] - 1) + 1)
    for ax, name in zip(axes.flat, names):
        rho = autocorrelation(post[name].transpose("chain", "draw").values)
        for chain, line in zip(post["chain"].values, rho):
            ax.plot(lags, line[lags], linewidth=1, label=f"chain {chain}")
        ax.axhline(0.0, color="grey", linewidth=0.6)
        ax.set_title(f"{name}: {chains}")
        ax.set_ylabel("autocorrelation")
        ax.legend(fontsize=7, ncol=min(4, len(rho)), loc="upper right")
    for ax in axes[-1]:
        ax.set_xlabel("lag")
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    fig.tight_layout()
    return axes


def plot_ppc(idata, num_pp_samples: int = 50, seed: int = 0):
    """ArviZ's `plot_ppc` of a run: the densities (real data) or histograms (counts, binary
    data) of `num_pp_samples` replicated data sets (or as many as there are) against the observed data, points pooled,
    one panel per data dimension. A run without a `posterior_predictive` group gets one
    first ([`dpppl.posterior_predictive`][dpppl.posterior_predictive] on `PPC_DRAWS` draws per chain, the
    model read from the run). Returns ArviZ's axes."""
    if not has_group(idata, "posterior_predictive"):
        idata = posterior_predictive(idata, num_draws=PPC_DRAWS, seed=seed)
    replicates = group(idata, "posterior_predictive")
    available = replicates.sizes["chain"] * replicates.sizes["draw"]
    return arviz().plot_ppc(idata, flatten=["point"], num_pp_samples=min(num_pp_samples, available),
                            random_seed=seed)


def plot_command(kind: str, runs: dict, out: str, estimate: str = "vi", var_names=None) -> None:
    """Draw one figure of `kind` (`KINDS`) for the `dpppl plot` command.

    `runs` maps file names to InferenceData; all but `lp` use the first; `var_names`
    are the variables of `trace` and `autocorr`.
    """
    import matplotlib.pyplot as plt

    if kind not in KINDS:
        raise ArgumentError(f"kind must be one of {KINDS}, got {kind!r}")
    first = next(iter(runs.values()))
    if kind in ("trace", "autocorr"):
        plot_trace(first, var_names, kind)
    elif kind == "coclustering":
        plot_coclustering(first, estimate)
    elif kind == "clusters":
        plot_clusters(first, estimate)
    elif kind == "k":
        plot_num_clusters(first)
    elif kind == "ppc":
        plot_ppc(first)
    else:
        plot_log_joint(runs if len(runs) > 1 else first)
    plt.gcf().tight_layout()
    plt.savefig(out, dpi=110)
    plt.close(plt.gcf())


__all__ = ["KINDS", "LABEL_INVARIANT", "plot_cluster_sizes", "plot_clusters", "plot_coclustering",
           "plot_command", "plot_log_joint", "plot_num_clusters", "plot_ppc", "plot_trace"]
