"""The dpppl command line, end to end, in process."""

from pathlib import Path

import numpy as np
import pytest

from dpppl.cli import main
import dpppl

MODELS = Path(__file__).resolve().parent.parent / "models"


@pytest.fixture(scope="module")
def galaxies_run(tmp_path_factory):
    """One `dpppl sample` run on the galaxies (compiled once for the tests that read it):
    the netCDF file it wrote, its exit status and what it printed."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("cli") / "run.nc"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--warmup", "5",
                       "--samples", "20", "--chains", "2", "--no-progress", "--out", str(out)])
    return out, status, printed.getvalue()


def test_sample_summary_and_plots(galaxies_run, tmp_path, capsys):
    out, status, text = galaxies_run
    assert status == 0
    assert "kernel: gibbs (exact), 2 chain(s) x 20 draws, 82 points" in text
    assert "num_clusters" in text and "P(K=" in text and out.exists()
    assert main(["summary", str(out)]) == 0
    assert "largest_cluster" in capsys.readouterr().out
    for kind in ("trace", "autocorr"):
        fig = tmp_path / f"{kind}.png"
        assert main(["plot", str(out), "--kind", kind, "--out", str(fig)]) == 0
        assert fig.stat().st_size > 1000


def test_sample_from_csv_with_kernel_options(tmp_path, capsys):
    rng = np.random.default_rng(0)
    data = tmp_path / "points.csv"
    np.savetxt(data, rng.normal(size=(20, 2)), delimiter=",", header="a,b", comments="")
    assert main(["sample", str(MODELS / "gaussian_known.dp"), "--data", str(data), "--kernel",
                 "gibbs+splitmerge", "--option", "num_proposals=3", "--warmup", "2", "--samples", "5",
                 "--no-progress"]) == 0
    assert "gibbs+splitmerge" in capsys.readouterr().out


def test_listings(capsys):
    assert main(["kernels"]) == 0
    text = capsys.readouterr().out
    assert "gibbs" in text and "exact" in text and "nuts" in text
    assert main(["datasets"]) == 0
    assert "galaxies" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--kernel", "gibs"], "unknown kernel 'gibs'"),
    (["--option", "beam=3"], "unknown option"),
    (["--data", "no_such_file.csv"], "no_such_file"),
])
def test_errors_exit_2_with_one_line(args, message, capsys):
    base = ["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--no-progress"]
    assert main(base + args) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpppl: error:") and message in err


def test_malformed_model_file(tmp_path, capsys):
    bad = tmp_path / "bad.dp"
    bad.write_text("data x : real[N, D]\nz ~ CRP(1)\ntheta[k] ~ NormalInverseWishrt()\nx[i] ~ Normal(theta[z[i]])\n")
    assert main(["sample", str(bad), "--data", "galaxies", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "bad.dp:3:" in err and "NormalInverseWishart" in err


def test_plot_of_unknown_variable(galaxies_run, tmp_path, capsys):
    out = galaxies_run[0]
    assert main(["plot", str(out), "--var", "nope", "--out", str(tmp_path / "f.png")]) == 2
    assert "nope" in capsys.readouterr().err


def test_cli_summary_and_analysis_plots(tmp_path, capsys):
    out = tmp_path / "run.nc"
    assert main(["sample", "models/gaussian_known.dp", "--data", "faithful", "--warmup", "5", "--samples", "30",
                 "--chains", "2", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    for name in ("num_clusters", "largest_cluster", "entropy", "cluster_sizes[0]", "r_hat", "ess_bulk", "lp"):
        assert name in text
    for kind in ("coclustering", "clusters", "k", "lp"):
        fig = tmp_path / f"{kind}.png"
        extra = ["--compare", str(out)] if kind == "lp" else ["--estimate", "dahl"]
        assert main(["plot", str(out), "--kind", kind, "--out", str(fig)] + extra) == 0
        assert fig.stat().st_size > 1000


def test_cli_search(tmp_path):
    from dpppl.cli import main

    x, _ = dpppl.datasets.gaussian_mixture(40, 2, 3, mean_scale=9.0, seed=2)
    data = tmp_path / "x.csv"
    np.savetxt(data, x, delimiter=",")
    out = tmp_path / "labels.csv"
    assert main(["search", "models/gaussian_known.dp", "--data", str(data), "--beam", "10",
                 "--out", str(out)]) == 0
    labels = np.loadtxt(out, dtype=int)
    model = dpppl.load("models/gaussian_known.dp")
    assert np.array_equal(labels, dpppl.map_search(model, x, beam=10).labels)
    assert main(["search", "models/gaussian_known.dp", "--data", str(data), "--beam", "zero"]) == 2


@pytest.mark.slow  # a NIW compilation; the CLI path itself is covered by tests/test_cli.py
def test_cli_samples_the_stick_breaking_model_file(tmp_path, capsys):
    from pathlib import Path

    from dpppl.cli import main

    data = tmp_path / "points.csv"
    pts = np.r_[np.random.default_rng(0).normal(-2, 0.5, (6, 2)), np.random.default_rng(1).normal(2, 0.5, (6, 2))]
    np.savetxt(data, pts, delimiter=",")
    model = Path(__file__).resolve().parents[1] / "models" / "stick_breaking.dp"
    assert main(["sample", str(model), "--data", str(data), "--kernel", "sbgibbs+labelswap+labelpermute",
                 "--option", "permute_prob=0.5", "--warmup", "0", "--samples", "4", "--no-progress"]) == 0
    assert "sbgibbs+labelswap+labelpermute (exact)" in capsys.readouterr().out

