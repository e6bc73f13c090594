"""Component families (see `dpppl.families.base` for the interface)."""

from dpppl.families.base import Family
from dpppl.families.beta_bernoulli import BetaBernoulli
from dpppl.families.dirichlet_multinomial import DirichletMultinomial
from dpppl.families.generalized_mallows import GeneralizedMallows
from dpppl.families.niw import NormalInverseWishart
from dpppl.families.normal_gamma import NormalGamma
from dpppl.families.normal_known import NormalKnownCov
from dpppl.families.normal_lognormal import NormalLogNormal
from dpppl.families.coupled import CoupledGaussian

__all__ = ["Family", "NormalKnownCov", "NormalInverseWishart", "NormalGamma", "NormalLogNormal",
           "DirichletMultinomial", "BetaBernoulli", "CoupledGaussian", "GeneralizedMallows"]
