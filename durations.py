"""Paimon's durations (``TimeUtils.parseDuration``: ``30 min``, ``1h``, ``500ms``, ``2 d``),
read alike by table options (``table.options.reader``) and the daemon's settings
(``config.values``). Imports nothing of ours."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")
UNITS_MS = {
    "": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}


def duration_millis(text: str) -> int | None:
    """``text`` in milliseconds; None if it is not a duration."""
    match = _DURATION.match(text)
    if match is None or match.group(2).lower() not in UNITS_MS:
        return None
    return int(match.group(1)) * UNITS_MS[match.group(2).lower()]
