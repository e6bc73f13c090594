"""Random partitions shared by the metrics and partition tests."""


import matplotlib

matplotlib.use("Agg")




def _random_partitions(rng, s, n, k):
    return rng.integers(0, k, size=(s, n))

