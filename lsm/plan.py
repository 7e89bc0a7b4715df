"""Planning one bucket's compaction from its files alone: Java
``MergeTreeCompactManager.triggerCompaction`` (apache/paimon 5dacde516b) as a pure function.

The levels of the bucket, the picker's unit (``lsm.picker``), whether deletes may be dropped,
and for lookup tables (deletion vectors, first-row) the files above the output level that
level-0 keys are looked up in. No storage and no clock: the moment comes in the
:class:`PickerState`, and the state the bucket's next plan starts from comes back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from paimond.format.binary.key_order import min_key_order
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import DataFileMeta, ManifestEntry
from paimond.lsm.levels import Levels
from paimond.lsm.merge.record_expire import RecordExpiry
from paimond.lsm.picker import (
    CompactUnit,
    PickerState,
    drop_deletes,
    pick_full_compaction,
    pick_step,
)
from paimond.lsm.task import CompactTask, TaskTable
from paimond.table.options.compaction import CompactionOptions


@dataclass(frozen=True, slots=True)
class BucketSnapshot:
    """One bucket of a snapshot as the planner sees it."""

    snapshot_id: int
    partition: bytes
    partition_text: str
    bucket: int
    total_buckets: int
    directory: str  # where the bucket's data files are
    files: tuple[ManifestEntry, ...]
    dv_index: IndexManifestEntry | None = None  # deletion-vector tables: the bucket's index


def _last_full_compaction_millis(levels: Levels) -> int | None:
    """Java's estimate: the newest creation time among max-level files."""
    times = [f.creation_time_millis for f in levels.files_at(levels.max_level)
             if f.creation_time_millis is not None]
    return max(times) if times else None


def plan_bucket(bucket: BucketSnapshot, table: TaskTable, compaction: CompactionOptions,
                state: PickerState, *, full: bool = False,
                record_expiry: RecordExpiry | None = None
                ) -> tuple[CompactTask | None, PickerState]:
    """The bucket's task (None: nothing to compact) and its picker state after this plan.
    ``state`` brings the moment (``local_hour``, ``now_millis``) and what earlier plans of the
    bucket left (gentle-mode attempts); a full compaction leaves the attempts as they are.
    ``record_expiry``: a full compaction of a lone max-level run also rewrites the files
    holding expired rows (their schemas must be in ``table``), and the task drops them."""
    key_order = min_key_order(table.schema.key_type.field_types)
    levels = Levels.from_files([e.file for e in bucket.files], compaction.num_levels, key_order)
    state = dataclasses.replace(state,
                                last_full_compaction_millis=_last_full_compaction_millis(levels))
    if full:
        unit = _pick_full(bucket, levels, table, compaction, record_expiry)
    else:
        unit, state = pick_step(levels.sorted_runs(), levels.num_levels, compaction, state)
    if unit is None:
        return None, state
    return _task(bucket, levels, unit, table, compaction, record_expiry), state


def _pick_full(bucket: BucketSnapshot, levels: Levels, table: TaskTable,
               compaction: CompactionOptions, record_expiry: RecordExpiry | None
               ) -> CompactUnit | None:
    """Every run to the max level; a lone max-level run only when some of its files must be
    rewritten: those with deletion vectors, or holding expired rows."""
    dv_ranges = bucket.dv_index.index_file.dv_ranges if bucket.dv_index is not None else None
    with_vectors = {r.data_file_name for r in dv_ranges or ()}

    def must_rewrite(meta: DataFileMeta) -> bool:
        return meta.file_name in with_vectors or (
            record_expiry is not None
            and record_expiry.expires_file(meta, table.schema_of(meta.schema_id)))

    return pick_full_compaction(levels.sorted_runs(), levels.num_levels, must_rewrite,
                                compaction.force_rewrite_all_files)


def _task(bucket: BucketSnapshot, levels: Levels, unit: CompactUnit, table: TaskTable,
          compaction: CompactionOptions, record_expiry: RecordExpiry | None) -> CompactTask:
    entries = {e.file.file_name: e for e in bucket.files}
    dv = table.options.deletion_vectors_enabled
    # Readers of DV and first-row tables skip level 0: its keys are looked up above.
    producer = table.options.changelog_producer
    # first-row, lookup changelog, deletion vectors, force-lookup (Java needLookup)
    picked = {f.file_name for f in unit.files}
    lookup = tuple(entries[f.file_name] for f in levels.files_above(unit.output_level)
                   if f.file_name not in picked) if compaction.needs_lookup else ()
    return CompactTask(
        table=table, base_snapshot_id=bucket.snapshot_id, partition=bucket.partition,
        partition_text=bucket.partition_text, bucket=bucket.bucket,
        total_buckets=bucket.total_buckets, directory=bucket.directory,
        output_level=unit.output_level, max_level=levels.max_level,
        inputs=tuple(entries[f.file_name] for f in unit.files),
        drop_deletes=drop_deletes(unit.output_level, levels.non_empty_highest_level(),
                                  dv_enabled=dv),
        trigger=unit.trigger.value, reason=unit.reason, file_rewrite=unit.file_rewrite,
        deletion_vectors=dv, dv_index=bucket.dv_index if dv else None, lookup_files=lookup,
        record_expiry=record_expiry,
        changelog_producer=producer if producer in ("lookup", "full-compaction") else None)
