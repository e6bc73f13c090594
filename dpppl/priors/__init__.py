"""Partition priors: the Chinese restaurant process (DP), Pitman-Yor, and
stick-breaking priors with arbitrary (a_i, b_i) on explicit labels."""

from dpppl.priors.crp import CRP, Gamma, PitmanYor, PartitionPrior
from dpppl.priors.stick_breaking import StickBreaking

__all__ = ["CRP", "Gamma", "PitmanYor", "PartitionPrior", "StickBreaking"]
