"""Load a script that is not on the import path (an example, a tutorial) as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def load_script(path, name: str | None = None):
    """Execute the Python file `path` as a fresh module (named `name`, default its stem) and
    return it, so tests and benchmarks can call its functions (e.g. `main`)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
