"""Helpers of the checkpoint tests: runs stopped at a chosen chunk, and runs compared bit for bit."""

import numpy as np

from dpppl.diagnostics.arviz_compat import group
from dpppl.run import runner

SAMPLE_GROUPS = ("posterior", "sample_stats", "posterior_partition")


def stop_at_chunk(monkeypatch, k: int) -> None:
    """Runs go in chunks of one iteration, and the k-th chunk from now (counting from 1, a
    chunk re-run after the capacity grew included) raises KeyboardInterrupt."""
    monkeypatch.setattr(runner, "CHUNK_SECONDS", 0.0)
    real = runner._chunk_function
    calls = {"n": 0}

    def stopping(*spec):
        fn = real(*spec)

        def chunk(*args):
            calls["n"] += 1
            if calls["n"] == k:
                raise KeyboardInterrupt
            return fn(*args)
        return chunk

    monkeypatch.setattr(runner, "_chunk_function", stopping)


def assert_same_run(got, expected) -> None:
    """The sample groups hold the same variables with the same dtypes and the same values
    (NaN where NaN), and the same attrs but ArviZ's time of creation."""
    for name in SAMPLE_GROUPS:
        a, b = group(got, name), group(expected, name)
        assert sorted(a.data_vars) == sorted(b.data_vars), name
        for var in b.data_vars:
            assert a[var].dtype == b[var].dtype, (name, var)
            np.testing.assert_array_equal(a[var].values, b[var].values, err_msg=f"{name}.{var}", strict=True)
        drop = {"created_at"}
        assert {k: v for k, v in a.attrs.items() if k not in drop} == {k: v for k, v in b.attrs.items()
                                                                       if k not in drop}, name
