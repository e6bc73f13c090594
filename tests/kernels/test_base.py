"""Kernel options are checked when a kernel is built, before anything is compiled."""

import pytest

import dpppl
from dpppl.kernels.base import build
from tests.helpers.cases import CASES


@pytest.mark.parametrize("spec, value, shown", [
    ("gibbs", "yes", "got 'yes' (str)"), ("gibbs+splitmerge", "no", "got 'no' (str)"), ("gibbs", 1, "got 1 (int)")])
def test_a_switch_option_must_be_a_bool(spec, value, shown):
    """`native="no"` used to be read by its truth value (true): a switch takes True, False or None."""
    bound = CASES["niw_2d_overlap"].model.bind(CASES["niw_2d_overlap"].x)
    with pytest.raises(dpppl.ArgumentError) as e:
        build(spec, bound, native=value)
    assert str(e.value) == f"option native of kernel 'gibbs' must be True, False or None, {shown}"
    for accepted in (True, False, None):
        assert build(spec, bound, native=accepted).name == spec
