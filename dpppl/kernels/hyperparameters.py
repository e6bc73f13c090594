"""The move of the random hyperparameters of the base measure: a slice sampler on each one's collapsed conditional.

A model file may give a component hyperparameter a prior (`m ~ Normal(0, 1000)`, then
`mu0 = m`; `dpppl.priors.hyperpriors`). With the component parameters integrated out, a random
hyperparameter h enters the collapsed joint only through the marginal likelihood of each
cluster, so given the partition C (and the other hyperparameters)

    p(h | C, x)  ∝  p(h) prod_{c in C} m_h(x_c),

with m_h(x_c) the family's `log_marginal` of the cluster's sufficient statistics at h (the state
holds them; they do not depend on h). Each step updates every random hyperparameter in turn by one
slice-sampling update (Neal 2003, sec. 4) of u = T^-1(h), the value on the unconstrained scale
(the identity, log h or a logit: `Hyperprior.to_unconstrained`), whose log density is
log p(T(u)) + log |T'(u)| + sum_c log m_{T(u)}(x_c):

1. a level y = log f(u0) - e, e ~ Exponential(1) (drawn as log f(u0) + log U);
2. an interval of width w placed at random around u0, stepped out by w on each side while its end
   is inside the slice, with Neal's cap of m steps split at random between the sides (J =
   floor(m V) to the left, K = m - 1 - J to the right, V uniform) — the split that keeps the
   update reversible; a cap that bounds each side separately is not (it breaks detailed balance
   when the slice is wider than the cap, as under a vague prior);
3. shrinkage: draw u uniformly on the interval, accept it if it is inside the slice, else move the
   end on its side of u0 to it.

"Inside" is the same test, log f(u) >= y, in steps 2 and 3 (a value where f is not finite is
outside). Shrinkage stops after `MAX_SHRINKS` rejections, leaving u0, which takes an interval
shrunk by more than 2^-`MAX_SHRINKS` of its width: never in practice. w is the prior's scale for
a Normal prior, else 1 (`Hyperprior.width`).

The move is exact (it leaves p(C, alpha, h | x) invariant) and is appended by
[`dpppl.kernels.base.build`][dpppl.kernels.base.build] after the partition moves, which run at
the state's hyperparameters (`at_state_hyperparameters`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpppl.families.base import cluster_log_marginals
from dpppl.kernels.base import Kernel, NoInfo, register_prior_move

MAX_STEPS = 32
"""Neal's m: the most steps the interval is stepped out by, both sides together."""
MAX_SHRINKS = 200
"""The most shrinkage proposals of one update (module docstring)."""


def slice_update(rng_key, u0, log_density, width, max_steps: int = MAX_STEPS, max_shrinks: int = MAX_SHRINKS):
    """One slice-sampling update of a scalar `u0` with log density `log_density(u)` (unnormalised):
    stepping out with the random split of `max_steps` between the sides, then shrinkage (module
    docstring). Traceable; returns the new u."""
    k_level, k_place, k_split, k_shrink = jax.random.split(rng_key, 4)
    dtype = jnp.result_type(u0)
    level = log_density(u0) + jnp.log(jax.random.uniform(k_level, dtype=dtype, minval=jnp.finfo(dtype).tiny))

    def inside(u):
        return log_density(u) >= level

    left = u0 - width * jax.random.uniform(k_place, dtype=dtype)
    right = left + width
    j = jnp.floor(max_steps * jax.random.uniform(k_split, dtype=dtype)).astype(jnp.int32)
    k = max_steps - 1 - j

    def step_out(end, budget, direction):
        def cond(c):
            return (c[1] > 0) & inside(c[0])
        return jax.lax.while_loop(cond, lambda c: (c[0] + direction * width, c[1] - 1), (end, budget))[0]

    left, right = step_out(left, j, -1.0), step_out(right, k, 1.0)

    def cond(c):
        return ~c[3] & (c[5] < max_shrinks)

    def shrink(c):
        lo, hi, key, _, _, i = c
        key, sub = jax.random.split(key)
        u = jax.random.uniform(sub, dtype=dtype, minval=lo, maxval=hi)
        ok = inside(u)
        lo = jnp.where(~ok & (u < u0), u, lo)
        hi = jnp.where(~ok & (u >= u0), u, hi)
        return lo, hi, key, ok, u, i + 1

    _, _, _, ok, u, _ = jax.lax.while_loop(cond, shrink, (left, right, k_shrink, jnp.zeros((), bool), u0, 0))
    return jnp.where(ok, u, u0)


def collapsed_log_likelihood(bound_model, state, values: dict):
    """sum_c log m_h(x_c) over the occupied slots of `state` with the family at the random
    hyperparameters `values` (`BoundModel.at_hyperparameters`)."""
    family = bound_model.at_hyperparameters(values).family
    counts = state.stats.n
    return jnp.sum(jnp.where(counts > 0, cluster_log_marginals(family, state.stats), 0.0))


def build_hyperparameter_kernel(bound_model) -> Kernel:
    """The move of the random hyperparameters (module docstring), appended to every kernel of a
    model with some (`BoundModel.moves`); it records each one in `posterior` under its name."""
    priors = dict(bound_model.model.hyperpriors)

    def step(rng_key, state, x):
        hyper = dict(state.hyper)
        for key, (name, prior) in zip(jax.random.split(rng_key, len(priors)), priors.items()):
            def log_density(u, name=name, prior=prior):
                value = prior.to_value(u)
                return (prior.log_prob_unconstrained(u)
                        + collapsed_log_likelihood(bound_model, state, {**hyper, name: value}))
            current = hyper[name]
            u = slice_update(key, prior.to_unconstrained(current), log_density, prior.width)
            hyper[name] = prior.to_value(u).astype(current.dtype)
        return state._replace(hyper=hyper), NoInfo()

    return Kernel("hyperparameters", exact=True, step=step, masked_points=True,
                  record=lambda state: dict(state.hyper), record_dims={name: [] for name in priors})


register_prior_move("hyperparameters", build_hyperparameter_kernel)

__all__ = ["MAX_SHRINKS", "MAX_STEPS", "build_hyperparameter_kernel", "collapsed_log_likelihood", "slice_update"]
