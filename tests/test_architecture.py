"""The layout's rules, checked: imports only go down the layers of ``pyproject.toml``'s
import-linter contract, no import cycle, no function-local import of a dpppl module, no
probe of a model's kind in the run path, and ruff is clean."""

import ast
import pathlib
import shutil
import subprocess
import sys

import grimp
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dpppl"
# the places that must only call the protocols (dpppl.core.protocols), never ask what a model is
PROTOCOL_ONLY = ["run", "kernels/adapter.py", "kernels/base.py", "models/init.py", "search", "testing"]


def _tool(name):
    path = shutil.which(name, path=str(pathlib.Path(sys.executable).parent))
    if path is None:
        pytest.fail(f"{name} is not installed next to {sys.executable} (it is in the [test] extra)")
    return path


def test_imports_only_go_down_the_layers():
    out = subprocess.run([_tool("lint-imports")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle():
    assert _cycles(grimp.build_graph("dpppl")) == []


def _python_files(*parts):
    for part in parts:
        path = PACKAGE / part
        yield from ([path] if path.suffix == ".py" else sorted(path.rglob("*.py")))


def test_no_function_local_import_of_a_dpppl_module():
    found = []
    for path in _python_files("."):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    module = (inner.module or "" if isinstance(inner, ast.ImportFrom) and inner.level == 0
                              else "." if isinstance(inner, ast.ImportFrom)
                              else " ".join(a.name for a in inner.names) if isinstance(inner, ast.Import) else None)
                    if module is not None and (module.startswith(("dpppl", ".")) or " dpppl" in f" {module}"):
                        found.append(f"{path.relative_to(REPO)}:{inner.lineno}")
    assert found == []


def test_the_run_path_asks_no_model_what_it_is():
    """No hasattr, and no getattr with a default, in the driver, the adapter, the registry,
    the init strategies, the search and the testing helpers: they call the protocols."""
    found = []
    for path in _python_files(*PROTOCOL_ONLY):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and (node.func.id == "hasattr" or (node.func.id == "getattr" and len(node.args) == 3))):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []


def test_ruff_is_clean():
    out = subprocess.run([_tool("ruff"), "check", "dpppl", "tests", "benchmarks", "examples", "docs"],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
