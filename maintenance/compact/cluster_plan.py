"""Planning Paimon's incremental clustering of a bucket-unaware append table
(``clustering.incremental=true``): Java ``IncrementalClusterManager`` and
``IncrementalClusterStrategy``, apache/paimon 5dacde516b ``paimon-core/.../append/cluster``.

Per partition the live files form levels: each level-0 file is a sorted run of its own, in
the order of their minimum sequence numbers (as the batch split generator hands them over),
and each higher level is one run. Paimon's universal compaction (size amplification, size
ratio, run count; no early full compaction, no off-peak ratio) picks the runs to cluster, or
with ``--full`` every run goes to the max level unless one max-level run already clustered
by the same columns is all there is. The picked files are rewritten sorted by
``clustering.columns`` with ``clustering.strategy`` (``auto``: ``order`` for one column,
``zorder`` for fewer than five, else ``hilbert``) and land at the output level
(:mod:`paimond.maintenance.compact.sort_compact` executes them). Both ``clustering.incremental.mode``
values give the same rows; paimond's sort of a task is global either way.
``clustering.history-partition.idle-to-full-sort`` (used only when partitions are named) is
refused then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from paimond.errors import UnsupportedError
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import DataFileMeta, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.levels import SortedRun
from paimond.lsm.picker import CompactUnit, PickerState, Trigger, pick_universal
from paimond.maintenance.compact.sort_compact import SortPlan, SortTask
from paimond.maintenance.compact.sort_order import check_sort_columns
from paimond.table.catalog import Table
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options.compaction import CompactionOptions
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.partition_filter import PartitionSelection
from paimond.table.scan.bucket_scan import LiveIndex
from paimond.table.scan.partition_windows import WINDOW_ENTRIES
from paimond.table.scan.snapshot_scan import bucket_path
from paimond.table.scan.window_scan import index_by_partition, over_windows


def clustering_of(options: TableOptions) -> tuple[tuple[str, ...], str]:
    """``clustering.columns`` (or ``sink.clustering.by-columns``) and the strategy."""
    text = options.text("clustering.columns") or options.text("sink.clustering.by-columns")
    columns = tuple(c.strip() for c in (text or "").split(",") if c.strip())
    strategy = (options.text("clustering.strategy") or options.text("sink.clustering.strategy")
                or "auto").lower()
    if strategy == "auto":
        strategy = "order" if len(columns) == 1 else "zorder" if len(columns) < 5 else "hilbert"
    return columns, strategy


def incremental_clustering(options: TableOptions) -> bool:
    return options.flag("clustering.incremental")


def pick_cluster(runs: list[SortedRun], num_levels: int, options: CompactionOptions, *,
                 full: bool, same_keys: bool) -> CompactUnit | None:
    """Java ``IncrementalClusterStrategy.pick``; ``same_keys``: the lone max-level run was
    clustered by the table's current columns."""
    max_level = num_levels - 1
    if not full:
        return pick_universal(runs, num_levels, options, PickerState())
    if not runs or (len(runs) == 1 and runs[0].level == max_level and same_keys):
        return None
    files = tuple(f for run in runs for f in run.files)
    return CompactUnit(max_level, files, Trigger.FULL, "full clustering", True)


def partition_runs(entries: list[ManifestEntry]) -> list[SortedRun]:
    """Java ``constructPartitionLevels``: level-0 files one run each, by min sequence
    number (stable), then one run per higher level."""
    level0 = sorted((e.file for e in entries if e.file.level == 0),
                    key=lambda f: f.min_sequence_number)
    runs = [SortedRun(0, (f,)) for f in level0]
    for level in sorted({e.file.level for e in entries} - {0}):
        runs.append(SortedRun(level, tuple(e.file for e in entries if e.file.level == level)))
    return runs


def plan_incremental_clustering(table: Table, *, full: bool = False,
                                partitions: PartitionSelection | None = None,
                                snapshot: Snapshot | None = None,
                                window_entries: int = WINDOW_ENTRIES,
                                accepted_options: Collection[str] = ()) -> SortPlan:
    """The partitions to cluster at the latest snapshot (or ``snapshot``), their live files
    read a window of about ``window_entries`` manifest entries at a time without statistics
    (``table.scan.window_scan``), the picked files read back whole."""
    schema = table.latest_schema()
    refuse(schema, "compact", table.path, accepted_options)
    options = TableOptions.of(schema)
    _check_clustered(table, schema, options, partitions)
    columns, strategy = clustering_of(options)
    check_sort_columns(schema.fields, schema.partition_keys, strategy, columns)
    snapshot = snapshot or table.snapshots.latest()
    if snapshot is None:
        return SortPlan(table.name, None, strategy, columns, ())
    planner = _ClusterPlanner(table, schema, columns, options, full, partitions)
    found = over_windows(table, snapshot, schema, list, planner.plan_window,
                         budget=window_entries)
    tasks = tuple(task for _, task in sorted(found, key=lambda item: item[0]))
    return SortPlan(table.name, snapshot.id, strategy, columns, tasks)


