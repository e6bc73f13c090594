"""Diagnostics: conversion to ArviZ and label-invariant summaries."""

from dpppl.diagnostics.arviz_compat import to_arviz

__all__ = ["to_arviz"]
