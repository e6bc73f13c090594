"""Test support: exact posteriors over set partitions and a statistical check of
kernel draws against them (see :mod:`dpppl.testing.exact`)."""

from .exact import (ExactCase, ExactPosterior, HarnessResult, PowerCurve, QuantityCheck,
                    canonical, check_kernel_samples, exact_posterior, partition_index,
                    power_curve, sample_exact, sample_sticky_chains, scale_concentration,
                    set_partitions, small_datasets)

__all__ = ["ExactCase", "ExactPosterior", "HarnessResult", "PowerCurve", "QuantityCheck",
           "canonical", "check_kernel_samples", "exact_posterior", "partition_index",
           "power_curve", "sample_exact", "sample_sticky_chains", "scale_concentration",
           "set_partitions", "small_datasets"]
