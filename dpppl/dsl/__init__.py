"""The model language: spec dataclasses, parser, and compilation to NumPyro."""

from .spec import BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture

__all__ = ["BoundModel", "DataDecl", "DPMixture", "Model", "PitmanYorMixture"]
