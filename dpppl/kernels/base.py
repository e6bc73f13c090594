"""What a kernel is, the registry of kernels, and composition into hybrids.

A kernel is a pair of pure functions in the manner of BlackJAX:

    step(rng_key, state: PartitionState, x) -> (PartitionState, info)

over the immutable [`PartitionState`][dpppl.core.state.PartitionState], built for one bound
model by a *factory*. `info` is a NamedTuple of scalars of the kernel's `info_type`
(BlackJAX's `HMCInfo`; `NoInfo` for a move with no statistics), and the values a kernel
carries from step to step are its own NamedTuple in `state.extras` (`PermExtras`,
`SubclusterExtras`, ...), so what a step reads and writes is typed. `warmup_step` (optional) is
used during warmup instead, for kernels that adapt a tuning parameter in burn-in only. Every
kernel declares whether it leaves the exact posterior invariant (`exact`); a hybrid is exact
when every part is.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpppl.core import numerics_random as random
from dpppl.core.numerics import sample_index
from dpppl.core.state import HybridExtras, NoExtras
from dpppl.errors import KernelError, check_bool


class NoInfo(NamedTuple):
    """The info of a move that reports no statistics (Gibbs sweeps, the alpha move)."""


class HybridInfo(NamedTuple):
    """The info of a hybrid run with `schedule="sequence"`: `parts[i]` is part i's info."""

    parts: tuple


class RandomScanInfo(NamedTuple):
    """The info of a hybrid run with `schedule="random"`: `parts[i]` is part i's info (zeros for
    the parts not run) and `move` (int32) the index of the part that ran."""

    parts: tuple
    move: jax.Array


def own_keys(rng_key, count: int):
    """The `count` keys of a step that takes `count` keys at once (`Kernel.keys_per_step`): `rng_key`
    itself when it is those keys already (the runner draws them in one hash, `dpppl.run.runner.step_keys`),
    else `count` keys split from the single key `rng_key`."""
    return rng_key if jnp.shape(rng_key) == (count,) else random.split(rng_key, count)


