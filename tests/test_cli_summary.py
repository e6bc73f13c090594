"""`dpppl summary` prints diagnostics at a precision that shows a failing R-hat, explains its columns, shows
one interval level and no row twice, and never prints NaN (cli.summary_text)."""

import re

import numpy as np

from dpppl.cli import summary_text
from dpppl.diagnostics.arviz_compat import arviz, to_arviz
from dpppl.diagnostics.summaries import label_summaries


def _run_with_rhat_between(low, high):
    """A made-up run of 4 chains whose ``lp`` has an R-hat in (low, high): chains of
    independent normal draws, one chain shifted until R-hat lands there."""
    rng = np.random.default_rng(0)
    chains, draws, n = 4, 400, 5
    noise = rng.normal(size=(chains, draws))
    z = rng.integers(0, 3, size=(chains, draws, n)).astype(np.int32)
    summaries = label_summaries(z)
    az = arviz()
    for shift in np.linspace(0.0, 1.0, 201):
        lp = -100.0 + noise + shift * (np.arange(chains) == 0)[:, None]
        r_hat = float(az.rhat(lp))
        if low < r_hat < high:
            break
    else:
        raise AssertionError("no shift gives the wanted R-hat")
    posterior = {k: v for k, v in summaries.items() if k != "cluster_sizes"} | {"lp": lp}
    partition = {"z": z, "cluster_sizes": summaries["cluster_sizes"]}
    idata = to_arviz({"posterior": posterior, "posterior_partition": partition, "sample_stats": {"lp": lp}},
                     dims={"z": ["point"], "cluster_sizes": ["cluster"]}, attrs={"kernel": "gibbs", "exact": 1})
    return idata, r_hat


def test_summary_shows_an_r_hat_just_above_the_limit_and_ess_as_integers():
    idata, r_hat = _run_with_rhat_between(1.011, 1.019)
    text = summary_text(idata)
    lp_row = next(line for line in text.splitlines() if line.startswith("lp "))
    header = next(line for line in text.splitlines() if "r_hat" in line).split()
    row = dict(zip(header, lp_row.split()[1:]))
    assert row["r_hat"] == f"{r_hat:.3f}" and float(row["r_hat"]) > 1.01
    assert re.fullmatch(r"\d+", row["ess_bulk"]) and re.fullmatch(r"\d+", row["ess_tail"])
    assert "R-hat above 1.01: " in text and "lp" in text.split("R-hat above 1.01: ")[1].splitlines()[0]
    for name in ("num_clusters", "largest_cluster", "entropy", "cluster_sizes[1]"):
        assert name in text


def _table(text):
    """The summary table of `text`: {row name: {column: cell}}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["mean", "sd"])
    header = lines[start].split()
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        name, *cells = line.split()
        rows[name] = dict(zip(header, cells))
    return header, rows


def test_summary_explains_every_column_and_shows_no_row_twice():
    idata, _ = _run_with_rhat_between(1.0, 1.01)
    text = summary_text(idata)
    header, rows = _table(text)
    assert header == ["mean", "sd", "hdi_5%", "hdi_95%", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"]
    explained = [line.split(":")[0] for line in text.splitlines() if ": " in line]
    for column in header:
        assert any(column in names.split(", ") for names in explained), f"no line explains {column}"
    assert "hdi_5%, hdi_95%: the narrowest interval holding 90% of the draws" in text
    assert "cluster_sizes[0]" not in rows and "largest_cluster" in rows and "cluster_sizes[1]" in rows
    assert "cluster_sizes[r]: the size of the (r+1)-th largest cluster ([0], the largest: largest_cluster)" in text


def test_the_headline_interval_is_the_tables_interval():
    """One interval level: K's line gives the table's 90% HDI of num_clusters, not a central interval."""
    idata, _ = _run_with_rhat_between(1.0, 1.01)
    text = summary_text(idata)
    k_line = next(line for line in text.splitlines() if line.startswith("K: "))
    row = _table(text)[1]["num_clusters"]
    assert k_line.endswith(f"90% interval [{float(row['hdi_5%']):.0f}, {float(row['hdi_95%']):.0f}]"), k_line
    assert "94%" not in text and "hdi_3%" not in text


def test_one_chain_shows_no_r_hat_and_says_why_and_nothing_prints_nan():
    idata, _ = _run_with_rhat_between(1.0, 1.01)
    text = summary_text(idata.isel(chain=[0]))
    header, rows = _table(text)
    assert "r_hat" not in header and "nan" not in text.lower()
    assert "r_hat: not shown for one chain (it compares chains): run 2 or more (--chains, default 4)" in text


def test_a_quantity_equal_in_every_draw_shows_a_dash_and_a_line_saying_why():
    """One cluster in every draw: num_clusters, largest_cluster and entropy are constant, R-hat is 0/0."""
    idata, _ = _run_with_rhat_between(1.0, 1.01)
    z = np.zeros((4, 400, 5), np.int32)
    summaries = label_summaries(z)
    lp = np.asarray(idata.posterior["lp"])
    posterior = {k: v for k, v in summaries.items() if k != "cluster_sizes"} | {"lp": lp}
    constant = to_arviz({"posterior": posterior, "posterior_partition": {"z": z, "cluster_sizes": summaries[
        "cluster_sizes"]}, "sample_stats": {"lp": lp}}, dims={"z": ["point"], "cluster_sizes": ["cluster"]},
        attrs={"kernel": "gibbs", "exact": 1})
    text = summary_text(constant)
    _, rows = _table(text)
    assert rows["num_clusters"]["r_hat"] == "-" and rows["lp"]["r_hat"] != "-"
    assert "nan" not in text.lower()
    assert "-: num_clusters, largest_cluster, entropy took one value in every draw: no variance for R-hat to " \
           "compare" in text


def test_dpppl_sample_runs_four_chains_by_default():
    from dpppl.cli import DEFAULT_CHAINS, _parser

    args = _parser().parse_args(["sample", "models/galaxies.dp"])
    assert args.chains == DEFAULT_CHAINS == 4
    sample = next(a for a in _parser()._actions if a.dest == "command").choices["sample"]
    assert "default 4; R-hat needs 2 or more" in next(a.help for a in sample._actions if a.dest == "chains")
