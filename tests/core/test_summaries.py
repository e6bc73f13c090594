"""Hyperparameters resolved from the summaries of rows held across processes (issue 34;
`dpppl.core.summaries`): every data function of the expression language gives from the combined
summaries what it gives from the rows, and what the summaries cannot answer is a DataError."""

import numpy as np
import pytest

import dpppl
from dpppl.core.summaries import RowSummaries
from dpppl.errors import DataError
from dpppl.families import NormalGamma, NormalInverseWishart, NormalKnownCov


@pytest.fixture
def rows():
    rng = np.random.default_rng(0)
    return rng.normal(size=(301, 2)) * [1.0, 3.0] + 1e4  # far from the origin: the scatter must keep its digits


def _summaries_of_parts(x, cuts=(0, 140, 141, 301)):
    """The summaries of `x`'s rows as processes holding `cuts`' ranges would send them (packed)."""
    parts = [RowSummaries.of(x[a:b]).packed() for a, b in zip(cuts[:-1], cuts[1:])]
    return RowSummaries.combined([RowSummaries.unpacked(p, x.shape[1]) for p in parts])


def test_the_data_functions_of_the_summaries_are_those_of_the_rows(rows):
    s = _summaries_of_parts(rows)
    for fn, kwargs in ((np.mean, {}), (np.sum, {}), (np.min, {}), (np.max, {}), (np.var, {"ddof": 1}),
                       (np.std, {"ddof": 1})):
        np.testing.assert_allclose(fn(s, axis=0, **kwargs), fn(rows, axis=0, **kwargs), rtol=1e-11)
    np.testing.assert_allclose(np.cov(s, rowvar=False, ddof=1), np.cov(rows, rowvar=False, ddof=1), rtol=1e-9)
    np.testing.assert_allclose(s.squared_deviations([1.0, 2.0]), np.sum((rows - [1.0, 2.0]) ** 2, axis=0),
                               rtol=1e-11)


@pytest.mark.parametrize("component", [NormalInverseWishart(), NormalKnownCov(), NormalGamma(),
                                       NormalInverseWishart(mu0="(min(x) + max(x)) / 2 + sum(x) / N",
                                                            psi0="diag(var(x)) + eye(D) * sum(sd(x))")])
def test_a_model_bound_to_its_rows_with_the_global_summaries_resolves_the_global_hyperparameters(rows, component):
    model = dpppl.DPMixture(1.0, component)
    whole, part = model.bind(rows), model.bind(rows[:140], _summaries_of_parts(rows))
    assert part.num_points == 140
    np.testing.assert_allclose(part.shift, whole.shift, rtol=1e-13)
    for name in ("mu0", "kappa0", "nu0", "psi0", "sigma2", "tau2", "a0", "b0"):
        if hasattr(whole.family, name):
            np.testing.assert_allclose(getattr(part.family, name), getattr(whole.family, name), rtol=1e-9,
                                       atol=1e-9)


def test_what_the_summaries_do_not_know_is_a_data_error(rows):
    model = dpppl.DPMixture(1.0, NormalInverseWishart(mu0="mean(x * 2)"))
    with pytest.raises(DataError, match="'multiply' of the data themselves is not known from the summaries of rows "
                                        "held across processes"):
        model.bind(rows[:10], _summaries_of_parts(rows))


def test_a_variance_of_one_point_held_across_processes_is_a_data_error(rows):
    with pytest.raises(DataError, match=r"var\(\) of the data needs at least 2 points, got 1"):
        np.var(RowSummaries.of(rows[:1]), axis=0, ddof=1)
