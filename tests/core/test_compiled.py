"""Programs kept on disk across processes (`dpppl.core.compiled.persisted`): a new process, or this
one after `clear`, runs the exported program without tracing; an entry that is damaged, foreign or
not this user's own is never trusted: the function is traced again."""

import logging
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpppl import config
from dpppl.core import compiled
from dpppl.core.state import NoExtras, PartitionState
from dpppl.errors import ArgumentError

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


@pytest.fixture
def options():
    """dpppl's compile options back to its defaults after the test."""
    yield
    config.set_compiler_options(None)
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


def test_other_compile_options_compile_another_program_of_the_same_draws(cache, options):
    first = run()
    assert compiled.persisted(("test", "step"), step).options == config.COMPILER_OPTIONS
    config.set_compiler_options({})  # XLA's own defaults
    fn = compiled.persisted(("test", "step"), step)
    assert fn.options == {} and compiled.compiler_options() == {}
    again = fn(state(), 2.0)
    assert len(TRACES) == 1, "the exported program (options are not part of it) was traced again"
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)


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
