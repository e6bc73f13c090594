"""`kernel="auto"`: the kernel chosen by the model and the size of its data.

[`choose`][dpppl.kernels.auto.choose] returns a [`Choice`][dpppl.kernels.auto.Choice]: the
kernel spec, its options and a sentence saying why. The rule, in order (the first that
applies):

| model | N | kernel |
| --- | --- | --- |
| DDP (`z ~ DDP(...)`) | any | `ddp+ddpswap` |
| Generalized Mallows rankings | any | `mallows-slice` |
| labelled stick-breaking prior | any | `sbgibbs+labelswap+labelpermute` |
| exchangeable prior, conjugate component | N < `SUBCLUSTER_MIN_POINTS` | `gibbs+splitmerge` |
| DP prior, conjugate component | N >= `SUBCLUSTER_MIN_POINTS` | `subcluster` |
| Pitman-Yor prior, conjugate component | any (sub-cluster moves refuse it) | `gibbs+splitmerge` |
| exchangeable prior, non-conjugate component | any | `subcluster` (its parameter moves) |
| anything else | any | the first of `FALLBACK` that applies (`nuts`) |

`subcluster` with its default options runs the published sub-cluster splits (Chang & Fisher
2013) in warmup, where they find clusters fast, and its exact variant for the kept draws; every
choice above keeps exact draws but the last resort, `nuts` (`attrs["exact"]` says so). The
threshold on N is measured, not guessed: `benchmarks/bench_auto_rule.py` times both candidates
to the true labels' log joint in burn-in and measures their effective samples per second in the
kept draws on W2-like data (docs/kernels/auto.md has the figures).
"""

from __future__ import annotations

import dataclasses
import difflib

import jax
import numpy as np

from dpppl.errors import KernelError
from dpppl.kernels.base import applies_to, entry, expand_aliases, parse_kernel_name, register_chooser

AUTO = "auto"
"""The kernel name that asks for the automatic choice."""

SUBCLUSTER_MIN_POINTS = 3_000
"""Points from which a DP mixture with a conjugate component runs `subcluster` rather than
`gibbs+splitmerge`: the smallest N of `benchmarks/bench_auto_rule.py` (W2-like data, D = 2,
CPU; N = 100, 300, 1,000, 3,000, 10,000, 30,000) from which the sub-cluster sampler was at
least as good on every measure: time to the true labels' log joint in burn-in, and effective
samples per second of `lp` and of K in the kept draws. At 1,000 points it burned in faster
and had more ESS/s of `lp` but fewer of K; below, `gibbs+splitmerge` had 2-30 times the ESS/s
(docs/kernels/auto.md). At D = 10 the same threshold came out, before issue 32's sub-cluster moves
(N = 300, 1,000, 3,000) and with them (N = 1,000, 3,000, 10,000: the sub-cluster moves had 12-70
times the ESS of `lp` per CPU second from 3,000 points, and no more than the collapsed moves at 1,000)."""

FALLBACK = ("gibbs+splitmerge", "subcluster", "nuts")
"""Tried in order when no rule of the table matches the model."""

MULTI_PROCESS_KERNELS = ("subcluster",)
"""The kernels that run over several processes (`jax.distributed`; `dpppl.run.distributed`): those whose
moves over points are parallel by design. `auto` chooses among them when `jax.process_count() > 1`."""


@dataclasses.dataclass(frozen=True)
class Choice:
    """What `kernel="auto"` runs: the kernel `spec`, its `options` (a user's options are added
    to them) and the `reason`, one sentence for `attrs` and the command line."""

    spec: str
    options: dict
    reason: str


