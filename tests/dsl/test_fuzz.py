"""Fuzzing model files and data: every failure is a dpppl error, and what binds has a finite log joint.

Hypothesis mutates the model files of `models/` and `examples/` (tokens deleted, duplicated,
swapped, numbers replaced by extreme values, wrong names, unbalanced brackets, deep nesting,
unicode) and the data (non-finite, extreme, wrong shape or dtype, empty, complex, masked,
strings), then parses and binds. Any exception must be a `dpppl.errors.DPPPLError`; a model that binds
must give a finite log joint for one cluster, two and every point alone. The default run is derandomized
and small; `-m slow` runs many more examples and samples one iteration of those that bind.
"""

from __future__ import annotations

import os
import pathlib
import re
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dpppl
from dpppl.errors import DPPPLError

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL_FILES = sorted([*ROOT.glob("models/*.dp"), *ROOT.glob("examples/*.dp")])
MODELS = {p.name: "".join(line for line in p.read_text().splitlines(keepends=True)
                          if not line.lstrip().startswith("#")) for p in MODEL_FILES}
KERNELS = {"gaussian_lognormal.dp": "subcluster", "rankings.dp": "mallows-slice", "ddp.dp": "ddp",
           "stick_breaking.dp": "sbgibbs", "pseudo_particles.dp": "sbgibbs"}
"""The kernel that samples each model file (gibbs for the others)."""

TOKEN = re.compile(r"\s+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[^\W\d]\w*|\*\*|\S")
NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
EXTREME_NUMBERS = ["0", "-1", "1e-320", "2.5e-310", "1e-300", "1e-200", "1e-160", "1e-100", "1e-30", "1e30",
                   "1e100", "1e160", "1e200", "1e308", "-1e308", "-1e200", "-1e30", "1e300", "1e16", "nan", "inf",
                   "1" + "0" * 40, "9" * 400, "0.0000001", "1e-45", "3.5e38"]
WRONG_NAMES = ["alpha", "beta", "Gamma", "CRP", "PitmanYor", "DDP", "theta", "x", "y", "z", "i", "k", "N", "D",
               "V", "n", "t", "mean", "cov", "eye", "NormalInverseWishart", "Dirichlet", "data", "by", "of",
               "real", "count", "ranking", "αλφα", "x²", "_", "None", "ones"]
BRACKETS = ["(", ")", "[", "]", ",", "=", "~", ":", "+", "*", "^", "-", "\n", "#", "\r", "\t", "\x00", "é", "∑"]

rng = np.random.default_rng(0)
REAL = np.concatenate([rng.normal(-3, 1, (6, 2)), rng.normal(3, 1, (6, 2))])
DATA = {"real": REAL, "count": rng.integers(0, 5, (12, 4)).astype(float),
        "binary": rng.integers(0, 2, (12, 3)).astype(float),
        "ranking": np.array([rng.permutation(5) for _ in range(12)], float)}
TIMES = np.repeat([0.0, 1.0, 2.0], 4)


MUTATIONS = ["number"] * 4 + ["value"] * 4 + ["nest", "chain", "delete", "duplicate", "swap", "name", "bracket",
                                              "unicode"]
"""Kinds of mutation, most often an extreme number or argument value (which keep the text parseable)."""


def argument_values(tokens: list[str]) -> list[tuple[int, int]]:
    """(start, end) token ranges of the values of keyword arguments `name = value` inside calls."""
    spans, depth = [], 0
    for i, token in enumerate(tokens):
        depth += (token in "([") - (token in ")]")
        if token == "=" and depth > 0:
            end, level = i + 1, 0
            while end < len(tokens) and not (level == 0 and tokens[end] in (",", ")")):
                level += (tokens[end] in "([") - (tokens[end] in ")]")
                end += 1
            spans.append((i + 1, end))
    return spans


@st.composite
def model_texts(draw):
    """(file name, text): a model file as it is or with one or two mutations."""
    name = draw(st.sampled_from(sorted(MODELS)))
    tokens = TOKEN.findall(MODELS[name])
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(tokens) - 1))
        kind = draw(st.sampled_from(MUTATIONS))
        numbers = [j for j, t in enumerate(tokens) if NUMBER.match(t)]
        if kind in ("number", "nest", "chain") and numbers:
            i = draw(st.sampled_from(numbers))
        values = argument_values(tokens)
        if kind == "value" and values:
            start, end = draw(st.sampled_from(values))
            tokens[start:end] = [" ", draw(st.sampled_from(EXTREME_NUMBERS))]
        elif kind == "delete":
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == "number":
            tokens[i] = draw(st.sampled_from(EXTREME_NUMBERS))
        elif kind == "name":
            tokens[i] = draw(st.sampled_from(WRONG_NAMES))
        elif kind == "bracket":
            tokens.insert(i, draw(st.sampled_from(BRACKETS)))
        elif kind == "nest":
            depth = draw(st.integers(1, 400))
            tokens[i] = "(" * depth + tokens[i] + ")" * depth
        elif kind == "chain":
            tokens[i] = " + ".join([tokens[i]] * draw(st.integers(2, 600)))
        else:
            tokens.insert(i, draw(st.text(min_size=1, max_size=4)))
        if not tokens:
            tokens = [""]
    return name, "".join(tokens)


