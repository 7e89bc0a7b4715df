"""Planning an append table's compaction (no primary key, no LSM tree) from metadata alone:
Java ``AppendCompactCoordinator`` (bucket-unaware tables, ``bucket=-1``) and
``BucketedAppendCompactManager`` (fixed buckets), apache/paimon 5dacde516b, as Paimon's batch
``compact`` procedure drives them (the coordinator runs once; each bucket picks once).

Bucket-unaware: per partition, the files smaller than ``compactionFileSize``
(``target-file-size`` times ``compaction.small-file-ratio``) or whose deletion vector holds more
than ``compaction.delete-ratio-threshold`` of their rows are packed by size (each file counting
``source.split.open-file-cost`` more) into bins of at least two files and twice the target
size; a last bin of at least ``compaction.min.file-num`` files is a task too. With deletion
vectors, the files of one DV index file stay in one task (a rewritten file's vector leaves its
index file, which is rewritten once), and such a group is compacted even alone. The
coordinator's aging (a partition compacted whole after five idle rounds, forgotten after ten)
happens only across the rounds of a streaming job; a batch plan never reaches it.

Fixed buckets: files ordered by their minimum sequence number. A normal pick slides a window
over them until it holds ``compaction.min.file-num`` files, dropping the oldest while the window
holds twice the target size; a full compaction (``--full``) skips the leading large files
without a vector, then rewrites the rest when small files outnumber large ones (at least
three files), always with deletion vectors or ``compaction.force-rewrite-all-files``.

The pickers are pure functions of :class:`PickFile` lists (a test ports Java's own cases);
:func:`plan_append_compaction` feeds them one snapshot's files and emits ``CompactTask``s
with ``append=True`` (executed by ``maintenance.compact.append_rewrite``).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from paimond.errors import UnsupportedError
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.task import CompactTask, TaskTable
from paimond.maintenance.compact.plan import CompactionPlan, check_external_paths
from paimond.table.catalog import Table
from paimond.table.indexes.file_index_versions import keeping_bitmap_version
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.partition_filter import PartitionSelection
from paimond.table.scan.partition_windows import WINDOW_ENTRIES
from paimond.table.scan.snapshot_scan import bucket_path

FULL_COMPACT_MIN_FILES = 3  # Java BucketedAppendCompactManager.FULL_COMPACT_MIN_FILE



@dataclass(frozen=True, slots=True)
class AppendCompactOptions:
    target_file_size_bytes: int
    compaction_file_size_bytes: int  # below it a file is small
    min_file_num: int = 5
    open_file_cost_bytes: int = 4 << 20
    delete_ratio_threshold: float = 0.2
    file_num_limit: int = 100_000
    force_rewrite_all_files: bool = False

    @classmethod
    def of(cls, options: TableOptions) -> AppendCompactOptions:
        return cls(options.target_file_size_bytes, options.compaction_file_size_bytes,
                   options.compaction_min_file_num, options.source_split_open_file_cost_bytes,
                   options.compaction_delete_ratio_threshold, options.compaction_file_num_limit,
                   options.compaction_force_rewrite_all_files)


@dataclass(frozen=True, slots=True)
class PickFile:
    name: str
    size_bytes: int
    min_sequence: int = 0
    row_count: int = 0


@dataclass(frozen=True, slots=True)
class FileVector:
    """A data file's deletion vector as the index manifest lists it."""

    index_file: str
    cardinality: int | None


# ---- bucket-unaware (AppendCompactCoordinator) ------------------------------------------------


def should_compact(file: PickFile, options: AppendCompactOptions,
                   vectors: Mapping[str, FileVector] | None = None) -> bool:
    """Small, or too much of it deleted (an unknown cardinality counts as too much)."""
    if file.size_bytes < options.compaction_file_size_bytes:
        return True
    vector = vectors.get(file.name) if vectors is not None else None
    if vector is None:
        return False
    return (vector.cardinality is None
            or vector.cardinality > file.row_count * options.delete_ratio_threshold)


