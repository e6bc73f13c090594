"""Rewrite reST markup in docstrings as the Markdown mkdocstrings renders.

The API reference is rendered by mkdocstrings' Python handler, which reads docstrings as
Markdown: reST roles (``:func:`x` ``) and double-backtick literals show up raw. This script
rewrites, inside docstrings only (module, class, function and attribute docstrings; code and
other strings are left alone):

- ``:func:`x` ``, ``:class:``, ``:meth:``, ``:mod:``, ``:data:``, ``:attr:``, ``:obj:``,
  ``:exc:`` (with ``~`` and ``title <target>`` forms) to an mkdocs-autorefs cross-reference
  ``[`x`][dpppl.full.path]`` when the target has an anchor in the built site, else to plain
  code `` `x` `` (a reference to an undocumented target would fail ``mkdocs build --strict``);
- double-backtick literals to single-backtick code (a literal containing a backtick keeps
  Markdown's double-backtick form);
- ``default ``x`` `` in a numpydoc type line to ``default x`` (griffe puts it in the
  Default column verbatim).

Which targets are documented is read from the inventory of a built site (``objects.inv``), so
build the site first. Run from the repository root:

    mkdocs build --site-dir /tmp/dpppl-site
    python docs/tools/convert_rest.py --inventory /tmp/dpppl-site/objects.inv dpppl/cli.py ...

With no file arguments it converts every ``.py`` file under ``dpppl/``. ``--check`` reports
the files it would change and exits 1 if any, changing nothing.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import zlib
from pathlib import Path

ROLE = re.compile(r":(?:py:)?(func|class|meth|mod|data|attr|obj|exc|const):`([^`]+)`")
DOUBLE = re.compile(r"``(.+?)``(?!`)", re.S)
DEFAULT = re.compile(r"(,\s*default\s+)``([^`]+)``")


def read_inventory(path: Path) -> set[str]:
    """The object names of a Sphinx inventory (version 2) that mkdocstrings writes."""
    data = path.read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    body = zlib.decompress(data[header_end:]).decode("utf-8")
    return {line.split(" ", 1)[0] for line in body.splitlines() if line.strip()}


def resolve(target: str, module: str, scope: str, documented: set[str]) -> str | None:
    """The documented full path a role's target means in ``module`` (inside class ``scope``)."""
    target = target.lstrip(".")
    candidates = [target]
    if scope:
        candidates.append(f"{module}.{scope}.{target}")
    candidates.append(f"{module}.{target}")
    package = module.rsplit(".", 1)[0] if "." in module else module
    candidates += [f"{package}.{target}", f"dpppl.{target}"]
    return next((c for c in candidates if c in documented), None)


def convert_text(text: str, module: str, scope: str, documented: set[str]) -> str:
    """Markdown for the reST of one docstring's source text."""

    def role(match: re.Match) -> str:
        body = match.group(2).strip()
        titled = re.fullmatch(r"(.+?)\s*<([^>]+)>", body, re.S)
        if titled:
            title, target = titled.group(1).strip(), titled.group(2).strip()
        else:
            target = body
            title = target.lstrip("~.")
            if target.startswith("~"):
                title = title.rsplit(".", 1)[-1]
        target = target.lstrip("~")
        path = resolve(target.rstrip("()"), module, scope, documented)
        return f"[`{title}`][{path}]" if path else f"`{title}`"

    def literal(match: re.Match) -> str:
        inner = match.group(1)
        if "`" in inner:
            return f"`` {inner.strip()} ``"
        return f"`{inner}`"

    text = DEFAULT.sub(lambda m: m.group(1) + m.group(2), text)
    text = DOUBLE.sub(literal, text)
    return ROLE.sub(role, text)


PARAM_LINE = re.compile(r"^\s*\**\w+(?:, \**\w+)* : ")


def protected(line: str) -> list[tuple[int, int]]:
    """Character ranges of code spans and cross-references, where a line must not break."""
    return [m.span() for m in re.finditer(r"\[`[^`]*`\]\[[^\]]*\]|``.*?``|`[^`]*`", line)]


def wrap(text: str, indent: int, limit: int) -> str:
    """Break the lines of a converted docstring that grew past ``limit`` at a space outside
    code and references; the continuation gets the line's indentation (the docstring's for
    its first line), which Markdown reads as the same paragraph."""
    out = []
    for number, line in enumerate(text.split("\n")):
        start = indent if number == 0 else 0
        while start + len(line) > limit and not PARAM_LINE.match(line):
            spans = protected(line)
            lead = len(line) - len(line.lstrip()) if number else 0
            cut = next((i for i in range(limit - start, lead + 10, -1) if line[i] == " "
                        and not any(a <= i < b for a, b in spans)), None)
            if cut is None:
                break
            pad = " " * (indent if number == 0 else len(line) - len(line.lstrip()))
            out.append(line[:cut].rstrip())
            line, start, number = pad + line[cut + 1:], 0, number or 1
        out.append(line)
    return "\n".join(out)


def docstring_nodes(tree: ast.Module):
    """(string constant node, enclosing class qualname) of every docstring-like statement."""

    def walk(body, scope):
        for node in body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                yield node.value, scope
            if isinstance(node, ast.ClassDef):
                yield from walk(node.body, f"{scope}.{node.name}" if scope else node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(node.body, scope)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                yield from walk(node.body, scope)

    yield from walk(tree.body, "")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.resolve().relative_to(root.resolve()).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def convert_file(path: Path, root: Path, documented: set[str], limit: int = 120) -> tuple[str, str]:
    """(old source, new source) of one Python file."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    data = source.encode("utf-8")
    module = module_name(path, root)
    spans = []
    for node, scope in docstring_nodes(tree):
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset
        spans.append((start, end, scope))
    out = data
    for start, end, scope in sorted(spans, reverse=True):
        literal = out[start:end].decode("utf-8")
        new = convert_text(literal, module, scope, documented)
        if new != literal:
            new = wrap(new, start - out.rfind(b"\n", 0, start) - 1, limit)
            out = out[:start] + new.encode("utf-8") + out[end:]
    new_source = out.decode("utf-8")
    ast.parse(new_source)  # still Python
    return source, new_source


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="Python files (default: dpppl/**/*.py)")
    parser.add_argument("--inventory", type=Path, default=Path("site/objects.inv"),
                        help="objects.inv of a built site (default: site/objects.inv)")
    parser.add_argument("--root", type=Path, default=Path("."), help="the directory holding dpppl/")
    parser.add_argument("--check", action="store_true", help="report, change nothing; exit 1 on changes")
    args = parser.parse_args(argv)
    if not args.inventory.is_file():
        parser.error(f"no inventory at {args.inventory}: run `mkdocs build` first (or pass --inventory)")
    documented = read_inventory(args.inventory)
    files = args.files or sorted((args.root / "dpppl").rglob("*.py"))
    changed = []
    for path in files:
        old, new = convert_file(path, args.root, documented)
        if new != old:
            changed.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(("would convert " if args.check else "converted ") + str(path))
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
