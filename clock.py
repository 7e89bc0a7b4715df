"""The one clock: wall time in epoch milliseconds, local date-time, and a monotonic reading.

Only the front doors (``cli/``, ``daemon/``, ``spark/``) build a :class:`Clock`; everything
below takes one, so a plan is a function of its inputs and tests inject fixed time. A clock is
plain picklable data: a worker process or a Spark executor gets the same clock as its driver.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Clock:
    """The system's clocks. ``fixed_ms`` pins wall time (tests, replays); the monotonic
    reading always advances."""

    fixed_ms: int | None = None

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (Paimon's snapshot ``timeMillis``)."""
        return self.fixed_ms if self.fixed_ms is not None else time.time_ns() // 1_000_000

    def local_now(self) -> datetime.datetime:
        """The local wall date-time, naive (Paimon's ``creationTime`` of data files and the
        off-peak hours are local time)."""
        if self.fixed_ms is None:
            return datetime.datetime.now()
        return datetime.datetime.fromtimestamp(self.fixed_ms / 1000)

    def local_ms(self) -> int:
        """Local wall time as epoch milliseconds of the same digits (Java's
        ``LocalDateTime`` stored as a TIMESTAMP: the zone offset added)."""
        return (self.local_now() - _EPOCH) // datetime.timedelta(milliseconds=1)

    def monotonic_s(self) -> float:
        """Seconds on a clock that never goes back, for durations and deadlines."""
        return time.monotonic()


_EPOCH = datetime.datetime(1970, 1, 1)
SYSTEM_CLOCK = Clock()
