"""The sdist and the wheel: built, inspected, installed into a fresh virtual environment, run.

``python -m build`` makes the sdist from the checkout and the wheel from the sdist (so a file
missing from the sdist breaks the wheel too). Both archives must hold the package data, the
licence and the version of ``dpppl/version.py``. The wheel is then installed, without its
dependencies, into a new virtual environment whose ``.pth`` file appends this environment's
site-packages (jax, numpyro, arviz, ... are not downloaded again; this environment's own
dpppl is not imported: an editable install is only reachable through its ``.pth`` hooks,
which are not run, and the new environment's site-packages come first). pip then resolves the
wheel's declared dependencies offline against what is installed, and the README's first
command runs with the new environment's ``dpppl`` script on a copy of ``models/``.

The wheel does not ship the model files: the README's command is run from a checkout (here, a
copy of its ``models/``); the sdist does ship them.
"""

import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("build", reason="the test extra installs 'build'")
# the build downloads setuptools (build isolation) and the README command samples 2 x 1500 iterations
pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parent.parent
VERSION = re.search(r'__version__ = "([^"]+)"', (REPO / "dpppl" / "version.py").read_text()).group(1)


def _run(args, **kwargs):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _package_files():
    """Every file of the package in the checkout, and the console-script module, relative to the
    repository root."""
    return sorted([str(p.relative_to(REPO)) for p in (REPO / "dpppl").rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"] + ["dpppl_console.py"])


def _readme_command():
    """The README's first command after the install: `dpppl sample ...`."""
    block = re.search(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    command = block.strip().split(" && ")[-1]
    assert command.startswith(".venv/bin/dpppl sample "), command
    return command.removeprefix(".venv/bin/dpppl ").split()


def test_build_inspect_install_and_run(tmp_path):
    """One test, so that pytest-xdist does not build on two workers."""
    _run([sys.executable, "-m", "build", "--outdir", tmp_path / "dist", REPO], cwd=REPO)
    (sdist,), (wheel,) = (tmp_path / "dist").glob("*.tar.gz"), (tmp_path / "dist").glob("*.whl")
    _check_sdist(sdist)
    _check_wheel(wheel)
    _check_install_and_run(wheel, tmp_path)


def _check_sdist(sdist):
    assert sdist.name == f"dpppl-{VERSION}.tar.gz"
    root = f"dpppl-{VERSION}/"
    with tarfile.open(sdist) as archive:
        names = {n.removeprefix(root) for n in archive.getnames()}
        info = email.parser.Parser().parsestr(archive.extractfile(root + "PKG-INFO").read().decode())
    missing = set(_package_files()) - names
    assert not missing, f"not in the sdist: {sorted(missing)}"
    models = {str(p.relative_to(REPO)) for p in (REPO / "models").glob("*.dp")}
    assert models and models <= names
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"} <= names
    assert not any(n.startswith("tests/") for n in names)
    assert info["Version"] == VERSION
    assert info["License-Expression"] == "Apache-2.0" and info["License-File"] == "LICENSE"


def _check_wheel(wheel):
    assert wheel.name == f"dpppl-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        meta = email.parser.Parser().parsestr(archive.read(f"dpppl-{VERSION}.dist-info/METADATA").decode())
        licence = archive.read(f"dpppl-{VERSION}.dist-info/licenses/LICENSE").decode()
    missing = set(_package_files()) - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    # package data: a data set, the grammar, the C++ sources of the native hash, Gibbs sweep and SALSO
    # pass (compiled on first use)
    assert {"dpppl/datasets/data/galaxies.csv", "dpppl/core/grammar.lark", "dpppl/core/numerics_threefry.cc",
            "dpppl/core/numerics_threefry.h", "dpppl/models/native_seating.cc", "dpppl/models/native_seating.h",
            "dpppl/models/native_ddp.cc", "dpppl/models/native_perm.cc",
            "dpppl/analysis/salso_native.cc"} <= names
    assert meta["Version"] == VERSION and meta["License-Expression"] == "Apache-2.0"
    assert licence == (REPO / "LICENSE").read_text() and "Apache License" in licence
    assert any(r.startswith("numpyro") for r in meta.get_all("Requires-Dist"))


def _check_install_and_run(wheel, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site_packages = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
    pip = [sys.executable, "-m", "pip", "--python", python]
    _run(pip + ["install", "--no-deps", "--no-index", "--disable-pip-version-check", wheel], env=env)
    # this environment's packages, after the new environment's own (its .pth files are not run)
    ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p) != site_packages]
    (site_packages / "_test_environment.pth").write_text("\n".join(ours) + "\n")

    # the wheel's declared dependencies, resolved by pip against what is installed, offline
    report = _run(pip + ["install", "--dry-run", "--no-index", "--disable-pip-version-check", wheel], env=env)
    assert f"dpppl=={VERSION}" in report  # its dependencies were resolved ("... (from ...->dpppl==0.1.0)")
    # every one already installed (pip.conf's find-links still apply under --no-index)
    would = [name for line in report.splitlines() if line.startswith("Would install")
             for name in line.split()[2:]]
    assert all(name.startswith("dpppl-") for name in would), would

    check = ("import dpppl, importlib.metadata as m, sys; "
             "print(dpppl.__file__); assert m.version('dpppl') == dpppl.__version__ == sys.argv[1], "
             "(m.version('dpppl'), dpppl.__version__)")
    where = _run([python, "-c", check, VERSION], cwd=tmp_path, env=env).strip()
    assert Path(where).is_relative_to(site_packages), where

    work = tmp_path / "checkout"
    shutil.copytree(REPO / "models", work / "models")
    printed = _run([venv / "bin" / "dpppl", *_readme_command(), "--no-progress"], cwd=work, env=env, timeout=400)
    assert "kernel: gibbs+splitmerge (exact), 2 chain(s) x 1000 draws, 82 points" in printed  # kernel="auto"
    assert (work / "galaxies.nc").stat().st_size > 10_000
