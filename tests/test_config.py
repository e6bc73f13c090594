"""dpppl.config: what importing dpppl changes in JAX, what it leaves alone, and the opt-outs.

Each case imports dpppl in a fresh process (JAX settings are per process and fixed once
the CPU client exists), with an environment cleared of every variable dpppl or JAX reads.
"""

import json
import os
import subprocess
import sys

import pytest

from dpppl.core import native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EIGEN = "--xla_cpu_multi_thread_eigen"
# HOME is a temporary directory (dpppl's default cache lives under it); keep matplotlib's
# font cache where it was, or every subprocess rebuilds it
MPL = os.environ.get("MPLCONFIGDIR") or os.path.join(os.path.expanduser("~"), ".cache", "matplotlib")

REPORT = r"""
import json, logging, os
records = []
class _Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger("dpppl").addHandler(_Keep())
logging.getLogger("dpppl").setLevel(logging.INFO)
import dpppl
import jax
print(json.dumps({
    "xla_flags": os.environ.get("XLA_FLAGS"),
    "async": jax.config.values["jax_cpu_enable_async_dispatch"],
    "x64": jax.config.values["jax_enable_x64"],
    "dtype": str(dpppl.config.float_dtype().__name__),
    "dpppl_dtype": str(dpppl.config.in_x64(dpppl.config.float_dtype)().__name__),
    "min_compile": [jax.config.values["jax_persistent_cache_min_compile_time_secs"],
                    dpppl.config.in_x64(lambda: jax.config.values["jax_persistent_cache_min_compile_time_secs"])()],
    "cache_dir": jax.config.values["jax_compilation_cache_dir"],
    "cache_max": jax.config.values["jax_compilation_cache_max_size"],
    "settings": {s.name: [s.value, s.changed, s.source, s.opt_out] for s in dpppl.config.settings()},
    "describe": dpppl.config.describe(),
    "records": records,
}, default=str))
"""


