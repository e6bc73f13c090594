"""The Monte Carlo error of the NumPy reference sampler of Escobar & West's full model
(`galaxies_escobar_west.py`): 8 independent chains of 3,000 sweeps (seeds 100 to 107, a fifth
dropped from each), each chain's E[K] and P(K = 3), and their mean with its standard error (the
spread of the chain means over sqrt(8)). docs/hyperpriors.md quotes it beside dpppl's run.

Run from the repository root: `PYTHONPATH=benchmarks python benchmarks/galaxies_escobar_west_seeds.py`
(about 4 minutes on an idle 2-core machine). Nothing here asserts.
"""

import numpy as np

import dpppl
import galaxies_escobar_west as reference_sampler

x = np.asarray(dpppl.datasets.load("galaxies", scale=True)[0], float).ravel()
chains = []
for seed in range(100, 108):
    draws = reference_sampler.reference(x, 3000, seed)
    chains.append((float(draws[:, 0].mean()), float((draws[:, 0] == 3).mean())))
    print(f"seed {seed}: E[K] {chains[-1][0]:.3f}, P(K = 3) {chains[-1][1]:.4f}", flush=True)
table = np.array(chains)
se = table.std(axis=0, ddof=1) / np.sqrt(len(table))
print(f"E[K] {table[:, 0].mean():.3f} +- {se[0]:.3f}; P(K = 3) {table[:, 1].mean():.4f} +- {se[1]:.4f}")
