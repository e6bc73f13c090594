"""What a kernel is, the registry of kernels, and composition into hybrids.

A kernel is a pair of pure functions in the manner of BlackJAX:

    step(rng_key, state: PartitionState, x) -> (PartitionState, info: dict[str, scalar])

over the immutable :class:`~dpppl.kernels.state.PartitionState`, built for one bound
model by a *factory*. ``warmup_step`` (optional) is used during warmup instead, for
kernels that adapt a tuning parameter in burn-in only. Every kernel declares whether it
leaves the exact posterior invariant (``exact``); a hybrid is exact when every part is.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Optional

import jax

from ..errors import KernelError


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A partition-sampling move bound to a model.

    Attributes
    ----------
    name : str
    exact : bool
        True when ``step`` leaves p(z, alpha | x) invariant.
    step : callable
        ``(rng_key, state, x) -> (state, info)``; ``info`` maps names to scalars that
        the driver records in ``sample_stats`` (prefixed by the move's name in hybrids).
    warmup_step : callable or None
        Used instead of ``step`` during warmup (adaptation); None means ``step``.
    info_names : tuple of str
        The keys of ``info``.
    """

    name: str
    exact: bool
    step: Callable
    warmup_step: Optional[Callable] = None
    info_names: tuple = ()

    @property
    def warmup(self) -> Callable:
        return self.warmup_step or self.step


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    name: str
    factory: Callable  # (bound_model, **options) -> Kernel
    exact: bool
    description: str
    applies: Optional[Callable] = None  # bound/unbound model -> None or a reason it does not apply

    @property
    def options(self) -> tuple:
        params = list(inspect.signature(self.factory).parameters.values())[1:]
        return tuple(p.name for p in params if p.kind == p.KEYWORD_ONLY or p.default is not p.empty)


_REGISTRY: dict[str, KernelEntry] = {}


def register(name: str, factory: Callable, *, exact: bool, description: str = "",
             applies: Optional[Callable] = None) -> None:
    """Register a kernel factory under ``name``.

    ``factory(bound_model, **options) -> Kernel``. ``applies(model)`` returns None when
    the kernel can sample the model, else a sentence saying why not.
    """
    if "+" in name:
        raise KernelError(f"kernel names may not contain '+': {name!r}")
    _REGISTRY[name] = KernelEntry(name, factory, exact, description, applies)


def available() -> list[str]:
    """Names of the registered kernels (``"nuts"`` is handled by :func:`dpppl.sample`)."""
    return sorted(_REGISTRY) + ["nuts"]


def entry(name: str) -> KernelEntry:
    if name not in _REGISTRY:
        import difflib

        close = difflib.get_close_matches(name, list(_REGISTRY) + ["nuts"], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KernelError(f"unknown kernel {name!r}{hint} Available: {', '.join(available())}")
    return _REGISTRY[name]


def parse_kernel_name(spec: str) -> list[str]:
    """``"gibbs+splitmerge"`` -> ``["gibbs", "splitmerge"]``, each checked to exist."""
    if not isinstance(spec, str) or not spec.strip():
        raise KernelError(f"kernel must be a non-empty string such as 'gibbs', got {spec!r}")
    names = [s.strip() for s in spec.split("+")]
    for n in names:
        if n == "nuts" and len(names) > 1:
            raise KernelError("'nuts' samples the truncated stick-breaking model and cannot be "
                              "combined with partition moves")
        if n != "nuts":
            entry(n)
    return names


def check_applies(spec: str, model) -> None:
    """Raise KernelError when a kernel (or a part of a hybrid) cannot sample ``model``."""
    for n in parse_kernel_name(spec):
        if n == "nuts":
            continue
        e = entry(n)
        reason = e.applies(model) if e.applies else None
        if reason:
            raise KernelError(f"kernel {n!r} does not apply to this model: {reason}")


def build(spec: str, bound_model, **options) -> Kernel:
    """Build a kernel (or a ``+``-joined hybrid) for a bound model.

    Options go to every part whose factory accepts them; an option no part accepts is an
    error. When the concentration has a Gamma prior, the alpha move is appended.
    """
    names = parse_kernel_name(spec)
    check_applies(spec, bound_model.model)
    used = set()
    parts = []
    for n in names:
        e = entry(n)
        accepted = {k: v for k, v in options.items() if k in e.options}
        used |= set(accepted)
        parts.append(e.factory(bound_model, **accepted))
    unknown = set(options) - used
    if unknown:
        accepted = sorted({o for n in names for o in entry(n).options})
        raise KernelError(f"unknown option(s) {sorted(unknown)} for kernel {spec!r}; "
                          f"accepted: {accepted or 'none'}")
    if bound_model.prior.alpha_is_random:
        from .alpha import build_alpha_kernel

        parts.append(build_alpha_kernel(bound_model))
    return parts[0] if len(parts) == 1 else compose(parts, name=spec)


def compose(parts: list[Kernel], name: str | None = None) -> Kernel:
    """Run ``parts`` in turn each iteration; info keys are prefixed by each part's name."""

    def make(steps):
        def step(rng_key, state, x):
            info = {}
            for part, part_step, key in zip(parts, steps, jax.random.split(rng_key, len(parts))):
                state, part_info = part_step(key, state, x)
                info.update({f"{part.name}_{k}": v for k, v in part_info.items()})
            return state, info
        return step

    has_warmup = any(p.warmup_step is not None for p in parts)
    return Kernel(
        name=name or "+".join(p.name for p in parts),
        exact=all(p.exact for p in parts),
        step=make([p.step for p in parts]),
        warmup_step=make([p.warmup for p in parts]) if has_warmup else None,
        info_names=tuple(f"{p.name}_{k}" for p in parts for k in p.info_names),
    )
