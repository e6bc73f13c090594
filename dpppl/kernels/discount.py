"""The move of a random Pitman-Yor discount: a slice sampler on its conditional given the partition.

A model file may give the discount of a Pitman-Yor prior a prior on [0, 1) (`d ~ Beta(1, 3)` or
`d ~ Uniform(0, 0.5)`, then `z ~ PitmanYor(alpha, d)`). The discount enters the collapsed joint
only through the partition's EPPF (Pitman 2006, eq. 3.6; `PitmanYor.log_eppf`), so given the
partition C with K clusters of sizes n_c and the concentration alpha

    p(d | C, alpha)  ∝  p(d) prod_{j=1}^{K-1} (alpha + j d) prod_{c in C} (1 - d)_{n_c - 1}

(the normaliser (alpha + 1)_{N-1} is free of d). One step is one slice-sampling update
(`dpppl.kernels.hyperparameters.slice_update`: Neal 2003, stepping out with the random split of the
step budget, then shrinkage) of u = logit((d - low) / (high - low)), the unconstrained value of d's
prior (`Hyperprior.to_unconstrained`), with the log density log p(T(u)) + log |T'(u)| + log EPPF(C |
alpha, T(u)) and an initial width of 1. It is exact: it leaves p(C, alpha, d, h | x) invariant.

The move is appended after the alpha move (`PitmanYor.moves`), so alpha's update conditions on the
state's d (`dpppl.kernels.alpha`: the slice update on log alpha, since Escobar & West's auxiliary
draw is for a DP only), and then d's conditions on the new alpha. The partition kernels run at the
state's d (`BoundModel.at_hyperparameters`); the hyperparameter move records d in `posterior`
under its name.
"""

from __future__ import annotations

from dpppl.kernels.base import Kernel, NoInfo, register_prior_move
from dpppl.kernels.hyperparameters import slice_update


def build_discount_kernel(bound_model) -> Kernel:
    """The discount move (module docstring), appended to every kernel of a model whose Pitman-Yor
    discount is random."""
    name = bound_model.model.prior.random_discount
    prior = bound_model.model.hyperpriors[name]

    def step(rng_key, state, x):
        eppf = bound_model.prior.at_discount

        def log_density(u):
            return prior.log_prob_unconstrained(u) + eppf(prior.to_value(u)).log_eppf(state.stats.n, state.alpha)

        current = state.hyper[name]
        u = slice_update(rng_key, prior.to_unconstrained(current), log_density, 1.0)
        return state._replace(hyper={**state.hyper, name: prior.to_value(u).astype(current.dtype)}), NoInfo()

    return Kernel("discount", exact=True, step=step, masked_points=True)


register_prior_move("discount", build_discount_kernel)

__all__ = ["build_discount_kernel"]
