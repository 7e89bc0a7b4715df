"""What the daemon reads of a table besides its status, from the same scan: the items its
regenerating jobs have (stale file indexes, buckets missing vectors) and the lag and health
figures (``table/status/health.py``), a window of partitions at a time
(``daemon/tables/watch_windows.py``). Read again at a new snapshot, a new schema (options
changed: metadata only, one lookup of the next schema file at most every minute), and when
what can change without either did: looked for every :data:`RECHECK_MS` (a deletion-vector
table's index files, one of which may be lost; nothing for most other tables)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from paimond.daemon.tables.watch_windows import WatchWindows
from paimond.errors import PaimondError
from paimond.format.meta.schema import TableSchema
from paimond.maintenance.regenerate.pending import EXISTS_RECHECK_MS, RegenerationMemory, table_needs
from paimond.table.catalog import Table
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import SnapshotFiles
from paimond.table.status.health import FileFigures, HealthInputs, file_figures, health_score
from paimond.table.status.report import TableStatus, table_status

# the gauge of each regenerating job's unsettled items (daemon/metrics.py)
NEED_GAUGES = {"rewrite_index": "stale_index_files", "rebuild_dv": "buckets_missing_vectors"}
RECHECK_MS = EXISTS_RECHECK_MS
SCHEMA_CHECK_MS = 60_000  # a table's next schema is looked up at most this often (idle cost)


@dataclass(frozen=True, slots=True)
class Watch:
    needs: Mapping[str, frozenset[str]] = field(default_factory=dict)  # job -> item keys
    gauges: Mapping[str, float] = field(default_factory=dict)  # small_files, health
    oldest_level0_millis: int | None = None  # local wall-clock millis
    changelog_pending_millis: int | None = None  # ... of the oldest file awaiting changelog


def watch(table: Table, status: TableStatus, files: SnapshotFiles | None,
          memory: RegenerationMemory, now_ms: int) -> Watch:
    """The figures of ``files`` (the latest snapshot ``status`` describes, scanned whole;
    None: no snapshot). A table whose metadata cannot be read has none (its status says
    why). The daemon reads them a window at a time instead (:meth:`Watcher.read`)."""
    if status.error is not None or status.schema_id is None:
        return Watch()
    try:
        schema = table.schema(status.schema_id)
        needs = {} if files is None else table_needs(table, files, memory, now_ms)
        figures = file_figures(schema, [] if files is None else files.buckets().values())
    except PaimondError:
        return Watch()
    return _scored(schema, status, needs, figures)


def windowed_watch(table: Table, status: TableStatus, found: WatchWindows) -> Watch:
    """:func:`watch` of what ``found`` read beside ``status``, window by window."""
    if status.error is not None or status.schema_id is None:
        return Watch()
    try:
        schema = table.schema(status.schema_id)
        read = found.found()
    except PaimondError:
        return Watch()
    needs, figures = read if read is not None else ({}, file_figures(schema, []))
    return _scored(schema, status, needs, figures)


def _scored(schema: TableSchema, status: TableStatus, needs: Mapping[str, frozenset[str]],
            figures: FileFigures) -> Watch:
    options = TableOptions.of(schema)
    manifests = status.manifests
    score = health_score(HealthInputs(
        max_sorted_runs=max((b.sorted_runs for b in status.buckets), default=0)
        if schema.primary_keys else 0,
        stop_trigger=status.stop_trigger if schema.primary_keys else None,
        data_files=figures.data_files, small_files=figures.small_files,
        snapshots=status.snapshot_count, snapshot_limit=options.snapshot_num_retained_max,
        manifest_files=(manifests.base_files + manifests.delta_files) if manifests else 0,
        manifest_merge_min_count=options.manifest_merge_min_count))
    return Watch(needs, {"small_files": figures.small_files, "health": score},
                 figures.oldest_level0_millis, figures.changelog_pending_millis)


def _recheck(status: TableStatus, watch: Watch, found: WatchWindows) -> frozenset[str] | None:
    """What can change in a reading with no new snapshot and no new schema: a deletion-vector
    table's index files (one may be lost; they are looked for), nothing for other tables (an
    empty set). None when the whole reading is redone instead: a table that could not be
    read, and one whose rows grow more urgent as they wait (changelog to produce, rows in
    postpone buckets: the order of the tables in a tick follows them)."""
    if (status.error is not None or found.error is not None
            or watch.changelog_pending_millis is not None
            or status.postpone_oldest_millis is not None):
        return None
    return found.dv_paths or frozenset()


def unsettled(needs: Mapping[str, frozenset[str]], memory: RegenerationMemory
              ) -> dict[str, int]:
    """Per regenerating job, its items no pass handled yet."""
    return {job: sum(1 for key in keys if key not in memory.handled)
            for job, keys in needs.items()}


@dataclass
class Watcher:
    """One table's, kept by the daemon: the regeneration memory its jobs' passes share, and
    what the last reading found. Touched by one thread at a time (the table's check)."""

    memory: RegenerationMemory = field(default_factory=RegenerationMemory)
    last: Watch = field(default_factory=Watch)
    schema_id: int | None = None
    read_at_ms: int | None = None
    schema_checked_ms: int | None = None
    # what can change with no new snapshot nor schema, looked for every RECHECK_MS (_recheck)
    recheck: frozenset[str] | None = None
    needed: bool = False  # the last reading found regeneration items (handled or not)

    def due(self, table: Table, now_ms: int) -> bool:
        """Whether to read again although no snapshot came: options changed (looked for at
        most every :data:`SCHEMA_CHECK_MS`), or every :data:`RECHECK_MS` what can change
        without either (:attr:`recheck`) did."""
        if self.read_at_ms is None:
            return True
        if now_ms - self.read_at_ms >= RECHECK_MS:
            if self.recheck is None or any(not self._still_there(table, path)
                                           for path in self.recheck):
                return True
            self.read_at_ms = now_ms  # the reading holds: looked at again in RECHECK_MS
        if self.schema_checked_ms is not None and now_ms - self.schema_checked_ms < SCHEMA_CHECK_MS:
            return False
        self.schema_checked_ms = now_ms
        if self.schema_id is not None:
            return table.has_schema_after(self.schema_id)
        ids = table.schema_ids()
        return bool(ids)

    def read(self, table: Table, now_ms: int) -> TableStatus:
        """The table's status, with this watch's figures read from the same scan, a window
        of partitions at a time (``daemon/tables/watch_windows.py``)."""
        found = WatchWindows(table, self.memory, now_ms)
        status = table_status(table, verify_files=False, parallelism=4, also=found)
        self.last = windowed_watch(table, status, found)
        self.recheck = _recheck(status, self.last, found)
        self.needed = any(self.last.needs.values())
        self.schema_id, self.read_at_ms = status.schema_id, now_ms
        self.schema_checked_ms = now_ms
        return status

    def _still_there(self, table: Table, path: str) -> bool:
        try:
            if table.storage.is_file(path):
                return True
        except PaimondError:
            return True  # unreachable is not lost: the next check decides
        self.memory.seen_ms.pop(path, None)  # the reading looks it up again
        return False

    def unsettled(self) -> dict[str, int]:
        return unsettled(self.last.needs, self.memory)

    def has_unsettled(self) -> bool:
        """Whether some regeneration item is left (what every tick asks of every table)."""
        if not self.needed:
            return False
        handled = self.memory.handled
        return any(key not in handled for keys in self.last.needs.values() for key in keys)

    def need_gauges(self) -> dict[str, float]:
        counts = self.unsettled()
        return {gauge: counts.get(job, 0) for job, gauge in NEED_GAUGES.items()}
