"""A pytest plugin: the seconds each test spends in JAX's tracing, lowering and XLA compiling.

Where the default test run's time goes (issue 21: about two thirds of it is XLA compiling, one
program per kernel x model x shape). It listens to JAX's `jax.monitoring` duration events and
writes one JSON line per test (wall seconds, trace, lower, compile, number of compiles,
persistent-cache hits) to `$COMPILE_REPORT_DIR/<xdist worker>.jsonl`:

    PYTHONPATH=benchmarks COMPILE_REPORT_DIR=/tmp/cr DPPPL_COMPILATION_CACHE=/tmp/fresh-cache \\
        .venv/bin/python -m pytest -q -n 2 -p compile_report

Setup and teardown (fixtures) count towards the test that ran them.
"""

import json
import os
import time

import pytest

_totals = {"trace": 0.0, "lower": 0.0, "compile": 0.0, "n": 0, "cache_hits": 0}


def _duration(event, duration, **_):
    if event.endswith("backend_compile_duration"):
        _totals["compile"] += duration
        _totals["n"] += 1
    elif event.endswith("jaxpr_trace_duration"):
        _totals["trace"] += duration
    elif event.endswith("jaxpr_to_mlir_module_duration"):
        _totals["lower"] += duration


def _event(event, **_):
    if "cache_hits" in event and "original" not in event:
        _totals["cache_hits"] += 1


def pytest_configure(config):
    import jax.monitoring  # noqa: PLC0415  (JAX only once pytest has set the environment up)

    jax.monitoring.register_event_duration_secs_listener(_duration)
    jax.monitoring.register_event_listener(_event)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    for key in _totals:
        _totals[key] = 0
    start = time.perf_counter()
    yield
    wall = time.perf_counter() - start
    directory = os.environ.get("COMPILE_REPORT_DIR", "compile-report")
    os.makedirs(directory, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(directory, f"{worker}.jsonl"), "a") as out:
        out.write(json.dumps({"id": item.nodeid, "wall": wall, **_totals}) + "\n")
