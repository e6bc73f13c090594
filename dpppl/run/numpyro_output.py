"""ArviZ InferenceData from a NumPyro `MCMC` run of a dpppl kernel, in the layout of [`dpppl.sample`][dpppl.sample].

    mcmc = numpyro.infer.MCMC(dpppl.PartitionGibbs(NUTS(model)), num_warmup=500, num_samples=1000)
    mcmc.run(jax.random.key(0), x, y)
    idata = from_numpyro(mcmc)   # posterior label-invariant, labels in posterior_partition

NumPyro's own outputs (`mcmc.get_samples()`, `mcmc.print_summary()`, `arviz.from_numpyro`) hold
the continuous sites and each partition's label-invariant summaries, not the labels: the
labels are an extra field of the kernel's state (`mcmc.get_extra_fields()["labels"]`,
[`labels_of`][dpppl.run.numpyro_output.labels_of]).
"""

from __future__ import annotations

import numpy as np
from numpyro.infer import MCMC

from dpppl.errors import ArgumentError
from dpppl.kernels.adapter import PartitionKernel
from dpppl.run.output import to_inference_data
from dpppl.run.partition_gibbs import PartitionGibbs, inference_data


def _finished(mcmc, what: str):
    """The sampler of `mcmc`, a finished MCMC run of a dpppl kernel (ArgumentError otherwise)."""
    sampler = mcmc.sampler if isinstance(mcmc, MCMC) else None
    if not isinstance(sampler, (PartitionGibbs, PartitionKernel)):
        got = f"an MCMC of {type(sampler).__name__}" if sampler is not None else repr(mcmc)
        raise ArgumentError(f"{what} takes a numpyro.infer.MCMC of dpppl.PartitionGibbs or of a kernel from "
                            f"dpppl.kernels.make, got {got} (use arviz.from_numpyro for other kernels)")
    if mcmc._states is None:  # NumPyro's record of the draws (its get_samples asserts on it)
        raise ArgumentError(f"{what}: the MCMC has not run yet; call mcmc.run(key, ...) first")
    return sampler


def labels_of(mcmc, group_by_chain: bool = False):
    """The labels of a finished MCMC run of a dpppl kernel: `{labels site: (draws, N)}` for
    `PartitionGibbs` (canonical labels, by site), an array (draws, N) of cluster slots for a
    kernel of `dpppl.kernels.make`; (chains, draws, N) with `group_by_chain`."""
    _finished(mcmc, "labels_of")
    return mcmc.get_extra_fields(group_by_chain=group_by_chain)["labels"]


def from_numpyro(mcmc):
    """InferenceData of a finished `numpyro.infer.MCMC` run of
    [`PartitionGibbs`][dpppl.run.partition_gibbs.PartitionGibbs] or of a kernel of
    [`dpppl.kernels.make`][dpppl.kernels.make], in the layout [`dpppl.sample`][dpppl.sample]
    returns for the same model (docs/inference-data.md): label-invariant `posterior`, the labels
    and cluster sizes in `posterior_partition`, `sample_stats` (`lp`; `overflow`, NUTS's
    `diverging` and `acceptance_rate` where collected) and `observed_data`, the data (a model
    function's observed sites at `mcmc.run`'s arguments; a dpppl model's data).

    Raises ArgumentError for another kernel or an MCMC that has not run.
    """
    sampler = _finished(mcmc, "from_numpyro")
    if isinstance(sampler, PartitionGibbs):
        return inference_data(mcmc)
    target = sampler.target
    samples = mcmc.get_samples(group_by_chain=True)
    fields = mcmc.get_extra_fields(group_by_chain=True)
    slots = np.asarray(fields["labels"])
    chains, draws, n = slots.shape
    z = np.stack([target.prior.canonical(row) for row in slots.reshape(-1, n).astype(np.int64)])
    lp = -np.asarray(fields["potential_energy"])
    records = {"z": z.reshape(chains, draws, n), "alpha": np.asarray(samples["alpha"]), "lp": lp}
    if "overflow" in fields:
        records["overflow"] = np.asarray(fields["overflow"])
    return to_inference_data(target, records, dict(kernel=sampler.kernel.name, exact=sampler.exact,
                                                   num_warmup=mcmc.num_warmup, thinning=mcmc.thinning))


__all__ = ["from_numpyro", "labels_of"]
