"""Diagnostics: conversion to ArviZ and label-invariant summaries."""

from .arviz_compat import to_arviz

__all__ = ["to_arviz"]
