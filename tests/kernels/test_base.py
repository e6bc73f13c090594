"""Kernel options are checked when a kernel is built, before anything is compiled; kernels' info and
carried values are typed, in hybrids too."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

import dpppl
from dpppl.core.state import HybridExtras, NoExtras, grow
from dpppl.kernels.base import HybridInfo, Kernel, NoInfo, build, compose, info_type
from dpppl.kernels.perm.sampler import PermExtras, PermInfo, PermMHInfo
from dpppl.kernels.subcluster.sampler import SubclusterExtras
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


def test_a_hybrid_types_its_parts_info_and_extras():
    """Each part of a hybrid reads and writes its own extras and returns its own info type; the
    hybrid's info names are the parts' fields, prefixed, and `info_dict` gives them in that order.
    Traced only (`jax.eval_shape`): nothing is compiled."""
    case = CASES["niw_2d_overlap"]  # alpha ~ Gamma: the alpha move is appended
    bound = case.model.bind(case.x)
    kern = build("gibbs+perm-move", bound, beam_epsilon=None)
    assert [p.name for p in kern.parts] == ["gibbs", "perm-move", "alpha"] and kern.info_type is HybridInfo
    assert kern.info_names == tuple(f"perm-move_{f}" for f in PermMHInfo._fields)
    x = jnp.asarray(bound.x)
    start = jax.eval_shape(lambda: kern.init(bound.state_from_labels(None, jnp.zeros(5, jnp.int32), 6), x))
    assert [type(e) for e in start.extras.parts] == [NoExtras, PermExtras, NoExtras]
    state, info = jax.eval_shape(kern.warmup, jax.random.key(0), start, x)
    assert jax.tree.structure(state) == jax.tree.structure(start)
    assert [type(i) for i in info.parts] == [NoInfo, PermMHInfo, NoInfo]
    assert tuple(kern.info_dict(info)) == kern.info_names
    single = build("gibbs", CASES["niw_2d_separated"].model.bind(CASES["niw_2d_separated"].x))
    assert single.info_type is NoInfo and single.info_names == () and single.init is None


def test_grow_pads_the_slots_of_each_part_s_extras():
    """`grow` pads a kernel's per-slot values (`extras.slots`), also inside a hybrid's extras, and
    leaves its other carried values (the sub-cluster labels) as they are."""
    case = CASES["niw_2d_overlap"]
    bound = case.model.bind(case.x)
    kern = build("subcluster", bound)
    x = jnp.asarray(bound.x)
    start = jax.eval_shape(lambda: kern.init(bound.state_from_labels(None, jnp.zeros(5, jnp.int32), 3), x))
    own = start.extras.parts[0]
    assert isinstance(start.extras, HybridExtras) and isinstance(own, SubclusterExtras)
    grown = jax.eval_shape(lambda s: grow(s, 6), start).extras.parts[0]
    assert jax.tree.map(lambda a: a.shape[0], grown.slots) == jax.tree.map(lambda a: 6, own.slots)
    assert grown.slots.u is None and set(grown.slots.theta) == set(own.slots.theta) == {"mu", "cov"}
    assert grown.sub_z.shape == own.sub_z.shape == (5,)


def test_info_types_of_a_configuration_are_one_class():
    assert info_type("SubclusterInfo", ("num_splits",)) is info_type("SubclusterInfo", ("num_splits",))
    assert info_type("SubclusterInfo", ("num_splits",))._fields == ("num_splits",)


def test_a_step_whose_info_is_not_its_info_type_is_an_error():
    """A kernel written with a dict of statistics (the form before typed info) is refused by name
    when the run's program is traced, before any step runs."""
    case = CASES["niw_2d_separated"]
    gibbs = build("gibbs", case.model.bind(case.x))
    mine = dataclasses.replace(gibbs, name="mine", info_type=PermInfo)
    with pytest.raises(dpppl.KernelError) as e:
        mine.info_dict({"accept_prob": 1.0})
    assert str(e.value) == ("kernel 'mine': its step returned info of type dict, not its info_type PermInfo (a "
                            "NamedTuple of the move's statistics, given as Kernel(..., info_type=...))")
    hybrid = build("gibbs+splitmerge", case.model.bind(case.x))
    with pytest.raises(dpppl.KernelError, match="kernel 'splitmerge': its step returned info of type NoInfo, not "
                                                "its info_type SplitMergeInfo"):
        hybrid.info_dict(HybridInfo((NoInfo(), NoInfo())))


def test_a_sequence_hybrid_takes_every_part_s_keys_at_once():
    """A hybrid run in sequence takes its parts' keys as one array (`keys_per_step`: the sum of its
    parts', nested hybrids included), each part its own in order; given a single key it splits it
    into one key per part, as before. Run eagerly on recording parts: nothing is compiled."""
    seen = []

    def part(name, count):
        def step(rng_key, state, x):
            seen.append((name, jax.random.key_data(rng_key).tolist()))
            return state, NoInfo()
        return Kernel(name, exact=True, step=step, keys_per_step=count)

    inner = compose([part("a", 1), part("b", 2)])
    outer = compose([inner, part("c", 1)])
    assert (inner.keys_per_step, outer.keys_per_step) == (3, 4)
    assert compose([part("a", 1), part("b", 2)], schedule="random").keys_per_step == 1
    keys = jax.random.split(jax.random.key(0), 4)
    outer.step(keys, None, None)
    data = jax.random.key_data(keys).tolist()
    assert seen == [("a", data[0]), ("b", data[1:3]), ("c", data[3])]
    seen.clear()
    key = jax.random.key(1)
    outer.step(key, None, None)
    k_inner, k_c = jax.random.split(key)
    k_a, k_b = jax.random.split(k_inner)
    assert seen == [(name, jax.random.key_data(k).tolist()) for name, k in (("a", k_a), ("b", k_b), ("c", k_c))]


@pytest.mark.skipif(dpppl.core.native._compiler() is None, reason="no C++ compiler")
def test_a_kernel_of_native_moves_compiles_its_chunks_light_and_one_with_a_jax_loop_does_not(monkeypatch):
    """The default moves run native calls and scalar arithmetic (`Kernel.light_compile`): their chunks
    compile with XLA's elemental emitters (`LIGHT_OPTIONS`), the native permutation move's too; the JAX
    Gibbs loop, or a hybrid with a part that is not light (the permutation move's `dp="exact"`, a JAX
    program), keeps dpppl's options. Built only: nothing is compiled."""
    from dpppl import config
    from dpppl.config import COMPILER_OPTIONS
    from dpppl.core.compiled import LIGHT_OPTIONS
    from dpppl.run import runner

    # dpppl's default options (the suite's are XLA's own: tests/conftest.py), restored after the test
    monkeypatch.setattr(config, "_compiler_options", config._compiler_options)
    config.set_compiler_options(None)
    case = CASES["niw_2d_overlap"]  # alpha ~ Gamma: the alpha move is appended
    bound = case.model.bind(case.x)
    for spec, options, light in [("gibbs+splitmerge", {}, True), ("gibbs", {"native": False}, False),
                                 ("gibbs+perm-move", {}, True), ("gibbs+perm-move", {"dp": "exact"}, False)]:
        kern, key, make = runner._program(spec, bound, options)[1]
        assert kern.light_compile is light, spec
        chunk = runner._chunk_function(make, kern, key, 8, 6)
        assert chunk.options == ({**COMPILER_OPTIONS, **LIGHT_OPTIONS} if light else COMPILER_OPTIONS), spec
