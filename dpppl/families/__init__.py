"""Component families (see :mod:`dpppl.families.base` for the interface)."""

from .base import Family
from .beta_bernoulli import BetaBernoulli
from .dirichlet_multinomial import DirichletMultinomial
from .generalized_mallows import GeneralizedMallows
from .niw import NormalInverseWishart
from .normal_gamma import NormalGamma
from .normal_known import NormalKnownCov
from .normal_lognormal import NormalLogNormal
from .coupled import CoupledGaussian

__all__ = ["Family", "NormalKnownCov", "NormalInverseWishart", "NormalGamma", "NormalLogNormal",
           "DirichletMultinomial", "BetaBernoulli", "CoupledGaussian", "GeneralizedMallows"]