@functools.lru_cache(maxsize=None)
def info_type(name: str, fields: tuple) -> type:
    """The NamedTuple class `name` with the scalar statistics `fields`, for a move whose
    statistics depend on its options (`subcluster`'s with `pair_merges`, ...): one class per
    `(name, fields)`, so every kernel of a configuration returns the same type. Info is never
    saved in a checkpoint, so these classes need no module-level name."""
    return NamedTuple(name, [(f, jax.Array) for f in fields])


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A partition-sampling move bound to a model.

    Attributes
    ----------
    name : str
    exact : bool
        True when `step` leaves p(z, alpha | x) invariant.
    step : callable
        `(rng_key, state, x) -> (state, info)`; `info` is an `info_type`, whose fields the
        driver records in `sample_stats` (prefixed by the move's name in hybrids;
        `info_dict`).
    warmup_step : callable or None
        Used instead of `step` during warmup (adaptation); None means `step`.
    info_type : type
        The NamedTuple class of `info` (`NoInfo` when the move reports nothing; for a hybrid,
        `HybridInfo` or `RandomScanInfo` over its `parts`).
    init : callable or None
        `(state, x) -> state`, run once on each chain's initial state before the first
        step: sets `state.extras` to the kernel's carried values (an adapted tuning
        parameter, instantiated cluster parameters; the driver's loops need their structure
        from the start). None: the kernel carries nothing (`NoExtras`).
    log_joint : callable or None
        `state -> scalar`: the log joint the driver records as `lp` for kernels whose
        state instantiates parameters the family cannot integrate out (None: the
        collapsed `log_joint`).
    record : callable or None
        `state -> dict` of extra per-draw values for the `posterior` group (e.g.
        cluster parameters); their dimension names are `record_dims`. Per-slot values
        grow with the capacity; the driver pads earlier draws (NaN, or 0 for integers).
    parts : tuple of Kernel
        The moves a hybrid combines (empty for a single move).
    note : str
        A sentence the run records as `attrs["kernel_note"]` when not empty: what the kernel
        chose to run for this target (e.g. `subcluster`'s step on small data); a hybrid
        joins its parts' notes.
    masked_points : bool
        True when the move runs on a target whose points are padded to a shape class
        (`BoundModel.padded`): it visits, counts and draws for the first `num_valid` points
        only, with random numbers whose shapes do not depend on the padding, so its draws are
        those of the unpadded target. The runner pads only for such kernels (a hybrid: every
        part).
    light_compile : bool
        True when the move's step runs native calls and scalar arithmetic, not large XLA-emitted
        loops (the native Gibbs sweep and split-merge step, the native DDP steps, the alpha and
        hyperparameter moves), or was measured to run as fast with XLA's elemental emitters
        (`subcluster` in up to 8 dimensions): the runner's chunks of a kernel whose every move has it
        compile with them (`dpppl.core.compiled.LIGHT_OPTIONS`), in about half the CPU (`subcluster`: 0.7x).
    keys_per_step : int
        How many keys `step` can take at once, as one array of that many keys: 1 (a single key), more
        for a move that would split its key (`own_keys`), and for a hybrid run in sequence the sum of
        its parts' (each part's keys in order). The runner derives them in one hash
        (`dpppl.run.runner.step_keys`) where each split would be one more. Such a step given a single
        key splits it (a hybrid into one key per part, as it always did).
    """

    name: str
    exact: bool
    step: Callable
    warmup_step: Optional[Callable] = None
    info_type: type = NoInfo
    init: Optional[Callable] = None
    log_joint: Optional[Callable] = None
    record: Optional[Callable] = None
    record_dims: Optional[dict] = None
    parts: tuple = ()
    masked_points: bool = False
    note: str = ""
    keys_per_step: int = 1
    light_compile: bool = False

    @property
    def warmup(self) -> Callable:
        return self.warmup_step or self.step

    @property
    def info_names(self) -> tuple:
        """The names the driver records `info` under: the fields of `info_type`; in a hybrid,
        each part's prefixed by the part's name (a part that is itself a hybrid keeps its
        names), then `move` under the random schedule."""
        if not self.parts:
            return self.info_type._fields
        return tuple(name for part in self.parts for name in _prefixed(part, part.info_names)) + tuple(
            f for f in self.info_type._fields if f != "parts")

    def info_dict(self, info) -> dict:
        """`info` (of this kernel's step) as a dict from `info_names` to its scalars: what the
        driver records. Raises KernelError when `info` is not an `info_type` (checked as the
        run's program is traced, before any step runs)."""
        if type(info) is not self.info_type:
            raise KernelError(f"kernel {self.name!r}: its step returned info of type {type(info).__name__}, "
                              f"not its info_type {self.info_type.__name__} (a NamedTuple of the move's "
                              f"statistics, given as Kernel(..., info_type=...))")
        if not self.parts:
            return info._asdict()
        named = {}
        for part, part_info in zip(self.parts, info.parts):
            named.update(zip(_prefixed(part, part.info_names), part.info_dict(part_info).values()))
        return {**named, **{f: v for f, v in info._asdict().items() if f != "parts"}}


def _prefixed(part: Kernel, names: tuple) -> tuple:
    return names if part.parts else tuple(f"{part.name}_{n}" for n in names)


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    """A registered kernel: its factory, whether it is exact, and the backend that runs it
    (`"partition"`: a step over partition states, driven by `dpppl.run`; another
    name, e.g. `"nuts"`, a sampler of its own that [`dpppl.sample`][dpppl.sample] hands the run to)."""

    name: str
    factory: Optional[Callable]  # (bound_model, **options) -> Kernel; None for another backend
    exact: bool
    description: str
    applies: Optional[Callable] = None  # model -> None or a reason it does not apply
    backend: str = "partition"
    alias: Optional[str] = None  # the `+`-joined spec a name registered by `register_alias` stands for

    @property
    def options(self) -> tuple:
        if self.factory is None:
            return ()
        params = list(inspect.signature(self.factory).parameters.values())[1:]
        return tuple(p.name for p in params if p.kind == p.KEYWORD_ONLY or p.default is not p.empty)

    def check_switches(self, options: dict) -> None:
        """Raise [`ArgumentError`][dpppl.errors.ArgumentError] for an option the factory
        annotates as a switch (`bool`, or `bool | None` / `Optional[bool]`, then None allowed)
        given anything but True or False: `native="yes"` would be read as true, `"no"` too."""
        params = inspect.signature(self.factory).parameters
        for name, value in options.items():
            given = params[name].annotation
            annotation = (given.__name__ if isinstance(given, type) else str(given)).replace(" ", "").replace(
                "typing.", "")
            if annotation in _SWITCHES:
                check_bool(f"option {name} of kernel {self.name!r}", value, allow_none=annotation != "bool")


_SWITCHES = ("bool", "bool|None", "Optional[bool]", "None|bool")


_REGISTRY: dict[str, KernelEntry] = {}
_PRIOR_MOVES: dict[str, Callable] = {}
_PRIOR_MOVE_OPTIONS: dict[str, tuple] = {}
_CHOOSERS: dict[str, Callable] = {}


def register(name: str, factory: Optional[Callable], *, exact: bool, description: str = "",
             applies: Optional[Callable] = None, backend: str = "partition") -> None:
    """Register a kernel factory under `name`.

    `factory(bound_model, **options) -> Kernel`. `applies(model)` returns None when
    the kernel can sample the model, else a sentence saying why not. A kernel of another
    `backend` (a sampler that is not a step over partition states, such as NUTS) has no
    factory; [`dpppl.sample`][dpppl.sample] runs it by its backend.
    """
    if "+" in name:
        raise KernelError(f"kernel names may not contain '+': {name!r}")
    _REGISTRY[name] = KernelEntry(name, factory, exact, description, applies, backend)


def register_alias(name: str, spec: str, *, description: str) -> None:
    """Register `name` as another name of the hybrid `spec` (`"perm"` for
    `"gibbs+splitmerge+perm-every"`, a sampler of Liang et al. 2007):
    [`parse_kernel_name`][dpppl.kernels.base.parse_kernel_name] reads it as `spec`'s parts, so a
    run records the parts that ran (`attrs["kernel"]`) and the parts' options reach them. It is
    exact when every part is."""
    if "+" in name:
        raise KernelError(f"kernel names may not contain '+': {name!r}")
    exact = all(entry(n).exact for n in parse_kernel_name(spec))
    _REGISTRY[name] = KernelEntry(name, None, exact, description, alias=spec)


def register_prior_move(name: str, factory: Callable, options: tuple = ()) -> None:
    """Register a move a partition prior asks every kernel to append (its `moves`, e.g.
    `"alpha"`); `factory(bound_model, **given) -> Kernel`, `given` the kernel options of `options`
    that a run gives (`hyper_move` of the hyperparameter move)."""
    _PRIOR_MOVES[name] = factory
    _PRIOR_MOVE_OPTIONS[name] = tuple(options)


def register_chooser(name: str, resolve: Callable) -> None:
    """Register a kernel name that stands for a choice made per bound model (`"auto"`,
    `dpppl.kernels.auto`): `resolve(bound_model, options) -> (spec, options)`, which
    [`build`][dpppl.kernels.base.build] builds instead."""
    _CHOOSERS[name] = resolve


def available() -> list[str]:
    """Names of the registered kernels."""
    return sorted(_REGISTRY)


def entry(name: str) -> KernelEntry:
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KernelError(f"unknown kernel {name!r}{hint} Available: {', '.join(available())}")
    return _REGISTRY[name]


def parse_kernel_name(spec: str) -> list[str]:
    """`"gibbs+splitmerge"` -> `["gibbs", "splitmerge"]`, each checked to exist. A name
    registered by [`register_alias`][dpppl.kernels.base.register_alias] stands for its parts,
    less those named before it (`"gibbs+perm"` -> `["gibbs", "splitmerge", "perm-move"]`)."""
    if not isinstance(spec, str) or not spec.strip():
        raise KernelError(f"kernel must be a non-empty string such as 'gibbs', got {spec!r}")
    names = []
    for given in (s.strip() for s in spec.split("+")):
        alias = entry(given).alias
        names += [given] if alias is None else [n for n in parse_kernel_name(alias) if n not in names]
    for n in names:
        e = entry(n)
        if e.backend != "partition" and len(names) > 1:
            raise KernelError(f"{n!r} is a sampler of its own ({e.description}) and cannot be "
                              "combined with partition moves")
    return names


def expand_aliases(spec: str) -> str:
    """`spec` with each name registered by `register_alias` replaced by its parts (`"perm"` ->
    `"gibbs+splitmerge+perm-every"`): the kernel that runs; `spec` itself when it names no alias."""
    if not any(entry(s.strip()).alias for s in spec.split("+")):
        return spec
    return "+".join(parse_kernel_name(spec))


def backend_of(spec: str) -> str:
    """The backend that runs `spec` (a hybrid of partition moves: `"partition"`)."""
    return entry(parse_kernel_name(spec)[0]).backend


def check_applies(spec: str, model) -> None:
    """Raise KernelError when a kernel (or a part of a hybrid) cannot sample `model`."""
    for n in parse_kernel_name(spec):
        reason = model.refuses_kernel(n)
        if reason:
            raise KernelError(f"kernel {n!r} does not apply to this model: {reason}")
        e = entry(n)
        reason = e.applies(model) if e.applies else None
        if reason:
            raise KernelError(f"kernel {n!r} does not apply to this model: {reason}")


def exchangeable_prior_only(model) -> Optional[str]:
    """`applies` of the kernels built on an exchangeable partition prior (its EPPF
    `log_eppf` and seating weights `log_seat_weights`): they sample unlabelled
    partitions and would be wrong for a prior on explicit labels, whose law changes when
    labels are permuted (Porteous et al. 2006, sec. 3.1)."""
    prior = model.prior
    if prior.labelled:
        return (f"the prior {prior.describe()} is on explicit labels (not exchangeable); use "
                f"'sbgibbs+labelswap+labelpermute'")
    return None


def applies_to(spec: str, model) -> bool:
    """True when every part of `spec` can sample `model` (`check_applies` raises instead)."""
    try:
        check_applies(spec, model)
    except KernelError:
        return False
    return True


SCHEDULES = ("sequence", "random")


def build(spec: str, bound_model, *, schedule: str = "sequence", weights=None, **options) -> Kernel:
    """Build a kernel (or a `+`-joined hybrid) for a bound model.

    Options go to every part whose factory accepts them; an option no part accepts is an
    error. When the concentration has a Gamma prior, the alpha move is appended.

    `schedule` says how the parts of a hybrid share the iterations: `"sequence"`
    (default) runs every part in turn each iteration; `"random"` runs one part per
    iteration, part k with probability `weights[k] / sum(weights)` (default equal
    weights): a random-scan form of the time sharing of Liang et al. (2007, sec. 5),
    who divide the CPU time among the moves of a hybrid (see [`compose`][dpppl.kernels.base.compose]). The
    alpha move, when there is one, runs every iteration after the chosen part.

    `spec="auto"` builds the kernel [`dpppl.kernels.auto.choose`][dpppl.kernels.auto.choose]
    picks for the bound model (the returned kernel's `name` is the chosen spec).
    """
    if spec in _CHOOSERS:
        spec, options = _CHOOSERS[spec](bound_model, options)
    names = parse_kernel_name(spec)
    requested, spec = spec, expand_aliases(spec)
    check_applies(spec, bound_model.model)
    if backend_of(spec) != "partition":
        raise KernelError(f"kernel {spec!r} is run by its own backend: sample it with dpppl.sample")
    if schedule not in SCHEDULES:
        raise KernelError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if weights is not None and schedule != "random":
        raise KernelError("weights apply to schedule='random' only")
    used = set()
    given = []  # the options each part's factory takes
    for n in names:
        e = entry(n)
        given.append({k: v for k, v in options.items() if k in e.options})
        e.check_switches(given[-1])
        used |= set(given[-1])

    def partition_parts(bound):
        parts = [entry(n).factory(bound, **own) for n, own in zip(names, given)]
        if schedule == "random" and len(parts) > 1:
            parts = [compose(parts, name=spec, schedule="random", weights=weights)]
        return parts

    parts = partition_parts(bound_model)
    target_moves = bound_model.moves  # random hyperparameters: the partition moves at their values
    moves = (*bound_model.prior.moves, *target_moves)
    move_options = {m: {k: options[k] for k in _PRIOR_MOVE_OPTIONS[m] if k in options} for m in moves}
    used |= {k for given_move in move_options.values() for k in given_move}
    unknown = set(options) - used
    if unknown:
        accepted = sorted({o for n in names for o in entry(n).options} | {"schedule", "weights"}
                          | {o for m in moves for o in _PRIOR_MOVE_OPTIONS[m]})
        hints = [f"{o!r}: did you mean {close[0]!r}?" for o in sorted(unknown)
                 for close in [difflib.get_close_matches(o, accepted, n=1)] if close]
        runs = f" (runs {spec!r})" if spec != requested else ""
        raise KernelError(f"unknown option(s) {sorted(unknown)} for kernel {requested!r}{runs}; "
                          + (f"{' '.join(hints)} " if hints else "") + f"accepted: {accepted}")
    if schedule == "random" and len(names) == 1:
        _schedule_probabilities(weights, 1)  # validated, though one part leaves nothing to choose
    if target_moves:
        def one(ps):
            return ps[0] if len(ps) == 1 else compose(ps, name=spec)
        parts = [at_state_hyperparameters(one(parts), lambda hyper: one(partition_parts(
            bound_model.at_hyperparameters(hyper))))]
    parts += [_PRIOR_MOVES[move](bound_model, **move_options[move]) for move in moves]
    kernel = parts[0] if len(parts) == 1 else compose(parts, name=spec)
    if kernel.log_joint is None:  # the collapsed log joint of the target
        kernel = dataclasses.replace(kernel, log_joint=bound_model.lp)
    return kernel


def at_state_hyperparameters(kernel: Kernel, make: Callable[[dict], Kernel]) -> Kernel:
    """`kernel` (built on a target at its initial random hyperparameters) made to run at the
    hyperparameters of the state it is given: its step, warmup step, init, log joint and record
    each call those of `make(state.hyper)`, the same kernel built on the target at those values
    (`BoundModel.at_hyperparameters`; traced, so it costs nothing at run time)."""
    def step(rng_key, state, x):
        return make(state.hyper).step(rng_key, state, x)

    def warmup_step(rng_key, state, x):
        return make(state.hyper).warmup(rng_key, state, x)

    def init(state, x):
        return make(state.hyper).init(state, x)

    def log_joint(state):
        return make(state.hyper).log_joint(state)

    def record(state):
        return make(state.hyper).record(state)

    return dataclasses.replace(
        kernel, step=step, warmup_step=warmup_step if kernel.warmup_step is not None else None,
        init=init if kernel.init is not None else None, log_joint=log_joint if kernel.log_joint is not None else None,
        record=record if kernel.record is not None else None)


def _schedule_probabilities(weights, num_parts: int):
    if weights is None:
        return [1.0 / num_parts] * num_parts
    try:
        w = [float(v) for v in weights]
    except (TypeError, ValueError):
        raise KernelError(f"weights must be a sequence of numbers, got {weights!r}") from None
    if len(w) != num_parts:
        raise KernelError(f"weights must have one entry per part of the hybrid ({num_parts}), got {len(w)}")
    if not all(v >= 0 and v < float("inf") for v in w) or sum(w) <= 0:
        raise KernelError(f"weights must be finite, non-negative and not all zero, got {weights!r}")
    return [v / sum(w) for v in w]


def compose(parts: list[Kernel], name: str | None = None, schedule: str = "sequence",
            weights=None) -> Kernel:
    """Combine kernels into one; exact when every part is.

    `schedule="sequence"` runs `parts` in turn each iteration. `schedule="random"`
    runs one part per iteration, part k with probability `weights[k] / sum(weights)`:
    a mixture of kernels that each leave the posterior invariant leaves it invariant
    (Tierney 1994, on hybrid strategies). Under `vmap` (several chains in [`dpppl.sample`][dpppl.sample])
    JAX evaluates every branch of the choice and keeps the chosen one, so the random
    schedule changes the chain, not the cost of an iteration.

    The hybrid's info is a `HybridInfo` (a `RandomScanInfo` under `"random"`, whose
    statistics of the parts not run are zero) of its parts' infos; its `info_names` are the
    parts' prefixed by each part's name. When a part carries values (`init`), the hybrid's
    `state.extras` is a `HybridExtras` of every part's extras, and each part's step, log joint
    and record see the state with its own extras.
    """
    if schedule not in SCHEDULES:
        raise KernelError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    parts = list(parts)
    carries = any(p.init is not None for p in parts)

    def own(i: int, fn: Callable) -> Callable:
        """Part i's `state -> value` on the hybrid's state."""
        return fn if not carries else (lambda state: fn(state._replace(extras=state.extras.parts[i])))

    def own_step(i: int, part_step: Callable) -> Callable:
        """Part i's step on the hybrid's state: it reads and writes its own extras."""
        if not carries:
            return part_step

        def step(rng_key, state, x):
            extras = state.extras.parts
            state, info = part_step(rng_key, state._replace(extras=extras[i]), x)
            return state._replace(extras=HybridExtras(extras[:i] + (state.extras,) + extras[i + 1:])), info
        return step

    counts = [p.keys_per_step for p in parts]
    starts = [sum(counts[:i]) for i in range(len(parts))]

    def make_sequence(steps):
        def step(rng_key, state, x):
            infos = []
            if jnp.shape(rng_key) == (sum(counts),):  # every part's keys, drawn at once (`keys_per_step`)
                keys = [rng_key[s] if c == 1 else rng_key[s:s + c] for s, c in zip(starts, counts)]
            else:
                keys = random.split(rng_key, len(parts))
            for part_step, key in zip(steps, keys):
                state, part_info = part_step(key, state, x)
                infos.append(part_info)
            return state, HybridInfo(tuple(infos))
        return step

    def make_random(steps):
        probs = jnp.asarray(_schedule_probabilities(weights, len(parts)))

        def step(rng_key, state, x):
            k_move, k_step = random.split(rng_key)
            move = sample_index(jnp.log(probs), random.uniform(k_move))
            zeros = tuple(jax.tree.map(lambda v: jnp.zeros(v.shape, v.dtype), jax.eval_shape(s, k_step, state, x)[1])
                          for s in steps)

            def branch(i, part_step):
                def run(state):
                    state, part_info = part_step(k_step, state, x)
                    return state, zeros[:i] + (part_info,) + zeros[i + 1:]
                return run

            state, infos = jax.lax.switch(move, [branch(i, s) for i, s in enumerate(steps)], state)
            return state, RandomScanInfo(infos, move)
        return step

    make = make_sequence if schedule == "sequence" else make_random
    has_warmup = any(p.warmup_step is not None for p in parts)

    def init(state, x):
        extras = []
        for part in parts:
            state = state._replace(extras=NoExtras())
            if part.init is not None:
                state = part.init(state, x)
            extras.append(state.extras)
        return state._replace(extras=HybridExtras(tuple(extras)))

    return Kernel(
        name=name or "+".join(p.name for p in parts),
        exact=all(p.exact for p in parts),
        step=make([own_step(i, p.step) for i, p in enumerate(parts)]),
        warmup_step=make([own_step(i, p.warmup) for i, p in enumerate(parts)]) if has_warmup else None,
        info_type=HybridInfo if schedule == "sequence" else RandomScanInfo,
        init=init if carries else None,
        log_joint=next((own(i, p.log_joint) for i, p in enumerate(parts) if p.log_joint is not None), None),
        record=next((own(i, p.record) for i, p in enumerate(parts) if p.record is not None), None),
        record_dims=next((p.record_dims for p in parts if p.record_dims is not None), None),
        parts=tuple(parts),
        masked_points=all(p.masked_points for p in parts),
        note="; ".join(p.note for p in parts if p.note),
        keys_per_step=sum(counts) if schedule == "sequence" else 1,
        light_compile=all(p.light_compile for p in parts),
    )