def pick_unaware(files: Sequence[PickFile], options: AppendCompactOptions,
                 vectors: Mapping[str, FileVector] | None = None) -> list[tuple[PickFile, ...]]:
    """One partition's tasks (``vectors`` None: the table has no deletion vectors)."""
    candidates = [f for f in files if should_compact(f, options, vectors)]
    if vectors is None:
        return _pack(candidates, options)
    groups: dict[str, list[PickFile]] = {}
    rest = []
    for file in candidates:
        vector = vectors.get(file.name)
        if vector is None:
            rest.append(file)
        else:
            groups.setdefault(vector.index_file, []).append(file)
    result: list[tuple[PickFile, ...]] = []
    bin_ = _Bin(options)
    for group in sorted(groups.values(), key=lambda g: sum(f.size_bytes for f in g)):
        for file in group:
            bin_.add(file)
        if bin_.enough_content():
            result.append(bin_.drain())
    if bin_.files:  # a file with a vector past the ratio is always compacted
        result.append(bin_.drain())
    if len(rest) > 1:
        result += _pack(rest, options)
    return result


class _Bin:
    def __init__(self, options: AppendCompactOptions) -> None:
        self.options = options
        self.files: list[PickFile] = []
        self.total_bytes = 0

    def add(self, file: PickFile) -> None:
        self.files.append(file)
        self.total_bytes += file.size_bytes + self.options.open_file_cost_bytes

    def enough_content(self) -> bool:
        return len(self.files) > 1 and self.total_bytes >= self.options.target_file_size_bytes * 2

    def drain(self) -> tuple[PickFile, ...]:
        files, self.files, self.total_bytes = tuple(self.files), [], 0
        return files


def _pack(files: Sequence[PickFile], options: AppendCompactOptions) -> list[tuple[PickFile, ...]]:
    """Smallest first; too few files left over wait for more."""
    result = []
    bin_ = _Bin(options)
    for file in sorted(files, key=lambda f: f.size_bytes):
        bin_.add(file)
        if bin_.enough_content():
            result.append(bin_.drain())
    if len(bin_.files) >= options.min_file_num:
        result.append(bin_.drain())
    return result


# ---- fixed buckets (BucketedAppendCompactManager) ---------------------------------------------


def pick_compact_before(queue: Sequence[PickFile], min_file_num: int, target_file_size_bytes: int
                        ) -> tuple[tuple[PickFile, ...] | None, tuple[PickFile, ...]]:
    """Java ``pickCompactBefore`` on files in sequence order: the pick (None: nothing) and
    what the manager keeps waiting (files that slid out of the window are released)."""
    window: list[PickFile] = []
    total = 0
    for index, file in enumerate(queue):
        window.append(file)
        total += file.size_bytes
        if len(window) >= min_file_num:
            return tuple(window), tuple(queue[index + 1:])
        if total >= target_file_size_bytes * 2:
            total -= window.pop(0).size_bytes
    return None, tuple(window)


def pick_full(queue: Sequence[PickFile], options: AppendCompactOptions,
              with_vector: frozenset[str] | None = None) -> tuple[PickFile, ...] | None:
    """Java's full compaction (``FullCompactTask``) of files in sequence order
    (``with_vector`` None: the table has no deletion vectors)."""
    force = options.force_rewrite_all_files
    if not force and (not queue or (with_vector is None and len(queue) < FULL_COMPACT_MIN_FILES)):
        return None
    files = list(queue)
    small_size = options.compaction_file_size_bytes
    while not force and files and files[0].size_bytes >= small_size \
            and (with_vector is None or files[0].name not in with_vector):
        files.pop(0)
    if with_vector is not None:
        return tuple(files) or None
    small = sum(1 for f in files if f.size_bytes < small_size)
    if force or (small > len(files) - small and len(files) >= FULL_COMPACT_MIN_FILES):
        return tuple(files) or None
    return None


def pick_bucket(files: Sequence[PickFile], options: AppendCompactOptions, *, full: bool,
                with_vector: frozenset[str] | None = None) -> tuple[PickFile, ...] | None:
    queue = sorted(files, key=lambda f: f.min_sequence)
    if full:
        return pick_full(queue, options, with_vector)
    picked, _ = pick_compact_before(queue, options.min_file_num, options.target_file_size_bytes)
    return picked


# ---- the table's plan -------------------------------------------------------------------------


def pick_file(entry: ManifestEntry) -> PickFile:
    meta = entry.file
    return PickFile(meta.file_name, meta.file_size, meta.min_sequence_number, meta.row_count)


