"""Exchangeable partition priors and the Gamma prior on a concentration.

The Pitman-Yor process PY(d, alpha) with discount 0 <= d < 1 and strength alpha > -d
induces the exchangeable partition probability function (Pitman 2006, eq. 3.6)

    p(C) = prod_{j=1}^{K-1} (alpha + j d) / (alpha + 1)_{N-1} * prod_{c in C} (1 - d)_{|c| - 1},

with (a)_m the rising factorial. With d = 0 this is the Chinese restaurant process of a
Dirichlet process DP(alpha): p(C) = alpha^K Gamma(alpha) / Gamma(alpha + N)
prod_c Gamma(|c|). Sequentially, point N+1 joins cluster c with weight |c| - d and a new
cluster with weight alpha + K d; these are the weights of collapsed Gibbs (Neal 2000,
algorithm 3).

The discount may be random (`d ~ Beta(1, 1)` and `z ~ PitmanYor(alpha, d)` in a model file): the
model's prior then holds the name of d (`PitmanYor(discount="d")`, `random_discount`), and a bound
model holds the prior resolved at a value of d (`at_discount`: its median when chains start, the
state's value inside a move), whose `discount` may be a traced scalar. At a traced discount the
EPPF's factor prod_{j=1}^{K-1} (alpha + j d) is summed term by term over the slots (`_log_new_terms`)
rather than written with gammaln(alpha / d + K), whose difference loses every digit as d -> 0.

The priors and `Gamma` are JAX pytrees (`dpppl.core.pytrees.register_attributes`) whose leaves are
the concentration's numbers (a float alpha, or the Gamma prior's float shape and rate): a bound
model carries its prior as an argument of the compiled programs, so a run at another alpha compiles
nothing. A fixed discount is static (structure): the CRP's formulas and some kernels' (perm's count
factor) branch on it being zero.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from dpppl.core.expressions import check_hyper, count_limit, float_limits
from dpppl.core.numerics import sample_index
from dpppl.core.pytrees import register_attributes
from dpppl.core.state import canonical_labels
from dpppl.errors import ModelError


@register_attributes
@dataclasses.dataclass(frozen=True)
class Gamma:
    """Gamma(shape, rate) prior on a concentration parameter; makes it resampled."""

    shape: float = 1.0
    rate: float = 1.0

    def __post_init__(self):
        for name in ("shape", "rate"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 0):
                raise ModelError(f"Gamma: {name} must be a positive number, got {v!r}")

    def log_prob(self, value):
        return (self.shape * jnp.log(self.rate) - gammaln(self.shape)
                + (self.shape - 1) * jnp.log(value) - self.rate * value)

    def log_prob_of_log(self, u):
        """The log density of u = log alpha (the Jacobian alpha included), finite where
        alpha = exp(u) underflows to 0: shape log(rate) - log Gamma(shape) + shape u - rate e^u."""
        return self.shape * jnp.log(self.rate) - gammaln(self.shape) + self.shape * u - self.rate * jnp.exp(u)

    @property
    def mean(self) -> float:
        return self.shape / self.rate

    def check_hyperparameters(self) -> None:
        """Raise [`HyperparameterError`][dpppl.errors.HyperparameterError] unless shape is a
        count (`check_hyper`: shape + K - 1 is the alpha move's shape) and rate positive, both
        normal numbers of the run's float dtype, and the prior mean shape / rate (the chains'
        initial alpha) is itself a valid concentration."""
        check_hyper("Gamma", "shape", self.shape, count=True)
        check_hyper("Gamma", "rate", self.rate, positive=True, at_least=(
            self.shape / count_limit(), "below it the prior mean shape / rate of alpha, the chains' initial alpha, "
            "is past the count limit"), at_most=(
            self.shape / float_limits().tiny, "above it shape / rate, the chains' initial alpha, is not a normal "
            "number"))


Concentration = Union[float, Gamma]


@register_attributes
@dataclasses.dataclass(frozen=True)
class PitmanYor:
    """Pitman-Yor partition prior PY(discount, alpha).

    Parameters
    ----------
    discount : float in [0, 1), or str, default 0
        A number, or the name of a random hyperparameter whose prior lies in [0, 1) (the model's
        `hyperpriors` hold it; the discount move, `dpppl.kernels.discount`, resamples it).
    alpha : float > -discount, or [`Gamma`][dpppl.priors.crp.Gamma] (then resampled), default 1
        A number must be positive when the discount is random (alpha > -d for every d in [0, 1)).
    """

    discount: float = 0.0
    alpha: Concentration = 1.0

    name = "PitmanYor"
    #: structure, not a leaf (`dpppl.core.pytrees.register_attributes`): a zero discount selects the
    #: Dirichlet process's formulas, and kernels branch on its value (perm's count factor)
    static_attributes = ("discount",)
    labelled = False
    """Exchangeable: the law of a partition does not depend on how its clusters are numbered."""

    def __post_init__(self):
        d = self.discount
        if isinstance(d, str):
            if not d.isidentifier():
                raise ModelError(f"{self.name}: a random discount is the name of a random hyperparameter, got {d!r}")
            a = self.alpha
            if not isinstance(a, Gamma) and not (isinstance(a, (int, float)) and not isinstance(a, bool) and a > 0):
                raise ModelError(f"{self.name}: alpha must be positive or Gamma(shape, rate) when the discount is "
                                 f"random ('{d}': alpha > -discount for every discount in [0, 1)), got {a!r}")
            return
        if not (isinstance(d, (int, float)) and 0 <= d < 1):
            raise ModelError(f"{self.name}: discount must be in [0, 1), got {d!r}")
        a = self.alpha
        if isinstance(a, Gamma):
            return
        if not isinstance(a, (int, float)) or isinstance(a, bool):
            raise ModelError(f"{self.name}: alpha must be a number or Gamma(shape, rate), got {a!r}")
        if not a > -d or (d == 0 and a <= 0):
            raise ModelError(f"{self.name}: alpha must be > -discount (and > 0 when discount is 0), got {a!r}")

    @property
    def alpha_is_random(self) -> bool:
        return isinstance(self.alpha, Gamma)

    @property
    def random_discount(self) -> str | None:
        """The name of the random discount (module docstring), None for a fixed one."""
        return self.__dict__.get("_discount_name", self.discount if isinstance(self.discount, str) else None)

    def at_discount(self, value) -> "PitmanYor":
        """This prior with its random discount at `value` (a number or a traced scalar), keeping
        `random_discount`; not validated again (`value` may be traced)."""
        name = self.random_discount
        out = copy.copy(self)
        object.__setattr__(out, "discount", value)
        object.__setattr__(out, "_discount_name", name)
        return out

    @property
    def initial_alpha(self) -> float:
        """alpha when chains start: the Gamma prior's mean, or the fixed value (a traced scalar
        inside a compiled program, where the prior's numbers are leaves)."""
        if self.alpha_is_random:
            return self.alpha.mean
        return float(self.alpha) if isinstance(self.alpha, (int, float)) else self.alpha

    def check_hyperparameters(self, n: int) -> None:
        """Raise [`HyperparameterError`][dpppl.errors.HyperparameterError] when a hyperparameter
        makes the EPPF of n points degenerate in the run's float dtype (`check_hyper`): a
        discount 0 < d below the smallest normal number (log d is -inf), alpha + d not normal
        (log(alpha + K d) of the first new cluster), alpha or alpha / d past the count limit
        (gammaln(alpha + N) - gammaln(alpha + 1) and gammaln(alpha / d + K) lose the counts);
        a Gamma prior is checked by [`Gamma.check_hyperparameters`][dpppl.priors.crp.Gamma.check_hyperparameters]."""
        d = self.discount
        if self.random_discount is not None:  # alpha > 0 (`__post_init__`) and d's prior in [0, 1) (the parser)
            if self.alpha_is_random:
                self.alpha.check_hyperparameters()
            return
        if d > 0:
            check_hyper(self.name, "discount", d, positive=True)
        if self.alpha_is_random:
            self.alpha.check_hyperparameters()
            return
        check_hyper(self.name, "alpha", self.alpha, count=d == 0, at_least=(
            float_limits().tiny - d, "alpha + discount, the weight of the first new cluster, must be a normal number"),
            at_most=(count_limit(), "above it alpha + 1 == alpha, and gammaln(alpha + N) - gammaln(alpha + 1) "
                     "loses the counts"))
        if d > 0:
            check_hyper(self.name, "discount", d, at_least=(
                abs(self.alpha) / count_limit(), "below it alpha / discount, a count in gammaln(alpha / discount + K), "
                "is so large that adding a cluster no longer changes it"))

    def log_eppf(self, counts, alpha):
        """log p(partition) from cluster sizes `counts` (zeros are empty slots)."""
        occupied = counts > 0
        K = jnp.sum(occupied)
        N = jnp.sum(counts)
        return (self._log_new_terms(K, alpha, counts.shape[-1]) + self._log_size_terms(counts)
                - (gammaln(alpha + N) - gammaln(alpha + 1)))

    def _log_new_terms(self, k, alpha, slots: int):
        """log prod_{j=1}^{K-1} (alpha + j d) for K = `k` clusters: (K - 1) log alpha for a DP;
        (K - 1) log d + gammaln(alpha / d + K) - gammaln(alpha / d + 1) for a fixed d > 0; at a traced
        discount (a random one) the sum of log(alpha + j d) over j < K <= `slots` (module docstring)."""
        d = self.discount
        if isinstance(d, (int, float)) and d == 0:
            return (k - 1) * jnp.log(alpha)
        if isinstance(d, (int, float)):
            return (k - 1) * jnp.log(d) + gammaln(alpha / d + k) - gammaln(alpha / d + 1)
        j = jnp.arange(1, slots + 1, dtype=jnp.result_type(d, float))
        terms = jnp.log(jnp.asarray(alpha)[..., None] + j * jnp.asarray(d)[..., None])
        return jnp.sum(jnp.where(j < jnp.asarray(k)[..., None], terms, 0.0), axis=-1)

    def _log_size_terms(self, counts):
        """sum over occupied slots of log (1 - d)_{n_c - 1} = gammaln(n_c - d) - gammaln(1 - d)."""
        d = self.discount
        occupied = counts > 0
        return jnp.sum(jnp.where(occupied, gammaln(jnp.where(occupied, counts, 1.0) - d) - gammaln(1.0 - d), 0.0))

    def log_eppf_change(self, old_rows, new_rows, counts, alpha):
        """log_eppf(new) - log_eppf(old) for a move that changes only some slots' sizes,
        `old_rows` (R,) to `new_rows` (R,), and keeps the number of points: `counts` holds the
        old sizes of every slot (their number of clusters K). The normaliser
        (alpha + 1)_{N-1} cancels and only the changed slots' size terms and the change of K
        enter: O(R) special functions instead of O(slots) twice (split-merge's prior ratio)."""
        k_old = jnp.sum(counts > 0)
        k_new = k_old + jnp.sum(new_rows > 0) - jnp.sum(old_rows > 0)
        d = self.discount
        if isinstance(d, (int, float)) and d == 0:
            new_terms = (k_new - k_old) * jnp.log(alpha)
        elif isinstance(d, (int, float)):
            new_terms = (k_new - k_old) * jnp.log(d) + gammaln(alpha / d + k_new) - gammaln(alpha / d + k_old)
        else:
            slots = counts.shape[-1]
            new_terms = self._log_new_terms(k_new, alpha, slots) - self._log_new_terms(k_old, alpha, slots)
        return new_terms + self._log_size_terms(new_rows) - self._log_size_terms(old_rows)

    def log_seat_weights(self, counts, alpha):
        """Sequential (Gibbs) weights: log(|c| - d) for occupied slots (-inf for empty
        ones) and log(alpha + K d) for opening a new cluster."""
        occupied = counts > 0
        existing = jnp.where(occupied, jnp.log(jnp.where(occupied, counts, 1.0) - self.discount), -jnp.inf)
        new = jnp.log(alpha + self.discount * jnp.sum(occupied))
        return existing, new

    def log_prior_alpha(self, alpha):
        return self.alpha.log_prob(alpha) if self.alpha_is_random else jnp.zeros(())

    @property
    def moves(self) -> tuple[str, ...]:
        """The alpha move (Escobar & West 1995) when alpha has a Gamma prior, then the discount move
        (`dpppl.kernels.discount`) when the discount is random."""
        return ("alpha",) * self.alpha_is_random + ("discount",) * (self.random_discount is not None)

    def canonical(self, labels) -> np.ndarray:
        """Any integer labels renumbered 0..K-1 by first appearance (the partition is what matters)."""
        return canonical_labels(labels)

    def draw_labels(self, key, n: int, capacity: int, alpha):
        """n labels drawn by sequential seating (weights |c| - d and alpha + K d), each new
        cluster at the first empty slot, so labels come in order of first appearance;
        `capacity` >= n + 1 never runs out."""
        alpha = jnp.asarray(alpha)
        uniforms = jax.random.uniform(key, (n,), dtype=alpha.dtype)

        def seat(counts, u):
            log_existing, log_new = self.log_seat_weights(counts, alpha)
            first_empty = jnp.argmax(counts < 0.5)
            k = sample_index(log_existing.at[first_empty].set(log_new), u)
            return counts.at[k].add(1.0), k

        _, z = jax.lax.scan(seat, jnp.zeros((capacity,), alpha.dtype), uniforms)
        return z.astype(jnp.int32)

    def max_slots(self, n: int) -> int:
        """n + 1: new clusters take the first empty slot, so n points never need more."""
        return n + 1

    def min_slots(self, n: int) -> int:
        return 1

    def describe(self) -> str:
        return f"PitmanYor(discount={self.discount}, alpha={self.alpha})"


@register_attributes
@dataclasses.dataclass(frozen=True)
class CRP(PitmanYor):
    """Chinese restaurant process: the partition of a Dirichlet process DP(alpha)."""

    discount: float = dataclasses.field(default=0.0, init=False)
    alpha: Concentration = 1.0

    name = "CRP"

    def describe(self) -> str:
        return f"CRP(alpha={self.alpha})"

