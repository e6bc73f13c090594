"""Partition priors: the Chinese restaurant process (DP), Pitman-Yor, and
stick-breaking priors with arbitrary (a_i, b_i) on explicit labels, and the DDP's sticks.
Each implements `dpppl.core.protocols.PartitionPrior`."""

from dpppl.priors.crp import CRP, Gamma, PitmanYor
from dpppl.priors.ddp import DDP
from dpppl.priors.hyperpriors import Hyperprior
from dpppl.priors.stick_breaking import StickBreaking

__all__ = ["CRP", "DDP", "Gamma", "Hyperprior", "PitmanYor", "StickBreaking"]
