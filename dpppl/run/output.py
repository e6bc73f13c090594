"""A run's records as ArviZ InferenceData (the contract of `docs/inference-data.md`).

Inside `with run_groups_only():` (the command line's `sample` and `resume`), a run is returned as a
`dpppl.diagnostics.arviz_compat.RunGroups` instead: the same groups as xarray Datasets,
written to the same netCDF file, without importing ArviZ.
"""

from __future__ import annotations

import contextlib
import contextvars

import jax
import numpy as np
import numpyro

from dpppl.core.protocols import Target
from dpppl.diagnostics.arviz_compat import PARTITION_GROUPS, to_arviz, to_run_groups, writes_without_arviz
from dpppl.diagnostics.summaries import label_summaries
from dpppl.run.runner import kept_records
from dpppl.version import __version__


_RUN_GROUPS = contextvars.ContextVar("dpppl_run_groups_only", default=False)

SUMMARY_BLOCK = 2**24
"""Labels summarised at a time by `blocked_label_summaries` (its int64 temporaries, about 24 bytes
a label, then stay near 0.4 GB)."""


def blocked_label_summaries(z: np.ndarray) -> dict:
    """`label_summaries` of the labels `z` (chain, draw, point), computed on blocks of draws of
    at most `SUMMARY_BLOCK` labels: the same arrays, without temporaries several times the size
    of `z` (W3's 1,000 draws of 10^6 points: 4 GB of labels, 24 GB of temporaries at once)."""
    step = max(1, SUMMARY_BLOCK // max(1, z.shape[0] * z.shape[2]))
    return kept_records(tuple(label_summaries(z[:, i:i + step]) for i in range(0, z.shape[1], step)))


def to_inference_data(target: Target, records: dict, attrs: dict, record_dims: dict | None = None):
    """`posterior`: the label-invariant summaries of `z` (scalars per draw), `alpha`
    when it has a prior, a copy of `lp` and the kernel's label-invariant continuous records;
    `posterior_partition`: `z`, `cluster_sizes` and the records indexed by label slot
    or integer-valued (what ArviZ should not see by default); `sample_stats`: `lp` and
    each move's statistics; `observed_data`: the target's observed variables."""
    records = dict(records)
    z = records.pop("z").astype(np.int32, copy=False)
    records.pop("num_clusters", None)  # the runner's, for its progress bar; recomputed from z below
    summaries = blocked_label_summaries(z)
    partition = {"z": z, "cluster_sizes": summaries.pop("cluster_sizes")}
    posterior = dict(summaries)
    alpha = records.pop("alpha")
    if target.prior.alpha_is_random:
        posterior["alpha"] = alpha
    posterior["lp"] = records["lp"]  # also in sample_stats, where ArviZ's conventions put it
    record_dims = record_dims or {}
    for k in record_dims:
        value = records.pop(k)
        by_slot = "slot" in record_dims[k] or np.asarray(value).dtype.kind in "iub"
        (partition if by_slot else posterior)[k] = value
    sample_stats = {"lp": records.pop("lp"), **records}
    model = target.model
    observed = target.observed()
    name = model.data.name
    all_attrs = dict(attrs, model=model.describe(), model_source=model.source or repr(model),
                     dpppl_version=__version__, jax_version=jax.__version__,
                     numpyro_version=numpyro.__version__)
    convert = to_run_groups if _RUN_GROUPS.get() and writes_without_arviz() else to_arviz
    return convert(
        {"posterior": posterior, PARTITION_GROUPS["posterior"]: partition, "sample_stats": sample_stats,
         "observed_data": observed},
        coords={"point": np.arange(target.num_points), "dim": np.arange(target.x.shape[1])},
        dims={"z": ["point"], "cluster_sizes": ["cluster"], name: ["point", "dim"], **record_dims,
              **{other: ["point"] for other in observed if other != name}},
        attrs=all_attrs)


@contextlib.contextmanager
def run_groups_only():
    """Within it, `to_inference_data` returns a `RunGroups` (where ArviZ 0.x is installed): for a
    caller that only writes and summarises the run."""
    token = _RUN_GROUPS.set(True)
    try:
        yield
    finally:
        _RUN_GROUPS.reset(token)


__all__ = ["SUMMARY_BLOCK", "blocked_label_summaries", "run_groups_only", "to_inference_data"]
