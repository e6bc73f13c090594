"""The progress bar of a partition-kernel run: it says when it is compiling, and its rate counts sampling only.

A run's first chunk of each phase (warmup, sampling, a grown capacity) may compile a program,
which can take longer than the sampling itself; the display then reads

    dpppl gibbs:   0%|          | 0/1500 [compiling the sampling program: 12 s]

with the seconds ticking, and once the program runs the time spent compiling is taken out of
the bar's clock (`tqdm.unpause`), so its elapsed time, rate and ETA count iterations only. A
program already compiled in this process shows nothing of the kind.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

import numpy as np

SHOWN_CHAINS = 4
"""Chains whose values the bar shows (the first few of a run with more)."""

_RAN: set = set()
"""Keys of the compiled functions this process has run (one that has run compiles no more)."""


class RunProgress:
    """A tqdm bar of `total` iterations, `done` of them already done (None: no bar is shown)."""

    def __init__(self, total: int, done: int, show: bool, name: str):
        self.bar = None
        if show:
            from tqdm.auto import tqdm  # noqa: PLC0415  (tqdm only when a bar is shown)

            self.bar = tqdm(total=total, initial=done, desc=f"dpppl {name}", unit="it", dynamic_ncols=True)

    @contextlib.contextmanager
    def compiling(self, key, what: str) -> Iterator[None]:
        """Around the first call of the compiled function kept under `key`: the bar says it
        compiles `what`, with the seconds since it began, and the time is left out of the rate."""
        if self.bar is None or key in _RAN:
            yield
            _RAN.add(key)
            return
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(what, time.monotonic(), stop), daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
            self.bar.set_postfix_str("", refresh=False)
            self.bar.unpause()  # the compile is not part of the elapsed time, the rate or the ETA
        _RAN.add(key)

    def _tick(self, what: str, began: float, stop: threading.Event) -> None:
        while True:
            self.bar.set_postfix_str(f"compiling {what}: {time.monotonic() - began:.0f} s")
            if stop.wait(1.0):
                return

    def update(self, n: int, status: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(status, refresh=False)
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def chain_status(num_clusters, lp, warmup: bool) -> str:
    """The bar's status of the last iteration: K and lp of each chain, comma-separated in chain
    order, `K=5,6 lp=-818.8,-797.4` for two chains (one value per chain, not a fraction), the first
    `SHOWN_CHAINS` of more chains followed by `,...`, and then how many there are."""
    k, lp = np.atleast_1d(num_clusters), np.atleast_1d(lp)
    more = ",..." if k.size > SHOWN_CHAINS else ""
    shown = slice(0, SHOWN_CHAINS)
    return (f"K={','.join(str(int(v)) for v in k[shown])}{more} "
            f"lp={','.join(f'{float(v):.1f}' for v in lp[shown])}{more}"
            + (f" ({k.size} chains)" if more else "") + (" (warmup)" if warmup else ""))


__all__ = ["RunProgress", "chain_status"]