def file_vectors(entries: Iterable[IndexManifestEntry], partition: bytes
                 ) -> dict[str, FileVector]:
    """Data file name -> its vector, over a partition's DV index files."""
    found = {}
    for entry in entries:
        meta = entry.index_file
        if entry.partition != partition or meta.index_type != INDEX_TYPE_DELETION_VECTORS:
            continue
        for dv in meta.dv_ranges or ():
            found[dv.data_file_name] = FileVector(meta.file_name, dv.cardinality)
    return found


def plan_append_compaction(table: Table, *, full: bool = False,
                           partitions: PartitionSelection | None = None,
                           moment: datetime.datetime, snapshot: Snapshot | None = None,
                           window_entries: int = WINDOW_ENTRIES,
                           schema: TableSchema | None = None,
                           accepted_options: Collection[str] = ()) -> CompactionPlan:
    """The tasks of one compaction run of an append table at the latest snapshot (or
    ``snapshot``); ``partitions`` as ``plan_compaction``'s. ``full`` applies to fixed buckets
    (the coordinator of a bucket-unaware table has no full mode). The live files are read a
    window of about ``window_entries`` manifest entries at a time, without statistics; the
    picked files are read back whole (``maintenance.compact.append_windows``). ``schema``: as
    ``plan_compaction``'s (refused already); None: the latest, refused here, accepting the
    undecided ``accepted_options``."""
    from paimond.maintenance.compact.append_windows import plan_buckets, plan_unaware

    if schema is None:
        schema = table.latest_schema()
        refuse(schema, "compact", table.path, accepted_options)
    options = TableOptions.of(schema)
    if options.flag("clustering.incremental"):
        raise UnsupportedError("clustering.incremental: the compact job clusters this table "
                               "(maintenance/compact/cluster_plan.py), it does not concatenate",
                               table.path)
    check_external_paths(table, options)
    snapshot = snapshot or table.snapshots.latest()
    if snapshot is None:
        return CompactionPlan(table.name, None, (), 0)
    planner = AppendPlanner(table, snapshot, AppendCompactOptions.of(options), moment,
                            partitions, schema)
    if options.bucket_mode(schema) == "BUCKET_UNAWARE":
        plan_unaware(planner, window_entries)
    else:
        plan_buckets(planner, full, window_entries)
    return CompactionPlan(table.name, snapshot.id, tuple(planner.tasks), planner.seen,
                          tuple(planner.skipped))


class AppendPlanner:
    """What the table's plan has: options, the partition filter, and the tasks so far."""

    def __init__(self, table: Table, snapshot: Snapshot, options: AppendCompactOptions,
                 moment: datetime.datetime, partitions: PartitionSelection | None,
                 schema: TableSchema | None = None) -> None:
        self.table, self.snapshot, self.options = table, snapshot, options
        self.schema = schema or table.latest_schema()
        self.table_options = keeping_bitmap_version(table, TableOptions.of(self.schema), snapshot)
        self.spec = TaskTable(table.name, table.path, table.location, self.schema,
                              self.table_options)
        self.dv = self.table_options.deletion_vectors_enabled
        self.moment, self.partitions = moment, partitions
        self.tasks: list[CompactTask] = []
        self.skipped: list[str] = []
        self.seen = 0
        self._matches: dict[bytes, bool] = {}

    def wanted(self, partition: bytes) -> bool:
        if not self.partitions:
            return True
        if partition not in self._matches:
            text = partition_text(self.schema, partition)
            self._matches[partition] = partition_matches(text, self.partitions)
        return self._matches[partition]

    def task(self, partition: bytes, bucket: int, total_buckets: int,
             inputs: tuple[ManifestEntry, ...], dv_index: IndexManifestEntry | None,
             reason: str, dv_index_files: tuple[IndexManifestEntry, ...] = ()) -> CompactTask:
        ids = {e.file.schema_id for e in inputs} - {self.schema.id}
        spec = dataclasses.replace(self.spec, file_schemas=tuple(
            self.table.schema(i) for i in sorted(ids)))
        return CompactTask(
            spec, self.snapshot.id, partition, partition_text(self.schema, partition), bucket,
            total_buckets, bucket_path(self.table, self.schema, partition, bucket), 0, 0,
            inputs, False, "append", f"{reason}: {len(inputs)} files",
            deletion_vectors=self.dv, dv_index=dv_index, append=True,
            dv_index_files=dv_index_files)
