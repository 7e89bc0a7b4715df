"""Keeping up with writers that never stall (``write-only=true``): which tables the daemon
watches between check ticks, and when a table is looked at again right after its run.

Java's writers compact inline and stop at ``num-sorted-run.stop-trigger``; a write-only writer
does neither, so sorted runs pile up as fast as it commits. One check tick per table is then
too slow: a table whose busiest bucket is within one run of its compaction trigger is *near*
and is watched every :func:`watch_interval_s`; one at its trigger is *due* at once, whether the
watch saw it or its own run just ended with writers' snapshots arrived meanwhile. Pure: the
figures come from ``evaluate.health``'s gauges.
"""

from __future__ import annotations

from collections.abc import Mapping

_WATCHES_PER_TICK = 5
_FASTEST_WATCH_S = 0.2
_SLOWEST_WATCH_S = 1.0


def watch_interval_s(check_interval_s: float) -> float:
    """How often near tables are looked at: five times per check tick, within 0.2..1 s."""
    return max(_FASTEST_WATCH_S, min(_SLOWEST_WATCH_S, check_interval_s / _WATCHES_PER_TICK))


def near_trigger(gauges: Mapping[str, float]) -> bool:
    """Within one sorted run of the compaction trigger (or past it): worth watching."""
    return gauges.get("max_sorted_runs", 0) >= gauges.get("compaction_trigger", 1) - 1


def compaction_due(gauges: Mapping[str, float]) -> bool:
    """At or past the compaction trigger in some bucket: the picker has work now."""
    return gauges.get("max_sorted_runs", 0) >= gauges.get("compaction_trigger", 1)
