"""`dpppl summary` prints diagnostics at a precision that shows a failing R-hat (cli.summary_text)."""

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
    for name in ("num_clusters", "largest_cluster", "entropy", "cluster_sizes[0]"):
        assert name in text
