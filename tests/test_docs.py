"""The documentation site: it builds with warnings as errors, it covers every kernel, every
statement and distribution of the model language, every CLI command and every public name,
its error catalogue matches what the parser says, and its tutorials run (quick mode) and
draw the figures the pages show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
pytest.importorskip("material", reason="the docs extra (mkdocs-material) is not installed")
pytest.importorskip("mkdocstrings", reason="the docs extra (mkdocstrings[python]) is not installed")
import yaml  # noqa: E402  (a dependency of mkdocs)

import dpppl  # noqa: E402
from dpppl.dsl import parser as dsl_parser  # noqa: E402
from dpppl.core.expressions import FUNCTIONS  # noqa: E402
from dpppl.models.mixture import DATA_KINDS  # noqa: E402
from dpppl.testing.scripts import load_script  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TUTORIALS = ("crp", "galaxies", "mixing")


def nav_pages() -> list[str]:
    """The markdown files of mkdocs.yml's nav, relative to docs/."""
    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may use !!python/name tags (e.g. for extensions); ignore them here
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    pages = []

    def walk(node):
        if isinstance(node, str):
            pages.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(config["nav"])
    return pages


def read(page: str) -> str:
    return (DOCS / page).read_text(encoding="utf-8")


def headings(page: str) -> list[str]:
    return [line for line in read(page).splitlines() if line.startswith("#")]


# ---------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """The site built once with `mkdocs build --strict`: (its directory, the build's result)."""
    site = tmp_path_factory.mktemp("docs") / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                             str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return site, result


def test_site_builds_strict_with_every_nav_page(built_site):
    site, result = built_site
    assert result.returncode == 0, result.stdout + result.stderr
    pages = nav_pages()
    for page in pages:
        stem = page[:-len(".md")]
        built = site / (stem[:-len("index")] if stem.endswith("index") else stem + "/") / "index.html"
        assert built.is_file(), f"nav page {page} was not built ({built})"
        assert built.stat().st_size > 1000
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert on_disk == set(pages), f"pages not in the nav: {sorted(on_disk - set(pages))}"


RAW_REST_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|obj|exc):")


