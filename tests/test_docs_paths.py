"""The documentation stays true without building it: every repository path the pages and the
README name exists, every `from dpppl... import ...` they show imports, and the top level holds
what docs/api/index.md says (names moved off it still resolve, with a warning naming the new path)."""

from __future__ import annotations

import glob
import re
import warnings
from pathlib import Path

import pytest

import dpppl

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(ROOT.glob("docs/**/*.md")) + [ROOT / "README.md"]
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
"""Inline code and fenced blocks of a page."""
REPO_PATH = re.compile(r"(?<![\w./-])((?:dpppl|tests|models|benchmarks|examples|docs)/[\w./*-]*[\w*/])")
"""A path from the repository's root, as the pages write one in code (`dpppl/kernels/gibbs.py`)."""
LINK = re.compile(r"\]\(([^)\s#]+)")
"""The target of a Markdown link, relative to its page (to the root in the README)."""
NOT_IN_THE_REPOSITORY = {
    "benchmarks/results/harness_power.json": "that file is not in the repository",  # its benchmark's output
    "docs/kernels/mine.md": "requires a page `docs/kernels/mine.md`",  # the page a user adds for their kernel
}
"""Paths the pages name that are not committed: path -> what the page naming it says about it."""


def named_paths(text: str, base: Path) -> list[tuple[str, str]]:
    """(what the page writes, the path from the root it means) for each repository path named in
    `text`, a page whose links are relative to the folder `base`."""
    found = [(path, path) for code in CODE.findall(text) for path in REPO_PATH.findall(code)]
    for target in LINK.findall(CODE.sub("", text)):
        if "://" not in target and not target.startswith("mailto:"):
            found.append((target, str((base / target).resolve().relative_to(ROOT))))
    return found


def test_every_repository_path_the_docs_name_exists():
    missing = []
    for page in PAGES:
        for written, path in named_paths(page.read_text(encoding="utf-8"), page.parent):
            if path in NOT_IN_THE_REPOSITORY:
                assert NOT_IN_THE_REPOSITORY[path] in " ".join(page.read_text(encoding="utf-8").split()), path
            elif not glob.glob(str(ROOT / path)):
                missing.append(f"{page.relative_to(ROOT)}: {written}")
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


def test_the_path_check_sees_code_links_and_globs():
    """The check above could fail: it reads backticked paths (a test's name after `::` left out),
    fenced blocks and links relative to the page."""
    text = ("See `tests/no_such_test.py::test_x` and [a page](../no-such-page.md).\n"
            "```bash\npython benchmarks/no_such_bench.py\n```\n`tests/kernels/test_*.py`\n")
    paths = [path for _, path in named_paths(text, ROOT / "docs" / "kernels")]
    assert paths == ["tests/no_such_test.py", "benchmarks/no_such_bench.py", "tests/kernels/test_*.py",
                     "docs/no-such-page.md"]
    assert glob.glob(str(ROOT / "tests/kernels/test_*.py"))


IMPORT = re.compile(r"^\s*from (dpppl[\w.]*) import ([\w, ]+)$", re.M)


def test_every_import_the_docs_show_works():
    shown = sorted({(module, name.strip()) for page in PAGES for code in CODE.findall(page.read_text("utf-8"))
                    for module, names in IMPORT.findall(code.strip("`")) for name in names.split(",")})
    assert ("dpppl.metrics", "adjusted_rand_index") in shown
    failed = []
    for module, name in shown:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            try:
                exec(f"from {module} import {name}", {})
            except (ImportError, DeprecationWarning) as e:
                failed.append(f"from {module} import {name}: {e}")
    assert not failed, "\n".join(failed)


def test_the_top_level_is_the_documented_front_door():
    documented = re.findall(r"^\| ((?:`\w+`(?:, )?)+) \|", (ROOT / "docs/api/index.md").read_text("utf-8"), re.M)
    listed = {name for row in documented for name in re.findall(r"`(\w+)`", row)}
    assert set(dpppl.__all__) <= listed
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in dpppl.__all__:
            getattr(dpppl, name)
        from dpppl.metrics import adjusted_rand_index
        from dpppl.plots import plot_coclustering
    assert adjusted_rand_index is dpppl.analysis.metrics.adjusted_rand_index
    assert plot_coclustering is dpppl.analysis.plots.plot_coclustering


@pytest.mark.parametrize("name", sorted(dpppl.MOVED))
def test_a_name_moved_off_the_top_level_resolves_with_a_warning_naming_its_path(name):
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(dpppl, name)
    module = dpppl.MOVED[name]
    assert str(caught[0].message).startswith(f"dpppl.{name} moved to {module}.{name}: import it from there "
                                              f"(`from {module} import {name}`)")
    assert value is getattr(__import__(module, fromlist=[name]), name)
    assert name not in dpppl.__all__


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'dpppl' has no attribute 'NormalInverseWishartt'"):
        dpppl.NormalInverseWishartt


