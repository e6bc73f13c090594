"""Super-clusters of the sub-cluster sampler: J divergences and Algorithm 1."""

import itertools

import numpy as np

from tests.helpers.cases import CASES


def test_j_divergences_match_their_definitions():
    """J(p, q) = KL(p || q) + KL(q || p), against direct numpy formulas."""
    from dpppl.kernels.subcluster.superclusters import gaussian_j_divergence, j_divergence

    rng = np.random.default_rng(1)
    dim = 3
    loc = rng.normal(size=(4, dim))
    covs = [a @ a.T + np.eye(dim) for a in rng.normal(size=(4, dim, dim))]
    white = np.stack([np.linalg.inv(np.linalg.cholesky(c)) for c in covs])

    def kl(m0, c0, m1, c1):
        inv1 = np.linalg.inv(c1)
        d = m1 - m0
        return 0.5 * (np.trace(inv1 @ c0) + d @ inv1 @ d - dim + np.log(np.linalg.det(c1) / np.linalg.det(c0)))

    expected = np.array([[kl(loc[k], covs[k], loc[m], covs[m]) + kl(loc[m], covs[m], loc[k], covs[k])
                          for m in range(4)] for k in range(4)])
    np.testing.assert_allclose(gaussian_j_divergence(loc, white), expected, rtol=1e-9, atol=1e-9)
    sd = rng.uniform(0.5, 2.0, size=(4, dim))
    diag = np.array([[kl(loc[k], np.diag(sd[k] ** 2), loc[m], np.diag(sd[m] ** 2))
                      + kl(loc[m], np.diag(sd[m] ** 2), loc[k], np.diag(sd[k] ** 2)) for m in range(4)]
                     for k in range(4)])
    np.testing.assert_allclose(gaussian_j_divergence(loc, 1.0 / sd), diag, rtol=1e-9, atol=1e-9)
    probs = rng.dirichlet(np.ones(5), size=4)
    family = CASES["dirichlet_multinomial_separated"].model.bind(CASES["dirichlet_multinomial_separated"].x).family
    categorical = np.array([[np.sum(p * np.log(p / q)) + np.sum(q * np.log(q / p)) for q in probs] for p in probs])
    np.testing.assert_allclose(j_divergence(family, {"probs": probs}), categorical, rtol=1e-9, atol=1e-12)


def test_super_clusters_follow_algorithm_1():
    """Groups are connected components of the drawn neighbour graph: never across clusters
    with infinite divergence, labelled by their smallest slot, and two clusters alone at
    divergence 0 are grouped unless both draw themselves: probability 3/4."""
    import jax

    from dpppl.kernels.subcluster.superclusters import sample_super_clusters

    blocks = np.array([0, 0, 1, 1, 1, 2, 2, 3])  # slot 7 is empty
    divergence = np.where(blocks[:, None] == blocks[None], 0.0, np.inf)
    occupied = np.arange(8) < 7
    draws = np.asarray(jax.vmap(lambda k: sample_super_clusters(k, divergence, occupied))(
        jax.random.split(jax.random.key(0), 4000)))
    assert np.all(blocks[draws] == blocks)  # within blocks only
    assert np.all(draws <= np.arange(8)) and np.all(np.take_along_axis(draws, draws, 1) == draws)
    together = np.mean(draws[:, 0] == draws[:, 1])
    assert abs(together - 0.75) < 4 * np.sqrt(0.75 * 0.25 / len(draws))
    # three clusters at divergence 0 (slots 2, 3, 4): one group as often as the enumeration
    # of their 27 neighbour draws says
    one_group = np.mean([len(set(_components(3, [(0, a), (1, b), (2, c)]))) == 1
                         for a, b, c in itertools.product(range(3), repeat=3)])
    together = np.mean((draws[:, 2] == draws[:, 3]) & (draws[:, 3] == draws[:, 4]))
    assert abs(together - one_group) < 4 * np.sqrt(one_group * (1 - one_group) / len(draws))


def _components(size, edges):
    """Root of every node of an undirected graph (union-find), for the test above."""
    parent = list(range(size))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for a, b in edges:
        parent[find(a)] = find(b)
    return [find(a) for a in range(size)]

