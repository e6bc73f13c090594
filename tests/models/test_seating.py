"""Functions built on exchangeable seating refuse priors on explicit labels."""

import pytest

import dpppl
from tests.helpers.stick_breaking import FIG1_PRIOR, NKC, X4


def test_functions_built_on_exchangeable_seating_refuse_stick_breaking_priors():
    model = dpppl.StickBreakingMixture(*FIG1_PRIOR, component=NKC)
    for call in (lambda: dpppl.map_search(model, X4), lambda: dpppl.sample_prior(model, 4)):
        with pytest.raises(dpppl.ModelError, match="prior on explicit labels"):
            call()

