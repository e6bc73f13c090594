"""The partition-kernel backend: steps traced and compiled once per process, one chunk
length, the same draws whatever was compiled before."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl.core import numerics_random
from dpppl.diagnostics.arviz_compat import partition_group
from dpppl.kernels import base
from dpppl.kernels.gibbs import build_gibbs_kernel
from dpppl.models.init import initial_states
from dpppl.run import runner


@pytest.fixture
def counting_kernel(monkeypatch):
    """A kernel 'counted' (collapsed Gibbs) whose step counts how often it is traced."""
    traces = {"n": 0}

    def factory(bound_model):
        kern = build_gibbs_kernel(bound_model)

        def step(rng_key, state, x):
            traces["n"] += 1  # runs while JAX traces the step, never when a compiled step runs
            return kern.step(rng_key, state, x)

        return dataclasses.replace(kern, name="counted", step=step)

    monkeypatch.setitem(base._REGISTRY, "counted", base.KernelEntry(
        "counted", factory, True, "collapsed Gibbs that counts its traces", base.exchangeable_prior_only))
    return traces


def test_a_second_run_traces_nothing(counting_kernel, niw_model, two_blobs):
    x, _ = two_blobs
    # a model of its own, so no earlier test compiled these steps: a fixed discount is part of a program's
    # structure (alpha is an argument of it, so another alpha would share an earlier test's program)
    model = dpppl.PitmanYorMixture(0.09, 0.9, niw_model.component)
    first = dpppl.sample(model, x, kernel="counted", num_warmup=3, num_samples=7, seed=5, progress_bar=False)
    traced = counting_kernel["n"]
    # once: the chunk compiled in a thread while the chains start (`runner._first_chunk`) is the one the run calls
    assert traced == 1
    second = dpppl.sample(model, x, kernel="counted", num_warmup=3, num_samples=7, seed=5, progress_bar=False)
    assert counting_kernel["n"] == traced
    assert np.array_equal(partition_group(first)["z"].values, partition_group(second)["z"].values)
    # other lengths (longer than a chunk), another seed: still nothing traced
    dpppl.sample(model, x, kernel="counted", num_warmup=2, num_samples=runner.CHUNK_LENGTH + 11, seed=6,
                 progress_bar=False)
    assert counting_kernel["n"] == traced
    # other data of the same shape: the data and the hyperparameters resolved from them are arguments of the
    # compiled chunk, not constants of it, so nothing is traced either (issue 35)
    dpppl.sample(model, x + 1.0, kernel="counted", num_warmup=3, num_samples=7, seed=5, progress_bar=False)
    assert counting_kernel["n"] == traced


def test_warmup_runs_the_sampling_chunk_when_the_kernel_has_no_warmup_step(counting_kernel, niw_model,
                                                                           two_blobs):
    """One program for both phases: a run with warmup traces the step no more often than
    a run without."""
    x, _ = two_blobs
    no_warmup = dpppl.PitmanYorMixture(0.08, 0.8, niw_model.component)
    dpppl.sample(no_warmup, x, kernel="counted", num_warmup=0, num_samples=4, seed=1, progress_bar=False)
    traced = counting_kernel["n"]
    assert traced == 1, "the chunk traced the step more than once (its one trace is the loop's body)"
    counting_kernel["n"] = 0
    with_warmup = dpppl.PitmanYorMixture(0.07, 0.7, niw_model.component)
    dpppl.sample(with_warmup, x, kernel="counted", num_warmup=5, num_samples=4, seed=1, progress_bar=False)
    assert counting_kernel["n"] == traced > 0


def test_one_program_runs_the_warmup_step_in_warmup_and_the_step_after(niw_model, two_blobs, monkeypatch):
    """A kernel with a warmup step of its own: one chunk program runs the warmup step when the traced
    phase says warmup and the step otherwise, so the switch to sampling lowers and compiles nothing."""
    from tests.run.test_compile_once import lowerings

    phase_info = base.info_type("PhaseInfo", ("in_warmup",))

    def factory(bound_model):
        kern = build_gibbs_kernel(bound_model)

        def step(rng_key, state, x):
            return kern.step(rng_key, state, x)[0], phase_info(jnp.zeros((), bool))

        def warmup(rng_key, state, x):  # leaves the state as it is
            return state, phase_info(jnp.ones((), bool))

        return dataclasses.replace(kern, name="phased", step=step, warmup_step=warmup, info_type=phase_info)

    monkeypatch.setitem(base._REGISTRY, "phased", base.KernelEntry(
        "phased", factory, True, "collapsed Gibbs with a warmup step that stays", base.exchangeable_prior_only))
    x, _ = two_blobs
    program, (kern, key, make) = runner._program("phased", dpppl.PitmanYorMixture(0.05, 0.5, niw_model.component)
                                                 .bind(x), {})
    init_keys, chain_keys = runner._chain_keys(0, 2)
    states = initial_states(program, "sequential", init_keys, None)
    chunk = runner._chunk_function(make, kern, key, 4, int(states.stats.n.shape[-1]))

    def run(warmup):
        new, buf = chunk(states, chain_keys, np.int32(0), np.int32(3), np.bool_(warmup), program)
        assert np.all(np.asarray(buf["in_warmup"])[:, :3] == warmup)
        assert np.array_equal(np.asarray(new.z), np.asarray(states.z)) == warmup  # gibbs moves some label

    run(True)
    with lowerings() as programs:
        run(False)
        run(True)
    assert programs == []


def test_a_step_s_keys_are_folded_from_its_chain_key_and_its_number():
    """Step t of a chain takes `fold_in(chain_key, t)`, or, for a kernel taking k keys at once
    (`Kernel.keys_per_step`: gibbs+splitmerge with the alpha move takes 1 + 2 + 1), the k keys
    `fold_in(chain_key, t k + i)`: what the chunk derives depends on t only, never on the chunking."""
    key = jax.random.key(7)
    data = jax.random.key_data
    assert np.array_equal(data(runner.step_keys(key, 5, 1)), data(jax.random.fold_in(key, 5)))
    four = data(runner.step_keys(key, 5, 4))
    assert four.shape == (4, 2)
    assert np.array_equal(four, np.stack([data(jax.random.fold_in(key, 20 + i)) for i in range(4)]))
    bound = dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), dpppl.NormalKnownCov(1.0, 0.0, 4.0)).bind(np.zeros((6, 1)))
    assert base.build("gibbs+splitmerge", bound).keys_per_step == 4


@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1, 2**32 - 1, 2**32, 2**63 - 1])
def test_the_chains_keys_are_computed_on_the_host_as_jax_splits_them(seed):
    """`_chain_keys` (no program compiled) gives the keys of `jax.random.split(jax.random.key(seed),
    (2, chains))`: the chains' start and steps draw what they drew when a program computed them."""
    with dpppl.config.x64():
        for chains in (1, 2, 5):
            keys = jax.random.split(jax.random.key(seed), (2, chains))
            init_keys, chain_keys = runner._chain_keys(seed, chains)
            assert np.array_equal(jax.random.key_data(init_keys), jax.random.key_data(keys[0]))
            assert np.array_equal(chain_keys, jax.random.key_data(keys[1]))
            assert jax.typeof(init_keys) == jax.typeof(keys[0]) and chain_keys.dtype == np.uint32
    assert np.array_equal(numerics_random.host_split(seed, (3, 2)),
                          jax.random.key_data(jax.random.split(jax.random.key(seed), (3, 2))))
