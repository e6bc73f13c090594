"""Label-invariant summaries (dpppl.diagnostics.summaries)."""


import matplotlib

matplotlib.use("Agg")

import numpy as np

from dpppl.diagnostics.summaries import compact_labels, label_summaries
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import canonical


# ------------------------------------------------------------------- summaries ---
def test_label_summaries_by_hand():
    z = np.array([[5, 5, 2, 9, 2, 5],      # sizes 3, 2, 1
                  [0, 0, 0, 0, 0, 0],      # one cluster
                  [3, 1, 4, 0, 5, 2]])     # singletons
    out = label_summaries(z)
    np.testing.assert_array_equal(out["num_clusters"], [3, 1, 6])
    np.testing.assert_array_equal(out["largest_cluster"], [3, 6, 1])
    np.testing.assert_array_equal(out["cluster_sizes"], [[3, 2, 1, 0, 0, 0], [6, 0, 0, 0, 0, 0], [1] * 6])
    p = np.array([3, 2, 1]) / 6
    np.testing.assert_allclose(out["entropy"], [-(p * np.log(p)).sum(), 0.0, np.log(6)])


def test_compact_labels_keeps_the_partition_for_any_labels():
    rng = np.random.default_rng(0)
    z = rng.integers(-50, 10**6, size=(2, 3, 9)) // 10**5      # negative and large labels
    labels, counts = compact_labels(z)
    assert labels.shape == z.shape and counts.shape[:2] == (2, 3)
    np.testing.assert_array_equal(canonical(labels), canonical(z))
    for row, c in zip(labels.reshape(-1, 9), counts.reshape(-1, counts.shape[-1])):
        np.testing.assert_array_equal(np.bincount(row, minlength=c.size), c)


def test_every_run_has_the_label_invariant_summaries(run):
    _, x, idata = run
    post, part = group(idata, "posterior"), partition_group(idata)
    z = np.asarray(part["z"])
    k = np.array([[np.unique(d).size for d in chain] for chain in z])
    np.testing.assert_array_equal(post["num_clusters"], k)
    sizes = np.asarray(part["cluster_sizes"])
    assert sizes.shape == z.shape[:2] + (k.max(),) and part["cluster_sizes"].dims[-1] == "cluster"
    assert np.all(sizes.sum(axis=-1) == x.shape[0]) and np.all(np.diff(sizes, axis=-1) <= 0)
    np.testing.assert_array_equal(sizes[..., 0], post["largest_cluster"])
    assert np.all((0 <= post["entropy"]) & (post["entropy"] <= np.log(x.shape[0]) + 1e-12))
    assert "lp" in group(idata, "sample_stats")

