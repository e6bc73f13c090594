"""The command line imports only what a run needs: ArviZ, Matplotlib, pandas, xarray, `scipy.stats` (a
hyperprior's median, quantiles) and `dpppl.analysis` (point estimates, plots, prediction: `dpppl.ON_FIRST_USE`)
come on first use."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_command_line_imports_neither_arviz_nor_matplotlib_pandas_xarray_scipy_stats_or_the_analysis():
    script = ("import sys, dpppl.cli\n"
              "lazy = ('arviz', 'matplotlib', 'pandas', 'xarray', 'scipy.stats', 'dpppl.analysis')\n"
              "print(sorted(m for m in lazy if m in sys.modules))\n"
              "print(dpppl.point_estimate.__module__, dpppl.plots.__name__, 'predict' in dir(dpppl))\n"
              "print(dpppl.simulate.expected_num_clusters.__module__)")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "dpppl.analysis.partitions dpppl.plots True", "dpppl.simulate"]

