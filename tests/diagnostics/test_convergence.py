"""The summary columns the command line prints (dpppl.diagnostics.convergence) are ArviZ's numbers."""

import numpy as np
import pytest
import xarray as xr

from dpppl.diagnostics.arviz_compat import arviz
from dpppl.diagnostics.convergence import COLUMNS, INTERVAL, columns, summary_table


def _draws(shape, seed=0):
    """Chains of a random walk (slow mixing), integers with ties, a constant and a vector quantity."""
    rng = np.random.default_rng(seed)
    return xr.Dataset({
        "walk": (("chain", "draw"), rng.normal(size=shape).cumsum(axis=1)),
        "count": (("chain", "draw"), rng.integers(0, 4, size=shape).astype(float)),
        "constant": (("chain", "draw"), np.full(shape, 3.0)),
        "sizes": (("chain", "draw", "cluster"), rng.gamma(2.0, size=shape + (3,))),
    }, coords={"cluster": [0, 1, 2]})


@pytest.mark.parametrize("hdi_prob", [INTERVAL, 0.94])
@pytest.mark.parametrize("shape", [(2, 1000), (4, 101), (1, 60), (3, 3)])
def test_the_summary_table_is_arviz_summary(shape, hdi_prob):
    data = _draws(shape)
    expected = arviz().summary(data, kind="all", hdi_prob=hdi_prob, round_to="none")
    got = summary_table(data, hdi_prob=hdi_prob)
    assert list(got.columns) == list(columns(hdi_prob)) == list(expected.columns)
    assert list(summary_table(data).columns) == list(COLUMNS) == list(columns(INTERVAL))
    assert COLUMNS[2:4] == ("hdi_5%", "hdi_95%") and columns(0.94)[2:4] == ("hdi_3%", "hdi_97%")
    assert list(got.index) == list(expected.index) == ["walk", "count", "constant", "sizes[0]", "sizes[1]",
                                                       "sizes[2]"]
    np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=1e-10, equal_nan=True)


def test_a_nan_draw_gives_nan_diagnostics_as_arviz_does():
    data = _draws((2, 200))
    data["walk"][0, 5] = np.nan
    got = summary_table(data).loc["walk"]
    assert np.isnan(got[["mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"]]).all()
