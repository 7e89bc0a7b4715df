"""Admission for write-only writers: whether a table can take another commit now, or is at its
stop trigger (``num-sorted-run.stop-trigger``; primary-key tables) or over its compaction debt
(``max_compaction_debt_mb`` of its policy).

A Paimon writer that compacts stalls itself once a bucket has more sorted runs than the stop
trigger (Java ``MergeTreeCompactManager.shouldWaitForLatestCompaction``, apache/paimon
release-1.0). A ``write-only`` writer never does, so it asks here: ``GET /admission`` and
``paimond.spark.admission`` (which can wait). A bucket *at* the stop trigger already holds a
writer back: its next commit adds a sorted run and would take it past the point where Java's
writer waits.

The figures come from metadata (``table_status`` without listing data files), cached per
snapshot id: asking again before the next commit reads one hint file.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

from paimond.daemon.tables.evaluate import health
from paimond.errors import UnreadableTableError
from paimond.table.catalog import Table
from paimond.table.status.report import table_status


@dataclass(frozen=True, slots=True)
class Admission:
    table: str
    admitted: bool
    reason: str
    snapshot_id: int | None
    max_sorted_runs: int
    stop_trigger: int
    compaction_trigger: int
    compaction_debt_bytes: int
    max_compaction_debt_bytes: int | None  # None: the debt does not hold writers back

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Figures:
    max_sorted_runs: int
    stop_trigger: int
    compaction_trigger: int
    compaction_debt_bytes: int
    primary_key: bool = True  # append tables have no stop trigger (their writers never stall)


def admit(table: str, snapshot_id: int | None, figures: Figures,
          max_debt_bytes: int | None) -> Admission:
    """The rule, from figures alone."""
    if figures.primary_key and figures.max_sorted_runs >= figures.stop_trigger:
        admitted, reason = False, (f"a bucket has {figures.max_sorted_runs} sorted runs, at "
                                   f"or past the stop trigger {figures.stop_trigger}")
    elif max_debt_bytes is not None and figures.compaction_debt_bytes > max_debt_bytes:
        admitted, reason = False, (f"compaction debt {figures.compaction_debt_bytes} bytes is "
                                   f"over {max_debt_bytes}")
    elif not figures.primary_key:
        admitted, reason = True, "an append table: no stop trigger; debt within its limit"
    else:
        admitted, reason = True, (f"at most {figures.max_sorted_runs} sorted runs per bucket "
                                  f"(stop trigger {figures.stop_trigger})")
    return Admission(table, admitted, reason, snapshot_id, figures.max_sorted_runs,
                     figures.stop_trigger, figures.compaction_trigger,
                     figures.compaction_debt_bytes, max_debt_bytes)


class Admissions:
    """Admission answers, their figures cached per table and snapshot id; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._figures: dict[str, tuple[int | None, Figures]] = {}

    def check(self, table: Table, max_debt_bytes: int | None) -> Admission:
        """Raises UnreadableTableError (with the reason) when the metadata cannot be read,
        and what reading the latest snapshot id raises."""
        latest = table.snapshots.latest_id()
        with self._lock:
            cached = self._figures.get(table.name)
        if cached is not None and cached[0] == latest:
            figures = cached[1]
        else:
            status = table_status(table, verify_files=False, parallelism=4)
            figured = health(status)
            if figured is None:
                raise UnreadableTableError(status.error or "unreadable")
            gauges = figured.gauges
            figures = Figures(int(gauges["max_sorted_runs"]), int(gauges["stop_trigger"]),
                              int(gauges["compaction_trigger"]),
                              int(gauges["compaction_debt_bytes"]), bool(status.primary_keys))
            latest = status.latest_snapshot
            with self._lock:
                self._figures[table.name] = (latest, figures)
        return admit(table.name, latest, figures, max_debt_bytes)
