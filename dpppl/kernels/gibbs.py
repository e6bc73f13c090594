"""Collapsed Gibbs sampling of cluster labels (Neal 2000, algorithm 3).

With the component parameters integrated out, each label is drawn from its full
conditional given all other labels (the CRP/Pitman-Yor seating weights times the
posterior predictive of the point under each cluster; Liang et al. 2007, sec. 2;
Porteous et al. 2006, eq. 9 in the stick-breaking form):

    p(z_i = c | z_-i, x) ∝ (|c|_-i - d) p(x_i | x_{c, -i})      for an existing cluster c,
    p(z_i = new | z_-i, x) ∝ (alpha + K_-i d) p(x_i)               for a new cluster.

One sweep visits every point once, in a fresh random order. The cluster statistics
are updated incrementally as a point leaves and joins a cluster, and the predictive
quantities (e.g. the Student-t precision of NIW) are recomputed for those two clusters
only: a sweep costs O(N C D^2) for C slots. The same pass without removals, over an
empty partition, is the *sequential prediction* initialiser of Liang et al. (2007,
sec. 5.1): points are seated one by one by the CRP weights times the predictive.
"""

from __future__ import annotations


from dpppl.kernels.base import Kernel, NoInfo, exchangeable_prior_only, register
from dpppl.models.native_seating import use_native
from dpppl.models.seating import seat_points, sweep_draws


def build_gibbs_kernel(bound_model, *, native: bool | None = None) -> Kernel:
    """One collapsed-Gibbs sweep over all points, in a random order, per step.

    `native`: run the sweep as one native call on CPU (`dpppl.models.native_seating`;
    NormalInverseWishart and NormalKnownCov under CRP/Pitman-Yor): True requires it, False runs
    the JAX loop, None (default) follows `DPPPL_NATIVE` (default: native where covered and
    built). Both make the same draws up to floating-point rounding.
    """
    family, prior = bound_model.family, bound_model.prior

    def step(rng_key, state, x):
        shuffle, uniforms = sweep_draws(rng_key, x)
        return seat_points(family, prior, x, shuffle, uniforms, state, remove_first=True, native=native,
                           num_valid=bound_model.num_valid), NoInfo()

    return Kernel("gibbs", exact=True, step=step, masked_points=True,
                  light_compile=use_native(family, prior, native))  # the sweep one native call (Kernel)


register("gibbs", build_gibbs_kernel, exact=True, applies=exchangeable_prior_only,
         description="collapsed Gibbs, one label at a time (Neal 2000, alg. 3); O(N K D^2) per sweep")
