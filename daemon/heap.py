"""The daemon's long-lived objects kept out of the way of Python's cyclic garbage collector.

A daemon over many tables holds millions of objects for as long as it runs: each table's
state, schemas, caches and console history. CPython's oldest generation is collected whenever
enough objects survived into it since the last time, and such a collection traverses every
object in it: at 20,000 tables 2 s of a core and more each, every few minutes while the tables'
duties run.

So the daemon settles its heap now and then: one full collection (the frozen objects back in,
so cycles that died since are freed), then everything still alive is frozen (``gc.freeze``):
the collections in between traverse only what was allocated since. Garbage cycles among frozen
objects wait for the next settle; objects without cycles are freed by reference counting as
always. The first settle comes :data:`FIRST_SETTLE_S` after the start, and each gap doubles up
to :data:`SETTLE_INTERVAL_S`: what the first pass builds (every table's first check) is
frozen soon after it is built, and a settle's full collection (about as long as one the
collector would run by itself) comes a few times an hour.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

from paimond.daemon.logging import get_logger

log = get_logger(__name__)

FIRST_SETTLE_S = 60.0
SETTLE_INTERVAL_S = 960.0  # the longest gap: 60 s doubled four times


@dataclass(frozen=True, slots=True)
class Settled:
    collected: int  # unreachable objects the full collection found
    frozen: int  # objects alive and frozen after it
    seconds: float


def settle() -> Settled:
    """A full collection over every object, frozen ones included, then all survivors frozen."""
    started = time.perf_counter()
    gc.unfreeze()
    collected = gc.collect()
    gc.freeze()
    settled = Settled(collected, gc.get_freeze_count(), time.perf_counter() - started)
    log.debug("heap_settled", collected=settled.collected, frozen=settled.frozen,
              seconds=round(settled.seconds, 3))
    return settled


class Settler:
    """Called every :data:`FIRST_SETTLE_S` (the scheduler's ``settle`` job): settles when
    its gap since the start or the last settle has passed."""

    def __init__(self, monotonic_s: Callable[[], float]) -> None:
        self._now = monotonic_s
        self._gap = FIRST_SETTLE_S
        self._due = monotonic_s() + FIRST_SETTLE_S

    def __call__(self) -> Settled | None:
        now = self._now()
        if now < self._due:
            return None
        settled = settle()
        self._gap = min(2 * self._gap, SETTLE_INTERVAL_S)
        self._due = self._now() + self._gap
        return settled


def release() -> None:
    """Back to plain collection (at shutdown, and for an embedding process's sake)."""
    gc.unfreeze()
