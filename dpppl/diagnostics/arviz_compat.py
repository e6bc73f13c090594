"""The one place that knows which ArviZ major is installed.

ArviZ 0.x returns `az.InferenceData` from `az.from_dict(posterior=..., ...)`;
ArviZ 1.x (Python >= 3.12) returns an `xarray.DataTree` from a nested dict. dpppl
builds `{group: {name: ndarray}}` and converts here, so both work. numpyro is imported
before arviz (ArviZ 1.x otherwise leaves numpyro half-imported).
"""

from __future__ import annotations

import datetime
import functools
import importlib.metadata
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


#: the groups of ArviZ 0.x's scheme dpppl writes, in the order `InferenceData` keeps them
ARVIZ_GROUPS = ("posterior", "log_likelihood", "sample_stats", "observed_data")


COMPRESSED_KINDS = "biu"
"""The NumPy dtype kinds `RunGroups.to_netcdf` compresses: labels, sizes and counts (a run's labels to a
fifth of their size or less). Floating-point draws, such as the pointwise log likelihood, shrink by a few
per cent and took half the write's time to compress (Old Faithful's default run: 0.27 s -> 0.19 s CPU for
a file of 4.76 MB instead of 4.44 MB), so they are written as they are."""


class RunGroups:
    """A run's groups as `xarray.Dataset`s, as ArviZ 0.x's `from_dict` makes them (`to_run_groups`),
    without importing ArviZ (with Matplotlib and SciPy's statistics, about a second): what
    `dpppl sample --out` writes and summarises. `run[name]` is a group, `run.groups()` their names,
    `run.attrs` the run's attributes and `run.to_netcdf(path)` writes the file ArviZ 0.x's
    `InferenceData.to_netcdf` writes (h5netcdf), which `arviz.from_netcdf` reads, with zlib on its
    integer variables only (`COMPRESSED_KINDS`)."""

    def __init__(self, datasets: dict, attrs: dict):
        self.datasets, self.attrs = datasets, attrs

    def __getitem__(self, name: str):
        return self.datasets[name]

    def groups(self) -> list[str]:
        return list(self.datasets)

    def to_netcdf(self, path) -> None:
        import xarray as xr  # noqa: PLC0415  (imported with the first run written)

        mode = "w"
        if self.attrs:
            xr.Dataset(attrs=self.attrs).to_netcdf(path, mode=mode, engine="h5netcdf", group="/")
            mode = "a"
        for name, data in self.datasets.items():
            encoding = {var: {"zlib": True} for var, values in data.variables.items()
                        if values.dtype.kind in COMPRESSED_KINDS}
            data.to_netcdf(path, mode=mode, group=f"//{name}", engine="h5netcdf", encoding=encoding)
            mode = "a"


def writes_without_arviz() -> bool:
    """Whether `to_run_groups` makes what `to_arviz` would (ArviZ 0.x is installed; 1.x writes DataTrees)."""
    return int(importlib.metadata.version("arviz").split(".")[0]) == 0


def to_run_groups(groups: dict, *, coords: dict | None = None, dims: dict | None = None,
                  attrs: dict | None = None) -> RunGroups:
    """`to_arviz`'s conversion of `{group: {var: array}}` on ArviZ 0.x, as a `RunGroups`: the same
    variables, dimensions (`name_dim_i` for an axis `dims` does not name), coordinates (0, 1, ... where
    `coords` gives none) and attributes (`created_at`, `arviz_version` and `attrs`; a group outside
    ArviZ's scheme, such as `posterior_partition`, has only the first two, as ArviZ's `add_groups` leaves it)."""
    import xarray as xr  # noqa: PLC0415  (imported with the first run converted)

    attrs = {k: _attr(v) for k, v in (attrs or {}).items()}
    made = {"created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "arviz_version": importlib.metadata.version("arviz")}
    coords, dims = coords or {}, dims or {}
    order = [name for name in ARVIZ_GROUPS if name in groups] + [name for name in groups if name not in ARVIZ_GROUPS]
    datasets = {}
    for name in order:
        leading = [] if "data" in name else ["chain", "draw"]
        variables = {}
        for var, value in groups[name].items():
            value = np.asarray(value)
            given = list(dims.get(var, []))
            names = leading + [given[i] if i < len(given) else f"{var}_dim_{i}"
                               for i in range(value.ndim - len(leading))]
            axes = {dim: np.asarray(coords[dim]) if dim in coords else np.arange(size)
                    for dim, size in zip(names, value.shape)}
            variables[var] = xr.DataArray(value, coords={dim: xr.IndexVariable((dim,), axes[dim]) for dim in names},
                                          dims=names)
        datasets[name] = xr.Dataset(variables, attrs=dict(made, **(attrs if name in ARVIZ_GROUPS else {})))
    return RunGroups(datasets, attrs)


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
