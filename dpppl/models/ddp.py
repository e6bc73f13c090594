"""Dependent Dirichlet-process mixtures over time slices (Porteous et al. 2006, sec. 5).

A [`DDPModel`][dpppl.models.ddp.DDPModel] couples T stick-breaking mixtures, one per time slice, through
the cluster parameters: label i has a mean in every slice, the means of one label
drawn jointly from a Gaussian over time (eq. 12), and an inverse-Wishart covariance
per slice (eq. 11; or one shared by the slices,
[`CoupledGaussian`][dpppl.families.coupled.CoupledGaussian]); each slice has its own sticks with
the same Beta(a_i, b_i) ([`DDP`][dpppl.priors.ddp.DDP]). Build one with
[`DDPMixture`][dpppl.models.ddp.DDPMixture] or a model file::

    data x : real[N, 2] by t
    z ~ DDP(a = 1, b = 1)
    theta[k] ~ CoupledGaussian(a = 1, beta = 0.005, delta = 1)
    x[i] ~ Normal(theta[z[i]])

Data carry a time with every point. [`dpppl.sample`][dpppl.sample] accepts `(x, t)`, a dict
`{"x": x, "t": t}` (the declared names) or one array whose **last column** is the time
(what a CSV file with a time column gives on the command line). The slices are the
distinct times, in increasing order; Gamma uses the times themselves, so slices need not
be evenly spaced.

Kernels: `ddp` (Gibbs over assignments and parameters, `dpppl.kernels.ddp`) and
`ddpswap` (label swaps over time intervals, `dpppl.kernels.ddp.swap`), e.g.
`kernel="ddp+ddpswap"`, and `nuts` on the truncated model of `dpppl.models.ddp_compile`
(approximate); the collapsed kernels refuse DDP models.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core import numerics_random as random
from dpppl.core.pytrees import register_attributes
from dpppl.core.state import PartitionState
from dpppl.errors import DataError, KernelError, ModelError
from dpppl.families.base import translated
from dpppl.families.coupled import CoupledGaussian
from dpppl.models.ddp_compile import compile_ddp
from dpppl.models.ddp_state import (DEFAULT_NUM_AUX, DDPSlots, seat, slot_statistics, update_parameters,
                                    with_statistics)
from dpppl.models.native_seating import DDP_SOURCE, native_ddp_label_log_joints, use_native_sticks
from dpppl.models.mixture import DataDecl, Model, check_not_masked, data_shift, model_structure, validate_data
from dpppl.priors.ddp import DDP

DDP_KERNELS = ("ddp", "ddpswap", "nuts")
"""The kernels that sample a DDP model (`nuts` on its truncated form)."""

MAX_CAPACITY = 1 << 14
"""Most label slots a DDP state grows to (labels are not dense: see `DDPBound`)."""

_INIT_PARAMETER_SWEEPS = 3  # parameter updates after labels are given, before the first step


@dataclasses.dataclass(frozen=True)
class DDPModel(Model):
    """A dependent DP mixture over time slices; build with [`DDPMixture`][dpppl.models.ddp.DDPMixture] or a model
    file."""

    def __post_init__(self):
        if not isinstance(self.prior, DDP):
            raise ModelError(f"a DDP model needs a DDP partition prior, got {self.prior!r}")
        if not isinstance(self.component, CoupledGaussian):
            raise ModelError(
                f"a DDP model needs CoupledGaussian components (means coupled over time), got "
                f"{getattr(self.component, 'name', self.component)!r}", source=self.path,
                line=self.data.line, column=self.data.column, text=self.source)
        if not self.data.by:
            raise ModelError("a DDP model needs time-indexed data: declare them as "
                             "'data x : real[N, D] by t'", source=self.path, line=self.data.line,
                             column=self.data.column, text=self.source)
        if self.data.kind != "real":
            raise ModelError(f"a DDP model observes real data, but the data are declared {self.data.kind}",
                             source=self.path, line=self.data.line, column=self.data.column, text=self.source)

    def refuses_kernel(self, name: str) -> Optional[str]:
        """Why kernel `name` cannot sample this model (None for the DDP kernels)."""
        if name in DDP_KERNELS:
            return None
        return ("a DDP model instantiates time-coupled cluster parameters; sample it with "
                f"{', '.join(repr(k) for k in DDP_KERNELS)} (e.g. 'ddp+ddpswap')")

    def bind(self, data) -> "DDPBound":
        """Validate time-indexed data (see the module docstring); raises DataError."""
        x, t = split_time(data, self.data)
        arr = validate_data(x, dataclasses.replace(self.data, by=None), self.component)
        t = _check_times(t, arr.shape[0], self.data)
        times, slices = np.unique(t, return_inverse=True)
        with self.located():
            self.prior.check_hyperparameters(arr.shape[0])
            family = self.component.resolve(arr, times=times)
        shift = data_shift(family, arr)
        return DDPBound(self, arr - shift, translated(family, shift), t, slices.astype(np.int32), times, shift, arr)

    def numpyro_model(self, truncation: int = 20):
        """The model compiled to a NumPyro model function `f(x, t)` with `truncation` sticks
        per slice (labels summed out; `dpppl.models.ddp_compile`). Its hyperparameters and
        slices come from the `(x, t)` it is called with; to simulate data from the prior,
        use `model.bind((x, t)).numpyro_model(truncation)`."""
        return compile_ddp(self, truncation)

    def describe(self) -> str:
        return f"{self.prior.describe()} mixture over time ('{self.data.by}') of {self.component.name}"


def _parameter_sweeps(family, rng_key, state):
    """A few parameter updates (eq. 11) given the labels, to start a chain."""
    return jax.lax.fori_loop(0, _INIT_PARAMETER_SWEEPS, lambda s, st: update_parameters(
        family, random.fold_in(rng_key, s), st), state)


def split_time(data, decl: DataDecl):
    """(x, t) from a tuple `(x, t)`, a dict of the declared names, or one array (or list
    of rows) whose last column is t."""
    if isinstance(data, dict):
        missing = [k for k in (decl.name, decl.by) if k not in data]
        if missing:
            raise DataError(f"data dict is missing {', '.join(repr(k) for k in missing)}; expected keys "
                            f"{decl.name!r} (points) and {decl.by!r} (their times)")
        return data[decl.name], data[decl.by]
    if isinstance(data, tuple):
        if len(data) != 2:
            raise DataError(f"time-indexed data given as a tuple must be (x, {decl.by}), got {len(data)} items")
        return data
    check_not_masked(data, decl.name)
    if np.iscomplexobj(data):
        raise DataError(f"time-indexed data '{decl.name}' are complex; the models take real data")
    try:
        arr = np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"time-indexed data '{decl.name}' must be (x, {decl.by}), a dict or one numeric "
                        f"array whose last column is '{decl.by}'") from None
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise DataError(f"time-indexed data '{decl.name}' given as one array need at least two columns "
                        f"(the last is the time '{decl.by}'), got shape {arr.shape}")
    return arr[:, :-1], arr[:, -1]


def _check_times(t, n: int, decl: DataDecl) -> np.ndarray:
    name = decl.by
    check_not_masked(t, name)
    try:
        arr = np.asarray(t)
    except Exception as e:
        raise DataError(f"time '{name}' cannot be read as an array: {e}") from None
    if arr.dtype.kind == "c":
        raise DataError(f"time '{name}' is complex (dtype {arr.dtype}); times are real numbers")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise DataError(f"time '{name}' must be numeric (e.g. hours or slice numbers), got dtype {arr.dtype}")
    arr = np.asarray(arr, dtype=float)
    if arr.ndim != 1:
        raise DataError(f"time '{name}' must be 1-D (one time per point), got shape {arr.shape}")
    if arr.shape[0] != n:
        raise DataError(f"time '{name}' has {arr.shape[0]} entries but the data have {n} points")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(f"time '{name}' has a non-finite value ({arr[i]}) at point {i}")
    return arr


@register_attributes(static_keys={"model": model_structure})
@dataclasses.dataclass(frozen=True)
class DDPBound:
    """A DDP model with validated data: points `x` (N, D), their times `t` (N,), the
    distinct `times` (T,) and each point's slice index `slices` (N,).

    As in [`BoundModel`][dpppl.models.mixture.BoundModel], `x` and the family's `mu0` are
    translated by `shift`, the mean of the points as given (`observed_x`): the means'
    prior N(m, Gamma (x) I) and the likelihood depend on x, mu and m only through
    differences, so `lp` is that of the data as given.

    Labels are the sticks' indices (0-based here) and matter: a new cluster may take any
    unused label, so the largest label can exceed the number of points; the state's
    capacity grows to `MAX_CAPACITY`.

    Padded to a shape class (`padded`), the points past `num_valid` belong to no slice and no
    label: their label is -1, so they are in no statistics (`slot_statistics`), and no kernel
    visits them.
    """

    model: DDPModel
    x: np.ndarray
    family: CoupledGaussian
    t: np.ndarray
    slices: np.ndarray
    times: np.ndarray
    shift: np.ndarray
    observed_x: Optional[np.ndarray]
    #: with `padded`: the number of real points (an int32 array, a leaf), the first rows of `x`
    num_valid: Any = None

    @property
    def prior(self) -> DDP:
        return self.model.prior

    @property
    def points(self):
        """The number of real points: `num_points`, or `num_valid` (traced in a compiled
        program) when the points are padded to a shape class."""
        return self.num_points if self.num_valid is None else self.num_valid

    def padded(self, size: int) -> "DDPBound":
        """This target with its points padded to `size` rows and `num_valid` the real count
        (the contract of `BoundModel.padded`): zero rows of `x`, the time NaN (no time) and the
        slice index 0 (an index every per-point gather accepts; with the label -1 the padded
        points count in no slice). `times` and the slices of the real points are unchanged, and
        `observed_x` is left out (the data as given are the host's, not the program's)."""
        extra = size - self.num_points
        return dataclasses.replace(
            self, x=np.concatenate([self.x, np.zeros((extra,) + self.x.shape[1:], self.x.dtype)]),
            t=np.concatenate([self.t, np.full(extra, np.nan)]),
            slices=np.concatenate([self.slices, np.zeros(extra, self.slices.dtype)]),
            observed_x=None, num_valid=np.int32(self.num_points))

    @property
    def num_points(self) -> int:
        return int(self.x.shape[0])

    @property
    def moves(self) -> tuple[str, ...]:
        """None beside the prior's: a DDP has no random hyperparameters of the base measure."""
        return ()

    @property
    def num_slices(self) -> int:
        return int(self.times.shape[0])

    @property
    def data_family(self) -> CoupledGaussian:
        """The resolved family in the data's frame (`mu0` as resolved, up to rounding)."""
        return translated(self.family, -self.shift)

    def numpyro_model(self, truncation: int = 20):
        """The compiled NumPyro model `f(x=None, t=None)` (`dpppl.models.ddp_compile`) with
        this data's hyperparameters and slice times, in the data's frame: `f(observed_x, t)`
        conditions on the data, `f()` simulates points at the data's times `t`, `f(None, t2)`
        at other times `t2` among the slice times."""
        return compile_ddp(self.model, truncation, family=self.data_family, t=self.t)

    def nuts_model(self, truncation: int):
        """What `kernel="nuts"` runs: the compiled model in this target's frame (on `x`, with
        `family`, the points' slices its `slices`) and the arguments `(x,)` that condition it on
        the data."""
        return compile_ddp(self.model, truncation, family=self.family, slices=self.slices), (jnp.asarray(self.x),)

    def lp_of_draw(self, labels, draw: dict, capacity: int):
        """`lp` of a draw of the compiled model:
        [`log_joint_state`][dpppl.families.coupled.CoupledGaussian.log_joint_state] of the
        state with labels `labels` (its most probable labels) and the draw's
        parameters `theta_mu` (capacity, T, D) and `theta_cov` (capacity, S, D, D), the
        quantity the `ddp` kernels record (traceable)."""
        x, slices = jnp.asarray(self.x), jnp.asarray(self.slices)
        n, nt, s1, s2 = slot_statistics(x, slices, labels, capacity, self.num_slices)
        stats = DDPSlots(n, nt, s1, s2, draw["theta_mu"], draw["theta_cov"])
        return self.lp(PartitionState(labels, stats, jnp.zeros(()), jnp.zeros((), bool)))

    def translate(self, points: np.ndarray) -> np.ndarray:
        """Points of the data's frame (M, D) in the frame of `x`: `points - shift`."""
        return points - self.shift

    # ----- states ----------------------------------------------------------------------
    def empty_state(self, capacity: int) -> PartitionState:
        """No point assigned (label 0, -1 for padded points); zero statistics and parameters."""
        n, (T, D) = self.num_points, (self.num_slices, self.x.shape[1])
        zeros = jnp.zeros
        slots = DDPSlots(zeros(capacity), zeros((capacity, T)), zeros((capacity, T, D)), zeros((capacity, T, D, D)),
                         zeros((capacity, T, D)), zeros((capacity, self.family.num_covariances, D, D)))
        unassigned = jnp.where(jnp.arange(n) < self.points, 0, -1).astype(jnp.int32)
        return PartitionState(unassigned, slots, jnp.zeros(()), jnp.zeros((), bool))

    def state_from_labels(self, rng_key, labels, capacity: int) -> PartitionState:
        """A state with labels `labels` (in [0, capacity)): parameters start at the prior
        mean and covariance psi0 / nu0, then a few parameter draws (eq. 11) given the labels."""
        x, slices = jnp.asarray(self.x), jnp.asarray(self.slices)
        state = self.empty_state(capacity)
        n, nt, s1, s2 = slot_statistics(x, slices, jnp.asarray(labels, jnp.int32), capacity, self.num_slices)
        fam = self.family
        mu = jnp.broadcast_to(jnp.asarray(fam.mu0), state.stats.mu.shape)
        sigma = jnp.broadcast_to(jnp.asarray(fam.psi0) / fam.nu0, state.stats.sigma.shape)
        state = state._replace(z=jnp.asarray(labels, jnp.int32), stats=DDPSlots(n, nt, s1, s2, mu, sigma))
        return _parameter_sweeps(fam, rng_key, state)

    def seat(self, key, state: PartitionState) -> PartitionState:
        """Points seated one by one in a random order by eq. (10) (the DDP's sequential
        prediction); a label keeps the parameters of the auxiliary that opened it (prior draws,
        chosen by the likelihood of its first point) until the first step's parameter update
        (eq. 11): no parameter update here, which keeps this start program to the seating alone
        (issue 35: the updates were 45% of its instructions). The loop over the points is one native
        call where `DPPPL_NATIVE` allows it (`dpppl.models.native_seating.native_ddp_seat`)."""
        x, slices = jnp.asarray(self.x), jnp.asarray(self.slices)
        state = seat(self.family, self.prior, x, slices, key, state, remove_first=False, num_aux=DEFAULT_NUM_AUX,
                     num_valid=self.num_valid, native=self.native_seat)
        return with_statistics(state, x, slices)

    @property
    def native_seat(self) -> bool:
        """Whether `seat` runs its loop as one native call (`DPPPL_NATIVE` and the library built): its
        program is then small array code, compiled with the light options
        (`dpppl.core.compiled.LIGHT_OPTIONS`, `dpppl.models.init.sequential`)."""
        return use_native_sticks(source=DDP_SOURCE)

    def draw_labels(self, key, capacity: int):
        """Labels drawn from the sticks' prior independently in every slice (the same
        Beta(a_i, b_i) sticks in each, sec. 5)."""
        n = self.num_points
        draws = jax.vmap(lambda k: self.prior.draw_labels(k, n, capacity, jnp.zeros(())))(
            random.split(key, self.num_slices))
        return draws[jnp.asarray(self.slices), self._rank_in_slice]

    @property
    def _rank_in_slice(self) -> jax.Array:
        """Each point's index among the points of its slice (traceable: the slices may be traced)."""
        slices = jnp.asarray(self.slices)
        order = jnp.argsort(slices, stable=True)
        starts = jnp.searchsorted(slices[order], jnp.arange(self.num_slices))
        return jnp.zeros(self.num_points, jnp.int32).at[order].set(
            (jnp.arange(self.num_points) - starts[slices[order]]).astype(jnp.int32))

    def lp(self, state: PartitionState):
        """[`log_joint_state`][dpppl.families.coupled.CoupledGaussian.log_joint_state]: the parameters
        are instantiated, so this is log p(x, z, mu, Sigma) with the sticks integrated out. Its labels'
        terms are one native call when `native_seat` (the same value up to rounding)."""
        if not self.native_seat:
            return self.family.log_joint_state(self.prior, state)
        stats = state.stats
        return (jnp.sum(self.prior.log_prob_labels(stats.nt.T))
                + jnp.sum(native_ddp_label_log_joints(self.family, stats)))

    # ----- the target protocol (host) -----------------------------------------------
    def log_joint_of_labels(self, labels):
        raise KernelError("a DDP model has no collapsed log joint (its prior on the parameters is not "
                          "conjugate); sample it and read 'lp' (DDPBound.lp of a state)")

    def max_slots(self) -> int:
        """Labels are not dense (a new cluster may take any unused label): at most
        `MAX_CAPACITY` slots."""
        return min(self.prior.max_slots(self.num_points), MAX_CAPACITY)

    def min_slots(self) -> int:
        return min(self.prior.min_slots(self.num_points), MAX_CAPACITY)

    def observed(self) -> dict:
        """The points as given and their times."""
        return {self.model.data.name: self.observed_x, self.model.data.by: self.t}


