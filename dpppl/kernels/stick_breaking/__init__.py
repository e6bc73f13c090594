"""Kernels of stick-breaking priors on explicit labels (Porteous et al. 2006, sec. 3)."""
