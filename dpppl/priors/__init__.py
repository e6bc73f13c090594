"""Partition priors: the Chinese restaurant process (DP), Pitman-Yor, and
stick-breaking priors with arbitrary (a_i, b_i) on explicit labels."""

from .crp import CRP, Gamma, PitmanYor, PartitionPrior
from .stick_breaking import StickBreaking

__all__ = ["CRP", "Gamma", "PitmanYor", "PartitionPrior", "StickBreaking"]
