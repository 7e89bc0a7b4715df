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
(:mod:`paimond.maintenance.sort_compact` executes them). Both ``clustering.incremental.mode``
values give the same rows; paimond's sort of a task is global either way.
``clustering.history-partition.idle-to-full-sort`` (used only when partitions are named) is
refused then.
"""

from __future__ import annotations

from collections.abc import Mapping

from paimond.errors import UnsupportedError
from paimond.format.manifest import ManifestEntry
from paimond.format.snapshot import Snapshot
from paimond.lsm.levels import SortedRun
from paimond.lsm.picker import CompactUnit, PickerState, Trigger, pick_universal
from paimond.maintenance.sort_compact import SortPlan, SortTask, dv_index_files, live_by_bucket
from paimond.maintenance.sort_order import check_sort_columns
from paimond.table.catalog import Table
from paimond.table.compaction_options import CompactionOptions
from paimond.table.layout import partition_text
from paimond.table.options import TableOptions
from paimond.table.scan import bucket_path, scan_snapshot
from paimond.table.semantic_options import refuse


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
                                partitions: Mapping[str, str] | None = None,
                                snapshot: Snapshot | None = None) -> SortPlan:
    schema = table.latest_schema()
    refuse(schema, "compact", table.path)
    options = TableOptions.of(schema)
    if options.bucket_mode(schema) != "BUCKET_UNAWARE" or schema.primary_keys:
        raise UnsupportedError("incremental clustering serves bucket-unaware append tables "
                               "only (Java)", table.path)
    if partitions and schema.partition_keys and options.text(
            "clustering.history-partition.idle-to-full-sort"):
        raise UnsupportedError("clustering.history-partition.idle-to-full-sort (full "
                               "clustering of idle history partitions) is not implemented",
                               table.path)
    columns, strategy = clustering_of(options)
    check_sort_columns(schema.fields, schema.partition_keys, strategy, columns)
    snapshot = snapshot or table.snapshots.latest()
    if snapshot is None:
        return SortPlan(table.name, None, strategy, columns, ())
    compaction = CompactionOptions(
        num_sorted_run_trigger=options.compaction.num_sorted_run_trigger,
        max_size_amp_percent=options.compaction.max_size_amp_percent,
        size_ratio=options.compaction.size_ratio)
    num_levels = options.compaction.num_levels
    scanned = scan_snapshot(table, snapshot)
    tasks = []
    for (partition, bucket, total_buckets), entries in live_by_bucket(
            scanned, schema, partitions).items():
        runs = partition_runs(entries)
        top = runs[-1].files[0] if runs else None
        same_keys = top is not None and clustering_of(
            TableOptions.of(table.schema(top.schema_id)))[0] == columns
        unit = pick_cluster(runs, num_levels, compaction, full=full, same_keys=same_keys)
        if unit is None or not unit.files:
            continue
        by_name = {e.file.file_name: e for e in entries}
        tasks.append(SortTask(partition, partition_text(schema, partition), bucket,
                              total_buckets, bucket_path(table, schema, partition, bucket),
                              tuple(by_name[f.file_name] for f in unit.files),
                              dv_index_files(scanned, partition),
                              unit.output_level))
    return SortPlan(table.name, snapshot.id, strategy, columns, tuple(tasks))
