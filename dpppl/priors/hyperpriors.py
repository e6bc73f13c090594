"""Priors of scalar random hyperparameters of the base measure (`m ~ Normal(0, 1000)` in a model file).

A [`Hyperprior`][dpppl.priors.hyperpriors.Hyperprior] is one of the scalar distributions of
`DISTRIBUTIONS`, with NumPyro's parametrisation (`Gamma(concentration, rate)` is shape and rate,
as a concentration's Gamma prior is; `InverseGamma(concentration, rate)`; `Beta(concentration1,
concentration0)`; `Uniform(low, high)`; `Normal(loc, scale)`, `LogNormal(loc, scale)`,
`HalfNormal(scale)`, `Exponential(rate)`). Its density is NumPyro's, and it names its support
(`"real"`, `"positive"` or `"interval"`) so the model language can refuse a prior whose support
does not fit the hyperparameter it is used in (a Normal prior on a variance).

The slice move of the random hyperparameters (`dpppl.kernels.hyperparameters`) works on the
unconstrained value u = T^-1(h): the identity on the real line, log h on the positive reals,
logit((h - low) / (high - low)) on an interval (NumPyro's `biject_to` of the support), with the
log Jacobian |dh/du| added to the log density (`log_prob_unconstrained`).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpyro.distributions as dist
from numpyro.distributions.transforms import biject_to
from scipy import special

from dpppl.errors import ModelError


@dataclasses.dataclass(frozen=True)
class _Kind:
    """A scalar distribution: NumPyro's class, its parameter names in NumPyro's order, the
    support, and which parameters must be positive."""

    numpyro: type
    params: tuple[str, ...]
    support: str
    positive: tuple[str, ...]


DISTRIBUTIONS: dict[str, _Kind] = {
    "Normal": _Kind(dist.Normal, ("loc", "scale"), "real", ("scale",)),
    "Gamma": _Kind(dist.Gamma, ("concentration", "rate"), "positive", ("concentration", "rate")),
    "InverseGamma": _Kind(dist.InverseGamma, ("concentration", "rate"), "positive", ("concentration", "rate")),
    "HalfNormal": _Kind(dist.HalfNormal, ("scale",), "positive", ("scale",)),
    "LogNormal": _Kind(dist.LogNormal, ("loc", "scale"), "positive", ("scale",)),
    "Uniform": _Kind(dist.Uniform, ("low", "high"), "interval", ()),
    "Beta": _Kind(dist.Beta, ("concentration1", "concentration0"), "interval", ("concentration1", "concentration0")),
    "Exponential": _Kind(dist.Exponential, ("rate",), "positive", ("rate",)),
}
"""The priors a random hyperparameter may have, by their name in the model language."""

SUPPORTS = {"real": "the real line", "positive": "the positive reals", "interval": "a bounded interval"}
"""What each support is, in words (for messages)."""


@dataclasses.dataclass(frozen=True)
class Hyperprior:
    """A scalar prior `distribution(*params)` of a random hyperparameter.

    Parameters
    ----------
    distribution : str
        A name of `DISTRIBUTIONS` (`"Normal"`, `"Gamma"`, ...).
    params : tuple of float
        Its parameters in NumPyro's order (`DISTRIBUTIONS[distribution].params`).
    """

    distribution: str
    params: tuple

    def __post_init__(self):
        kind = DISTRIBUTIONS.get(self.distribution)
        if kind is None:
            raise ModelError(f"unknown hyperprior '{self.distribution}'; expected one of {', '.join(DISTRIBUTIONS)}")
        if len(self.params) != len(kind.params):
            raise ModelError(f"{self.distribution}({', '.join(kind.params)}) takes {len(kind.params)} parameters, "
                             f"got {len(self.params)}")
        object.__setattr__(self, "params", tuple(float(p) for p in self.params))
        for name, value in zip(kind.params, self.params):
            if not math.isfinite(value) or (name in kind.positive and value <= 0):
                sign = "positive" if name in kind.positive else "finite"
                raise ModelError(f"{self.distribution}: {name} must be a {sign} number, got {value!r}")
        if self.distribution == "Uniform" and not self.params[0] < self.params[1]:
            low, high = self.params
            raise ModelError(f"Uniform: low must be below high, got low = {low!r}, high = {high!r}")

    @property
    def support(self) -> str:
        """`"real"`, `"positive"` or `"interval"`."""
        return DISTRIBUTIONS[self.distribution].support

    @property
    def interval(self) -> tuple[float, float]:
        """The support's ends (-inf, inf), (0, inf), (low, high) or (0, 1)."""
        if self.support == "real":
            return (-math.inf, math.inf)
        if self.support == "positive":
            return (0.0, math.inf)
        return (self.params[0], self.params[1]) if self.distribution == "Uniform" else (0.0, 1.0)

    def numpyro(self) -> dist.Distribution:
        """The NumPyro distribution (its parameters as Python floats: constants of a program)."""
        return DISTRIBUTIONS[self.distribution].numpyro(*self.params)

    def log_prob(self, value) -> jax.Array:
        """log p(h) at `value` (traceable)."""
        return self.numpyro().log_prob(value)

    def to_value(self, u) -> jax.Array:
        """h = T(u) of an unconstrained u (module docstring)."""
        return biject_to(self.numpyro().support)(u)

    def to_unconstrained(self, value) -> jax.Array:
        """u = T^-1(h)."""
        return biject_to(self.numpyro().support).inv(value)

    def log_prob_unconstrained(self, u) -> jax.Array:
        """log p(T(u)) + log |T'(u)|: the density of u."""
        transform = biject_to(self.numpyro().support)
        value = transform(u)
        return self.log_prob(value) + transform.log_abs_det_jacobian(u, value)

    def scipy(self):
        """The same distribution as a frozen `scipy.stats` distribution (quantiles, the median).
        `scipy.stats` is imported here, not with the module: it is a second of a new process's start
        that a run never needs (`initial_value` does without it)."""
        from scipy import stats  # noqa: PLC0415

        p = self.params
        return {"Normal": lambda: stats.norm(p[0], p[1]),
                "Gamma": lambda: stats.gamma(p[0], scale=1 / p[1]),
                "InverseGamma": lambda: stats.invgamma(p[0], scale=p[1]),
                "HalfNormal": lambda: stats.halfnorm(scale=p[0]),
                "LogNormal": lambda: stats.lognorm(p[1], scale=math.exp(p[0])),
                "Uniform": lambda: stats.uniform(p[0], p[1] - p[0]),
                "Beta": lambda: stats.beta(p[0], p[1]),
                "Exponential": lambda: stats.expon(scale=1 / p[0])}[self.distribution]()

    @property
    def initial_value(self) -> float:
        """Where chains start: the prior's median, a value every prior here has, inside its support
        (unlike the mean: InverseGamma(1/2, 1) has none). By `scipy.stats`' own quantile formulas at
        0.5 (`scipy.special`'s inverse incomplete gamma and beta functions, `ndtri`), so the numbers
        are `scipy().median()`'s without importing `scipy.stats` in a run."""
        p = self.params
        return float({"Normal": lambda: p[0],
                      "Gamma": lambda: special.gammaincinv(p[0], 0.5) * (1 / p[1]),
                      "InverseGamma": lambda: 1.0 / special.gammainccinv(p[0], 0.5) * p[1],
                      "HalfNormal": lambda: special.ndtri(0.75) * p[0],
                      "LogNormal": lambda: math.exp(p[0]),
                      "Uniform": lambda: 0.5 * (p[1] - p[0]) + p[0],
                      "Beta": lambda: special.betaincinv(p[0], p[1], 0.5),
                      "Exponential": lambda: -math.log1p(-0.5) * (1 / p[0])}[self.distribution]())

    @property
    def width(self) -> float:
        """The slice sampler's initial interval width on the unconstrained scale: the prior's
        scale for a Normal (u is h itself), 1 for the others (u is log h or a logit)."""
        return self.params[1] if self.distribution == "Normal" else 1.0

    def sample(self, rng_key, shape=()) -> jax.Array:
        """Draws from the prior."""
        return self.numpyro().sample(rng_key, shape)

    def describe(self) -> str:
        return f"{self.distribution}({', '.join(format(p, 'g') for p in self.params)})"


__all__ = ["DISTRIBUTIONS", "Hyperprior", "SUPPORTS"]
