"""Data sets: bundled real data, synthetic generators, file readers and ballots."""

from dpppl.datasets.bundled import (available, gaussian_mixture, load, mallows_mixture, minneapolis_ballots,
                                    moving_blobs, read_data, read_rankings)

__all__ = ["available", "gaussian_mixture", "load", "moving_blobs", "read_data", "mallows_mixture",
           "minneapolis_ballots", "read_rankings"]