def _script(tmp_path, code, **env):
    """Run ``code`` in a clean process (no variable dpppl or JAX reads); return the JSON it prints
    and the raw output."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("DPPPL_", "XLA_", "JAX_")) or k == "JAX_PLATFORMS"}
    clean.update(HOME=str(tmp_path), PYTHONPATH=ROOT, JAX_PLATFORMS="cpu", MPLCONFIGDIR=MPL, **env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env=clean, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc


def _run(tmp_path, prelude="", **env):
    """Import dpppl after ``prelude`` in a clean process; return the report and the raw output."""
    return _script(tmp_path, prelude + REPORT, **env)


@pytest.fixture(scope="module")
def defaults(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return _run(home)[0], home


def test_defaults_change_each_setting_say_so_once_and_print_nothing(defaults):
    r, tmp_path = defaults
    assert r["xla_flags"] is None  # the Eigen flag is opt-in (DPPPL_CPU_THREADING=strict)
    assert r["async"] is False
    # the process stays in 32-bit mode; dpppl's own programs run in float64 (dpppl.config.x64)
    assert r["x64"] is False and r["dtype"] == "float32" and r["dpppl_dtype"] == "float64"
    assert r["cache_dir"] == os.path.join(str(tmp_path), ".cache", "dpppl", "xla")
    assert r["cache_max"] == 2 * 2**30
    changed = {n for n, (_, c, source, _) in r["settings"].items() if c and source == "dpppl default"}
    assert changed == {"jax_compilation_cache_dir", "jax_compilation_cache_max_size", "jax_cpu_enable_async_dispatch"}
    # every program of dpppl's goes to the cache, the process's others by JAX's threshold (1 s)
    assert r["min_compile"] == [1.0, 0.0]
    assert len(r["records"]) == 1  # one INFO record names every change
    for name in changed:
        assert name in r["records"][0]
    assert EIGEN not in r["records"][0]
    # a bare import writes nothing to stdout or stderr
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DPPPL_", "XLA_"))}
    bare = subprocess.run([sys.executable, "-c", "import dpppl"], capture_output=True, text=True, check=False,
                          env={**clean, "HOME": str(tmp_path), "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu",
                               "MPLCONFIGDIR": MPL},
                          cwd=str(tmp_path), timeout=300)
    assert (bare.returncode, bare.stdout, bare.stderr) == (0, "", "")


def test_describe_lists_every_setting_with_value_source_and_opt_out(defaults):
    r, _ = defaults
    text = r["describe"]
    for name, (value, _, source, opt_out) in r["settings"].items():
        block = text[text.index(name):]
        assert block.startswith(f"{name} = {value!r}" if not isinstance(value, str) else f"{name} = '{value}'")
        assert source in block and opt_out in block
    for opt_out in ("DPPPL_X64=0", "DPPPL_CPU_THREADING=default", "DPPPL_COMPILATION_CACHE=off"):
        assert opt_out in text
    assert {"jax_enable_x64", "jax_cpu_enable_async_dispatch", "jax_compilation_cache_dir",
            "jax_compilation_cache_max_size"} <= set(r["settings"]) and any(EIGEN in n for n in r["settings"])


def test_user_settings_are_left_exactly_as_they_were(tmp_path):
    flags = f"--xla_force_host_platform_device_count=2 {EIGEN}=true"
    user_cache = str(tmp_path / "mine")
    prelude = ("import jax\n"
               f"jax.config.update('jax_compilation_cache_dir', {user_cache!r})\n"
               "jax.config.update('jax_cpu_enable_async_dispatch', False)\n")
    r, _ = _run(tmp_path, prelude, XLA_FLAGS=flags, JAX_ENABLE_X64="0")
    assert r["xla_flags"] == flags
    assert r["x64"] is False and r["dtype"] == "float32" and r["dpppl_dtype"] == "float32"
    assert r["cache_dir"] == user_cache and r["cache_max"] == -1
    assert r["async"] is False
    assert not any(changed for _, changed, _, _ in r["settings"].values())
    assert r["records"] == []  # nothing changed, nothing said
    assert r["settings"]["jax_enable_x64"][2] == "user: JAX_ENABLE_X64"
    assert r["settings"]["jax_compilation_cache_dir"][2] == "user: jax.config"
    assert not (tmp_path / ".cache" / "dpppl").exists()


def test_user_cache_dir_from_environment_and_x64_from_jax_config(tmp_path):
    user_cache = str(tmp_path / "jaxcache")
    r, _ = _run(tmp_path, "import jax\njax.config.update('jax_enable_x64', True)\n",
                JAX_COMPILATION_CACHE_DIR=user_cache, DPPPL_COMPILATION_CACHE=str(tmp_path / "dp"))
    assert r["cache_dir"] == user_cache and r["cache_max"] == -1  # JAX's own setting wins
    assert r["settings"]["jax_compilation_cache_dir"][1:3] == [False, "user: JAX_COMPILATION_CACHE_DIR"]
    assert r["x64"] is True and r["settings"]["jax_enable_x64"][1:3] == [False, "user: jax.config"]


def test_too_late_to_change_cpu_threading_is_reported_not_faked(tmp_path):
    r, _ = _run(tmp_path, "import jax\njax.numpy.ones(2).block_until_ready()\n")
    assert r["xla_flags"] is None and r["async"] is True
    assert r["settings"]["jax_cpu_enable_async_dispatch"][1] is False
    assert "too late" in r["settings"]["jax_cpu_enable_async_dispatch"][2]
    assert r["x64"] is False and r["dpppl_dtype"] == "float64"  # dpppl's context: read at trace time


@pytest.mark.parametrize("var, value", [("DPPPL_X64", "0"), ("DPPPL_CPU_THREADING", "default"),
                                        ("DPPPL_COMPILATION_CACHE", "off"), ("DPPPL_COMPILATION_CACHE", "DIR")])
def test_each_opt_out(tmp_path, var, value):
    if value == "DIR":
        value = str(tmp_path / "elsewhere")
    r, _ = _run(tmp_path, **{var: value})
    changed = {n for n, (_, c, _, _) in r["settings"].items() if c}
    if var == "DPPPL_X64":
        assert r["x64"] is False and r["dpppl_dtype"] == "float32"
        assert "jax_enable_x64" not in changed and r["async"] is False  # the others still on
    elif var == "DPPPL_CPU_THREADING":
        assert r["xla_flags"] is None and r["async"] is True
        assert not any(EIGEN in n or "async" in n for n in changed) and r["dpppl_dtype"] == "float64"
    elif value == "off":
        assert r["cache_dir"] is None and r["cache_max"] == -1 and r["dpppl_dtype"] == "float64"
        assert not (tmp_path / ".cache" / "dpppl").exists()
    else:
        assert r["cache_dir"] == value and "jax_compilation_cache_dir" in changed
    assert len(r["records"]) == 1  # what is still changed is still said, once
    untouched = {"DPPPL_X64": "jax_enable_x64", "DPPPL_CPU_THREADING": "jax_cpu_enable_async_dispatch"}.get(var)
    if untouched or value == "off":
        assert (untouched or "jax_compilation_cache_dir") not in r["records"][0]
        assert f"(source: opt-out: {var}=" in r["describe"]


def test_strict_cpu_threading_adds_the_eigen_flag_after_the_users_flags(tmp_path):
    r, _ = _run(tmp_path, DPPPL_CPU_THREADING="strict", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    assert r["xla_flags"] == f"--xla_force_host_platform_device_count=2 {EIGEN}=false"
    assert r["async"] is False
    eigen = next(v for n, v in r["settings"].items() if EIGEN in n)
    assert eigen[:3] == ["false", True, "DPPPL_CPU_THREADING=strict"]
    assert EIGEN in r["records"][0]


def test_compilation_cache_is_on_unless_turned_off():
    """Compiled kernels go to the persistent cache named by DPPPL_COMPILATION_CACHE; 'off' turns it off."""
    import jax

    import dpppl  # noqa: F401  (the tests' own process: tests/conftest.py names the cache)

    assert jax.config.jax_compilation_cache_dir == os.environ["DPPPL_COMPILATION_CACHE"]
    show = "import dpppl, jax; print(jax.config.jax_compilation_cache_dir)"
    off = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, check=True,
                         env={**os.environ, "DPPPL_COMPILATION_CACHE": "off"})
    assert off.stdout.strip() == "None"


PRECISION = r"""
import json
import jax, jax.numpy as jnp, numpy as np, numpyro, numpyro.distributions as dist
from numpyro.infer import NUTS
from numpyro.infer.util import log_density
import dpppl
component = dpppl.NormalKnownCov(sigma2=0.25, mu0=0.0, tau2=4.0)
lj = dpppl.log_joint(dpppl.DPMixture(1.0, component), np.array([[0.1], [0.2], [3.0], [3.1], [3.3]]),
                     np.array([0, 0, 1, 1, 1]))
