"""Compile a dependent DP mixture to a NumPyro model: K sticks per time slice, labels summed out.

The model of Porteous et al. (2006, sec. 5) is

    P(X, Z, V, theta) = P(theta) prod_t P(X_t | Z_t, theta_t) P(Z_t | V_t) P(V_t)

over the slices t = 1..T, with P(X_t | Z_t, theta_t), P(Z_t | V_t) and P(V_t) those of
eqs. (8a)-(8c) in every slice and P(theta) the coupled prior of eq. (12) (the family
[`CoupledGaussian`][dpppl.families.coupled.CoupledGaussian]). Truncated at K sticks per slice
(Ishwaran & James 2001), as `dpppl.models.compile` truncates a single mixture:

    V_{t,k} ~ Beta(a_k, b_k) independently, k = 1..K-1 (eq. 8c; the same (a_k, b_k) in
        every slice, sec. 5), and V_{t,K} = 1,
    w_{t,k} = V_{t,k} prod_{j<k} (1 - V_{t,j})                               (sec. 3.1),
    vec(mu_k) ~ N(m, Gamma (x) I_D), Gamma from eq. (12) over the slice times, k = 1..K,
    Sigma_{k,s} ~ IW(psi0, nu0), s = 1..T (per slice) or s = 1 (shared),
    p(x_n | V, theta) = sum_k w_{t_n,k} N(x_n; mu_{k,t_n}, Sigma_{k,s(t_n)})    (eqs. 8a-8b,
        z_n summed out),

so the labels k are the sticks' indices, as in the states of the `ddp` kernels (label k
there is stick k + 1 here, 0-based). With the same hyperparameters this is the joint
density those kernels sample, except that the weight of every stick past K is put on
stick K; a finite prior of L sticks (b_L = 0) is compiled with K = min(K, L) and is then
exact. The deterministic site `assignment` holds each point's most probable label
(`dpppl.models.compile.observe_mixture`), which is how `kernel="nuts"` reports a
labelled assignment per draw; `lp` of such a draw is the log joint the `ddp` kernels
record (`DDPBound.lp_of_draw`).

Sites: `v` (T, K - 1), `weights` (T, K), `theta_mu` (K, T, D), `theta_cov` (K, S, D, D),
the data (N, D) under the name the model declares, `assignment` (N,).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.errors import DataError
from dpppl.models.compile import (FamilyMixture, carried_binding, observe_mixture, prior_family, sample_weights,
                                  truncated)


def slices_of(times: np.ndarray, t) -> np.ndarray:
    """The slice index (N,) of each time in `t` among the distinct slice `times` (T,) of a
    resolved family; DataError for a time that is not one of them."""
    if isinstance(t, jax.core.Tracer):
        raise DataError("the times t of a compiled DDP model must be concrete (they choose the slices), "
                        "not traced")
    t = np.asarray(t, dtype=float)
    if t.ndim != 1:
        raise DataError(f"times t must be 1-D (one time per point), got shape {t.shape}")
    index = np.clip(np.searchsorted(times, t), 0, len(times) - 1)
    unknown = times[index] != t
    if unknown.any():
        raise DataError(f"time {t[np.argmax(unknown)]:g} (point {int(np.argmax(unknown))}) is not one of the "
                        f"model's {len(times)} slice times ({', '.join(f'{v:g}' for v in times[:8])}"
                        f"{', ...' if len(times) > 8 else ''}): the coupling Gamma of eq. (12) is over those")
    return index.astype(np.int32)


def compile_ddp(model, truncation: int, family=None, t=None, slices=None):
    """A NumPyro model `f(x=None, t=None, *, dim=None)` for the DDP `model` with `truncation`
    sticks per slice.

    `family` is a resolved [`CoupledGaussian`][dpppl.families.coupled.CoupledGaussian] in the frame
    of the data the model is called with, and `t` the times of the points it simulates when
    called without any. When `family` is None the model is bound to the `(x, t)` it is
    called with (both concrete) and uses that binding's hyperparameters and slices, in the
    data's frame. `f(x, t)` conditions on points `x` (N, D) at times `t` (N,); `f(None, t)`
    draws N points at those times from the prior (times must be slice times of `family`).
    Unbound, `f(None, t)` follows the rule of `dpppl.models.compile.prior_family`: the data
    the model file carries (and their times when `t` is not given), else numeric
    hyperparameters with the distinct times of `t` as the slices and `dim` (or the declared
    dimension) as D. `slices` (N,), with `family`: the slice index of each point, already
    checked (a bound model's, `DDPBound.slices`; traced in a compiled program); the model then
    reads no times.
    """
    prior = model.prior
    truncation = truncated(truncation, prior)
    default_t, fixed_slices = t, slices

    def ddp_mixture(x=None, t=None, *, dim=None):
        t = default_t if t is None else t
        fam = family
        if fam is None and x is None:
            carried = carried_binding(model)
            if carried is not None:
                fam, t = carried.data_family, carried.t if t is None else t
            elif t is None:
                raise DataError("give the times t of the points to simulate (one per point)")
            else:
                fam = prior_family(model, dim, times=np.unique(np.asarray(t, dtype=float)))
        elif fam is None:
            if t is None or isinstance(x, jax.core.Tracer):
                raise DataError("this model's hyperparameters and slices depend on the data: call it with "
                                "the points x and their times t, or call "
                                "model.bind((x, t)).numpyro_model(truncation) first")
            fam = model.bind((np.asarray(x), np.asarray(t))).data_family
        elif t is None and fixed_slices is None:
            raise DataError("give the times t of the points (one per point)")
        slices = slices_of(fam.times, t) if fixed_slices is None else fixed_slices
        if x is not None:
            x = jnp.asarray(x)
            if x.shape[0] != slices.shape[0]:
                raise DataError(f"x has {x.shape[0]} points but t has {slices.shape[0]} times")
        w = sample_weights(prior, truncation, batch=(fam.num_slices,))
        mixture = FamilyMixture(w[slices], fam.numpyro_sample_params(truncation), fam.at_slices(slices))
        observe_mixture(model.data.name, mixture, x, slices.shape[0])

    ddp_mixture.truncation = truncation
    return ddp_mixture


__all__ = ["compile_ddp", "slices_of"]
