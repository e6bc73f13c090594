"""The dpppl command line, end to end, in process."""

import re
from pathlib import Path

import numpy as np
import pytest

from dpppl.cli import main
import dpppl
import dpppl.run.driver
from dpppl.diagnostics.arviz_compat import az, group
from tests.run.runs import assert_same_run, stop_at_chunk

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
    assert "kernel: gibbs+splitmerge (exact), 2 chain(s) x 20 draws, 82 points" in text  # kernel="auto"
    assert "chosen by kernel=auto: a conjugate component on 82 < " in text
    assert "num_clusters" in text and "P(K=" in text and out.exists()
    assert main(["summary", str(out)]) == 0
    summary = capsys.readouterr().out
    assert "largest_cluster" in summary
    # printed by `sample` from the run it wrote without ArviZ, then by `summary` from the file ArviZ read back
    assert summary.strip() == text.replace(f"wrote {out}", "").strip()
    for kind in ("trace", "autocorr", "ppc"):  # ppc: replicated data drawn here, the model read from the run
        fig = tmp_path / f"{kind}.png"
        assert main(["plot", str(out), "--kind", kind, "--out", str(fig)]) == 0
        assert fig.stat().st_size > 1000


def test_sample_from_csv_with_kernel_options(tmp_path, capsys):
    rng = np.random.default_rng(0)
    data = tmp_path / "points.csv"
    np.savetxt(data, rng.normal(size=(20, 2)), delimiter=",", header="a,b", comments="")
    assert main(["sample", str(MODELS / "gaussian_known.dp"), "--data", str(data), "--kernel",
                 "gibbs+splitmerge", "--option", "num_proposals=3", "--warmup", "2", "--samples", "5",
                 "--chains", "1", "--no-progress"]) == 0
    assert "gibbs+splitmerge" in capsys.readouterr().out


def test_a_model_that_names_its_data_runs_without_data_and_data_given_win(tmp_path, capsys):
    """The README's main job: `dpppl sample models/galaxies.dp --chains 2` (Escobar & West's full model, m and tau
    random, issue 31) with no --data: the summary says K, alpha, the kernel and each random hyperparameter's
    posterior mean and interval (a headline line and a row of the table each), which `posterior` holds under its
    name, with an R-hat (a number) for every quantity; --data wins; a model that names no data, run without
    --data, is one line saying how (models/dpdensity.dp builds the same way: tests/models/test_model_files.py)."""
    out = tmp_path / "galaxies.nc"
    base = ["sample", str(MODELS / "galaxies.dp"), "--chains", "2", "--warmup", "3", "--samples", "10",
            "--no-progress", "--seed", "2"]
    assert main(base + ["--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kernel: gibbs+splitmerge (exact), 2 chain(s) x 10 draws, 82 points" in text
    assert "wrote None" not in text and f"wrote {out}" in text
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["mean", "sd"])
    rows = [line.split() for line in lines[start + 1:lines.index("", start)]]
    assert lines[start].split()[-1] == "r_hat" and len(rows) >= 4 and "nan" not in text.lower(), text
    assert all(re.fullmatch(r"\d+\.\d{3}", row[-1]) for row in rows), text  # R-hat a finite number in every row
    assert "chosen by kernel=auto: " in text
    assert "tau ~ InverseGamma(0.5, 50)" in text
    assert re.search(r"^K: +posterior mean [\d.]+, 90% interval \[\d+, \d+\]$", text, re.M), text
    assert re.search(r"^alpha: +posterior mean [\d.]+, 90% interval \[[\d.]+, [\d.]+\]$", text, re.M), text
    for name in ("m", "tau"):
        number = r"[-\d.e+]+"
        assert re.search(rf"^{name}: +posterior mean {number}, 90% interval \[{number}, {number}\]$", text, re.M), text
        assert re.search(rf"^{name} +[-\d.]+ ", text, re.M), text
    post = group(az.from_netcdf(out), "posterior")
    assert post["m"].shape == (2, 10) and np.all(np.asarray(post["tau"]) > 0)
    data = tmp_path / "v.csv"  # 90 points: the shape class of the galaxies' 82 (96 rows), so the program above runs
    np.savetxt(data, np.r_[np.full(45, 9000.0), np.full(45, 30000.0)] + np.arange(90.0))
    assert main(base + ["--data", str(data)]) == 0
    assert "x 10 draws, 90 points" in capsys.readouterr().out  # `search` of a model naming its data: test_cli_search
    for command in ("sample", "search"):
        assert main([command, str(MODELS / "gaussian_niw.dp")]) == 2
        assert _one_line_error(capsys).startswith(
            f"dpppl: error: {MODELS / 'gaussian_niw.dp'}:19: no data for 'x': the model names none and none were "
            "given; give --data FILE|NAME, or name them in the model file")


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
    for name in ("num_clusters", "largest_cluster", "entropy", "cluster_sizes[1]", "r_hat", "ess_bulk", "lp"):
        assert name in text
    for kind in ("coclustering", "clusters", "k", "lp", "ppc"):
        fig = tmp_path / f"{kind}.png"
        extra = ["--compare", str(out)] if kind == "lp" else ["--estimate", "dahl"]
        assert main(["plot", str(out), "--kind", kind, "--out", str(fig)] + extra) == 0
        assert fig.stat().st_size > 1000


def test_cli_search(tmp_path, capsys):
    """With --data, and without for a model file that names the same points (the same search)."""
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
    naming = tmp_path / "named.dp"
    naming.write_text((MODELS / "gaussian_known.dp").read_text().replace(
        "data x : real[N, D]", 'data x : real[N, D] = file("x.csv")'))
    capsys.readouterr()
    assert main(["search", str(naming), "--beam", "10", "--out", str(tmp_path / "named.csv")]) == 0
    assert "K = " in capsys.readouterr().out
    assert np.array_equal(np.loadtxt(tmp_path / "named.csv", dtype=int), labels)
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
                 "--option", "permute_prob=0.5", "--warmup", "0", "--samples", "4", "--chains", "1",
                 "--no-progress"]) == 0
    assert "sbgibbs+labelswap+labelpermute (exact)" in capsys.readouterr().out