mixture = dpppl.DPMixture(dpppl.Gamma(2.0, 2.0), component)
def regression(x, y):
    beta = numpyro.sample("beta", dist.Normal(0.0, 2.0))
    dpppl.dp_mixture("resid", mixture, obs=y - x * beta)
x = jnp.linspace(-1.0, 1.0, 6)
y = 1.5 * x + jnp.array([-2.0, 2.0, -2.0, 2.0, -2.0, 2.0])
lp = log_density(regression, (x, y), {}, {"beta": 1.0, "resid_alpha": 1.0,
                                           "resid_labels": jnp.array([0, 1, 0, 1, 0, 1])})[0]
state = dpppl.PartitionGibbs(NUTS(regression), "gibbs").init(jax.random.key(0), 5, None, (x, y), {})
floats = {str(a.dtype) for a in jax.tree.leaves(state) if jnp.issubdtype(a.dtype, jnp.floating)}
print(json.dumps({"x64": jax.config.values["jax_enable_x64"], "log_joint": float(lj), "model_lp": str(lp.dtype),
                  "partition_gibbs": sorted(floats)}))
"""


def test_dpppl_runs_in_float64_and_leaves_the_users_precision(tmp_path):
    """In a process left in 32-bit mode, dpppl's entry points compute in float64 (the same log joint
    as in a 64-bit process, to the last digits) and leave the mode as it was; a user's model holding
    dp_mixture, and PartitionGibbs's state, are in the user's precision (float32 there)."""
    # the suite's native libraries (the clean HOME would build them again: ~16 CPU s of C++ compiles per
    # process) and its XLA options (tests/conftest.py): neither changes the precision of a program
    cheap = {"DPPPL_NATIVE_CACHE": str(native.cache_dir()),
             **{k: os.environ[k] for k in ("XLA_FLAGS", "DPPPL_XLA_OPTIONS") if k in os.environ}}
    user32, _ = _script(tmp_path, PRECISION, **cheap)
    user64, _ = _script(tmp_path, PRECISION, JAX_ENABLE_X64="1", **cheap)
    assert user32["x64"] is False and user64["x64"] is True
    assert user32["log_joint"] == pytest.approx(user64["log_joint"], rel=1e-14)
    assert (user32["model_lp"], user32["partition_gibbs"]) == ("float32", ["float32"])
    assert (user64["model_lp"], user64["partition_gibbs"]) == ("float64", ["float64"])


def test_async_dispatch_is_left_alone_without_a_cpu_backend(tmp_path):
    """The wedge async dispatch guards against is XLA's CPU thread pool: a process whose JAX has no
    CPU backend keeps JAX's default (the GPU's own dispatch is not touched either way)."""
    r, _ = _run(tmp_path, "import jax\njax.config.update('jax_platforms', 'cuda')\n")
    assert r["async"] is True
    assert r["settings"]["jax_cpu_enable_async_dispatch"][1:3] == [False, "JAX default: no CPU backend "
                                                                          "(jax_platforms='cuda')"]


def test_compile_options_are_listed_with_their_source(tmp_path, defaults):
    name = "XLA compile options of dpppl's programs"
    assert defaults[0]["settings"][name][:3] == [{"xla_backend_optimization_level": 1}, False,
                                                 "dpppl default, on dpppl's own programs only"]
    r, _ = _run(tmp_path, DPPPL_XLA_OPTIONS="xla_backend_optimization_level=2")
    assert r["settings"][name][:3] == ["xla_backend_optimization_level=2", False, "user: DPPPL_XLA_OPTIONS"]
