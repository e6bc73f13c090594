"""The model language: spec dataclasses, parser, and compilation to NumPyro."""

from dpppl.dsl.parser import load, parse
from dpppl.models.mixture import BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture
from dpppl.models.mixture import PseudoParticleMixture, StickBreakingMixture

__all__ = ["BoundModel", "DataDecl", "DPMixture", "Model", "PitmanYorMixture", "load", "parse",
           "PseudoParticleMixture", "StickBreakingMixture"]
