"""Gibbs sampling of the dependent DP mixture over time (Porteous et al. 2006, sec. 5).

The state instantiates the parameters of every *used* label i (one with a point in any
slice): its means mu_{i,t} in every slice and its covariance Sigma_i, or one
Sigma_{i,t} per slice ([`CoupledGaussian`][dpppl.families.coupled.CoupledGaussian]; below Sigma_i
stands for the covariance of the point's slice); the sticks are integrated out
(`dpppl.priors.ddp`). One step of kernel `ddp` is

1. **assignments** (eq. 10): every point n, in slice t, in a fresh random order, is
   drawn from

       P(z_n = i | rest) ∝ E[pi_{t,i} | Z_{t,-n}] N(x_n; mu_{i,t}, Sigma_i)   for used labels i,

   and the unused labels (the empty ones below the largest label and all those above:
   the paper's lumping) together get E-weight W_new = sum_{i unused} E[pi_{t,i} | Z_{t,-n}]
   shared by m auxiliary parameter sets theta*_1..m (Neal 2000, algorithm 8), each with
   weight W_new / m times N(x_n; mu*_{k,t}, Sigma*_k): theta*_1 is the point's own
   label's parameters when no other point uses that label, the others fresh draws from
   the prior. If an auxiliary k is chosen, the label is drawn among the unused labels
   with probability proportional to E[pi_{t,i} | Z_{t,-n}] and takes theta*_k (all its T
   means and its covariance). This is a Gibbs step on the model augmented with the
   auxiliaries (whose conditional is exactly what is drawn), so it is exact, with no
   Monte Carlo estimate of the non-conjugate predictive integral of the paper's
   footnote 5. The unused labels' parameters are prior draws
   independent of everything, and are not part of the state. Eq. (10) needs of an
   auxiliary only its mean and covariance in the point's slice: mu*_{k,t} ~ N(m,
   Gamma_tt I) and Sigma*_k ~ IW are drawn for all points at once (the precision
   directly, [`draw_prior_cov`][dpppl.families.coupled.CoupledGaussian.draw_prior_cov]), and the
   chosen auxiliary's other means from their conditional given mu*_{k,t}
   ([`means_given_slice`][dpppl.families.coupled.CoupledGaussian.means_given_slice]), with per-slice
   covariances its other slices' covariances independent IW draws: the same prior
   draw, made lazily. The log-likelihoods log N(x_n; mu_{i,t_n}, Sigma_i) of all points
   and labels are computed once per sweep and a label's row is recomputed when it takes
   new parameters.
2. **parameters** (eq. 11): for every used label, Sigma_i | mu_i, x (inverse Wishart),
   then mu_i | Sigma_i, x (a T D-dimensional Gaussian coupling the slices through Gamma).

A sweep costs O(N C D^2 + N m D^3) for the assignments (C label slots, m auxiliaries;
O(N D^2) more per new label) and
O(C (T D)^3) for the means. Labels beyond the capacity have weight too (the remaining
stick): when one is drawn the state sets `overflow` and the driver grows the capacity
and re-runs the chunk from the same keys (draws do not depend on the capacity).
"""

from __future__ import annotations

import numbers

import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.models.ddp import DDPModel
from dpppl.errors import KernelError
from dpppl.kernels.base import Kernel, NoInfo, register
from dpppl.models.native_seating import DDP_SOURCE, use_native_sticks
from dpppl.models.ddp_state import DEFAULT_NUM_AUX, seat, update_parameters, with_statistics


def build_ddp_kernel(bound_model, *, num_aux: int = DEFAULT_NUM_AUX, record_atoms: bool = True,
                     native: bool | None = None) -> Kernel:
    """One sweep over the assignments (eq. 10) then the parameters (eq. 11) per step.

    Parameters
    ----------
    num_aux : int, default 10
        m, the auxiliary parameter sets of Neal's algorithm 8 that carry the unused
        labels' weight (any m >= 1 is exact). The prior of the means is broad compared
        with a cluster, so one prior draw rarely lands near a point; m draws make a new
        cluster about m times as likely to be opened where the data call for it, for
        O(m D^3) more work per point.
    record_atoms : bool, default True
        Record every label slot's atoms per kept draw, in the data's frame: `atom_mu` (slot,
        slice, dim), the means, and `atom_cov` (slot, cov_slice, row, col), the covariances
        (cov_slice T per slice or 1 shared; NaN in unused slots), in `posterior_partition`:
        chains x draws x slots x T x (D + S D^2 / T) numbers, what the run's posterior predictive
        and pointwise log likelihood read (docs/ddp.md).
    native : bool or None, default None
        Run the assignment sweep as one native call on CPU
        ([`native_ddp_seat`][dpppl.models.native_seating.native_ddp_seat]; the same draws up to
        rounding, and no XLA loop to compile): True requires it, False runs the JAX loop, None
        follows `DPPPL_NATIVE` (default: native where it builds).
    """
    if isinstance(num_aux, bool) or not isinstance(num_aux, numbers.Integral) or num_aux < 1:
        raise KernelError(f"ddp: num_aux must be an integer >= 1, got {num_aux!r}")
    family, prior = bound_model.family, bound_model.prior
    shift = jnp.asarray(bound_model.shift)
    run_native = use_native_sticks(requested=native, source=DDP_SOURCE)

    def record(state):
        used = state.stats.n > 0.5
        return {"atom_mu": jnp.where(used[:, None, None], state.stats.mu + shift, jnp.nan),
                "atom_cov": jnp.where(used[:, None, None, None], state.stats.sigma, jnp.nan)}

    def step(rng_key, state, x):
        # converted in the step: building the kernel on the host (the memory check) runs nothing
        slices = jnp.asarray(bound_model.slices)
        k_seat, k_params = random.split(rng_key)
        state = seat(family, prior, x, slices, k_seat, state, remove_first=True, num_aux=num_aux,
                     num_valid=bound_model.num_valid, native=run_native)
        state = with_statistics(state, x, slices)
        return update_parameters(family, k_params, state, native=run_native), NoInfo()

    # with the sweep one native call, what XLA runs is small array code: the light compile options (Kernel)
    if not record_atoms:
        return Kernel("ddp", exact=True, step=step, masked_points=True, light_compile=run_native)
    return Kernel("ddp", exact=True, step=step, masked_points=True, record=record, light_compile=run_native,
                  record_dims={"atom_mu": ["slot", "slice", "dim"], "atom_cov": ["slot", "cov_slice", "row", "col"]})


def applies_to_ddp(model):
    """`applies` of the DDP kernels: None for a DDP model, else why not."""
    if isinstance(model, DDPModel):
        return None
    return "it samples dependent DP mixtures over time (dpppl.DDPMixture, 'z ~ DDP(...)' with 'by t' data)"


register("ddp", build_ddp_kernel, exact=True, applies=applies_to_ddp,
         description="DDP Gibbs over labels (eq. 10, new labels via Neal's alg. 8 auxiliary) and "
                     "time-coupled parameters (eq. 11); O(N C D^2 + N m D^3 + C (T D)^3) per sweep")
