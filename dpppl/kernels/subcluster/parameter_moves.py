"""MCMC updates of instantiated, non-conjugate cluster parameters given the partition.

A kernel that instantiates parameters (`kernel="subcluster"`) draws each cluster's
parameters from p(theta_k | x_k) when the prior is conjugate (Chang & Fisher 2013, eq. 8).
With a non-conjugate prior (for example [`NormalLogNormal`][dpppl.families.NormalLogNormal]) it
instead moves them by a Markov kernel that leaves

    p(u_k | x_k)  ∝  p(u_k) prod_{i in k} f(x_i | u_k)

invariant for every row k at once, u the family's unconstrained parameter vector. The
rows are independent given the partition, and the family evaluates a cluster's whole
likelihood from its statistics (`log_likelihood_of_stats`), so an update costs O(K P)
and no pass over the points. The scale of every move comes from the family's data-driven
proposal q(u | x_k) (`family.proposal`, a function of the statistics only, never of
the current u, so using it as a mass matrix or proposal scale keeps the moves valid).

Methods (`param_update`):

- `"mh"` (default): `param_steps` Metropolis-Hastings steps per row, alternating an
  independence proposal u' ~ q(u | x_k), accepted with probability
  min(1, p(u' | x_k) q(u | x_k) / (p(u | x_k) q(u' | x_k))), and a Gaussian random walk
  u' = u + (2.38 / sqrt(P)) s_q eps with s_q the proposal's scale (Roberts, Gelman & Gilks
  1997). A user `proposal(rng_key, u, stats) -> (u', log_q_ratio)` replaces both; it
  receives every row at once and returns log q(u | u') - log q(u' | u) per row (zero for
  a symmetric proposal).
- `"nuts"`: NumPyro's NUTS (`numpyro.infer.hmc.hmc`, the functional kernel that
  `HMCGibbs` runs for its HMC sites), one chain per row (vectorised), `param_steps`
  transitions, with a diagonal inverse mass matrix s_q^2 and a fixed `nuts_step_size`
  (the mass matrix makes each row's target roughly standard normal in every coordinate;
  one joint NUTS over all rows would need a step size shrinking with their number). Each
  update starts with one independence step from q: a row started far in a tail, where the
  fixed step size diverges at every transition, would otherwise never move.
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.errors import KernelError

PARAM_UPDATES = ("mh", "nuts")


def build_parameter_update(family, *, method: str = "mh", steps: int = 10, proposal: Optional[Callable] = None,
                           nuts_step_size: float = 0.7, nuts_max_tree_depth: int = 6):
    """`update(rng_key, u, stats) -> (u', acceptance)`: the method above applied to every
    row of `u` (R, P) with the statistics `stats` (R rows); `acceptance` is the mean
    acceptance probability over rows and steps."""
    if method not in PARAM_UPDATES:
        raise KernelError(f"param_update must be one of {PARAM_UPDATES}, got {method!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise KernelError(f"param_steps must be an integer >= 1, got {steps!r}")
    if proposal is not None and not callable(proposal):
        raise KernelError(f"proposal must be a callable (rng_key, u, stats) -> (u_new, log_q_ratio), got {proposal!r}")
    if proposal is not None and method != "mh":
        raise KernelError("a user proposal is used by param_update='mh'; NUTS has no proposal to replace")
    if not nuts_step_size > 0:
        raise KernelError(f"nuts_step_size must be > 0, got {nuts_step_size!r}")

    def log_target(u, stats):
        return family.log_prior(u) + family.log_likelihood_of_stats(u, stats)

    walk_scale = 2.38 / jnp.sqrt(family.num_unconstrained)

    def mh_steps(rng_key, u, stats, num_steps, kind):
        """`num_steps` MH steps on every row; `kind(t)` True: independence proposal from
        q, False: random walk (ignored with a user proposal). Returns (u, mean acceptance)."""
        loc, scale = family.proposal(stats)

        def one_step(t, carry):
            u, current, total = carry
            k_prop, k_acc = random.split(random.fold_in(rng_key, t))
            if proposal is not None:
                u_new, log_q_ratio = proposal(k_prop, u, stats)
            else:
                eps = random.normal(k_prop, u.shape, u.dtype)
                independent = kind(t)
                u_new = jnp.where(independent, loc + scale * eps, u + walk_scale * scale * eps)
                z_old = (u - loc) / scale
                # log q(u) - log q(u') of the independence proposal; 0 for the random walk
                log_q_ratio = jnp.where(independent, 0.5 * jnp.sum(eps * eps - z_old * z_old, axis=-1), 0.0)
            proposed = log_target(u_new, stats)
            log_ratio = proposed - current + log_q_ratio
            accept = jnp.log(random.uniform(k_acc, log_ratio.shape, log_ratio.dtype)) < log_ratio
            u = jnp.where(accept[..., None], u_new, u)
            current = jnp.where(accept, proposed, current)
            return u, current, total + jnp.mean(jnp.exp(jnp.minimum(log_ratio, 0.0)))

        u, _, total = jax.lax.fori_loop(0, num_steps, one_step, (u, log_target(u, stats), 0.0))
        return u, total / num_steps

    def independence_step(rng_key, u, stats):
        return mh_steps(rng_key, u, stats, 1, lambda t: True)

    def update(rng_key, u, stats):
        return mh_steps(rng_key, u, stats, steps, lambda t: t % 2 == 0)

    if method == "mh":
        return update

    from numpyro.infer.hmc import hmc

    init_kernel, sample_kernel = hmc(potential_fn_gen=lambda stats: lambda u: -log_target(u, stats), algo="NUTS")

    def update_row(rng_key, u, stats):
        _, scale = family.proposal(stats)
        hmc_state = init_kernel(u, 0, step_size=nuts_step_size, inverse_mass_matrix=scale * scale,
                                adapt_step_size=False, adapt_mass_matrix=False, max_tree_depth=nuts_max_tree_depth,
                                model_args=(stats,), rng_key=rng_key)

        def transition(_, carry):
            hmc_state, total = carry
            hmc_state = sample_kernel(hmc_state, model_args=(stats,))
            return hmc_state, total + hmc_state.accept_prob

        hmc_state, total = jax.lax.fori_loop(0, steps, transition, (hmc_state, 0.0))
        return hmc_state.z, total / steps

    def update(rng_key, u, stats):
        k_independent, k_nuts = random.split(rng_key)
        u, _ = independence_step(k_independent, u, stats)
        u, acceptance = jax.vmap(update_row)(random.split(k_nuts, u.shape[0]), u, stats)
        return u, jnp.mean(acceptance)

    return update
