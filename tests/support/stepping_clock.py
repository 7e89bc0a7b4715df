"""A wall clock the test moves: the daemon's ticks then see exactly the time the test says."""

from __future__ import annotations

import dataclasses
import datetime

from paimond.clock import Clock


@dataclasses.dataclass(frozen=True, slots=True)
class SteppingClock(Clock):
    """Wall time ``seconds`` after ``start_ms`` (``now_ms[0]``), moved by :meth:`at`."""

    start_ms: int = 1_767_648_600_000
    now_ms: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.now_ms:
            self.now_ms.append(self.start_ms)

    def wall_ms(self) -> int:
        return self.now_ms[0]

    def local_now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.now_ms[0] / 1000)

    def at(self, seconds: float) -> None:
        self.now_ms[0] = self.start_ms + int(seconds * 1000)