class _TextOutsideCodeBlocks(HTMLParser):
    """Collects the text of a page outside `<pre>` code blocks, scripts and styles, and
    separately the text of inline `<code>`."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.open: list[str] = []
        self.text: list[str] = []
        self.inline_code: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        if any(tag in ("pre", "script", "style") for tag in self.open):
            return
        (self.inline_code if "code" in self.open else self.text).append(data)


def test_built_site_has_no_raw_rest(built_site):
    """Docstrings are Markdown (mkdocstrings): a reST role (`:func:`...) or a double-backtick
    literal left in one shows up raw on the API pages. docs/tools/convert_rest.py converts them."""
    site, result = built_site
    assert result.returncode == 0, result.stdout + result.stderr
    found = []
    for page in sorted(site.rglob("*.html")):
        parser = _TextOutsideCodeBlocks()
        parser.feed(page.read_text(encoding="utf-8"))
        for text in parser.text + parser.inline_code:
            for match in [*RAW_REST_ROLE.finditer(text), *re.finditer("``", text)]:
                context = text[max(0, match.start() - 50):match.end() + 50].replace("\n", " ")
                found.append(f"{page.relative_to(site)}: ...{context}...")
    assert not found, f"{len(found)} raw reST markups in the built site (run docs/tools/convert_rest.py " \
        "on the docstrings):\n" + "\n".join(found[:40])


def test_every_figure_a_page_shows_exists():
    for page in nav_pages():
        for figure in re.findall(r"\]\(((?:\.\./)*figures/[\w.-]+\.png)\)", read(page)):
            path = (DOCS / page).parent / figure
            assert path.is_file() and path.stat().st_size > 1000, f"{page} shows missing {figure}"


# ---------------------------------------------------------------------------- coverage


def test_every_kernel_has_a_page_that_says_whether_it_is_exact():
    pages = nav_pages()
    for name in dpppl.kernels.available():
        page = f"kernels/{name}.md"
        assert page in pages, f"kernel {name!r} has no page {page} in the nav"
        assert f"`{name}`" in headings(page)[0], f"{page} does not start with a heading naming `{name}`"
        exact = False if name == "nuts" else dpppl.kernels.entry(name).exact
        assert f"**Exact:** {'yes' if exact else 'no'}" in read(page), \
            f"{page} must say '**Exact:** {'yes' if exact else 'no'}'"
        assert f"kernels/{name}.md" in read("kernels/index.md").replace("](", "](kernels/")


def test_model_language_page_covers_every_statement_distribution_and_function():
    page = "model-language.md"
    text = read(page)
    heads = "\n".join(headings(page))
    statements = re.search(r"_statement:(.*?)\n\n", (ROOT / "dpppl/core/grammar.lark").read_text(), re.S)
    for rule in re.findall(r"\w+", statements.group(1)):
        assert "{#" + rule + "}" in heads, f"no section with anchor {{#{rule}}} for the statement rule {rule}"
    names = [*dsl_parser.PARTITION_PRIORS, *dsl_parser.CONCENTRATION_PRIORS, *dsl_parser.COMPONENTS,
             *dsl_parser.OBSERVATIONS, *dsl_parser.HYPERPRIORS, *DATA_KINDS]
    for name in names:
        assert re.search(rf"^#+ .*`{name}\b", heads, re.M), f"no section heading names `{name}`"
    for name in [*FUNCTIONS, *dsl_parser.BUILTINS]:
        assert f"`{name}" in text, f"the expression name {name!r} is not documented"
    for rule in dsl_parser.COMPONENTS.values():
        for param in rule.prior_params() + rule.observation_params:
            assert f"`{param}`" in text, f"{rule.family}'s argument {param!r} is not documented"


def error_examples():
    """(model text, data set, "own" (the data the model names) or None, message) of every catalogued error in the
    model-language page."""
    pattern = re.compile(r"<!-- error-example(?: data=(\w+))? -->\s*```dp\n(.*?)```\s*```text\n(.*?)```", re.S)
    return [(m.group(2), m.group(1), m.group(3).rstrip("\n")) for m in pattern.finditer(read("model-language.md"))]


def test_error_catalogue_matches_the_parser():
    examples = error_examples()
    assert len(examples) >= 20
    for text, data, message in examples:
        with pytest.raises((dpppl.ModelError, dpppl.DataError)) as caught:
            model = dpppl.parse(text, source="model.dp")
            if data == "own":  # the data the model names, or none
                dsl_parser.bind_data(model)
            elif data is not None:
                model.bind(dpppl.datasets.load(data)[0])
        assert str(caught.value) == message, f"the docs show\n{message}\nthe parser says\n{caught.value}"


def test_cli_page_covers_every_command_and_option():
    from dpppl.cli import _parser

    text = read("cli.md")
    parser = _parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in commands.choices.items():
        assert re.search(rf"^#+ `dpppl {name}`", text, re.M), f"no section for `dpppl {name}`"
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text, f"option {option} of `dpppl {name}` is not documented"


def test_api_reference_covers_every_public_name():
    directives = set()
    for page in nav_pages():
        if page.startswith("api/"):
            directives |= set(re.findall(r"^::: ([\w.]+)", read(page), re.M))
    documented = {d.rsplit(".", 1)[-1] for d in directives}
    missing = [name for name in dpppl.__all__ if name not in documented]
    assert not missing, f"public names without an API entry: {missing}"


# ---------------------------------------------------------------------------- tutorials


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name == "mixing" else name
                                  for name in TUTORIALS])  # mixing: ~130 s of compiles, run with -m slow
def test_tutorial_runs_quick_and_draws_the_figures_its_page_shows(name, tmp_path):
    module = load_script(DOCS / "tutorials" / f"{name}.py", f"tutorial_{name}")
    module.main(["--quick", "--out", str(tmp_path)])
    shown = set(re.findall(r"figures/([\w.-]+\.png)", read(f"tutorials/{name}.md")))
    assert shown, f"tutorials/{name}.md shows no figure"
    drawn = {p.name for p in tmp_path.glob("*.png")}
    assert shown <= drawn, f"{name}.py --quick did not draw {sorted(shown - drawn)}"
    for figure in shown:
        assert (tmp_path / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"{name}.py" in read(f"tutorials/{name}.md"), f"tutorials/{name}.md does not name its script"


@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorial_writes_the_docs_figures_only_when_asked_and_never_quick(name, capsys):
    """The committed figures are redrawn by `--docs` alone, and a quick run may not do it."""
    module = load_script(DOCS / "tutorials" / f"{name}.py", f"tutorial_{name}")
    assert module.FIGURES.resolve() == (DOCS / "figures").resolve()
    with pytest.raises(SystemExit) as caught:
        module.main(["--quick", "--docs"])
    assert caught.value.code == 2 and "without --quick" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        module.main(["--quick", "--out", "elsewhere", "--docs"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert "--docs" in read(f"tutorials/{name}.md") and "--docs" in read("tutorials/index.md")
