"""The protocols the run path, the kernels, the search and the testing helpers call.

A *partition prior* (CRP, Pitman-Yor, stick-breaking sticks, the DDP's sticks) says how its
labels are held, how many slots a chain may need, how to draw a partition and which moves
every kernel must append for it. A *target* is a model bound to data: it builds states
from labels, seats points, scores a state (`lp`) and names what a run records. Nothing
above this layer asks what kind of model or prior it holds: it calls these methods.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import jax
import numpy as np

from dpppl.core.state import PartitionState


class PartitionPrior(Protocol):
    """A law on partitions (or on labelled assignments, when `labelled`)."""

    name: str
    labelled: bool
    """True when labels matter (slot k is stick k + 1); False for an exchangeable prior."""
    alpha_is_random: bool
    initial_alpha: float

    def describe(self) -> str: ...

    def log_eppf(self, counts, alpha) -> jax.Array:
        """The prior term of the log joint from the slot counts."""

    def log_seat_weights(self, counts, alpha) -> tuple[jax.Array, jax.Array]:
        """Sequential weights: (log weight of each occupied slot, log weight of a new cluster)."""

    def log_prior_alpha(self, alpha) -> jax.Array: ...

    def check_hyperparameters(self, n: int) -> None:
        """Raise `HyperparameterError` when a hyperparameter makes the law of n points
        degenerate in the run's float dtype (called by `bind`, before any sampling)."""

    def canonical(self, labels: np.ndarray) -> np.ndarray:
        """Labels as a state holds them (renumbered 0..K-1 by first appearance when
        exchangeable; checked and kept as given when labelled)."""

    def draw_labels(self, key, n: int, capacity: int, alpha) -> jax.Array:
        """n labels in [0, capacity) drawn from the prior (traceable)."""

    def max_slots(self, n: int) -> int:
        """The most slots a chain on n points may use."""

    def min_slots(self, n: int) -> int:
        """Slots to start with whatever the labels (a heavy labelled tail needs more)."""

    @property
    def moves(self) -> tuple[str, ...]:
        """Registered moves every kernel appends for this prior (`("alpha",)` when the
        concentration is resampled)."""


class Target(Protocol):
    """A model bound to data: what the driver, the adapter and the kernels sample."""

    model: Any
    x: np.ndarray
    """The array every step receives (points, or padded rankings)."""
    family: Any

    @property
    def prior(self) -> PartitionPrior: ...

    @property
    def num_points(self) -> int: ...

    @property
    def moves(self) -> tuple[str, ...]:
        """Registered moves every kernel appends for this target after its prior's (`prior.moves`):
        `("hyperparameters",)` for a mixture with random hyperparameters of the base measure, whose
        target then also offers `at_hyperparameters(values) -> Target` (its family at those values),
        on which the partition moves are built at each state's values."""

    # The targets of kernels that take masked points (`Kernel.masked_points`, a mixture's
    # `BoundModel`) also offer: `num_valid` (None, or the traced number of real points of a padded
    # target), `points` (`num_points` or `num_valid`) and `padded(size) -> Target` (the points padded
    # to `size` rows, label -1 for the padding); `dpppl.run.runner` pads only for such kernels.
    # A target whose `seat` is one native call (the DDP's) says so with `native_seat = True`: the
    # start's program then compiles with `dpppl.core.compiled.LIGHT_OPTIONS`.

    def empty_state(self, capacity: int) -> PartitionState:
        """No point assigned (padded points, if any, carry the label -1)."""

    def state_from_labels(self, key, labels, capacity: int) -> PartitionState:
        """A state holding `labels` (traceable; `key` for targets that draw parameters)."""

    def seat(self, key, state: PartitionState) -> PartitionState:
        """Every point seated, one at a time in a random order, into the empty `state`
        (sequential prediction, Liang et al. 2007, sec. 5.1)."""

    def draw_labels(self, key, capacity: int) -> jax.Array:
        """Labels of every point drawn from the prior (traceable)."""

    def lp(self, state: PartitionState) -> jax.Array:
        """The log joint a run records as `lp`."""

    def log_joint_of_labels(self, labels) -> jax.Array:
        """log p(x, z) of labels as a state holds them ([`dpppl.log_joint`][dpppl.log_joint])."""

    def nuts_model(self, truncation: int) -> tuple[Callable, tuple]:
        """The model compiled with `truncation` sticks, in this target's frame, and the
        arguments that condition it on the data (what `kernel="nuts"` runs)."""

    def lp_of_draw(self, labels, draw: dict, capacity: int) -> jax.Array:
        """`lp` of one draw `draw` (its sites) of `nuts_model`'s model, whose most probable
        labels are `labels` (traceable)."""

    def max_slots(self) -> int: ...

    def min_slots(self) -> int: ...

    def observed(self) -> dict[str, np.ndarray]:
        """Observed variables for the InferenceData's `observed_data` group."""


InitStrategy = Callable[[Target, jax.Array, "int | None"], PartitionState]
"""`(target, keys, capacity) -> states`: the initial state of every chain (batched)."""


__all__ = ["InitStrategy", "PartitionPrior", "Target"]
