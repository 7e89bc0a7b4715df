"""Skipping an unchanged table's periodic compaction (the idle daemon).

A table whose compaction run found nothing to do (no task planned, nothing committed, no
failure) is planned again only once something its plan depends on may have changed: a new
snapshot, a new schema (its options), a trigger, a failure, or the moment a time-dependent
input of the planners changes. The time-dependent inputs, from reading the planners:

- ``record-level.expire-time`` (``lsm/merge/record_expire.py``): files' records expire as time
  passes: never skipped.
- ``compaction.optimization-interval`` (``lsm/picker.py`` early full compaction): compares the
  plan's moment with the max-level files' creation times; never skipped.
- ``compaction.skip-expired-partitions`` (``compact_plan.expired_partitions``, both the
  primary-key and the append planner): partitions expire by the local date-time; never
  skipped.
- off-peak hours (``compaction.offpeak.start.hour`` / ``end.hour`` / ``offpeak-ratio``): the
  plan reads the local hour; skipped until the next local hour boundary when the ratio differs
  between hours.
- gentle lookup compaction (``lookup-compact = gentle``, ``lookup-compact.max-interval``): each
  empty pick counts an attempt in the bucket's picker state, and the ``max-interval``-th
  forces level 0 up, so a plan is not a function of the snapshot alone: never skipped while a
  run changed a bucket's count.
- the daemon's own full-compaction window (``[[policies]] full_compaction_window``,
  ``table_policy.for_run``): skipped until the window's next start.
- the compaction job's sweep of dead jobs' records (``maintenance/job_cleanup.py``: a record
  becomes dead with time) cannot be seen without a listing: a skip lasts at most
  :data:`SKIP_AT_MOST_S`, so such garbage is still deleted within that time.

``full-compaction.delta-commits`` and ``changelog-producer = full-compaction`` count writer
commits (snapshots alone), incremental clustering (``cluster_plan.py``) reads no clock, and the
radical lookup mode forces level 0 up at every plan: none needs more than the snapshot id.
Pure: the service passes the table's schema, the run and the wall and local times in.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from paimond.errors import PaimondError
from paimond.format.meta.schema import TableSchema
from paimond.lsm.picker import PickerState
from paimond.table.options.core import TableOptions

SKIP_AT_MOST_S = 3600.0  # an unchanged table's compaction still runs once an hour
_DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class Unchanged:
    """A table's compaction, in a run started at ``since`` (wall seconds), found nothing to do
    at ``snapshot_id`` with schema ``schema_id``; it is not planned again before ``until``
    while both stay the same (nor after the wall clock went back before ``since``)."""

    snapshot_id: int | None
    schema_id: int
    since: float
    until: float
    until_why: str  # what ends the skip at ``until``

    def holds(self, latest: int | None, schema_id: int | None, now: float) -> bool:
        return (latest == self.snapshot_id and schema_id == self.schema_id
                and self.since <= now < self.until)

    def describe(self) -> str:
        at = datetime.datetime.fromtimestamp(self.until, datetime.timezone.utc)
        return (f"skipped: unchanged since snapshot {self.snapshot_id} (schema "
                f"{self.schema_id}); planned again at a new snapshot or schema, a trigger, or "
                f"after {at:%Y-%m-%d %H:%M:%S} UTC ({self.until_why})")


def attempts(picker_states: Mapping[object, object]) -> dict[object, object]:
    """Each bucket's gentle-mode attempts: what a plan may change in a :class:`PickerState`
    besides the moment (any other state is compared whole)."""
    return {key: state.force_l0_attempts if isinstance(state, PickerState) else state
            for key, state in picker_states.items()}


def next_window_start(window: tuple[int, int], after_s: float) -> float:
    """The first start (wall seconds, UTC) of a daily window of minutes strictly after
    ``after_s``."""
    day = after_s - after_s % _DAY_S
    start = day + window[0] * 60
    return start if start > after_s else start + _DAY_S


def next_hour_s(local: datetime.datetime, wall_s: float) -> float:
    """The wall seconds of the local hour boundary after ``local`` (read at ``wall_s``)."""
    into_hour = local.minute * 60 + local.second + local.microsecond / 1e6
    return wall_s + 3600 - into_hour


def unchanged_until(schema: TableSchema, started_s: float, local_started: datetime.datetime,
                    window: tuple[int, int] | None, attempts_before: Mapping[object, object],
                    attempts_after: Mapping[object, object]) -> tuple[float, str] | None:
    """Until when (wall seconds) a compaction that found nothing to do in a run started at
    ``started_s`` (local date-time ``local_started``) would find nothing again on the same
    snapshot and schema, and what ends it; None: it may find something at any time."""
    try:
        options = TableOptions.of(schema)
        compaction = options.compaction
        if (options.record_level_expire_time_s is not None
                or compaction.optimization_interval_ms is not None
                or options.compaction_skip_expired_partitions):
            return None
    except PaimondError:
        return None
    if any(attempts_after.get(k, 0) != attempts_before.get(k, 0)
           for k in {*attempts_before, *attempts_after}):
        return None  # a gentle-mode count moved: the next plan may force level 0 up
    until, why = started_s + SKIP_AT_MOST_S, f"at most {SKIP_AT_MOST_S:g} s"
    if len({compaction.offpeak_ratio_at(hour) for hour in range(24)}) > 1:
        boundary = next_hour_s(local_started, started_s)
        if boundary < until:
            until, why = boundary, "the next hour (off-peak hours)"
    if window is not None:
        start = next_window_start(window, started_s)
        if start < until:
            until, why = start, "the full-compaction window"
    return until, why