def choose(model, num_points: int, dim: int) -> Choice:
    """The kernel `kernel="auto"` runs on `model` with `num_points` points of `dim` dimensions
    (see the module docstring for the rule). Raises
    [`KernelError`][dpppl.KernelError] when no registered kernel applies."""
    del dim  # measured at D = 2 and 10, where the threshold was the same
    if jax.process_count() > 1:
        return _multi_process_choice(model, num_points)
    if applies_to("ddp+ddpswap", model):
        return Choice("ddp+ddpswap", {}, "a DDP model: Gibbs over labels and time-coupled parameters with "
                                         "label swaps")
    if applies_to("mallows-slice", model):
        return Choice("mallows-slice", {}, "Generalized Mallows rankings: the exact slice-Gibbs sampler")
    if applies_to("sbgibbs+labelswap+labelpermute", model):
        return Choice("sbgibbs+labelswap+labelpermute", {},
                      "a labelled stick-breaking prior: Gibbs over labels with label swaps and permutations")
    if model.component.conjugate and applies_to("gibbs+splitmerge", model):
        if num_points >= SUBCLUSTER_MIN_POINTS and applies_to("subcluster", model):
            return Choice("subcluster", {}, f"a DP mixture of a conjugate component on {num_points} >= "
                                            f"{SUBCLUSTER_MIN_POINTS} points: sub-cluster splits in warmup, the "
                                            "exact sub-cluster variant for the kept draws")
        if num_points >= SUBCLUSTER_MIN_POINTS:
            return Choice("gibbs+splitmerge", {}, f"{num_points} points, but the sub-cluster sampler does not "
                                                  f"apply ({model.prior.describe()} prior): collapsed Gibbs with "
                                                  "split-merge")
        return Choice("gibbs+splitmerge", {}, f"a conjugate component on {num_points} < {SUBCLUSTER_MIN_POINTS} "
                                              "points: collapsed Gibbs with split-merge")
    if applies_to("subcluster", model):
        return Choice("subcluster", {}, f"a non-conjugate {model.component.name} component: the sub-cluster "
                                        "sampler with its parameter moves, exact after warmup")
    for spec in FALLBACK:
        if applies_to(spec, model):
            return Choice(spec, {}, f"the first of {', '.join(FALLBACK)} that applies to this model")
    raise KernelError(f"kernel='auto' found no registered kernel for a {model.describe()}; name one")


def _multi_process_choice(model, num_points: int) -> Choice:
    """`auto`'s choice in a run over several processes: the first of `MULTI_PROCESS_KERNELS` that
    applies, whatever N; [`KernelError`][dpppl.KernelError] naming why each does not, when none does."""
    reasons = {}
    for spec in MULTI_PROCESS_KERNELS:
        if applies_to(spec, model):
            return Choice(spec, {}, f"a run over {jax.process_count()} processes on {num_points} points: the "
                                    "sub-cluster sampler, whose passes over points run data-parallel across them")
        reasons[spec] = model.refuses_kernel(spec) or entry(spec).applies(model)
    why = "; ".join(f"{spec}: {reason}" for spec, reason in reasons.items())
    raise KernelError(f"kernel='auto' found no kernel that runs over {jax.process_count()} processes for a "
                      f"{model.describe()} (the kernels that can: {', '.join(MULTI_PROCESS_KERNELS)}; {why}); "
                      "collapsed Gibbs is sequential over points and runs in one process only")


def resolve(kernel: str, model, num_points: int, dim: int, options: dict) -> tuple[str, dict, Choice | None]:
    """`(spec, options, choice)`: for `kernel="auto"` the chosen spec, the choice's options
    updated with `options`, and the choice; any other kernel is returned with its aliases
    expanded (`"perm"` -> `"gibbs+splitmerge+perm-every"`, the kernel that runs), with None.
    An option that no part of the chosen kernel accepts raises
    [`KernelError`][dpppl.KernelError] naming the chosen kernel."""
    if kernel != AUTO:
        return expand_aliases(kernel), dict(options), None
    choice = choose(model, num_points, dim)
    accepted = {o for name in parse_kernel_name(choice.spec) for o in entry(name).options}
    if entry(parse_kernel_name(choice.spec)[0]).backend == "partition":
        accepted |= {"schedule", "weights"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        hints = [f"{o!r}: did you mean {close[0]!r}?" for o in unknown
                 for close in [difflib.get_close_matches(o, sorted(accepted), n=1)] if close]
        raise KernelError(f"unknown option(s) {unknown} for kernel 'auto', which chose {choice.spec!r} "
                          f"({choice.reason}); " + (f"{' '.join(hints)} " if hints else "")
                          + f"accepted: {sorted(accepted)}; or name a kernel")
    return choice.spec, {**choice.options, **options}, choice


def dim_of(target) -> int:
    """The dimension of a bound model's points (1 for scalar data)."""
    shape = np.shape(target.x)
    return int(shape[1]) if len(shape) > 1 else 1


def _resolve_bound(bound_model, options: dict) -> tuple[str, dict]:
    spec, options, _ = resolve(AUTO, bound_model.model, bound_model.num_points, dim_of(bound_model), options)
    return spec, options


register_chooser(AUTO, _resolve_bound)

__all__ = ["AUTO", "Choice", "FALLBACK", "MULTI_PROCESS_KERNELS", "SUBCLUSTER_MIN_POINTS", "choose", "dim_of",
           "resolve"]