def _set_entry(x, value):
    x = np.array(x, dtype=float)
    x[len(x) // 2, 0] = value
    return x


DATA_MUTATIONS = {
    "valid": lambda x: x,
    "nan": lambda x: _set_entry(x, np.nan),
    "inf": lambda x: _set_entry(x, -np.inf),
    "huge entry": lambda x: _set_entry(x, 1e300),
    "subnormal entry": lambda x: _set_entry(x, 1e-320),
    "negative entry": lambda x: _set_entry(x, -1.0),
    "fractional entry": lambda x: _set_entry(x, 0.5),
    "scaled up": lambda x: x * 1e300,
    "scaled down": lambda x: x * 1e-300,
    "constant": lambda x: np.ones_like(x),
    "one point": lambda x: x[:1],
    "empty": lambda x: x[:0],
    "one column": lambda x: x[:, :1],
    "no columns": lambda x: x[:, :0],
    "flat": lambda x: x.ravel(),
    "3-D": lambda x: x[:, None, :],
    "complex": lambda x: x + 1j,
    "masked": lambda x: np.ma.masked_array(x, mask=np.eye(*x.shape, dtype=bool)),
    "strings": lambda x: x.astype(str),
    "objects": lambda x: np.array([[None] * x.shape[1]] * len(x), dtype=object),
    "ragged": lambda x: [list(row[:1 + i % 2]) for i, row in enumerate(x)],
    "bool": lambda x: x > 0,
    "None": lambda x: None,
    "scalar": lambda x: 3.0,
}


@st.composite
def data_for(draw, model):
    """Data for `model`: its kind's data set, half the time with one mutation (for a DDP model, paired
    with times)."""
    mutate = DATA_MUTATIONS[draw(st.sampled_from(["valid"] * len(DATA_MUTATIONS) + sorted(DATA_MUTATIONS)))]
    x = mutate(DATA[model.data.kind] if model.data.kind in DATA else REAL)
    if model.data.by is None:
        return x
    return x, draw(st.sampled_from([TIMES] * 4 + [TIMES[:3], np.full(12, np.nan), TIMES.astype(str)]))


def log_joints(target) -> list[float]:
    """The log joint of the states with every point in one cluster, in two halves, and alone (as
    many alone as the prior has labels)."""
    n = target.num_points
    partitions = [np.zeros(n), np.arange(n) >= n // 2, np.arange(n) % target.max_slots()]
    # one compiled program for the three (eagerly, every primitive of every model is compiled)
    lp = jax.jit(lambda z: target.lp(target.state_from_labels(jax.random.PRNGKey(0), z, n + 1)))
    return [float(lp(jnp.asarray(z, jnp.int32))) for z in partitions]


def check(text, draw_data, run_kernel=None):
    """Parse, bind and score (and with `run_kernel` sample one iteration); any failure must be a dpppl error."""
    where, stage = f"model text:\n{text!r}", "parse"
    try:
        model = dpppl.parse(text)
        data = draw_data(data_for(model))
        where += f"\ndata: {data!r}"[:3000]
        stage = "bind"
        target = model.bind(data)
        stage = "bound"
        lps = log_joints(target)
        assert np.all(np.isfinite(lps)), f"a model that binds has non-finite log joints {lps}; {where}"
        if run_kernel is not None:
            dpppl.sample(model, data, kernel=run_kernel, num_warmup=0, num_samples=1, progress_bar=False)
    except DPPPLError as exc:
        event(f"{type(exc).__name__} at {stage}")
    except Exception as exc:  # noqa: BLE001 (the point of the test)
        pytest.fail(f"raw {type(exc).__name__}: {exc}\n{where}\n{traceback.format_exc()}")
    else:
        event("bound")


COMMON = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=20, derandomize=True, **COMMON)  # ~20 s; the long run below is -m slow
@given(case=model_texts(), data=st.data())
def test_mutated_models_and_data_fail_only_with_dpppl_errors(case, data):
    check(case[1], data.draw)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("DPPPL_FUZZ_EXAMPLES", 1500)), derandomize=False, **COMMON)
@given(case=model_texts(), data=st.data(), run=st.integers(0, 19))
def test_mutated_models_and_data_fail_only_with_dpppl_errors_long(case, data, run):
    name, text = case
    check(text, data.draw, run_kernel=KERNELS.get(name, "gibbs") if run == 0 else None)


# ----------------------------------------------------------------------------- CSV files

CELL_JUNK = ["", "x", '"1,5"', "nan", "1e999", "'2'", '"3"4', '"', "1;2", "\t", "#"]


