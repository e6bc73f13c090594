"""The one place that knows which ArviZ major is installed.

ArviZ 0.x returns ``az.InferenceData`` from ``az.from_dict(posterior=..., ...)``;
ArviZ 1.x (Python >= 3.12) returns an ``xarray.DataTree`` from a nested dict. dpppl
builds ``{group: {name: ndarray}}`` and converts here, so both work. numpyro is imported
before arviz (ArviZ 1.x otherwise leaves numpyro half-imported).
"""

from __future__ import annotations

import functools
import warnings

import numpyro  # noqa: F401  (import order matters for ArviZ 1.x)


@functools.cache
def arviz():
    """The ``arviz`` module, imported on first use (it takes about a second: importing dpppl
    does not pay for it until a run is converted or summarised)."""
    with warnings.catch_warnings():
        # ArviZ 0.23 announces its 1.x refactor on import; dpppl absorbs the change here
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az  # noqa: PLC0415  (an import of a second's cost, on first use)
    return az


def arviz_major() -> int:
    return int(arviz().__version__.split(".")[0])


def __getattr__(name):
    """``az``: the arviz module (imported on first use)."""
    if name == "az":
        return arviz()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_arviz(groups: dict, *, coords: dict | None = None, dims: dict | None = None,
             attrs: dict | None = None):
    """Convert ``{group: {var: array}}`` to InferenceData (0.x) or DataTree (1.x).

    Sample groups (``posterior``, ``sample_stats``) have leading (chain, draw) axes;
    groups whose name contains ``data`` have none. ``attrs`` go on every group.
    """
    attrs = {k: _attr(v) for k, v in (attrs or {}).items()}
    az = arviz()
    if arviz_major() >= 1:
        return az.from_dict(groups, coords=coords, dims=dims,
                            attrs={name: attrs for name in groups} | {"/": attrs})
    kwargs = {name: data for name, data in groups.items()}
    kwargs.update({f"{name}_attrs": attrs for name in groups})
    return az.from_dict(**kwargs, coords=coords, dims=dims, attrs=attrs)


def group(idata, name: str):
    """A group as an ``xarray.Dataset`` on either ArviZ major."""
    g = idata[name]
    return g.to_dataset() if hasattr(g, "to_dataset") else g


def _attr(v):
    # netCDF attributes must be str, numbers or arrays of them
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (str, int, float)):
        return v
    return str(v)
