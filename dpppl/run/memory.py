"""What a run will hold in memory, estimated before it allocates anything, and the check that
refuses a run the machine cannot hold.

The estimate adds up the arrays the backend allocates, from their shapes (`jax.eval_shape`
of the chains' states and of the kernel's records: nothing is computed), not a product of
chains, capacity, points and dimensions:

- the data (`target.x`);
- every chain's state: labels, the family's sufficient statistics per cluster slot (O(N + C D^2)
  for a Gaussian family) and the kernel's carried values (the sub-cluster sampler's sub-labels),
  at the initial capacity;
- the chunk buffers of `dpppl.run.runner`: `chunk_length` steps of every chain's record (labels,
  `lp`, alpha, each move's statistics, the kernel's per-slot records) on the device and their copy
  on the host;
- the draws kept, `num_samples // thinning` records per chain, twice (the chunks kept and their
  concatenation at the end), and one block of `blocked_label_summaries`' temporaries.

`kernel="nuts"` holds per kept draw each point's component (int32) and its canonical labels
(int32) plus the truncated model's sites (sticks and component parameters).

The machine's memory is `MemAvailable` of `/proc/meminfo` (`os.sysconf` elsewhere); the
environment variable `DPPPL_MEMORY_LIMIT` (bytes, or with a unit: `16G`, `500M`) overrides it
(docs/configuration.md).
"""

from __future__ import annotations

import os
import re

import jax
import numpy as np

from dpppl.core.protocols import Target
from dpppl.errors import ArgumentError
from dpppl.models.init import seated_slots
from dpppl.run.output import SUMMARY_BLOCK
from dpppl.run.runner import built_kernel, chunk_length

MEMORY_LIMIT_VARIABLE = "DPPPL_MEMORY_LIMIT"
"""The environment variable that sets the memory a run may use (instead of the machine's)."""
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUMMARY_TEMPORARY = 24  # bytes per label of label_summaries' int64 temporaries
_NUTS_LABELS = 8  # bytes per point and kept draw of kernel="nuts": int32 component, int32 canonical labels


def available_memory() -> tuple[int, str]:
    """The bytes a run may use and where the figure comes from: `DPPPL_MEMORY_LIMIT` when set,
    else the memory the machine has available."""
    text = os.environ.get(MEMORY_LIMIT_VARIABLE, "").strip()
    if text:
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", text, re.I)
        if match is None:
            raise ArgumentError(f"{MEMORY_LIMIT_VARIABLE}={text!r} is not a size: give bytes or a number with a unit, "
                                "e.g. 16G or 500M")
        return int(float(match[1]) * _UNITS[match[2].upper()]), f"{MEMORY_LIMIT_VARIABLE}={text}"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available on this machine"
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "available on this machine"


def _nbytes(tree) -> int:
    return sum(int(np.prod(leaf.shape, dtype=np.int64)) * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def partition_run_bytes(*, data_bytes: int, state_bytes: int, record_bytes: int, num_points: int, num_chains: int,
                        num_samples: int, thinning: int) -> dict[str, int]:
    """The bytes a partition-kernel run holds at its peak, by part, from the bytes of one chain's
    state and of one step's record (see the module docstring)."""
    kept = num_chains * (num_samples // thinning) * record_bytes
    return {"data": data_bytes,
            "chain states": num_chains * state_bytes,
            "chunk buffers": 2 * chunk_length(num_chains, num_points) * num_chains * record_bytes,
            "kept draws": 2 * kept + min(SUMMARY_BLOCK, num_chains * (num_samples // thinning) * num_points)
            * _SUMMARY_TEMPORARY}


def partition_sizes(target: Target, spec: str, options: dict, capacity: int | None) -> tuple[int, int]:
    """(bytes of one chain's state, bytes of one step's record) of kernel `spec` on `target`,
    from the shapes of the arrays (`jax.eval_shape`: nothing is allocated)."""
    kern = built_kernel(spec, target, options)[0]
    slots = seated_slots(target, capacity)
    state = jax.eval_shape(lambda: target.empty_state(slots))
    if kern.init is not None:
        state = jax.eval_shape(kern.init, state, jax.ShapeDtypeStruct(target.x.shape, target.x.dtype))
    record = jax.eval_shape(kern.record, state) if kern.record is not None else {}
    scalars = 4 + 8 + 8 + 8 * len(kern.info_names)  # num_clusters, alpha, lp, each move's statistics
    return _nbytes(state), 4 * target.num_points + scalars + _nbytes(record)


def run_bytes(target: Target, spec: str, options: dict, backend: str, *, num_chains: int, num_samples: int,
              thinning: int, capacity: int | None, truncation: int) -> dict[str, int]:
    """The bytes a run of `spec` (run by `backend`) on `target` holds at its peak, by part."""
    data_bytes = int(np.asarray(target.x).nbytes)
    kept = num_chains * (num_samples // thinning)
    if backend == "nuts":
        dim = int(target.x.shape[1]) if np.ndim(target.x) == 2 else 1
        sites = 8 * truncation * (2 + dim + dim * dim)  # a draw's sticks and component parameters
        return {"data": data_bytes, "kept draws": kept * (_NUTS_LABELS * target.num_points + sites)}
    state_bytes, record_bytes = partition_sizes(target, spec, options, capacity)
    return partition_run_bytes(data_bytes=data_bytes, state_bytes=state_bytes, record_bytes=record_bytes,
                               num_points=target.num_points, num_chains=num_chains, num_samples=num_samples,
                               thinning=thinning)


def check_memory(parts: dict[str, int]) -> None:
    """Raise [`ArgumentError`][dpppl.ArgumentError] when the run whose peak is `parts` would hold
    more than `available_memory()`, naming both figures, the largest part and the options that
    lower it."""
    limit, source = available_memory()
    total = sum(parts.values())
    if total <= limit:
        return
    shown = ", ".join(f"{name} {_gb(size)}" for name, size in sorted(parts.items(), key=lambda p: -p[1]) if size)
    raise ArgumentError(f"this run would hold about {_gb(total)} in memory ({shown}), more than the {_gb(limit)} "
                        f"{source}: lower num_chains, or keep fewer draws (num_samples, or a larger thinning); "
                        f"{MEMORY_LIMIT_VARIABLE} sets the limit")


def _gb(size: int) -> str:
    return f"{size / 1e9:.3g} GB" if size >= 10**8 else f"{size / 1e6:.3g} MB"


__all__ = ["MEMORY_LIMIT_VARIABLE", "available_memory", "check_memory", "partition_run_bytes", "partition_sizes",
           "run_bytes"]
