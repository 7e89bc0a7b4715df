"""Planning a table's compaction from metadata alone: for every (partition, bucket) of the
latest snapshot, the levels, the picker's unit, and whether deletes may be dropped
(Java ``MergeTreeCompactManager.triggerCompaction`` as driven by the ``compact`` procedure).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from paimond.errors import UnsupportedError
from paimond.format.index_manifest import IndexManifestEntry
from paimond.format.key_order import min_key_order
from paimond.format.schema import TableSchema
from paimond.format.snapshot import Snapshot
from paimond.lsm.levels import Levels
from paimond.lsm.picker import PickerState, drop_deletes, pick_compaction, pick_full_compaction
from paimond.lsm.task import CompactTask
from paimond.table.catalog import Table
from paimond.table.compaction_options import CompactionOptions
from paimond.table.deletion_vectors import bucket_dv_entry
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options import BUCKET_POSTPONE, TableOptions
from paimond.table.scan import BucketFiles, scan_snapshot


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    table_name: str
    base_snapshot_id: int | None
    tasks: tuple[CompactTask, ...]
    buckets_seen: int
    skipped: tuple[str, ...] = ()

    def describe(self) -> str:
        lines = [f"{self.table_name}: {len(self.tasks)} of {self.buckets_seen} buckets to compact "
                 f"(base snapshot {self.base_snapshot_id})"]
        lines += [f"  {t.describe()}" for t in self.tasks]
        lines += [f"  skipped: {reason}" for reason in self.skipped]
        return "\n".join(lines)


def check_compactable(schema: TableSchema, options: TableOptions) -> None:
    """Refuse tables whose compaction needs what paimond does not produce (yet)."""
    if not schema.primary_keys:
        raise UnsupportedError("append tables have no LSM tree; paimond compacts primary-key "
                               "tables")
    producer = options.changelog_producer
    if producer in ("lookup", "full-compaction"):
        raise UnsupportedError(f"changelog-producer={producer} needs changelog files from "
                               "compaction, which paimond does not produce yet; compacting "
                               "without them would break streaming readers")
    if options.deletion_vectors_enabled and options.merge_engine == "first-row":
        raise UnsupportedError("first-row tables cannot enable deletion-vectors (Paimon "
                               "refuses the combination)")


def _last_full_compaction_millis(levels: Levels) -> int | None:
    """Java's estimate: the newest creation time among max-level files."""
    times = [f.creation_time_millis for f in levels.files_at(levels.max_level)
             if f.creation_time_millis is not None]
    return max(times) if times else None


def plan_compaction(table: Table, *, full: bool = False,
                    partitions: Mapping[str, str] | None = None,
                    now: Callable[[], datetime.datetime],
                    snapshot: Snapshot | None = None) -> CompactionPlan:
    """Plan every bucket of the latest snapshot (or ``snapshot``). ``partitions`` keeps only
    partitions whose path components match (``{"dt": "2024-01-01"}``)."""
    schema = table.latest_schema()
    options = TableOptions.of(schema)
    check_compactable(schema, options)
    snapshot = snapshot or table.snapshots.latest()
    if snapshot is None:
        return CompactionPlan(table.name, None, (), 0)
    compaction = options.compaction
    key_order = min_key_order(schema.key_type.field_types)
    moment = now()
    state_base = PickerState(local_hour=moment.hour,
                             now_millis=int(moment.timestamp() * 1000))
    tasks, skipped, seen = [], [], 0
    scanned = scan_snapshot(table, snapshot)
    dv = options.deletion_vectors_enabled
    # Readers of DV and first-row tables skip level 0: its keys are looked up above.
    looks_up = dv or options.merge_engine == "first-row"
    for (partition, bucket), files in scanned.buckets().items():
        text = partition_text(schema, partition)
        if partitions and not partition_matches(text, partitions):
            continue
        seen += 1
        if bucket == BUCKET_POSTPONE:
            skipped.append(f"{text} bucket-postpone (only Paimon's postpone compactor may move it)")
            continue
        dv_index = bucket_dv_entry(scanned.index_entries, partition, bucket) if dv else None
        task = _plan_bucket(table, schema, snapshot, files, text, compaction, key_order,
                            state_base, full, dv, dv_index, looks_up)
        if task is not None:
            tasks.append(task)
    return CompactionPlan(table.name, snapshot.id, tuple(tasks), seen, tuple(skipped))


def _plan_bucket(table: Table, schema: TableSchema, snapshot: Snapshot, files: BucketFiles,
                 partition_text: str, compaction: CompactionOptions,
                 key_order: Callable[..., object], state_base: PickerState,
                 full: bool, dv: bool, dv_index: IndexManifestEntry | None,
                 looks_up: bool) -> CompactTask | None:
    entries = {f.meta.file_name: f.entry for f in files.files}
    levels = Levels.from_files([f.meta for f in files.files], compaction.num_levels, key_order)
    runs = levels.sorted_runs()
    with_vectors = {r.data_file_name for r in dv_index.index_file.dv_ranges or ()} \
        if dv_index is not None else set()
    if full:
        unit = pick_full_compaction(runs, levels.num_levels,
                                    lambda f: f.file_name in with_vectors,
                                    compaction.force_rewrite_all_files)
    else:
        state = PickerState(state_base.local_hour, state_base.now_millis,
                            _last_full_compaction_millis(levels))
        unit = pick_compaction(runs, levels.num_levels, compaction, state)
    if unit is None:
        return None
    picked = {f.file_name for f in unit.files}
    lookup = tuple(entries[f.file_name] for f in levels.files_above(unit.output_level)
                   if f.file_name not in picked) if looks_up else ()
    return CompactTask(
        table_name=table.name, table_path=table.path, base_snapshot_id=snapshot.id,
        schema_id=schema.id, partition=files.partition, partition_text=partition_text,
        bucket=files.bucket, total_buckets=files.total_buckets, output_level=unit.output_level,
        max_level=levels.max_level, inputs=tuple(entries[f.file_name] for f in unit.files),
        drop_deletes=drop_deletes(unit.output_level, levels.non_empty_highest_level(),
                                  dv_enabled=dv),
        trigger=unit.trigger.value, reason=unit.reason, file_rewrite=unit.file_rewrite,
        deletion_vectors=dv, dv_index=dv_index, lookup_files=lookup)