@st.composite
def csv_files(draw):
    """(bytes, points or None): a numeric array written through Python's csv module with a drawn delimiter,
    quoting, header, BOM and line ending (the points it must read back as), or that text with one cell made
    junk or one row made ragged (None: any outcome but a raw exception)."""
    import csv
    import io

    n, d = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    x = np.array(draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=64), min_size=n * d,
                               max_size=n * d))).reshape(n, d)
    delimiter = draw(st.sampled_from([",", ";", "\t", " "]))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, quoting=quoting,
                        lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    if draw(st.booleans()):  # a header, its names holding the delimiter in quotes
        writer.writerow([f"col{delimiter}{j}" if delimiter != " " else f"col{j}" for j in range(d)])
    writer.writerows([repr(float(v)) for v in row] for row in x)
    rows = out.getvalue().splitlines(keepends=True)
    expected = x
    mutation = draw(st.sampled_from(["none", "none", "junk", "ragged", "comment", "blank"]))
    at = draw(st.integers(0, len(rows) - 1))
    if mutation == "junk":
        cells = rows[at].rstrip("\r\n").split(delimiter)
        cells[draw(st.integers(0, len(cells) - 1))] = draw(st.sampled_from(CELL_JUNK))
        rows[at], expected = delimiter.join(cells) + "\n", None
    elif mutation == "ragged":
        rows[at], expected = rows[at].rstrip("\r\n") + delimiter + "1\n", None
    elif mutation in ("comment", "blank"):  # skipped lines
        rows.insert(at, "# a comment, with a delimiter; and\ta tab\n" if mutation == "comment" else "\n")
    text = "".join(rows).encode("utf-8")
    return (b"\xef\xbb\xbf" + text if draw(st.booleans()) else text), expected


@settings(max_examples=60, derandomize=True, **COMMON)
@given(case=csv_files())
def test_csv_files_read_back_or_fail_with_a_data_error(case, tmp_path_factory):
    """What csv.writer writes (any delimiter, quoting, header, BOM, CRLF) reads back exactly; a junk cell or a
    ragged row is a DataError naming the file, never a raw exception or a silent misread."""
    content, expected = case
    path = tmp_path_factory.mktemp("csv") / "points.csv"
    path.write_bytes(content)
    try:
        x = dpppl.datasets.read_data(path)
    except DPPPLError as exc:
        assert expected is None, f"{exc}\n{content!r}"
        assert str(exc).startswith(str(path)), str(exc)
        event("DataError")
        return
    except Exception as exc:  # noqa: BLE001 (the point of the test)
        pytest.fail(f"raw {type(exc).__name__}: {exc}\n{content!r}\n{traceback.format_exc()}")
    event("read")
    if expected is not None:
        np.testing.assert_array_equal(x, expected)
    assert x.ndim == 2 and np.all(np.isfinite(x))


# ----------------------------------------------------------------------------- declared rank

DECLARED = {"real": ("NormalGamma", "Normal"), "count": ("Dirichlet", "Multinomial"),
            "binary": ("Beta", "Bernoulli"), "ranking": ("MallowsPrior", "GeneralizedMallows")}
SHAPES = [(), (12,), (12, 1), (12, 2), (12, 3), (12, 5), (12, 1, 3), (0, 3), (12, 0)]


@settings(max_examples=60, derandomize=True, **COMMON)
@given(kind=st.sampled_from(sorted(DECLARED)), dims=st.sampled_from(["N", "N, D", "N, 3", "12", "N, 1"]),
       shape=st.sampled_from(SHAPES))
def test_data_of_the_wrong_rank_are_a_data_error_for_each_declared_type(kind, dims, shape):
    """Every declared data type against data of every rank: what binds has the declared rank and fixed
    dimensions; the rest is a dpppl error."""
    prior, observation = DECLARED[kind]
    if kind == "ranking" and "," in dims:
        dims = "N"
    text = f"data x : {kind}[{dims}]\nz ~ CRP(1)\ntheta[k] ~ {prior}()\nx[i] ~ {observation}(theta[z[i]])\n"
    source = DATA[kind]
    x = np.resize(source, shape) if kind != "ranking" or len(shape) != 2 else \
        np.array([rng.permutation(max(shape[1], 1))[:shape[1]] for _ in range(shape[0])], float)
    try:
        bound = dpppl.parse(text).bind(x)
    except DPPPLError as exc:
        event(f"{type(exc).__name__}")
        return
    except Exception as exc:  # noqa: BLE001 (the point of the test)
        pytest.fail(f"raw {type(exc).__name__}: {exc}\n{text}\nshape {shape}\n{traceback.format_exc()}")
    event("bound")
    if kind != "ranking":
        declared = [d.strip() for d in dims.split(",")]
        assert bound.x.ndim == 2
        if len(declared) == 1:
            assert bound.x.shape[1] == 1, (text, shape)
        for axis, d in enumerate(declared):
            assert not d.isdigit() or bound.x.shape[axis] == int(d), (text, shape)
