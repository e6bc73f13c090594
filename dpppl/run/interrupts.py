"""Ctrl-C held back while a finished run is handed over: nothing is lost at the end of a run.

A run can be interrupted (Ctrl-C, SIGINT) while it samples: the runner returns the draws it
kept. Once its last iteration is done, what is left (turning the draws into InferenceData,
writing them to a file) is short and cannot be redone without sampling again, so a Ctrl-C that
lands there is held back until the result is complete, then reported:
[`dpppl.sample`][dpppl.sample] raises [`Completed`][dpppl.run.interrupts.Completed], a
`KeyboardInterrupt` carrying the finished run, and the command line writes `--out` whole before
it exits with status 130.

`finishing()` is the scope of one run: Ctrl-C behaves as usual in it until a backend calls
`hold()` after its last iteration; from then on a Ctrl-C is recorded, and the scope says whether
one arrived when it ends. `hold()` outside a scope does nothing, so a backend called directly
keeps Python's own Ctrl-C. Handlers can only be set in the main thread: elsewhere nothing is
held.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator, Optional


class Completed(KeyboardInterrupt):
    """Ctrl-C arrived after a run's last iteration, while its result was built: the run is
    complete, and `result` holds what [`dpppl.sample`][dpppl.sample] (or
    [`dpppl.resume`][dpppl.resume]) would have returned."""

    def __init__(self, result: Any):
        super().__init__("interrupted after the last iteration: the run is complete (its InferenceData is this "
                         "exception's `result`)")
        self.result = result


class _Scope:
    """One `finishing()` scope: the signals recorded once held, and the handler to restore."""

    def __init__(self):
        self.caught: list[int] = []
        self.previous: Optional[Any] = None

    def record(self, signum, frame) -> None:
        self.caught.append(signum)


_scope: Optional[_Scope] = None


@contextlib.contextmanager
def finishing() -> Iterator[list]:
    """The scope of one run: yields a list that holds the signal of every Ctrl-C received
    after `hold()` (empty when none was). The SIGINT handler in place before `hold()` is
    restored when the scope ends. A scope inside another is the outer one."""
    global _scope
    if _scope is not None:
        yield _scope.caught
        return
    _scope = scope = _Scope()
    try:
        yield scope.caught
    finally:
        _scope = None
        if scope.previous is not None:
            signal.signal(signal.SIGINT, scope.previous)


def hold() -> None:
    """From now until the current `finishing()` scope ends, record Ctrl-C instead of raising
    `KeyboardInterrupt`. Nothing outside a scope, outside the main thread, once held already,
    or when SIGINT is ignored."""
    scope = _scope
    if scope is None or scope.previous is not None or threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if current is signal.SIG_IGN or current is None:
        return
    scope.previous = current
    signal.signal(signal.SIGINT, scope.record)


@contextlib.contextmanager
def held() -> Iterator[list]:
    """Ctrl-C held back for the whole block (`finishing()` and `hold()` at once): yields the
    list of signals received, for the caller to act on once the block is done."""
    with finishing() as caught:
        hold()
        yield caught


__all__ = ["Completed", "finishing", "held", "hold"]
