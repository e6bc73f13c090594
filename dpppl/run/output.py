"""A run's records as ArviZ InferenceData (the contract of ``docs/inference-data.md``)."""

from __future__ import annotations

import jax
import numpy as np
import numpyro

from dpppl.core.protocols import Target
from dpppl.diagnostics.arviz_compat import to_arviz
from dpppl.diagnostics.summaries import label_summaries
from dpppl.version import __version__


def to_inference_data(target: Target, records: dict, attrs: dict, record_dims: dict | None = None):
    """``posterior``: ``z`` and its label-invariant summaries, ``alpha`` when it has a prior,
    and the kernel's recorded cluster parameters (``record_dims``); ``sample_stats``:
    ``lp`` and each move's statistics; ``observed_data``: the target's observed variables."""
    records = dict(records)
    z = records.pop("z").astype(np.int32)
    records.pop("num_clusters", None)  # the runner's, for its progress bar; recomputed from z below
    posterior = {"z": z, **label_summaries(z)}
    alpha = records.pop("alpha")
    if target.prior.alpha_is_random:
        posterior["alpha"] = alpha
    record_dims = record_dims or {}
    posterior.update({k: records.pop(k) for k in record_dims})
    sample_stats = {"lp": records.pop("lp"), **records}
    model = target.model
    observed = target.observed()
    name = model.data.name
    all_attrs = dict(attrs, model=model.describe(), model_source=model.source or repr(model),
                     dpppl_version=__version__, jax_version=jax.__version__,
                     numpyro_version=numpyro.__version__)
    return to_arviz(
        {"posterior": posterior, "sample_stats": sample_stats, "observed_data": observed},
        coords={"point": np.arange(target.num_points), "dim": np.arange(target.x.shape[1])},
        dims={"z": ["point"], "cluster_sizes": ["cluster"], name: ["point", "dim"], **record_dims,
              **{other: ["point"] for other in observed if other != name}},
        attrs=all_attrs)


__all__ = ["to_inference_data"]
