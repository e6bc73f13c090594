"""Shared fixtures: small data sets and models. JAX runs on the CPU in float64: the whole suite."""

import os
import signal
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# 64-bit mode for the whole suite, set here explicitly: importing dpppl leaves the process's mode as it
# was (dpppl's entry points run in float64 inside dpppl.config.x64), but the unit tests of internals
# (families, kernels, states built directly) compare float64 results. The subprocesses of the suite
# inherit it; tests/test_config.py clears it to check what importing dpppl does.
os.environ.setdefault("JAX_ENABLE_X64", "1")
# the full guard against the XLA CPU thread-pool wedge (docs/configuration.md#cpu-threading): the
# suite runs many vmapped kernels in parallel workers, where the last CI runs that hung saw it
os.environ.setdefault("DPPPL_CPU_THREADING", "strict")
# XLA's CPU backend tuned for compile time: most of the suite's time is compiling small programs
# that run briefly (a fresh run spends ~75% of its time in XLA compiles and another ~14% tracing
# and lowering). Optimisation level 0 for every program: ~18% faster overall when it first applied
# (tests/run + tests/analysis + test_splitmerge: 236 s -> 193 s). dpppl's own programs (the chunks,
# the seating, states from labels, the pointwise log likelihood: most of the suite's compile time)
# take it too: DPPPL_XLA_OPTIONS=xla compiles them with XLA's own options, so at this level 0, not at
# dpppl's level 1 (`dpppl.config.COMPILER_OPTIONS`, what users' programs get). XLA's older elemental
# fusion emitters instead of the MLIR ones (--xla_cpu_use_fusion_emitters=false, every program, dpppl's
# included) cut the CPU of test files by about a third (process CPU, fresh cache: 310 tests of
# tests/models, tests/run and three kernel files 509 -> 305 s; subcluster/test_sampler.py +
# analysis/test_partitions.py 108 -> 77 s; run side by side, statistical/test_exactness.py +
# test_hyperparameter_exactness.py 179 -> 128 s; every default test passes with them, run file group
# by file group). They were left out while a run resumed from a checkpoint ran chunk programs of other
# lengths, whose draws differed from the unstopped run's in the last bit; a run's chunks now have one
# buffer length (`dpppl.run.runner.chunk_length`), and the resume tests (test_checkpoint.py,
# test_cli.py) pass with them. One LLVM module per program (--xla_cpu_parallel_codegen_split_count=1),
# not parts compiled side by side: two workers already keep two cores busy, and each part costs CPU of
# its own (fresh cache, process CPU: first calls of subcluster then gibbs+splitmerge on 60 points,
# three runs each, 6.10-6.31 s split, 5.64-6.06 s whole; statistical/test_partition_gibbs.py +
# test_geweke.py side by side, 47.0 -> 44.2 s). The compiled programs compute the same operations (float
# results may differ in the last bits from a user's default build, so no test compares against draws
# made outside the suite). DPPPL_TEST_XLA_OPT=default keeps XLA's defaults and dpppl's options; a flag
# already in XLA_FLAGS, or DPPPL_XLA_OPTIONS already set, is kept.
if os.environ.get("DPPPL_TEST_XLA_OPT", "0") != "default":
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", "")] + [
        flag for flag in ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false",
                          "--xla_cpu_parallel_codegen_split_count=1")
        if flag.split("=")[0] not in os.environ.get("XLA_FLAGS", "")]).strip()
    os.environ.setdefault("DPPPL_XLA_OPTIONS", "xla")
# One compilation cache for the session's workers (and their subprocesses): tests that
# sample the same model on the same data compile it once.
os.environ.setdefault("DPPPL_COMPILATION_CACHE", os.path.join(tempfile.gettempdir(), "dpppl-test-xla-cache"))

import numpy as np
import pytest

import dpppl
from dpppl.core import compiled


