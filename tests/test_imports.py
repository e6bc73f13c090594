"""`import dpppl` and the command line import only what a run needs; the rest comes on first use."""

import subprocess
import sys
from pathlib import Path

import dpppl

REPO = Path(__file__).resolve().parent.parent


def test_the_command_line_imports_neither_arviz_nor_the_analysis_until_asked():
    script = ("import sys, dpppl.cli\n"
              "print(sorted(m for m in ('arviz', 'matplotlib', 'pandas', 'xarray', 'dpppl.analysis', "
              "'dpppl.estimators') if m in sys.modules))\n"
              "import dpppl\n"
              "print(dpppl.point_estimate.__module__, dpppl.DPGaussianMixture.__name__, dpppl.plots.__name__)")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "dpppl.analysis.partitions DPGaussianMixture dpppl.analysis.plots"]


def test_every_public_name_resolves_and_is_listed():
    for name in dpppl.__all__:
        assert getattr(dpppl, name) is not None, name
    assert {"point_estimate", "plots", "DPGaussianMixture", "analysis"} <= set(dir(dpppl))
    try:
        dpppl.no_such_name
    except AttributeError as e:
        assert str(e) == "module 'dpppl' has no attribute 'no_such_name'"
    else:
        raise AssertionError("dpppl.no_such_name resolved")
