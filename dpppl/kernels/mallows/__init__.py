"""Samplers of DP mixtures of Generalized Mallows models (Meila & Chen 2010)."""
