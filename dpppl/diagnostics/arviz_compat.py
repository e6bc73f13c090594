"""The one place that knows which ArviZ major is installed.

ArviZ 0.x returns `az.InferenceData` from `az.from_dict(posterior=..., ...)`;
ArviZ 1.x (Python >= 3.12) returns an `xarray.DataTree` from a nested dict. dpppl
builds `{group: {name: ndarray}}` and converts here, so both work. numpyro is imported
before arviz (ArviZ 1.x otherwise leaves numpyro half-imported).
"""

from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np
import numpyro  # noqa: F401  (import order matters for ArviZ 1.x)

from dpppl.errors import DataError

#: the group holding the labels of each sample group
PARTITION_GROUPS = {"posterior": "posterior_partition", "prior": "prior_partition"}


@functools.cache
def arviz():
    """The `arviz` module, imported on first use (it takes about a second: importing dpppl
    does not pay for it until a run is converted or summarised)."""
    with warnings.catch_warnings():
        # ArviZ 0.23 announces its 1.x refactor on import; dpppl absorbs the change here
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az  # noqa: PLC0415  (an import of a second's cost, on first use)
    return az


def arviz_major() -> int:
    return int(arviz().__version__.split(".")[0])


def __getattr__(name):
    """`az`: the arviz module (imported on first use)."""
    if name == "az":
        return arviz()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_arviz(groups: dict, *, coords: dict | None = None, dims: dict | None = None,
             attrs: dict | None = None):
    """Convert `{group: {var: array}}` to InferenceData (0.x) or DataTree (1.x).

    Sample groups (`posterior`, `sample_stats`, `posterior_partition`, ...) have
    leading (chain, draw) axes; groups whose name contains `data` have none. `attrs` go
    on every group. Groups outside ArviZ 0.x's scheme (`posterior_partition`) are added
    as datasets, which ArviZ 0.x accepts without a warning and keeps through netCDF.
    """
    attrs = {k: _attr(v) for k, v in (attrs or {}).items()}
    az = arviz()
    if arviz_major() >= 1:
        return az.from_dict(groups, coords=coords, dims=dims,
                            attrs={name: attrs for name in groups} | {"/": attrs})
    known = inspect.signature(az.from_dict).parameters
    kwargs = {name: data for name, data in groups.items() if name in known}
    kwargs.update({f"{name}_attrs": attrs for name in kwargs})
    idata = az.from_dict(**kwargs, coords=coords, dims=dims, attrs=attrs)
    for name, data in groups.items():
        if name not in known:  # a sample group of dpppl's own: converted like a posterior
            idata.add_groups({name: az.from_dict(posterior=data, coords=coords, dims=dims,
                                                 attrs=attrs).posterior})
    return idata


def with_groups(idata, groups: dict, *, coords: dict | None = None, dims: dict | None = None,
                attrs: dict | None = None):
    """`idata` with the groups `{group: {var: array}}` added (converted by `to_arviz`),
    replacing groups of the same names; returns the InferenceData (0.x, changed in place)
    or DataTree (1.x)."""
    new = to_arviz(groups, coords=coords, dims=dims, attrs=attrs)
    if arviz_major() >= 1:
        for name in groups:
            idata[name] = new[name]
        return idata
    idata.extend(new, join="right")
    return idata


def group(idata, name: str):
    """A group as an `xarray.Dataset` on either ArviZ major."""
    g = idata[name]
    return g.to_dataset() if hasattr(g, "to_dataset") else g


def has_group(idata, name: str) -> bool:
    """Whether `idata` (InferenceData or DataTree) has group `name`."""
    return name in (idata.groups() if callable(getattr(idata, "groups", None)) else idata.children)


def partition_group(idata, of: str = "posterior"):
    """The group holding the labels `z` of a run (`of="posterior"`) or of a prior
    simulation (`of="prior"`), with the other arrays indexed by point, label slot or
    size rank, as an `xarray.Dataset`: `posterior_partition` / `prior_partition`,
    or `of` itself for a file written before they moved there."""
    name = PARTITION_GROUPS[of]
    if has_group(idata, name):
        return group(idata, name)
    if has_group(idata, of):
        return group(idata, of)
    raise DataError(f"the InferenceData has no '{name}' group")


def labels(idata) -> np.ndarray:
    """The sampled labels `z` (chain, draw, point) of a run, or of a prior simulation
    when `idata` has no posterior; DataError when there are none."""
    for of in PARTITION_GROUPS:
        try:
            part = partition_group(idata, of)
        except DataError:
            continue
        if "z" in part:
            return np.asarray(part["z"])
    raise DataError("the InferenceData has no labels 'z' (in 'posterior_partition' or 'prior_partition')")


def _attr(v):
    # netCDF attributes must be str, numbers or arrays of them
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (str, int, float)):
        return v
    return str(v)
