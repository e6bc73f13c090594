"""Programs kept on disk across processes (`dpppl.core.compiled.persisted`): a new process, or this
one after `clear`, runs the exported program without tracing; an entry that is damaged, foreign or
not this user's own is never trusted: the function is traced again."""

import logging
import os
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpppl import config
from dpppl.core import compiled
from dpppl.core.state import NoExtras, PartitionState
from dpppl.errors import ArgumentError
from dpppl.priors.crp import Gamma

TRACES = []


def step(state, scale):
    """A small function of a dpppl NamedTuple state; each trace is counted."""
    TRACES.append(1)
    return state._replace(alpha=state.alpha * scale, z=state.z + 1), {"total": jnp.sum(state.stats) * scale}


def state():
    return PartitionState(z=np.arange(5, dtype=np.int32), stats=np.ones(3), alpha=np.float64(0.5),
                          overflow=np.bool_(False), extras=NoExtras())


@pytest.fixture
def cache(tmp_path):
    """A fresh compilation cache directory for the test (the suite's own one afterwards)."""
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    compiled.clear()
    TRACES.clear()
    yield tmp_path / compiled.EXPORT_DIRECTORY
    jax.config.update("jax_compilation_cache_dir", before)
    compiled.clear()


def run(key=("test", "step")):
    return compiled.persisted(key, step)(state(), 2.0)