def test_trace_plot_draws_integer_variables_as_bars(galaxies_run, tmp_path):
    """num_clusters and largest_cluster are integers: bars, not a smooth density (which is
    what a float variable such as entropy gets)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from dpppl.analysis.plots import plot_trace
    from dpppl.diagnostics.arviz_compat import az

    axes = plot_trace(az.from_netcdf(galaxies_run[0]))
    titles = [ax.get_title() for ax in axes[:, 0]]
    assert titles == ["num_clusters", "largest_cluster", "entropy", "alpha"]
    bars = [sum(isinstance(p, Rectangle) for p in ax.patches) for ax in axes[:, 0]]
    assert bars[0] > 0 and bars[1] > 0, bars
    assert bars[2] == bars[3] == 0 and axes[2, 0].lines, bars
    plt.close("all")
    with pytest.raises(dpppl.DataError, match=r"no variable\(s\) \['nope'\]"):
        plot_trace(az.from_netcdf(galaxies_run[0]), ["num_clusters", "nope"])


@pytest.mark.parametrize("argv, hint", [
    (["sampel", "m.dp"], "did you mean 'sample'?"),
    (["sample", "m.dp", "--data", "galaxies", "--sed", "3"], "--sed: did you mean --seed?"),
    (["sample", "m.dp", "--data", "galaxies", "--thining=2"], "--thining: did you mean --thinning?"),
    (["sample", "m.dp", "--dta", "galaxies"], "--dta: did you mean --data?"),
    (["plot", "run.nc", "--out", "f.png", "--kinds", "k"], "--kinds: did you mean --kind?"),
])
def test_misspelt_command_or_option_gets_a_suggestion(argv, hint, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error:" in err and err.endswith(f"({hint})"), err


def test_no_suggestion_for_far_off_or_valid_options(capsys):
    with pytest.raises(SystemExit):
        main(["sample", "m.dp", "--data", "galaxies", "--zzzz", "--samp", "3"])  # --samp: a prefix of --samples
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzz" in err and "did you mean" not in err


def test_every_option_has_help_and_seed_and_thinning_say_what_they_do():
    import argparse

    from dpppl.cli import _parser

    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in commands.items():
        for action in sub._actions:
            assert action.help, f"`dpppl {name}` {action.option_strings or action.dest} has no help"
    sample = {a.dest: a.help for a in commands["sample"]._actions}
    assert "same draws" in sample["seed"] and "every n-th" in sample["thinning"]


def test_datasets_listing_is_aligned_and_names_the_extras(capsys):
    assert main(["datasets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = list(dpppl.datasets.available())
    assert [line.split()[0] for line in lines] == names
    starts = {len(line) - len(line[len(name):].lstrip()) for line, name in zip(lines, names)}
    assert len(starts) == 1, "descriptions do not start in one column"
    by_name = dict(zip(names, lines))
    assert "[needs: pip install scikit-learn]" in by_name["digits"]
    assert "[needs: pip install 'dpppl[examples]']" in by_name["storms"]
    assert "[needs: pip install 'dpppl[examples]']" in by_name["minneapolis"]
    assert "needs" not in by_name["galaxies"] and "needs" not in by_name["w1"]


def test_data_errors_name_the_file_line_and_cell(tmp_path, capsys):
    data = tmp_path / "points.csv"
    data.write_text("a,b\n1,2\n3,nan\n")
    assert main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", str(data), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"dpppl: error: {data}, line 3: non-finite value (nan) at row 1, column 1 (b)"


def _one_line_error(capsys) -> str:
    """What a failed command printed: one `dpppl: error:` line on stderr, no traceback."""
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("dpppl: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("seed, message", [
    ("-1", "seed must be an integer in [0, 9223372036854775807], got -1"),
    (str(2**64), f"seed must be an integer in [0, 9223372036854775807], got {2**64}"),
    (str(2**70), f"seed must be an integer in [0, 9223372036854775807], got {2**70}"),
])
def test_out_of_range_seed_is_one_line_before_sampling(seed, message, monkeypatch, capsys):
    monkeypatch.setattr(dpppl.run.driver, "BACKENDS", {})  # a KeyError traceback if sampling were reached
    assert main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--no-progress",
                 "--seed", seed]) == 2
    assert message in _one_line_error(capsys)


def test_thinning_larger_than_samples_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(dpppl.run.driver, "BACKENDS", {})
    assert main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--no-progress",
                 "--samples", "5", "--thinning", "10"]) == 2
    assert _one_line_error(capsys) == ("dpppl: error: thinning (10) is larger than num_samples (5): "
                                       "no draw would be kept")


def test_out_in_a_missing_directory_is_refused_before_sampling(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(dpppl.run.driver, "BACKENDS", {})
    out = tmp_path / "nonexistent" / "dir" / "run.nc"
    assert main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--no-progress",
                 "--out", str(out)]) == 2
    assert _one_line_error(capsys) == (f"dpppl: error: --out {out}: the directory {out.parent} "
                                       "does not exist")
    assert main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--no-progress",
                 "--out", str(tmp_path)]) == 2
    assert "is a directory" in _one_line_error(capsys)


def test_run_files_that_are_not_netcdf_are_one_line(galaxies_run, tmp_path, capsys):
    csv = tmp_path / "points.csv"
    csv.write_text("a,b\n1,2\n")
    cases = [(csv, "not a netCDF file written by `dpppl sample --out`"),
             (tmp_path, "is a directory, not a run file"),
             (tmp_path / "missing.nc", "no such run file")]
    for path, message in cases:
        assert main(["summary", str(path)]) == 2
        assert _one_line_error(capsys).startswith(f"dpppl: error: {path}: {message}")
        assert main(["plot", str(path), "--out", str(tmp_path / "f.png")]) == 2
        assert _one_line_error(capsys).startswith(f"dpppl: error: {path}: {message}")
    assert main(["plot", str(galaxies_run[0]), "--kind", "lp", "--compare", str(csv),
                 "--out", str(tmp_path / "f.png")]) == 2
    assert "not a netCDF file" in _one_line_error(capsys)


def test_model_paths_that_are_not_model_files_are_one_line(tmp_path, capsys):
    latin1 = tmp_path / "latin1.dp"
    latin1.write_bytes("# mod\u00e8le\n".encode("latin-1") + (MODELS / "gaussian_known.dp").read_bytes())
    for path, message in ((tmp_path, "is a directory, not a model file"),
                          (tmp_path / "missing.dp", "no such model file"),
                          (latin1, "not UTF-8 text")):
        for command in (["sample", str(path), "--data", "galaxies", "--no-progress"],
                        ["search", str(path), "--data", "galaxies"]):
            assert main(command) == 2
            assert _one_line_error(capsys).startswith(f"dpppl: error: {path}: {message}")


# ------------------------------------------------------------------ checkpoints and Ctrl-C


@pytest.fixture
def exits(monkeypatch):
    """The command's end on Ctrl-C (os._exit(130)) as SystemExit; SIGINT's handler (which the
    exit sets to ignore) restored after the test."""
    import os
    import signal

    def exit_now(status):
        raise SystemExit(status)

    handler = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(os, "_exit", exit_now)
    yield
    signal.signal(signal.SIGINT, handler)


GALAXIES_RUN = ["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--warmup", "5", "--samples", "20",
                "--chains", "2", "--no-progress"]  # the run of the `galaxies_run` fixture


@pytest.mark.parametrize("stop", [3, 12], ids=["warmup", "sampling"])  # --warmup 5: chunks 1-5 are warmup
def test_an_interrupted_sample_resumes_to_the_run_that_was_not_stopped(stop, galaxies_run, tmp_path, monkeypatch,
                                                                      capsys, exits):
    stop_at_chunk(monkeypatch, stop)
    checkpoint, out = tmp_path / "run.ckpt", tmp_path / "run.nc"
    with pytest.raises(SystemExit) as caught:
        main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--warmup", "5", "--samples", "20",
              "--chains", "2", "--no-progress", "--out", str(out), "--checkpoint", str(checkpoint)])
    assert caught.value.code == 130
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.endswith(f"the run is saved in {checkpoint}: continue it with `dpppl resume {checkpoint} --out {out}`")
    if stop <= 5:
        assert "before any draw was kept" in err and not out.exists()
    else:
        assert f"the {stop - 6} draws kept per chain are in {out}" in err
        assert group(az.from_netcdf(out), "posterior").sizes["draw"] == stop - 6
    resumed = tmp_path / "resumed.nc"
    assert main(["resume", str(checkpoint), "--out", str(resumed), "--no-progress"]) == 0
    assert f"wrote {resumed}" in capsys.readouterr().out
    assert_same_run(az.from_netcdf(resumed), az.from_netcdf(galaxies_run[0]))


@pytest.mark.parametrize("checkpoint", [False, True])
def test_ctrl_c_while_writing_the_run_finishes_the_write(checkpoint, galaxies_run, tmp_path, monkeypatch, capsys,
                                                         exits):
    """A Ctrl-C during the write of --out (here: in its last step) is held back until the file
    is whole, then ends the command with status 130 (issue 30: it left no file)."""
    import os
    import signal

    out = tmp_path / "run.nc"
    extra = ["--checkpoint", str(tmp_path / "run.ckpt")] if checkpoint else []
    replace = os.replace

    def interrupted(src, dst):
        if str(dst).endswith(".nc"):
            signal.raise_signal(signal.SIGINT)  # Ctrl-C while --out is written
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(SystemExit) as caught:
        main(GALAXIES_RUN + ["--out", str(out)] + extra)
    assert caught.value.code == 130
    assert capsys.readouterr().err == f"dpppl: interrupted after the last iteration; the run is complete in {out}\n"
    assert_same_run(az.from_netcdf(out), az.from_netcdf(galaxies_run[0]))
    assert sorted(os.listdir(tmp_path)) == (["run.ckpt", "run.nc"] if checkpoint else ["run.nc"])


@pytest.mark.parametrize("out", [True, False], ids=["out", "no-out"])
def test_a_ctrl_c_after_the_last_iteration_does_not_lose_the_run(out, galaxies_run, tmp_path, monkeypatch, capsys,
                                                                 exits):
    """Ctrl-C while the finished draws become InferenceData (issue 30: `dpppl: interrupted`, exit
    130, no --out): the run is written whole, then the command ends with status 130."""
    import signal

    real = dpppl.run.driver.to_inference_data

    def interrupted(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(dpppl.run.driver, "to_inference_data", interrupted)
    path = tmp_path / "run.nc"
    with pytest.raises(SystemExit) as caught:
        main(GALAXIES_RUN + (["--out", str(path)] if out else []))
    assert caught.value.code == 130
    err = capsys.readouterr().err
    if out:
        assert err == f"dpppl: interrupted after the last iteration; the run is complete in {path}\n"
        assert_same_run(az.from_netcdf(path), az.from_netcdf(galaxies_run[0]))
    else:
        assert err == "dpppl: interrupted after the last iteration (no --out: nothing written)\n"


@pytest.mark.parametrize("checkpoint", [False, True])
def test_an_out_that_cannot_be_written_at_the_end_goes_to_a_fallback_file(checkpoint, galaxies_run, tmp_path,
                                                                          monkeypatch, capsys):
    """--out passed the check before sampling but cannot be created at the end (issue 30:
    `/proc/run.nc` lost every draw): the run goes to a new file beside the checkpoint, or in the
    working directory, without overwriting one there; exit status 1 and a line saying where."""
    import os

    monkeypatch.setattr(dpppl, "sample", lambda *args, **kwargs: az.from_netcdf(galaxies_run[0]))
    work, kept = tmp_path / "work", tmp_path / "kept"
    work.mkdir()
    kept.mkdir()
    monkeypatch.chdir(work)
    folder = kept if checkpoint else work
    (folder / "run.nc").write_text("another run")
    out = tmp_path / "run.nc"
    replace = os.replace

    def refused(src, dst):
        if os.path.abspath(dst) == str(out):
            raise PermissionError(13, "Permission denied", str(dst))
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", refused)
    extra = ["--checkpoint", str(kept / "run.ckpt")] if checkpoint else []
    assert main(GALAXIES_RUN + ["--out", str(out)] + extra) == 1
    captured = capsys.readouterr()
    fallback = folder / "run-1.nc"
    assert captured.err == (f"dpppl: error: cannot write --out {out} ([Errno 13] Permission denied: '{out}'); "
                            f"the run is written to {fallback} instead\n")
    assert "num_clusters" in captured.out and "wrote" not in captured.out  # the summary, after the write
    assert_same_run(az.from_netcdf(fallback), az.from_netcdf(galaxies_run[0]))
    assert (folder / "run.nc").read_text() == "another run" and not out.exists()


def test_when_the_fallback_file_fails_too_the_line_says_the_draws_are_lost(galaxies_run, tmp_path, monkeypatch,
                                                                           capsys):
    import os

    monkeypatch.setattr(dpppl, "sample", lambda *args, **kwargs: az.from_netcdf(galaxies_run[0]))
    monkeypatch.chdir(tmp_path)

    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    out = tmp_path / "sub" / "run.nc"
    out.parent.mkdir()
    assert main(GALAXIES_RUN + ["--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"dpppl: error: cannot write --out {out} ([Errno 28] No space left on device), nor the fallback file "
        f"{tmp_path / 'run.nc'} ([Errno 28] No space left on device): the draws are lost\n")
    assert os.listdir(tmp_path) == ["sub"] and os.listdir(out.parent) == []


def test_checkpoint_errors_are_one_line_before_sampling(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(dpppl.run.driver, "BACKENDS", {})
    base = ["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--no-progress"]
    assert main(base + ["--kernel", "nuts", "--checkpoint", str(tmp_path / "run.ckpt")]) == 2
    assert "kernel 'nuts' cannot save a checkpoint: the partition kernels (" in _one_line_error(capsys)
    assert main(base + ["--checkpoint", str(tmp_path / "no" / "run.ckpt")]) == 2
    assert "--checkpoint" in _one_line_error(capsys)
    assert main(["resume", str(tmp_path / "missing.ckpt")]) == 2
    assert _one_line_error(capsys) == f"dpppl: error: {tmp_path / 'missing.ckpt'}: no such checkpoint file"


def test_a_ctrl_c_dropped_by_a_garbage_collector_callback_still_stops_the_command(monkeypatch, capsys, exits):
    """Python drops a KeyboardInterrupt raised in a gc callback or a __del__ (JAX has a gc
    callback): the command sends SIGINT again, and exits 130 with one line."""
    import time

    class DropsCtrlC:
        def __del__(self):
            raise KeyboardInterrupt

    def sample(*args, **kwargs):
        DropsCtrlC()
        time.sleep(30)  # the SIGINT sent again interrupts this
        raise AssertionError("the dropped Ctrl-C was not sent again")

    monkeypatch.setattr(dpppl, "sample", sample)
    with pytest.raises(SystemExit) as caught:
        main(["sample", str(MODELS / "gaussian_niw.dp"), "--data", "galaxies", "--no-progress"])
    assert caught.value.code == 130
    captured = capsys.readouterr()
    assert captured.err == "dpppl: interrupted\n" and "Exception ignored" not in captured.err


def _interrupt_after_start(tmp_path, delays) -> None:
    """Run `dpppl sample` in fresh processes with an empty compilation cache, and send each
    SIGINT `delay` seconds after JAX starts compiling the run's first function (dpppl has been
    imported and the command started): exit status 130, one line, no traceback, no SIGSEGV."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parent.parent
    for i, delay in enumerate(delays):
        env = dict(os.environ, DPPPL_COMPILATION_CACHE=str(tmp_path / f"cache{i}"), JAX_LOG_COMPILES="1",
                   PYTHONPATH=str(root))
        process = subprocess.Popen([sys.executable, "-m", "dpppl.cli", "sample", str(MODELS / "gaussian_niw.dp"),
                                    "--data", "galaxies", "--no-progress"], cwd=root, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for line in process.stderr:
            if "Compiling jit(seat)" in line:  # the chains' start, the run's first program of its own
                time.sleep(delay)
                process.send_signal(signal.SIGINT)
                break
        _, err = process.communicate(timeout=120)
        assert process.returncode == 130, (delay, process.returncode, err[-2000:])
        assert err.splitlines()[-1] == "dpppl: interrupted" and "Traceback" not in err, err[-2000:]  # after JAX's logs


def test_ctrl_c_during_the_first_compile_of_a_run_exits_130(tmp_path):
    _interrupt_after_start(tmp_path, [0.0])


@pytest.mark.slow  # ~4 s a try; before os._exit: 3 SIGSEGV, 1 traceback, 1 Ctrl-C lost in these 5
def test_ctrl_c_in_the_first_seconds_of_a_run_exits_130_without_sigsegv(tmp_path):
    _interrupt_after_start(tmp_path, [0.5, 1.5, 2.5, 3.5, 4.5])


def test_ctrl_c_while_the_console_script_imports_dpppl_exits_130(tmp_path):
    """The `dpppl` console script (`dpppl_console.main`) handles Ctrl-C before it imports dpppl
    and JAX: a SIGINT sent while JAX is being imported (the first of its modules reported by
    `-X importtime`) ends it with status 130 and one line, not a traceback from the imports."""
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), DPPPL_COMPILATION_CACHE=str(tmp_path / "cache"))
    process = subprocess.Popen([sys.executable, "-X", "importtime", str(root / "dpppl_console.py"), "kernels"],
                               cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for line in process.stderr:
        if "jax" in line:
            process.send_signal(signal.SIGINT)
            break
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, (process.returncode, err[-2000:])
    assert err.splitlines()[-1] == "dpppl: interrupted while starting" and "Traceback" not in err, err[-2000:]


def test_the_console_script_ends_with_the_commands_status_and_output_without_the_interpreters_teardown(tmp_path):
    """`dpppl_console.main` flushes the command's output and ends the process with its status at once
    (`os._exit`): an exit handler registered before it never runs, the output is whole and a failing
    command's status is kept."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), DPPPL_COMPILATION_CACHE=str(tmp_path / "cache"))
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('teardown ran'))\n"
              "sys.argv = ['dpppl'] + sys.argv[1:]\n"
              "import dpppl_console\n"
              "dpppl_console.main()\n")
    done = subprocess.run([sys.executable, "-c", script, "kernels"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "splitmerge" in done.stdout and "teardown ran" not in done.stdout
    failed = subprocess.run([sys.executable, "-c", script, "sample", str(tmp_path / "missing.dp")], cwd=root, env=env,
                            capture_output=True, text=True, timeout=300)
    assert failed.returncode == 2 and "teardown ran" not in failed.stdout
    assert failed.stderr.startswith("dpppl: error: ") and "missing.dp" in failed.stderr
