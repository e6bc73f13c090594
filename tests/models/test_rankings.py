"""Ranking data (dpppl.models.rankings): names, arrays, padding and errors."""


import numpy as np
import pytest

import dpppl
from dpppl.errors import DataError, KernelError, ModelError
from dpppl.families.generalized_mallows import (GeneralizedMallows)
from tests.helpers.mallows import MODEL_TEXT


# ------------------------------------------------------------------------- data ---
def test_rankings_from_names_and_arrays():
    r = dpppl.rankings([["b", "a"], ["c"], ["a", "c", "b"]])
    assert r.items == ("a", "b", "c")
    np.testing.assert_array_equal(r.x, [[1, 0, -1], [2, -1, -1], [0, 2, 1]])
    assert list(r.lengths) == [2, 1, 3] and r.names(r.x[0]) == ["b", "a"]
    r2 = dpppl.rankings([[3, 1]], n_items=5)
    np.testing.assert_array_equal(r2.x, [[3, 1, -1, -1, -1]])


@pytest.mark.parametrize("rows, kwargs, message", [
    ([["a", "b"], ["a", "a"]], {}, "ranking 1 lists item"),
    ([["a", "b"], ["z"]], {"items": ["a", "b"]}, "ranking 1 has an unknown item 'z'"),
    ([["a"], []], {"items": ["a", "b"]}, "ranking 1 is empty"),
    ([[0, 1, 2]], {"n_items": 2}, "ranking 0 lists 3 items but there are only 2"),
    ([[0, 5]], {"n_items": 3}, "ranking 0 holds 5"),
])
def test_bad_rankings_name_the_row(rows, kwargs, message):
    with pytest.raises(DataError, match=message):
        dpppl.rankings(rows, **kwargs)


@pytest.mark.parametrize("data", [3.0, None])
def test_rankings_that_are_not_a_sequence_are_a_data_error(data):
    with pytest.raises(DataError, match=r"data 'x': rankings must be a sequence of rankings .* got "):
        dpppl.rankings(data)


def test_padding_rules_and_model_errors():
    with pytest.raises(DataError, match="ranking 0 has an item after the -1 padding"):
        dpppl.rankings(np.array([[0, -1, 1]]))
    model = dpppl.parse(MODEL_TEXT)
    with pytest.raises(KernelError, match="no closed-form marginal"):
        dpppl.sample(model, [[0, 1]], kernel="gibbs")
    with pytest.raises(KernelError, match="GeneralizedMallows components"):
        dpppl.sample(dpppl.DPMixture(1.0, dpppl.NormalKnownCov()), np.zeros((3, 1)), kernel="mallows-slice")
    with pytest.raises(ModelError, match="ranking data have one dimension"):
        dpppl.parse("data r : ranking[N, D] of 5\nz ~ CRP(1)\ntheta[k] ~ MallowsPrior()\n"
                    "r[i] ~ GeneralizedMallows(theta[z[i]])\n")
    fixed = dpppl.parse(MODEL_TEXT.replace("of n", "of 6"))
    assert fixed.data.of == 6 and fixed.bind([[0, 5]]).x.shape == (1, 6)
    with pytest.raises(ModelError, match="n_items <= 7"):
        dpppl.log_joint(dpppl.DPMixture(1.0, GeneralizedMallows(9)), [[0, 1]], [0])