def test_a_cleared_process_runs_the_kept_program_without_tracing(cache):
    first = run()
    assert len(TRACES) == 1 and len(list(cache.glob("*.jaxexport"))) == 1
    compiled.clear()  # what a new process starts with
    again = run()
    assert len(TRACES) == 1, "the program was traced again instead of read from the disk"
    assert type(again[0]) is PartitionState and type(again[0].extras) is NoExtras
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "foreign header", "other key", "group-writable"])
def test_a_damaged_or_foreign_entry_is_traced_again(cache, damage):
    expected = run()
    (entry,) = cache.glob("*.jaxexport")
    data = entry.read_bytes()
    if damage == "flipped byte":
        entry.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "cut short":
        entry.write_bytes(data[:len(data) // 2])
    elif damage == "foreign header":
        entry.write_bytes(b"\x80\x04pickle" + data)
    elif damage == "other key":  # a whole entry of another program, under this one's name
        entry.write_bytes(data.replace(entry.stem.encode(), b"0" * 64, 1))
    else:
        os.chmod(entry, 0o664)
    compiled.clear()
    again = run()
    assert len(TRACES) == 2, f"an entry with a {damage} was trusted"
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)
    if damage != "group-writable":  # rewritten whole: the next process reads it
        compiled.clear()
        run()
        assert len(TRACES) == 2


def test_a_key_of_this_process_only_is_not_kept_on_disk(cache):
    compiled.persisted(("test", object()), step)(state(), 2.0)  # an object's identity: no other process knows it
    assert not cache.exists() or not list(cache.glob("*.jaxexport"))


def test_under_vmap_the_function_is_traced_as_before(cache):
    fn = compiled.persisted(("test", "step"), step)
    states = jax.tree.map(lambda a: np.stack([a, a]), state())
    out, rec = jax.vmap(fn, in_axes=(0, None))(states, 2.0)
    np.testing.assert_array_equal(out.z, np.stack([np.arange(1, 6)] * 2))
    assert rec["total"].shape == (2,)


def test_a_new_process_reuses_the_program(cache):
    run()
    script = textwrap.dedent(f"""
        import jax
        from dpppl.core import compiled
        jax.config.update("jax_compilation_cache_dir", {str(cache.parent)!r})
        from tests.core import test_compiled as t
        out = t.run()
        print(len(t.TRACES), float(out[0].alpha), float(out[1]["total"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1.0", "6.0"], "the new process traced the program again"


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_prepared_program_is_the_one_a_later_call_runs(cache, use_cache):
    """`prepare` on the types of a call's arguments (what a thread does while the process does something
    else) compiles the program the call then runs: the call traces nothing more, with the disk cache
    (the program exported and read back) or without it (the program compiled here kept for the calls),
    for arguments that are dpppl pytrees too (a `Gamma`, whose numbers are its children)."""
    if not use_cache:  # the fixture restores the cache
        jax.config.update("jax_compilation_cache_dir", None)
    fn = compiled.persisted(("test", "prepared", use_cache), lambda s, prior: step(s, prior.shape))
    compiled.prepare(fn, jax.eval_shape(state), Gamma(2.0, 1.0))
    assert len(TRACES) == 1
    out = fn(state(), Gamma(2.0, 1.0))
    assert len(TRACES) == 1, "the call traced the function again instead of running the prepared program"
    assert float(out[0].alpha) == 1.0 and float(out[1]["total"]) == 6.0


@pytest.fixture
def options(monkeypatch):
    """dpppl's compile options back to what they were after the test (the suite's: tests/conftest.py)."""
    monkeypatch.setattr(config, "_compiler_options", config._compiler_options)
    yield
    compiled.clear()


@pytest.mark.parametrize("use_cache", [True, False])
def test_an_option_xla_does_not_know_is_an_argument_error_naming_it(cache, options, use_cache):
    if not use_cache:  # the program jitted as it is (no exported entry); the fixture restores the cache
        jax.config.update("jax_compilation_cache_dir", None)
    config.set_compiler_options({"xla_no_such_option": 1})
    with pytest.raises(ArgumentError, match=r"XLA refused dpppl's compile options \{'xla_no_such_option': 1\} "
                                            r"\(DPPPL_XLA_OPTIONS or dpppl.config.set_compiler_options\): "
                                            r".*No such compile option: 'xla_no_such_option'"):
        run()


@pytest.mark.parametrize("given, message", [
    ([("xla_backend_optimization_level", 1)], "compile options are a dict of option names to values, got list"),
    ({"backend_optimization_level": 1}, "'backend_optimization_level' is not an XLA compile option"),
    ({"xla_backend_optimization_level": [1]}, r"option xla_backend_optimization_level = \[1\] is a list"),
])
def test_compile_options_of_another_kind_are_refused_before_a_program_runs(cache, options, given, message):
    config.set_compiler_options(given)
    with pytest.raises(ArgumentError, match=r"dpppl.config.set_compiler_options: " + message):
        run()
    assert not TRACES, "a program was traced with options that are not compile options"


@pytest.mark.parametrize("text, expected", [
    ("xla_backend_optimization_level=2, xla_cpu_enable_fast_math=false",
     {"xla_backend_optimization_level": 2, "xla_cpu_enable_fast_math": False}),
    ("xla", {}),
])
def test_compile_options_from_the_environment(monkeypatch, options, text, expected):
    monkeypatch.setattr(config, "_compiler_options", ("user: DPPPL_XLA_OPTIONS", text))  # as read at import
    assert compiled.compiler_options() == expected


def test_a_malformed_environment_variable_is_an_argument_error_naming_it(cache, monkeypatch, options):
    monkeypatch.setattr(config, "_compiler_options", ("user: DPPPL_XLA_OPTIONS", "xla_backend_optimization_level"))
    with pytest.raises(ArgumentError, match="DPPPL_XLA_OPTIONS='xla_backend_optimization_level': "
                                            "'xla_backend_optimization_level' is not name=value"):
        run()


def test_a_light_program_adds_the_light_options_to_dpppl_s_own_only(options):
    config.set_compiler_options(None)  # dpppl's defaults (the suite's are XLA's: tests/conftest.py)
    assert compiled.persisted(("test", "light"), step, light=True).options == {**config.COMPILER_OPTIONS,
                                                                                **compiled.LIGHT_OPTIONS}
    config.set_compiler_options({"xla_backend_optimization_level": 2})  # a user's choice is taken as it is
    assert compiled.persisted(("test", "light"), step, light=True).options == {"xla_backend_optimization_level": 2}


def test_other_compile_options_compile_another_program_of_the_same_draws(cache, options):
    config.set_compiler_options(None)  # dpppl's defaults (the suite's are XLA's: tests/conftest.py)
    first = run()
    assert compiled.persisted(("test", "step"), step).options == config.COMPILER_OPTIONS
    config.set_compiler_options({})  # XLA's own defaults
    fn = compiled.persisted(("test", "step"), step)
    assert fn.options == {} and compiled.compiler_options() == {}
    again = fn(state(), 2.0)
    assert len(TRACES) == 1, "the exported program (options are not part of it) was traced again"
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)


@pytest.fixture
def kept(monkeypatch):
    """An empty table of kept functions for the test (the suite's own one afterwards), the process's memory
    maps as the test sets them (`maps[0]` of the limit 1000), and `jax.clear_caches` counted, not run."""
    monkeypatch.setattr(compiled, "_COMPILED", {})
    monkeypatch.setattr(compiled, "_FREED_TO", [0])
    maps = [100]
    monkeypatch.setattr(compiled, "_memory_maps", lambda: (maps[0], 1000))
    cleared = []
    monkeypatch.setattr(jax, "clear_caches", lambda: cleared.append(1))
    return maps, cleared


def test_a_process_near_its_memory_map_limit_frees_its_programs_before_compiling_another(kept, caplog):
    maps, cleared = kept
    compiled.compiled("first", lambda: "program 1")
    maps[0] = 751  # past MAPS_FRACTION (3/4) of the limit
    with caplog.at_level("WARNING", logger="dpppl"):
        assert compiled.compiled("second", lambda: "program 2") == "program 2"
    assert [key for key, _ in compiled._COMPILED] == ["second"]  # the first was forgotten
    assert cleared == [1]
    assert caplog.messages == [
        "dpppl: this process held 751 of the 1000 memory maps Linux allows it (vm.max_map_count), most of them "
        "compiled XLA programs; dpppl forgot its compiled programs and cleared JAX's caches (now 751 maps), so "
        "that the next compilation does not crash the process. Programs are compiled again, or read from the "
        "compilation cache, when next used (docs/configuration.md#memory-maps)"]
    # maps it could not free: not again before they take half the room left, (751 + 1000) / 2
    maps[0] = 875
    compiled.compiled("third", lambda: "program 3")
    assert cleared == [1] and len(caplog.messages) == 1
    maps[0] = 876
    compiled.compiled("fourth", lambda: "program 4")
    assert cleared == [1, 1] and [key for key, _ in compiled._COMPILED] == ["fourth"]


def test_below_the_fraction_or_off_the_main_thread_nothing_is_freed(kept, caplog):
    maps, cleared = kept
    compiled.compiled("first", lambda: "program 1")
    maps[0] = 750
    compiled.compiled("second", lambda: "program 2")
    maps[0] = 999
    compiled.compiled("first", lambda: "not built again")  # kept: no program is compiled, nothing checked
    freed = []
    thread = threading.Thread(target=lambda: freed.append(compiled.make_room()))  # a thread compiling ahead
    thread.start()
    thread.join()
    assert freed == [False] and cleared == [] and caplog.messages == []
    assert [key for key, _ in compiled._COMPILED] == ["first", "second"]


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="no /proc")
def test_the_memory_maps_are_this_process_s_and_the_limit_linux_s():
    held, limit = compiled._memory_maps()
    with open("/proc/self/maps") as f:
        assert abs(held - len(f.readlines())) < 50
    with open("/proc/sys/vm/max_map_count") as f:
        assert limit == int(f.read())
def test_prepare_without_the_disk_cache_compiles_a_bound_models_program(cache, niw_model, two_blobs):
    """`prepare` of a program on a bound model (a pytree whose leaves are found by their values) with
    the disk cache off: the program is lowered on the arguments as given (rebuilt on shape specs, the
    model flattened differently and JAX refused it), and the call after it compiles nothing."""
    jax.config.update("jax_compilation_cache_dir", None)  # the fixture restores it
    target = niw_model.bind(two_blobs[0])
    fn = compiled.on_target("test-prepare", target, lambda t, y: jnp.sum(t.x) + y)
    compiled.prepare(fn, jnp.float64(1.0))
    with jax.log_compiles(True), _Compiles() as compiles:
        assert float(fn(jnp.float64(1.0))) == pytest.approx(float(np.sum(target.x)) + 1.0)
    assert compiles.count == 0


@pytest.mark.parametrize("disk", [True, False], ids=["disk-cache", "no-disk-cache"])
def test_prepare_signals_when_the_program_is_lowered_before_xla_compiles_it(cache, disk, monkeypatch):
    """`prepare(..., lowered=event)` sets the event once the program is lowered, before XLA's compile
    (what the pointwise program's thread waits for), with the disk cache or without, and when the
    preparation fails; the call after it compiles nothing."""
    if not disk:
        jax.config.update("jax_compilation_cache_dir", None)  # the fixture restores it
    fn = compiled.persisted(("test-lowered", disk), lambda y: jnp.sin(y) * 2.0)
    seen = []
    compile_ = jax.stages.Lowered.compile
    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda self, *a, **k: seen.append(event.is_set())
                        or compile_(self, *a, **k))
    event = threading.Event()
    compiled.prepare(fn, jnp.float64(1.0), lowered=event)
    assert event.is_set() and seen == [True]
    with jax.log_compiles(True), _Compiles() as compiles:
        assert float(fn(jnp.float64(1.0))) == pytest.approx(2.0 * np.sin(1.0))
    assert compiles.count == 0
    failed = threading.Event()
    with pytest.raises(TypeError):
        compiled.prepare(compiled.persisted(("test-lowered-fails", disk), lambda y: y + "x"), jnp.float64(1.0),
                         lowered=failed)
    assert failed.is_set()


class _Compiles(logging.Handler):
    """Counts JAX's "Compiling ..." log records while in use (`with`)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        self.count += record.getMessage().startswith("Compiling ")

    def __enter__(self):
        logging.getLogger("jax").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("jax").removeHandler(self)
