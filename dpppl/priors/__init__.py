"""Partition priors: the Chinese restaurant process (DP) and Pitman-Yor."""

from .crp import CRP, Gamma, PitmanYor, PartitionPrior

__all__ = ["CRP", "Gamma", "PitmanYor", "PartitionPrior"]