@pytest.fixture(autouse=True)
def _sigint_as_a_fresh_process_has_it():
    """Every test starts with Python's own SIGINT handler and leaves it so: the Ctrl-C tests
    (tests/test_cli.py) end commands through `_exit_interrupted`, which ignores SIGINT, and a
    child process inherits an ignored SIGINT; one test leaving it ignored made the next Ctrl-C
    tests of the same xdist worker fail (seen once in a full run, order-dependent)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)


_TESTS_RUN = [0]


@pytest.fixture(autouse=True)
def _room_for_compiled_programs():
    """Every 20th test of a process, a process past half of the memory maps Linux allows it frees its
    compiled programs (`dpppl.core.compiled.make_room`). XLA's CPU programs hold three maps per kernel while
    kept (in a CI-like run an xdist worker ended the suite holding 62,369 of them), and a process at
    vm.max_map_count (65,530) dies inside XLA with SIGABRT or SIGSEGV, as CI workers did in
    `executable.serialize()` (docs/configuration.md#memory-maps). dpppl frees them itself past three
    quarters; freeing between tests first keeps that from happening inside a test that counts its
    compilations. Every 20th: reading the process's maps costs milliseconds, and 20 tests add far
    fewer maps than the quarter between the two thresholds."""
    _TESTS_RUN[0] += 1
    if _TESTS_RUN[0] % 20 == 0:
        compiled.make_room(fraction=0.5)
    yield


@pytest.fixture(scope="session")
def two_blobs():
    """30 points in 2-D, two well separated groups, and their labels."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-3, 1, (15, 2)), rng.normal(3, 1, (15, 2))])
    return x, np.repeat([0, 1], 15)


@pytest.fixture(scope="session")
def niw_model():
    return dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), dpppl.NormalInverseWishart(
        mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2)))


@pytest.fixture(scope="module")
def run():
    """A short fixed-alpha run on 24 points in two groups (lp is then log p(x, z))."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(-2.5, 0.7, (12, 2)), rng.normal(2.5, 0.7, (12, 2))])
    model = dpppl.DPMixture(0.7, dpppl.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0,
                                                            psi0=0.5 * np.eye(2)))
    idata = dpppl.sample(model, x, num_warmup=20, num_samples=150, num_chains=2, seed=1,
                         init="single", progress_bar=False)
    return model, x, idata



# The default run's longest tests (process CPU seconds of each, fresh compilation cache, 55d22b1), run
# first. pytest-xdist's worksteal gives each worker a contiguous half of the collection and a worker
# out of tests takes half of the other's queue, but never a test already running: one of these
# collected last (tests/test_packaging.py, tests/test_config.py are) kept one core busy alone at the
# end of the run. First, in this order, they are spread over the run's first minutes. Scheduling only:
# a name that no longer matches loses its place and nothing else.
LONGEST_FIRST = (
    "tests/statistical/test_ddp_geweke.py::test_geweke_ddp_with_swaps_small",  # 22 s
    "tests/run/test_distributed.py::test_two_processes_report_the_global_run_and_their_own_points",  # 20 s, 2 processes
    "tests/test_packaging.py::test_build_inspect_install_and_run",  # 14 s
    "tests/kernels/subcluster/test_parameter_moves.py::test_parameter_moves_leave_the_posterior_invariant",  # 17 s, 3
    "tests/statistical/test_mallows_exactness.py::test_slice_gibbs_matches_enumeration",  # 10 s
    "tests/test_config.py::test_dpppl_runs_in_float64_and_leaves_the_users_precision",  # 9 s
    "tests/run/test_driver.py::test_nuts_draws_what_numpyros_mcmc_draws",  # 8 s
    "tests/kernels/subcluster/test_sampler.py::test_published_warmup_finds_separated_clusters_and_the_exact_step_keeps_them",
    "tests/run/test_partition_gibbs.py::test_numpyro_shows_summaries_not_labels_and_from_numpyro_builds_dpppl_sample_layout",
    "tests/analysis/test_ppc.py::test_dp_errors_replicate_the_bimodal_residuals_of_the_data",  # 7 s
    "tests/dsl/test_fuzz.py::test_mutated_models_and_data_fail_only_with_dpppl_errors",  # 7 s
    "tests/test_docs.py::test_tutorial_runs_quick_and_draws_the_figures_its_page_shows",  # 7 s + the other tutorials
    "tests/statistical/test_partition_gibbs.py::test_geweke_rejects_a_wrong_composed_kernel",  # 6 s
)


def pytest_collection_modifyitems(items):
    """Move the tests of `LONGEST_FIRST` (each with its parameters) to the front, in its order; the
    others keep theirs. None of them uses a module-scoped fixture, so moving them sets none up twice.
    Those without a timeout of their own get 900 s instead of the run's 300 s: first, they compile with
    an empty cache while both workers start, and at load 17-25 a worker running them was ended there
    (its first test, the DDP Geweke one, 134 s at load 16 later in the run, was rerun)."""
    def rank(item):
        name = item.nodeid.split("[")[0]
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the others in collection order
    for item in items:
        if rank(item) < len(LONGEST_FIRST) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(900))