def test_the_site_loads_nothing_from_another_host():
    """MathJax and its fonts are served by the site (docs/javascripts/mathjax/), and the theme
    asks no font service, so a site built and read offline shows its maths."""
    import yaml  # noqa: PLC0415  (a dependency of mkdocs and of ArviZ's)

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    assets = config.get("extra_javascript", []) + config.get("extra_css", [])
    remote = [a for a in assets if "://" in a or a.startswith("//")]
    assert not remote, f"mkdocs.yml loads {remote} from another host"
    assert "javascripts/mathjax/tex-chtml-full.js" in assets
    assert [a for a in assets if not (ROOT / "docs" / a).is_file()] == []
    assert config["theme"].get("font") is False, "theme.font must be false (Material asks Google Fonts otherwise)"
    fonts = ROOT / "docs/javascripts/mathjax/output/chtml/fonts/woff-v2"
    assert {"MathJax_Main-Regular.woff", "MathJax_Math-Italic.woff", "MathJax_Size1-Regular.woff"} <= {
        p.name for p in fonts.glob("*.woff")}


def rendered_docstrings():
    """(object path, docstring) of every object the API pages render (`::: path`) and of its public members."""
    import importlib  # noqa: PLC0415
    import inspect  # noqa: PLC0415

    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        for path in re.findall(r"^::: ([\w.]+)", page.read_text("utf-8"), re.M):
            module, _, attribute = path.rpartition(".")
            try:
                obj = importlib.import_module(path)
            except ImportError:
                obj = getattr(importlib.import_module(module), attribute)
            yield path, inspect.getdoc(obj) or ""
            for name, member in vars(obj).items() if inspect.isclass(obj) else ():
                if not name.startswith("_") and callable(member):
                    yield f"{path}.{name}", inspect.getdoc(member) or ""


POWER = re.compile(r"\w\*\*\w")
"""`2**63`: Markdown reads its `**` as the start or end of bold text, unless it is in backticks."""


def powers_outside_code(text: str) -> list[str]:
    """The lines of `text` with a power (`2**63`) outside backticks."""
    return [line.strip() for line in re.sub(r"`[^`]*`", "", text).splitlines() if POWER.search(line)]


def test_api_docstrings_have_no_power_outside_code():
    """A power written `2**63 - 1` outside backticks rendered as bold text on the API pages."""
    found = [f"{path}: {line}" for path, doc in rendered_docstrings() for line in powers_outside_code(doc)]
    assert not found, "write powers in backticks (`2**63 - 1`):\n" + "\n".join(found)
    assert powers_outside_code("an integer in [0, 2**63 - 1]") == ["an integer in [0, 2**63 - 1]"]
    assert powers_outside_code("in `[0, 2**63 - 1]`, **z** labels") == []


def test_install_page_runs_the_readmes_main_job():
    command = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install -q -e \. && (.+)$", re.M)
    readme = command.findall((ROOT / "README.md").read_text("utf-8"))
    install = command.findall((ROOT / "docs/install.md").read_text("utf-8"))
    assert readme and install == readme[:1], (install, readme)


@pytest.mark.parametrize("name", ["crp", "galaxies", "mixing"])
def test_tutorial_numbers_are_included_from_what_the_script_wrote(name):
    """The numbers a tutorial page shows are its script's output file, included (pymdownx.snippets), not typed."""
    page = (ROOT / "docs/tutorials" / f"{name}.md").read_text("utf-8")
    script = (ROOT / "docs/tutorials" / f"{name}.py").read_text("utf-8")
    assert f'--8<-- "docs/figures/{name}.txt"' in page
    assert f'(args.out / "{name}.txt").write_text(' in script  # --docs: args.out is docs/figures
    assert (ROOT / "docs/figures" / f"{name}.txt").stat().st_size > 0


def test_a_missing_component_names_the_family_by_its_namespace():
    """The messages suggest `dpppl.families.NormalInverseWishart()`, a path that warns of nothing."""
    with pytest.raises(dpppl.ModelError) as caught:
        dpppl.DPMixture(alpha=1.0, component="x")
    assert str(caught.value) == ("component must be a dpppl component family (e.g. "
                                 "dpppl.families.NormalInverseWishart()), got 'x'")
    with pytest.raises(dpppl.ModelError, match=r"^a mixture needs a component family, e\.g\. "
                                               r"component=dpppl\.families\.NormalInverseWishart\(\)$"):
        dpppl.DPMixture(alpha=1.0)
