"""The version of dpppl, in one place (read by the package metadata too)."""

__version__ = "0.1.0"
