"""The model language: spec dataclasses, parser, and compilation to NumPyro."""

from .parser import load, parse
from .spec import BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture
from .spec import PseudoParticleMixture, StickBreakingMixture

__all__ = ["BoundModel", "DataDecl", "DPMixture", "Model", "PitmanYorMixture", "load", "parse",
           "PseudoParticleMixture", "StickBreakingMixture"]
