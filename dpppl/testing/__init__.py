"""Test support: exact posteriors over set partitions and a statistical check of
kernel draws against them (`dpppl.testing.exact`), and Geweke joint-distribution
tests for larger data (`dpppl.testing.geweke`)."""

from dpppl.testing.exact import (ExactCase, ExactPosterior, HarnessResult, PowerCurve, QuantityCheck, canonical,
                                 check_kernel_samples, exact_posterior, partition_index, power_curve, sample_exact,
                                 sample_sticky_chains, scale_concentration, set_partitions, small_datasets)
from dpppl.testing.geweke import GewekeResult, geweke_test

__all__ = ["ExactCase", "ExactPosterior", "GewekeResult", "HarnessResult", "PowerCurve", "QuantityCheck",
           "canonical", "check_kernel_samples", "exact_posterior", "geweke_test", "partition_index",
           "power_curve", "sample_exact", "sample_sticky_chains", "scale_concentration",
           "set_partitions", "small_datasets"]
