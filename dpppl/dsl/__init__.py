"""The model language: the parser of model files (the grammar and the hyperparameter
expressions live in `dpppl.core.expressions`; the models it builds in `dpppl.models`)."""

from dpppl.dsl.parser import as_model, load, parse

__all__ = ["as_model", "load", "parse"]
