"""The native-library cache: a library is loaded only when its bytes hash to the sha256
recorded when it was built, and only from files this user owns and others cannot write."""

import os
import warnings

import pytest

import dpppl
from dpppl.core import native

pytestmark = pytest.mark.skipif(native._compiler() is None, reason="no C++ compiler")


@pytest.fixture
def source(tmp_path, monkeypatch):
    """A one-function C++ source (compiles in well under a second) and an empty cache."""
    monkeypatch.setenv("DPPPL_NATIVE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny.cc"
    path.write_text('extern "C" int dpppl_tiny() { return 7; }\n')
    return path


def test_a_build_records_the_sha256_of_its_library(source):
    library = native._build(source)
    recorded = library.with_name(library.name + ".sha256")
    assert recorded.read_text().strip() == native._sha256(library)
    assert native._build(source) == library  # verified, not rebuilt
    lock = library.with_suffix(".lock")  # kept: a waiting process may hold it open
    assert sorted(p.name for p in library.parent.iterdir()) == sorted([library.name, recorded.name, lock.name])
    # no partial files


def test_builds_started_at_once_compile_once(source, monkeypatch):
    """Processes (here threads, each with its own lock description) that need a library not yet
    built wait for the first one's build instead of compiling it again."""
    import threading

    compiles, run = [], native.subprocess.run

    def counted(args, **kwargs):
        compiles.append(args)
        return run(args, **kwargs)

    monkeypatch.setattr(native.subprocess, "run", counted)
    built = []
    threads = [threading.Thread(target=lambda: built.append(native._build(source))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 3 and len(set(built)) == 1
    assert len(compiles) == 1


def test_editing_an_included_header_builds_another_library(source):
    header = source.with_name("tiny.h")
    header.write_text("#define SEVEN 7\n")
    source.write_text('#include "tiny.h"\nextern "C" int dpppl_tiny() { return SEVEN; }\n')
    first = native._build(source)
    header.write_text("#define SEVEN 8\n")
    assert native._build(source) != first


def test_editing_a_header_included_by_a_header_builds_another_library(source):
    """As the native sources share native_seating.h, which includes ../core/numerics_threefry.h."""
    inner, outer = source.with_name("inner.h"), source.with_name("outer.h")
    inner.write_text("#define SEVEN 7\n")
    outer.write_text('#pragma once\n#include "inner.h"\n#include "outer.h"\n')  # a cycle is read once
    source.write_text('#include "outer.h"\nextern "C" int dpppl_tiny() { return SEVEN; }\n')
    first = native._build(source)
    inner.write_text("#define SEVEN 8\n")
    assert native._build(source) != first

def test_a_tampered_library_is_rebuilt_with_a_warning(source):
    library = native._build(source)
    good = library.read_bytes()
    library.write_bytes(good + b"\0tampered")
    with pytest.warns(RuntimeWarning, match=rf"^dpppl: the cached native library {library} has sha256 [0-9a-f]{{16}}"
                      r"\.\.\., not the [0-9a-f]{16}\.\.\. recorded in tiny-[0-9a-f]{20}\.so\.sha256 when it was "
                      "built; rebuilding it$"):
        assert native._build(source) == library
    assert library.read_bytes() == good


def test_a_library_without_a_recorded_hash_is_rebuilt_silently(source):
    library = native._build(source)
    library.with_name(library.name + ".sha256").unlink()
    library.write_bytes(b"not a library")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        native._build(source)
    assert native._sha256(library) == library.with_name(library.name + ".sha256").read_text().strip()
    assert library.read_bytes() != b"not a library"


@pytest.mark.parametrize("which", ["library", "hash"])
def test_a_library_writable_by_others_is_not_loaded(source, which):
    library = native._build(source)
    path = library if which == "library" else library.with_name(library.name + ".sha256")
    os.chmod(path, 0o666)
    with pytest.raises(dpppl.KernelError, match=rf"^the native CPU code tiny.cc was requested .native=True or "
                       rf"DPPPL_NATIVE=1. but could not be built or loaded: RuntimeError: {path} is writable by "
                       r"others \(mode -rw-rw-rw-\): not loaded \(remove it, or set DPPPL_NATIVE_CACHE"):
        native.load(source, {}, required=True)
    assert path.stat().st_mode & 0o777 == 0o666  # left as it was, not replaced


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="no user ids")
def test_a_library_of_another_user_is_not_loaded_and_the_jax_path_runs(source, monkeypatch):
    library = native._build(source)
    owner = os.getuid()
    monkeypatch.setattr(native.os, "getuid", lambda: owner + 1)
    with pytest.warns(RuntimeWarning, match=rf"could not be built or loaded, so the JAX path runs instead .*"
                      rf"RuntimeError: {library} is owned by uid {owner}, not by this user \(uid {owner + 1}\): "
                      "not loaded"):
        assert native.load(source, {}, required=False) is False


def test_extra_compiler_flags_build_a_library_of_their_own(source, monkeypatch):
    """DPPPL_NATIVE_CFLAGS (a sanitized build, say) is part of the cache key: the normal library
    is neither replaced nor loaded in its place."""
    normal = native._build(source)
    monkeypatch.setenv("DPPPL_NATIVE_CFLAGS", "-g -DDPPPL_TINY='7'")
    assert native._flags()[-2:] == ("-g", "-DDPPPL_TINY=7")
    flagged = native._build(source)
    assert flagged != normal and flagged.parent == normal.parent
    assert normal.read_bytes() != flagged.read_bytes()  # -g adds debug sections


def test_extra_compiler_flags_that_break_the_build_are_named(source, monkeypatch):
    monkeypatch.setenv("DPPPL_NATIVE_CFLAGS", "-fno-such-flag-dpppl")
    with pytest.raises(dpppl.KernelError, match=r"^the native CPU code tiny.cc was requested .* could not be built "
                       r"or loaded: RuntimeError: \S+ -O2 .* -fno-such-flag-dpppl failed on tiny.cc:"):
        native.load(source, {}, required=True)


def test_extra_compiler_flags_that_cannot_be_split_are_named(source, monkeypatch):
    monkeypatch.setenv("DPPPL_NATIVE_CFLAGS", "-DX='unbalanced")
    with pytest.raises(dpppl.KernelError, match=r"could not be built or loaded: RuntimeError: "
                       r"DPPPL_NATIVE_CFLAGS=\"-DX='unbalanced\" cannot be split into flags: No closing quotation$"):
        native.load(source, {}, required=True)
