"""The permutation-augmented sampler (Liang, Jordan & Taskar 2007)."""
