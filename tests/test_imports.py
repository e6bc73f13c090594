"""The command line imports only what a run needs: ArviZ, Matplotlib, pandas, xarray and `scipy.stats` (a
hyperprior's median, quantiles) come on first use."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_command_line_imports_neither_arviz_nor_matplotlib_pandas_xarray_or_scipy_stats():
    script = ("import sys, dpppl.cli\n"
              "lazy = ('arviz', 'matplotlib', 'pandas', 'xarray', 'scipy.stats')\n"
              "print(sorted(m for m in lazy if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]"]

