"""What a table needs, decided from figures alone: which jobs are due, how urgent the table
is, how long to back off after a failure. Pure: no storage, no clock (``now`` is passed in),
so every rule is tested with plain values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from paimond.table.status.report import TableStatus


@dataclass(frozen=True, slots=True)
class Schedule:
    """One job's settings as the scheduler sees them."""

    enabled: bool
    interval_s: float


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    base_s: float
    max_s: float
    quarantine_after: int  # consecutive failures


@dataclass(frozen=True, slots=True)
class Standing:
    """What the daemon remembers of one table between ticks (wall seconds)."""

    last_snapshot_id: int | None = None
    compacted_snapshot_id: int | None = None  # the latest id after our last compaction
    last_run: Mapping[str, float] = field(default_factory=dict)
    failures: int = 0
    next_attempt_at: float = 0.0
    quarantined: bool = False
    refused: Mapping[str, str] = field(default_factory=dict)  # job -> fingerprint it refused
    # regenerating jobs: items (stale index files, buckets missing vectors) no pass handled yet
    unsettled: Mapping[str, int] = field(default_factory=dict)


# Jobs that run only when metadata shows work for them (maintenance/regenerate/pending.py).
REGENERATING = ("rebuild_dv", "rewrite_index")


@dataclass(frozen=True, slots=True)
class Decision:
    jobs: tuple[str, ...]
    new_snapshot: bool  # the table moved: refresh its health figures
    cleared: bool  # a new snapshot lifted quarantine and backoff


def decide(standing: Standing, latest_snapshot_id: int | None, now: float,
           schedules: Mapping[str, Schedule], fingerprint: str | None = None) -> Decision:
    """Jobs due at ``now``, in ``schedules`` order. A new snapshot clears quarantine; a
    quarantined or backing-off table gets nothing; compaction is also due whenever the table
    moved since our last compaction. A job that refused the table is not due while the
    table's schema/options ``fingerprint`` is the one it refused. A regenerating job
    (:data:`REGENERATING`) is due only while it has unsettled items."""
    new_snapshot = latest_snapshot_id != standing.last_snapshot_id
    cleared = new_snapshot and standing.quarantined
    if not cleared and (standing.quarantined or now < standing.next_attempt_at):
        return Decision((), new_snapshot, False)
    due = []
    for job, schedule in schedules.items():
        if not schedule.enabled or (fingerprint is not None
                                    and standing.refused.get(job) == fingerprint):
            continue
        if job in REGENERATING and not standing.unsettled.get(job):
            continue
        last = standing.last_run.get(job)
        if last is None or now - last >= schedule.interval_s or (
                job == "compact" and latest_snapshot_id != standing.compacted_snapshot_id):
            due.append(job)
    return Decision(tuple(due), new_snapshot, cleared)


@dataclass(frozen=True, slots=True)
class Backoff:
    delay_s: float
    quarantined: bool


def backoff(failures: int, policy: BackoffPolicy) -> Backoff:
    """After ``failures`` consecutive failures (>= 1): exponential delay, capped; quarantine
    from ``quarantine_after`` on."""
    delay = min(policy.base_s * 2 ** (failures - 1), policy.max_s)
    return Backoff(delay, failures >= policy.quarantine_after)


@dataclass(frozen=True, slots=True)
class Health:
    gauges: Mapping[str, float]  # daemon/metrics.py's table gauges, by name
    urgency: float  # higher runs first: sorted runs toward the stop trigger, then debt


# A streaming reader waiting this long for changelog makes a table as urgent as one at its
# stop trigger (Java's streaming writers produce it at every checkpoint, about a minute).
CHANGELOG_LATENCY_AT_STOP_S = 300.0


def changelog_urgency(pending_local_ms: int | None, now_local_ms: int) -> float:
    """What waiting changelog adds to a table's urgency: the age of its oldest file whose
    changelog compaction has not produced yet (table/status/health.py), in units of
    :data:`CHANGELOG_LATENCY_AT_STOP_S`; 0 when none waits."""
    if pending_local_ms is None:
        return 0.0
    return max(0.0, (now_local_ms - pending_local_ms) / 1000) / CHANGELOG_LATENCY_AT_STOP_S


# Rows waiting this long in a postpone bucket, which no reader sees, make a table as urgent as
# one at its stop trigger; so does this many of them.
POSTPONE_AGE_AT_STOP_S = 300.0
POSTPONE_ROWS_AT_STOP = 10_000_000


def postpone_urgency(status: TableStatus, now_local_ms: int) -> float:
    """What a postpone-bucket table's invisible rows add to its urgency: the age of its
    oldest postpone file and their number (invisible data is a freshness problem)."""
    oldest = status.postpone_oldest_millis
    if oldest is None:
        return 0.0
    age_s = max(0.0, (now_local_ms - oldest) / 1000)
    return age_s / POSTPONE_AGE_AT_STOP_S + status.postpone_rows / POSTPONE_ROWS_AT_STOP


# An append table's partition (bucket) with this many small files, or this share of its rows
# deleted by vectors, is as urgent as a primary-key bucket at its stop trigger.
APPEND_SMALL_FILES_AT_STOP = 50
APPEND_DELETED_RATIO_AT_STOP = 0.5


def append_urgency(status: TableStatus) -> float:
    """An append table's urgency: its worst partition's small files (Java's coordinator
    compacts those) plus its worst bucket's share of deleted rows (files past
    ``compaction.delete-ratio-threshold`` are rewritten)."""
    small = max((b.small_files for b in status.buckets), default=0)
    deleted = max((b.deleted_ratio for b in status.buckets), default=0.0)
    return small / APPEND_SMALL_FILES_AT_STOP + deleted / APPEND_DELETED_RATIO_AT_STOP


def health(status: TableStatus) -> Health | None:
    """The table's health figures, or None when its status could not be read."""
    if status.error is not None:
        return None
    runs = max((b.sorted_runs for b in status.buckets), default=0)
    stop = status.stop_trigger or 1
    trigger = status.compaction_trigger or 1
    debt = sum(b.size_bytes for b in status.buckets if b.sorted_runs > trigger)
    level0 = sum(lv.files for b in status.buckets for lv in b.levels if lv.level == 0)
    manifests = status.manifests
    gauges = {
        "level0_files": level0, "max_sorted_runs": runs, "compaction_trigger": trigger,
        "stop_trigger": stop, "compaction_debt_bytes": debt, "snapshots": status.snapshot_count,
        "manifest_files": (manifests.base_files + manifests.delta_files) if manifests else 0,
        "dv_cardinality": sum(b.dv_deleted_rows for b in status.buckets),
        "deleted_row_ratio": (sum(b.dv_deleted_rows for b in status.buckets)
                              / max(1, sum(b.rows for b in status.buckets))),
        "postpone_rows": status.postpone_rows}
    if not status.primary_keys:  # append: every file is a level-0 run; small files matter
        return Health(gauges, append_urgency(status))
    return Health(gauges, runs / stop + debt / 1e12)
