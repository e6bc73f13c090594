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

Escobar & West's (1995) conjugate route (`hyper_move="conjugate"`; the default is `"slice"`, which
gave more effective draws per second of m and itau on the galaxies, docs/hyperpriors.md) replaces the
slice update of a hyperparameter whose conditional given the clusters' parameters is closed-form
(`Family.conjugate_hyperparameters`): a location `mu0 = m` with m ~ Normal(m0, s0^2), and, for the
Normal-Inverse-Wishart family, `kappa0 = t` and `psi0 = s` with t, s ~ Gamma(a, b) (shape, rate). The
field must be the bare name, and the name used by no other hyperparameter. Given the partition C, one update

1. draws every occupied cluster's parameters from their posterior given its points at the current
   hyperparameters (`Family.posterior_draw`): for the Normal-Inverse-Wishart family
   Sigma_c ~ IW(psi_n, nu_n), mu_c | Sigma_c ~ N(mu_n, Sigma_c / kappa_n);
2. draws each conjugate hyperparameter in turn from its conditional given those parameters (and the
   other hyperparameters' current values). With P_c the precision of mu_c's prior about mu0
   (`Family.mean_precision`: kappa0 Sigma_c^-1, or diag(1 / tau2) for `NormalKnownCov`), K the
   number of occupied clusters, D the dimension and 1 the vector of ones (a scalar m is the same
   value in every entry of mu0):

       p(m | mu, Sigma)  ∝  N(m; m0, s0^2) prod_c N(mu_c; m 1, P_c^-1)
                         =  N(m; M / S, 1 / S),
       S = 1 / s0^2 + sum_c 1^T P_c 1,    M = m0 / s0^2 + sum_c 1^T P_c mu_c;

       p(t | mu, Sigma)  ∝  t^(a-1) e^(-b t) prod_c t^(D/2) exp(-t (mu_c - mu0)^T Sigma_c^-1 (mu_c - mu0) / 2)
                         =  Gamma(t; a + K D / 2, b + sum_c (mu_c - mu0)^T Sigma_c^-1 (mu_c - mu0) / 2),

   the Inverse-Wishart factor of Sigma_c being free of m and t. A scale `psi0 = s` (the matrix s I)
   with s ~ Gamma(a, b) enters only that factor, IW(Sigma_c; s I, nu0) ∝ s^(D nu0 / 2)
   exp(-s tr(Sigma_c^-1) / 2), so

       p(s | Sigma)  =  Gamma(s; a + K D nu0 / 2, b + sum_c tr(Sigma_c^-1) / 2)

   (the one-dimensional case of the Wishart update of a scale matrix). A vector location of bare names,
   `mu0 = [m1, ..., mD]` with m_j ~ Normal(a_j, b_j^2) each used once, is drawn jointly at its first
   entry's turn, with B = diag(b_j^2):

       p(m | mu, Sigma)  ∝  N(m; a, B) prod_c N(mu_c; m, P_c^-1)  =  N(m; S^-1 M, S^-1),
       S = B^-1 + sum_c P_c,    M = B^-1 a + sum_c P_c mu_c;
3. discards the parameters: the state keeps the partition's sufficient statistics only.

Steps 1 and 2 are Gibbs updates of p(C, theta, h | x) with C fixed, so the pair leaves its marginal
p(C, h | x) invariant: the route is exact, as the slice update is. The hyperparameters without a
closed form (a random `psi0`, a non-Normal prior on a location) keep the slice update, run after the
conjugate ones.

Both are exact (they leave p(C, alpha, h | x) invariant); the move is appended by
[`dpppl.kernels.base.build`][dpppl.kernels.base.build] after the partition moves, which run at
the state's hyperparameters (`at_state_hyperparameters`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.core.expressions import Name, Vector
from dpppl.errors import ArgumentError
from dpppl.families.base import cluster_log_marginals
from dpppl.families.gaussian import gamma_draw
from dpppl.kernels.base import Kernel, NoInfo, own_keys, register_prior_move

MAX_STEPS = 32
"""Neal's m: the most steps the interval is stepped out by, both sides together."""
MAX_SHRINKS = 200
"""The most shrinkage proposals of one update (module docstring)."""
HYPER_MOVES = ("conjugate", "slice")
"""The values of the option `hyper_move`: Escobar & West's route where it applies, else the slice
update (`"conjugate"`); the slice update for every hyperparameter (`"slice"`, the default)."""


_LEVEL, _STEP_LO, _STEP_HI, _SHRINK, _DONE = range(5)
"""The phases of `slice_update`'s loop: the level at u0, stepping out to the left, to the right,
shrinkage, done."""


class _SliceLoop(NamedTuple):
    """The carry of `slice_update`'s loop: its phase, the interval [lo, hi] and the steps left to
    each side, the slice's level, the value so far (u0 until a proposal is accepted) and the
    shrinkage proposals made."""

    phase: jax.Array
    lo: jax.Array
    hi: jax.Array
    budget_lo: jax.Array
    budget_hi: jax.Array
    level: jax.Array
    u: jax.Array
    shrinks: jax.Array


def slice_update(rng_key, u0, log_density, width, max_steps: int = MAX_STEPS, max_shrinks: int = MAX_SHRINKS,
                 stream=0):
    """One slice-sampling update of a scalar `u0` with log density `log_density(u)` (unnormalised):
    stepping out with the random split of `max_steps` between the sides, then shrinkage (module
    docstring). Traceable; returns the new u.

    The whole update is one `while_loop` whose body evaluates `log_density` once, at the point its
    phase asks for (`_SliceLoop`): u0 for the level, the left end while stepping out to the left,
    the right end, then each shrinkage proposal. The compiled step then holds one copy of the log
    density (for a random hyperparameter, every cluster's marginal likelihood) instead of four, and
    one random draw: each round draws four uniforms from
    `fold_in(rng_key, stream * (max_shrinks + 1) + shrinks)` (`shrinks`: the shrinkage proposals made
    so far), one threefry expansion in the compiled step; updates with other `stream`s (traceable)
    of the same key draw other numbers, so a loop of updates needs no key per update. The first round's give the
    level, the interval's place and the split of the stepping-out cap; the fourth uniform of the
    draw with index r places shrinkage proposal r. Each number used is a distinct uniform, so the
    update is the one done phase by phase with independent uniforms."""
    dtype = jnp.result_type(u0)
    u0 = jnp.asarray(u0, dtype)
    level = jnp.zeros((), jax.eval_shape(log_density, u0).dtype)  # traced for its dtype only, not in the program
    zero = jnp.int32(0)
    start = _SliceLoop(phase=jnp.int32(_LEVEL), lo=u0, hi=u0, budget_lo=zero, budget_hi=zero, level=level, u=u0,
                       shrinks=zero)

    def body(c: _SliceLoop) -> _SliceLoop:
        draw = random.fold_in(rng_key, stream * (max_shrinks + 1) + c.shrinks)
        u_level, u_place, u_split, u_shrink = random.uniform(draw, (4,), dtype=dtype)
        first = c.phase == _LEVEL
        lo = jnp.where(first, u0 - width * u_place, c.lo)
        hi = jnp.where(first, lo + width, c.hi)
        j = jnp.floor(max_steps * u_split).astype(jnp.int32)
        budget_lo = jnp.where(first, j, c.budget_lo)
        budget_hi = jnp.where(first, max_steps - 1 - j, c.budget_hi)
        proposal = jnp.maximum(c.lo, c.lo + (c.hi - c.lo) * u_shrink)
        point = jnp.select([first, c.phase == _STEP_LO, c.phase == _STEP_HI], [u0, c.lo, c.hi], proposal)
        value = log_density(point)
        level = jnp.where(first, value + jnp.log(jnp.maximum(u_level, jnp.finfo(dtype).tiny)), c.level)
        inside = value >= level
        out_lo = (c.phase == _STEP_LO) & inside & (budget_lo > 0)
        out_hi = (c.phase == _STEP_HI) & inside & (budget_hi > 0)
        shrinking = c.phase == _SHRINK
        rejected = shrinking & ~inside
        phase = jnp.where(first, _STEP_LO, c.phase)
        phase = jnp.where((c.phase == _STEP_LO) & ~out_lo, _STEP_HI, phase)
        phase = jnp.where((c.phase == _STEP_HI) & ~out_hi, _SHRINK if max_shrinks > 0 else _DONE, phase)
        shrinks = c.shrinks + shrinking
        phase = jnp.where(shrinking & (inside | (shrinks >= max_shrinks)), _DONE, phase)
        return _SliceLoop(
            phase=phase.astype(jnp.int32),
            lo=jnp.where(out_lo, lo - width, jnp.where(rejected & (proposal < u0), proposal, lo)),
            hi=jnp.where(out_hi, hi + width, jnp.where(rejected & (proposal >= u0), proposal, hi)),
            budget_lo=budget_lo - out_lo, budget_hi=budget_hi - out_hi,
            level=level, u=jnp.where(shrinking & inside, proposal, c.u), shrinks=shrinks)

    return jax.lax.while_loop(lambda c: c.phase != _DONE, body, start).u


def collapsed_log_likelihood(bound_model, state, values: dict):
    """sum_c log m_h(x_c) over the occupied slots of `state` with the family at the random
    hyperparameters `values` (`BoundModel.at_hyperparameters`)."""
    family = bound_model.at_hyperparameters(values).family
    counts = state.stats.n
    return jnp.sum(jnp.where(counts > 0, cluster_log_marginals(family, state.stats), 0.0))


def conjugate_fields(model) -> dict[str, str]:
    """The random hyperparameters of `model` that Escobar & West's route updates, each with the field
    it is: those written as the bare name in a field of `Family.conjugate_hyperparameters`, with the
    prior that field names, and used in no other field (module docstring); and the entries of a vector
    location of bare names (`mu0 = [m1, m2]`), each with that field's prior and used once, which the
    route draws jointly."""
    fields = model.random_fields()
    conjugate = model.component.conjugate_hyperparameters

    def once(name):
        prior = model.hyperpriors.get(name)
        return (prior is not None and conjugate.get(field) == prior.distribution
                and sum(name in other.names() for other in fields.values()) == 1)

    out = {}
    for field, expr in fields.items():
        if isinstance(expr, Name) and once(expr.name):
            out[expr.name] = field
        names = [item.name for item in expr.items if isinstance(item, Name)] if isinstance(expr, Vector) else []
        if (field in model.component.locations and names and len(names) == len(expr.items) == len(set(names))
                and all(map(once, names))):
            out.update(dict.fromkeys(names, field))
    return out


def conjugate_update(rng_key, bound_model, state, hyper: dict, fields: dict) -> dict:
    """The hyperparameters `hyper` with those of `fields` (`conjugate_fields`) redrawn by Escobar &
    West's route (module docstring): the occupied clusters' parameters drawn given their points,
    then each hyperparameter from its Normal or Gamma conditional given them, in turn (the entries of
    a vector location jointly, `_vector_location`)."""
    k_params, *keys = random.split(rng_key, 1 + len(fields))
    params = bound_model.at_hyperparameters(hyper).family.posterior_draw(k_params, state.stats)
    mu = params["mu"]
    occupied = state.stats.n > 0
    dim = mu.shape[-1]
    shift = 0.0 if bound_model.shift is None else jnp.asarray(bound_model.shift, mu.dtype)
    hyper = dict(hyper)
    expressions = bound_model.model.random_fields()
    for key, (name, field) in zip(keys, fields.items()):
        family = bound_model.at_hyperparameters(hyper).family
        precision = jnp.where(occupied[:, None, None], family.mean_precision(params), 0.0)
        a, b = bound_model.model.hyperpriors[name].params
        current = hyper[name]
        if isinstance(expressions[field], Vector):  # mu0 = [m1, ..., mD]: all entries at the first one's turn
            if name == expressions[field].items[0].name:
                drawn = _vector_location(key, bound_model, expressions[field], precision, mu + shift)
                hyper.update({n: jnp.asarray(v, hyper[n].dtype) for n, v in drawn.items()})
            continue
        if field == "mu0":  # m ~ Normal(a, b^2); the means in the data's frame (mu0 = m 1 there)
            row_sums = jnp.sum(precision, axis=-1)  # P_c 1 (P_c symmetric)
            total = 1.0 / b**2 + jnp.sum(row_sums)
            weighted = a / b**2 + jnp.sum(row_sums * (mu + shift))
            value = weighted / total + random.normal(key, (), mu.dtype) / jnp.sqrt(total)
        elif field == "kappa0":  # kappa0 = t ~ Gamma(a, b): P_c / t = Sigma_c^-1
            deviation = mu - family.mu0
            quadratic = jnp.einsum("ci,cij,cj->", deviation, precision, deviation) / current
            shape = a + 0.5 * dim * jnp.sum(occupied)
            value = gamma_draw(key, shape, (), mu.dtype) / (b + 0.5 * quadratic)
        else:  # psi0 = s ~ Gamma(a, b), the scale s I of Sigma_c ~ IW(s I, nu0): P_c / kappa0 = Sigma_c^-1
            trace = jnp.sum(jnp.trace(precision, axis1=-2, axis2=-1)) / family.kappa0
            shape = a + 0.5 * dim * family.nu0 * jnp.sum(occupied)
            value = gamma_draw(key, shape, (), mu.dtype) / (b + 0.5 * trace)
        hyper[name] = jnp.asarray(value, current.dtype)
    return hyper


def _vector_location(key, bound_model, expr: Vector, precision, mu) -> dict:
    """The entries m_j of a vector location `mu0 = [m1, ..., mD]` with independent priors
    m_j ~ Normal(a_j, b_j^2), drawn jointly from their conditional given the clusters' means `mu`
    (in the data's frame) with precisions `precision` P_c (zero for empty slots; module docstring):
    N(S^-1 M, S^-1), S = diag(1 / b^2) + sum_c P_c, M = a / b^2 + sum_c P_c mu_c."""
    a, b = (jnp.asarray([bound_model.model.hyperpriors[item.name].params[i] for item in expr.items], mu.dtype)
            for i in (0, 1))
    total = jnp.diag(1.0 / b**2) + jnp.sum(precision, axis=0)
    weighted = a / b**2 + jnp.einsum("cij,cj->i", precision, mu)
    lower = jnp.linalg.cholesky(total)  # S = L L^T: S^-1 M + L^-T z has covariance S^-1
    mean = jax.scipy.linalg.cho_solve((lower, True), weighted)
    noise = jax.scipy.linalg.solve_triangular(lower.T, random.normal(key, mean.shape, mu.dtype), lower=False)
    return {item.name: (mean + noise)[j] for j, item in enumerate(expr.items)}


def build_hyperparameter_kernel(bound_model, *, hyper_move: str = "slice") -> Kernel:
    """The move of the random hyperparameters (module docstring), appended to every kernel of a
    model with some (`BoundModel.moves`); it records each one in `posterior` under its name (a random
    Pitman-Yor discount too, which `dpppl.kernels.discount` moves).
    `hyper_move` (a kernel option of `dpppl.sample`, `HYPER_MOVES`): `"conjugate"` updates the
    hyperparameters of `conjugate_fields` by Escobar & West's route and the others by the slice
    update, `"slice"` all of them by the slice update."""
    if hyper_move not in HYPER_MOVES:
        raise ArgumentError(f"option hyper_move (the move of the random hyperparameters) must be one of "
                            f"{', '.join(map(repr, HYPER_MOVES))}, got {hyper_move!r}")
    fields = conjugate_fields(bound_model.model) if hyper_move == "conjugate" else {}
    discount = bound_model.model.prior.random_discount  # the discount move's (kernels.discount)
    priors = {name: prior for name, prior in bound_model.model.hyperpriors.items()
              if name not in fields and name != discount}

    def step(rng_key, state, x):
        hyper = dict(state.hyper)
        if fields:
            rng_key, k_conjugate = own_keys(rng_key, 2)
            hyper = conjugate_update(k_conjugate, bound_model, state, hyper, fields)
        if priors:  # hyperparameter h draws the stream h of rng_key (`slice_update`)
            hyper = jax.lax.fori_loop(0, len(priors), lambda h, hyper: one_slice_update(rng_key, h, state, hyper),
                                      hyper)
        return state._replace(hyper=hyper), NoInfo()

    names, hyperpriors = list(priors), list(priors.values())
    widths = [prior.width for prior in hyperpriors]

    def one_slice_update(key, h, state, hyper: dict) -> dict:
        """The slice update of the `h`-th hyperparameter of `priors` (h traced): one loop over the
        hyperparameters, so the compiled step holds one copy of the slice update and of every
        cluster's marginal likelihood, not one per hyperparameter; each one's prior and transform
        are picked by `lax.switch`. The same arithmetic, in the same order, as updating them one
        after another."""
        def pick(fns, u):
            return jax.lax.switch(h, fns, u) if len(fns) > 1 else fns[0](u)

        def at(h_value):  # `hyper` with the h-th hyperparameter at h_value
            return {name: jnp.where(h == i, h_value, hyper[name]).astype(hyper[name].dtype)
                    for i, name in enumerate(names)}

        to_value = [prior.to_value for prior in hyperpriors]

        def log_density(u):
            return (pick([prior.log_prob_unconstrained for prior in hyperpriors], u)
                    + collapsed_log_likelihood(bound_model, state, {**hyper, **at(pick(to_value, u))}))

        current = jnp.stack([hyper[name] for name in names])[h]
        u0 = pick([prior.to_unconstrained for prior in hyperpriors], current)
        width = jnp.asarray(widths, u0.dtype)[h] if len(widths) > 1 else widths[0]
        return {**hyper, **at(pick(to_value, slice_update(key, u0, log_density, width, stream=h)))}

    return Kernel("hyperparameters", exact=True, step=step, masked_points=True, keys_per_step=2 if fields else 1,
                  light_compile=True,
                  record=lambda state: dict(state.hyper),
                  record_dims={name: [] for name in bound_model.model.hyperpriors})


register_prior_move("hyperparameters", build_hyperparameter_kernel, options=("hyper_move",))

__all__ = ["HYPER_MOVES", "MAX_SHRINKS", "MAX_STEPS", "build_hyperparameter_kernel", "collapsed_log_likelihood",
           "conjugate_fields", "conjugate_update", "slice_update"]