def DDPMixture(sticks: Any = (1.0, 1.0), *, a: float = 1.0, beta: float = 0.005, delta: float = 1.0,
               b: Optional[float] = None, mu0: Any = None, nu0: Any = None, psi0: Any = None,
               slice_covariances: bool = True, data: Optional[DataDecl] = None, time: str = "t") -> DDPModel:
    """A dependent DP mixture over time slices (Porteous et al. 2006, sec. 5).

    Parameters
    ----------
    sticks : pair (a_i, b_i), [`DDP`][dpppl.DDP] or a stick-breaking prior with fields `a`
        and `b`; default (1, 1)
        The per-slice sticks V_{t,i} ~ Beta(a_i, b_i); each parameter in any form
        [`StickBreaking`][dpppl.StickBreaking] takes (a number, a finite sequence ending with
        b_L = 0, a vectorised callable or an expression of the 1-based stick index i).
        `(1, alpha)` is DP(alpha) in every slice.
    a : float, default 1.0
        The time covariance of a label's means is Gamma_{t,t'} = a exp(-beta |t - t'|^delta)
        off the diagonal and b on it (eq. 12); the defaults are the paper's storm settings
        for data in the unit square.
    beta : float, default 0.005
        The decay rate of that covariance over time.
    delta : float, default 1.0
        The exponent of the time distance in that covariance.
    b : float, optional
        The diagonal of that covariance (the variance of a label's mean in one slice);
        default a.
    mu0 : array (D,), default the data mean
    nu0 : float, default D + 1
    psi0 : array (D, D) or float, default 0.01 I
        The inverse-Wishart prior of each label's covariance.
    slice_covariances : bool, default True
        One covariance per label and slice, independent inverse-Wishart (the paper's
        eq. 11 and sec. 6); False: one per label shared by all slices.
    data : DataDecl, optional
        Default `x : real[N, D] by t`.
    time : str, default "t"
        The name of the time variable (the key of a data dict).

    Returns
    -------
    DDPModel
    """
    if isinstance(sticks, DDP):
        prior = sticks
    elif isinstance(sticks, tuple) and len(sticks) == 2:
        prior = DDP(a=sticks[0], b=sticks[1])
    elif hasattr(sticks, "a") and hasattr(sticks, "b"):
        prior = DDP(a=sticks.a, b=sticks.b)
    else:
        raise ModelError(f"sticks must be a pair (a, b) or a stick-breaking prior with fields a and b, "
                         f"got {sticks!r}")
    component = CoupledGaussian(a=a, beta=beta, delta=delta, b=b, mu0=mu0, nu0=nu0, psi0=psi0,
                                slice_covariances=slice_covariances)
    return DDPModel(prior=prior, component=component, data=data or DataDecl(by=time))


__all__ = ["DDPModel", "DDPBound", "DDPMixture", "DDP_KERNELS", "split_time"]
