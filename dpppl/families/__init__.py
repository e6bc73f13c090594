"""Conjugate component families (see :mod:`dpppl.families.base` for the interface)."""

from .base import Family
from .niw import NormalInverseWishart

__all__ = ["Family", "NormalInverseWishart"]
