"""The NUTS backend's host side (`dpppl.run.nuts.sample_nuts`), without compiling a NUTS program:
its compiled program (`on_target` of `run_chains`) is replaced by one that reports what a run would. The program itself
is checked against NumPyro's `MCMC` in tests/run/test_driver.py."""

import numpy as np
import pytest

import dpppl
from dpppl.run import nuts


def _reported(valid):
    """Stands for `on_target` of `run_chains`: a run that compiles nothing and returns `valid` and
    records of 2 draws."""

    def on_target(name, target, fn, *static, light=False):
        shape = (len(valid), 2)
        records = {"z": np.zeros(shape + (target.num_points,), np.int32), "lp": np.zeros(shape),
                   "diverging": np.zeros(shape, bool), "acceptance_rate": np.ones(shape)}
        return lambda keys: (np.asarray(valid), records)

    return on_target


def test_a_chain_without_valid_initial_parameters_is_a_model_error(monkeypatch, niw_model, two_blobs):
    """NumPyro's RuntimeError ("Cannot find valid initial parameters") is a ModelError naming the chains."""
    monkeypatch.setattr(nuts, "on_target", _reported([True, False, False]))
    monkeypatch.setattr(nuts, "prepare", lambda run, keys: None)
    with pytest.raises(dpppl.ModelError, match=r"kernel 'nuts': chain\(s\) 1, 2 found no initial parameters with a "
                                               r"finite log density and gradient in 100 draws"):
        dpppl.sample(niw_model, two_blobs[0], kernel="nuts", num_chains=3, num_warmup=1, num_samples=2,
                     progress_bar=False, log_likelihood=False)


def test_chain_keys_are_those_numpyros_mcmc_gives_its_chains():
    """One chain: the seed's key; several: its split (NumPyro's `MCMC.run`); key data computed on the host."""
    import jax

    for seed in (4, 2**33 + 5):
        one, three = nuts.chain_keys(seed, 1), nuts.chain_keys(seed, 3)
        key = jax.random.key(seed)
        assert one.dtype == three.dtype == np.uint32
        assert np.array_equal(one, jax.random.key_data(key)[None])
        assert np.array_equal(three, jax.random.key_data(jax.random.split(key, 3)))


def test_the_programs_progress_callback_advances_the_runs_bar(monkeypatch):
    """The compiled program reports every `progress_every` iterations (about 100 a chain) to the bar of
    the run in progress (`_SHOWN`), naming the chain and the warmup; with no run in progress, nothing."""
    shown = []

    class Bar:
        def update(self, n, status):
            shown.append((n, status))

    nuts._advance(np.int32(15), np.int32(1), np.bool_(True))  # no run: nothing to advance
    monkeypatch.setattr(nuts, "_SHOWN", [Bar()])
    nuts._advance(np.int32(15), np.int32(1), np.bool_(True))
    nuts._advance(np.int32(15), np.int32(1), np.bool_(False))
    assert shown == [(15, "chain 2 (warmup)"), (15, "chain 2")]
    assert nuts.progress_every(10) == 1 and nuts.progress_every(1500) == 15
