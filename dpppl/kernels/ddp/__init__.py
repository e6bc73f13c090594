"""Kernels of dependent DP mixtures over time (Porteous et al. 2006, sec. 5)."""