def _check_clustered(table: Table, schema: TableSchema, options: TableOptions,
                     partitions: PartitionSelection | None) -> None:
    """UnsupportedError for a table or a request incremental clustering does not serve."""
    if options.bucket_mode(schema) != "BUCKET_UNAWARE" or schema.primary_keys:
        raise UnsupportedError("incremental clustering serves bucket-unaware append tables "
                               "only (Java)", table.path)
    if partitions and schema.partition_keys and options.text(
            "clustering.history-partition.idle-to-full-sort"):
        raise UnsupportedError("clustering.history-partition.idle-to-full-sort (full "
                               "clustering of idle history partitions) is not implemented",
                               table.path)


class _ClusterPlanner:
    """Picks each (partition, bucket, total buckets) group's files to cluster, window by
    window of the scan."""

    def __init__(self, table: Table, schema: TableSchema, columns: tuple[str, ...],
                 options: TableOptions, full: bool, partitions: PartitionSelection | None
                 ) -> None:
        self.table, self.schema, self.columns = table, schema, columns
        self.full, self.partitions = full, partitions
        self.compaction = CompactionOptions(
            num_sorted_run_trigger=options.compaction.num_sorted_run_trigger,
            max_size_amp_percent=options.compaction.max_size_amp_percent,
            size_ratio=options.compaction.size_ratio)
        self.num_levels = options.compaction.num_levels
        self.same: dict[int, bool] = {}  # schema id -> clustered by the current columns

    def plan_window(self, found: list[tuple[tuple[int, int], SortTask]], live: LiveIndex
                    ) -> None:
        """Each (partition, bucket, total buckets) of the window, its files in the scan's
        order (``sort_compact.live_by_bucket``); tasks keyed by where their first file was
        listed (the whole scan's order of them), read back whole."""
        index = index_by_partition(live.index_entries)
        planned = []
        for files in live.buckets():
            if self.partitions and not partition_matches(
                    partition_text(self.schema, files.partition), self.partitions):
                continue
            groups: dict[int, list[tuple[tuple[int, int], ManifestEntry]]] = {}
            for f in files.files:
                groups.setdefault(f.entry.total_buckets, []).append((live.origin(f.entry),
                                                                     f.entry))
            for group in groups.values():
                group.sort(key=lambda item: item[0])
                task = self._plan_group(index, [e for _, e in group])
                if task is not None:
                    planned.append((group[0][0], task))
        if planned:
            whole = live.full_entries(self.table, (e for _, t in planned for e in t.inputs))
            found += [(at, dataclasses.replace(t, inputs=tuple(whole[e.identifier]
                                                               for e in t.inputs)))
                      for at, t in planned]

    def _plan_group(self, index: dict[bytes, list[IndexManifestEntry]],
                    entries: list[ManifestEntry]) -> SortTask | None:
        runs = partition_runs(entries)
        unit = pick_cluster(runs, self.num_levels, self.compaction, full=self.full,
                            same_keys=bool(runs) and self._same_keys(runs[-1].files[0]))
        if unit is None or not unit.files:
            return None
        first = entries[0]
        by_name = {e.file.file_name: e for e in entries}
        return SortTask(first.partition, partition_text(self.schema, first.partition),
                        first.bucket, first.total_buckets,
                        bucket_path(self.table, self.schema, first.partition, first.bucket),
                        tuple(by_name[f.file_name] for f in unit.files),
                        tuple(e for e in index.get(first.partition, ())
                              if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS),
                        unit.output_level)

    def _same_keys(self, top: DataFileMeta) -> bool:
        """The top run's first file was clustered by the table's current columns."""
        if top.schema_id not in self.same:
            self.same[top.schema_id] = clustering_of(
                TableOptions.of(self.table.schema(top.schema_id)))[0] == self.columns
        return self.same[top.schema_id]
