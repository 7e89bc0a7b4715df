"""A maintained table's state in the daemon (daemon/service.py), and the reads of its schema
that an unreadable one does not fail.

Every field of a :class:`TableState` but ``table`` and ``warehouse`` is read and written under
the daemon's lock; storage is never touched while holding it.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from paimond.daemon.runner import TableRun
from paimond.daemon.tables import compact_skip, evaluate
from paimond.daemon.tables.watch import Watcher
from paimond.errors import PaimondError
from paimond.format.meta.schema import TableSchema
from paimond.table.catalog import Table


@dataclass
class TableState:
    table: Table
    warehouse: int
    last_snapshot_id: int | None = None
    compacted_snapshot_id: int | None = None
    last_run: dict[str, float] = field(default_factory=dict)  # job -> wall seconds
    failures: int = 0
    next_attempt_at: float = 0.0
    quarantined: bool = False
    error: str | None = None
    urgency: float = 0.0
    running: bool = False  # submitted: queued or running
    triggered: Future[TableRun] | None = None  # a trigger that came while running: runs next
    picker_states: dict[Any, Any] = field(default_factory=dict)  # compaction's, across runs
    refused: dict[str, str] = field(default_factory=dict)  # job -> fingerprint it refused
    watcher: Watcher = field(default_factory=Watcher)  # regeneration items, lag and health
    gauged_snapshot_id: int | None = None  # the snapshot its gauges were last read at
    gauges: dict[str, float] = field(default_factory=dict)  # its health figures, as last read
    active: bool = False  # moved at its last check: watched between ticks (daemon.tables.pace)
    moved_at: float = float("-inf")  # wall seconds a check last saw it move (daemon.tables.pace)
    checked_at: float | None = None  # wall seconds of its last check by a tick (pace.checks_now)
    duties: bool = False  # running, with jobs besides compaction (daemon.tables.pace): counted
    awaits_turn: bool = False  # its due duties got no turn at its last check (pace.duty_turns)
    compaction_due: bool = False  # at its compaction trigger, by the latest gauges
    shown_needs: dict[str, float] | None = None  # its need gauges as last exported
    # its last compaction found nothing to do: skipped while this holds (daemon.tables.compact_skip)
    unchanged: compact_skip.Unchanged | None = None
    skip_told: compact_skip.Unchanged | None = None  # the skip the debug log last told of
    # its duties that did nothing: skipped while each holds (daemon.tables.duty_skip)
    quiet: dict[str, compact_skip.Unchanged] = field(default_factory=dict)

    def has_work(self) -> bool:
        """At its compaction trigger, or regeneration items no pass handled yet."""
        return self.compaction_due or self.watcher.has_unsettled()

    def standing(self) -> evaluate.Standing:
        return evaluate.Standing(self.last_snapshot_id, self.compacted_snapshot_id,
                                 dict(self.last_run), self.failures, self.next_attempt_at,
                                 self.quarantined, dict(self.refused),
                                 self.watcher.unsettled())


def options_of(table: Table) -> dict[str, str]:
    """The table's options, or none when its schema cannot be read (its jobs then fail and
    say why)."""
    schema = schema_of(table)
    return dict(schema.options) if schema is not None else {}


def schema_of(table: Table) -> TableSchema | None:
    """The table's latest schema, or None when it cannot be read."""
    try:
        return table.latest_schema()
    except PaimondError:
        return None
