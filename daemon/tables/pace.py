"""Keeping up with writers that never stall (``write-only=true``): which tables the daemon
watches between check ticks, and when a table is looked at again right after its run.

Java's writers compact inline and stop at ``num-sorted-run.stop-trigger``; a write-only writer
does neither, so sorted runs pile up as fast as it commits. One check tick per table is then
too slow. A table seen moving within the last :data:`ACTIVE_CHECKS` check intervals (or at
its last check, or by its own run) is *active* and is watched every
:func:`watch_interval_s` with one read of ``LATEST``: each snapshot since its gauges were read
may have added a sorted run to a bucket, so once the busiest bucket's runs plus the new
snapshots reach the compaction trigger its gauges are read again, and at the trigger it is
*due* at once. So is a table whose own run just ended with writers' snapshots arrived
meanwhile. Compaction never queues behind a wave of other duties (every table's expiry comes
due in the same tick): at most ``limits.concurrency`` runs with jobs besides compaction are
submitted at once, those whose duties waited longest first, and a table over that gets its
compaction alone (:func:`duty_turns`, :func:`paced_jobs`); its other jobs wait for a turn,
which each run that ends hands on (``Daemon._next_duties``), not for a later check.
Nor does it wait behind its own table's slower jobs: a run that compacts compacts again between
its later jobs, and between an expiry's bounded rounds, once writers committed
:data:`COMPACT_AGAIN_AFTER` snapshots since (:func:`compact_again`; the same stream under the
same lease, so still one writer of maintenance commits). A table nothing moved for
``daemon.idle_check_interval_s`` is checked once per that interval instead of every tick
(:func:`checks_now`). Pure: the figures come from ``evaluate.health``'s gauges.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

ACTIVE_CHECKS = 2
_WATCHES_PER_TICK = 5
_FASTEST_WATCH_S = 0.2
_SLOWEST_WATCH_S = 1.0


def watch_interval_s(check_interval_s: float) -> float:
    """How often active tables are looked at: five times per check tick, within 0.2..1 s."""
    return max(_FASTEST_WATCH_S, min(_SLOWEST_WATCH_S, check_interval_s / _WATCHES_PER_TICK))


def checks_now(moved_at: float, checked_at: float, has_work: bool, now: float,
               check_interval_s: float, idle_check_interval_s: float) -> bool:
    """Whether this tick checks an idle table (one read of ``LATEST``, its due jobs): at
    every tick while it moved within the last ``idle_check_interval_s`` or ``has_work`` (at
    its compaction trigger, regeneration items left), else once per
    ``idle_check_interval_s``. So thousands of tables no
    writer touches cost a check a minute each, not one every tick, and a writer's first
    commit to one is seen within that interval (then it is watched, and checked every tick)."""
    if (idle_check_interval_s <= check_interval_s or has_work
            or now - moved_at < idle_check_interval_s):
        return True
    return now - checked_at >= idle_check_interval_s - check_interval_s / 2


def first_check_at(name: str, now: float, idle_check_interval_s: float) -> float:
    """When a table's first check is counted as made: up to one idle interval back, by its
    name, so that idle tables' checks spread over the interval instead of all falling in the
    tick of the first pass."""
    return now - zlib.crc32(name.encode()) % 1000 / 1000 * idle_check_interval_s


def may_be_due(gauges: Mapping[str, float], snapshots_since: int) -> bool:
    """Whether ``snapshots_since`` new snapshots (each at most one more sorted run per
    bucket) may have brought the busiest bucket to the compaction trigger."""
    return gauges.get("max_sorted_runs", 0) + snapshots_since >= gauges.get(
        "compaction_trigger", 1)


def compaction_due(gauges: Mapping[str, float]) -> bool:
    """At or past the compaction trigger in some bucket: the picker has work now."""
    return gauges.get("max_sorted_runs", 0) >= gauges.get("compaction_trigger", 1)


def duty_turns(waits: Sequence[tuple[str, float]], duty_runs: int, concurrency: int
               ) -> set[str]:
    """The tables whose jobs besides compaction run now, of those with such jobs due
    (``waits``: a table and when its due duties last ran, -inf: never): as many as the runs
    with duties that may start besides the ``duty_runs`` submitted (``concurrency`` in all),
    those that waited longest first. So every table's expiry gets its turn, however many tables
    come due again sooner."""
    free = max(0, concurrency - duty_runs)
    return {name for name, _ in sorted(waits, key=lambda wait: wait[1])[:free]}


def paced_jobs(jobs: tuple[str, ...], has_turn: bool) -> tuple[str, ...]:
    """The jobs to submit now: all of them on the table's turn (:func:`duty_turns`), else
    compaction alone (if due)."""
    if has_turn or all(job == "compact" for job in jobs):
        return jobs
    return ("compact",) if "compact" in jobs else ()


# writers' snapshots since a run's last compaction that make it compact again between its
# other jobs (and between an expiry's rounds): each may have added a sorted run per bucket
COMPACT_AGAIN_AFTER = 2


def compact_again(compacted_at: int | None, latest: int | None) -> bool:
    """Within one table's run (one stream under its lease): whether to compact again before
    the next job or expire round. ``compacted_at``: the latest snapshot when the run's last
    compaction ended (None: the run has no compaction, or it failed: never again)."""
    if compacted_at is None or latest is None:
        return False
    return latest - compacted_at >= COMPACT_AGAIN_AFTER
