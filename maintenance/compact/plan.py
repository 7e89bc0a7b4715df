"""Planning a table's compaction from metadata alone: the table's schema and typed options
read once, the latest snapshot scanned, and every (partition, bucket) planned by
``lsm.plan.plan_bucket`` (Java ``MergeTreeCompactManager.triggerCompaction`` as driven by the
``compact`` procedure). Each task carries what its worker needs: the storage location, the
schema and options, the bucket's directory and the schemas of its files.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from paimond.errors import MissingFileError, PartitionStatsMismatchError
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.merge.record_expire import RecordExpiry, record_expiry_of
from paimond.lsm.picker import PickerState
from paimond.lsm.plan import BucketSnapshot, plan_bucket
from paimond.lsm.task import CompactTask, TaskTable
from paimond.table.catalog import Table
from paimond.table.commit.base import PlannedBuckets, PlannedBucketsBuilder
from paimond.table.data_files.external_paths import ExternalPaths
from paimond.table.indexes.deletion_vectors import bucket_dv_entry
from paimond.table.indexes.file_index_versions import keeping_bitmap_version
from paimond.table.layout import partition_matches, partition_text, partition_value_text
from paimond.table.options.compaction import CompactionOptions
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.partition_filter import PartitionSelection
from paimond.table.scan.bucket_scan import LiveIndex, scan_live_windows
from paimond.table.scan.partition_windows import WINDOW_ENTRIES
from paimond.table.scan.snapshot_scan import BucketFiles, bucket_path, scan_snapshot

if TYPE_CHECKING:  # a dry run's postpone plan only
    from paimond.maintenance.compact.postpone import PostponePlan

# A snapshot property paimond writes on the snapshot of a full compaction (readers ignore it).
FULL_COMPACTION_PROPERTY = "paimond.full-compaction"


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    table_name: str
    base_snapshot_id: int | None
    tasks: tuple[CompactTask, ...]
    buckets_seen: int
    skipped: tuple[str, ...] = ()
    # (partition, bucket) -> the picker state the bucket's next plan starts from
    picker_states: Mapping[tuple[bytes, int], PickerState] = field(default_factory=dict)
    full: bool = False  # every bucket to one sorted run: asked for, or due by the table's option
    full_reason: str | None = None  # why a full compaction the caller did not ask for is due
    # the tasks' buckets as planned: the commit's conflict check starts from them
    commit_base: PlannedBuckets | None = None
    # a dry run's plan of a postpone-bucket table: its postpone rows' real buckets
    postpone: PostponePlan | None = None

    def describe(self) -> str:
        lines = [f"{self.table_name}: {len(self.tasks)} of {self.buckets_seen} buckets to compact "
                 f"(base snapshot {self.base_snapshot_id})"]
        if self.full_reason:
            lines.append(f"  full compaction: {self.full_reason}")
        lines += [f"  {t.describe()}" for t in self.tasks]
        lines += [f"  skipped: {reason}" for reason in self.skipped]
        if self.postpone is not None:
            lines += ["", self.postpone.describe()]
        return "\n".join(lines)


def plan_compaction(table: Table, *, full: bool = False,
                    partitions: PartitionSelection | None = None,
                    moment: datetime.datetime,
                    snapshot: Snapshot | None = None,
                    picker_states: Mapping[tuple[bytes, int], PickerState] | None = None,
                    window_entries: int = WINDOW_ENTRIES,
                    commit_base: bool = False,
                    schema: TableSchema | None = None,
                    accepted_options: Collection[str] = ()) -> CompactionPlan:
    """Plan every bucket of the latest snapshot (or ``snapshot``). ``partitions`` keeps only
    partitions whose path components match (``{"dt": "2024-01-01"}``), or that a
    ``PartitionFilter`` (``--where``) selects. ``moment``: the local
    wall date-time the plan is made at (off-peak hours, the forced-compaction interval), data
    from the caller's clock. ``picker_states``: what earlier plans left per (partition,
    bucket); the plan holds the states after it. ``window_entries``: about how many manifest
    entries a window of partitions holds (``table.scan.partition_windows``; memory). ``commit_base``:
    keep the files of the tasks' buckets for the commit (``CompactionPlan.commit_base``).
    ``schema``: the table's schema as the caller's job run already refused it
    (``CompactJob.run``, once per run); None: the latest, refused here. ``accepted_options``:
    undecided option keys the operator accepts (``CompactSettings.allow_unknown_options``)."""
    if schema is None:
        schema = table.latest_schema()
        refuse(schema, "compact", table.path, accepted_options)  # before anything is written
    if not schema.primary_keys:  # an append table has no LSM tree
        from paimond.maintenance.compact.append_plan import plan_append_compaction  # imports this one
        return plan_append_compaction(table, full=full, partitions=partitions, moment=moment,
                                      snapshot=snapshot, schema=schema)
    options = TableOptions.of(schema)
    check_external_paths(table, options)
    snapshot = snapshot or table.snapshots.latest()
    if snapshot is None:
        return CompactionPlan(table.name, None, (), 0)
    options = keeping_bitmap_version(table, options, snapshot)
    full_reason = None if full else full_compaction_reason(table, snapshot, options)
    planner = BucketPlanner.of(table, schema, options, snapshot, moment, partitions,
                               picker_states, full=full or full_reason is not None)
    scanned = _scan_and_plan(table, snapshot, planner, window_entries, commit_base)
    tasks = [_with_file_schemas(table, task)
             for task in sorted(scanned.tasks, key=lambda t: (t.partition, t.bucket))]
    return CompactionPlan(table.name, snapshot.id, tuple(tasks), scanned.seen,
                          tuple(text for _, text in sorted(scanned.skipped, key=lambda s: s[0])),
                          dict(sorted(scanned.states.items())), planner.full, full_reason,
                          scanned.base.build(snapshot) if commit_base else None)


def check_external_paths(table: Table, options: TableOptions) -> None:
    """A bad ``data-file.external-paths`` setting, or a file system the storage cannot reach
    (UnsupportedError), fails the plan before any write."""
    external = ExternalPaths.of(options)
    for root in external.roots if external else ():
        table.storage.exists(root)


def full_compaction_reason(table: Table, snapshot: Snapshot, options: TableOptions
                           ) -> str | None:
    """Why the table's own options make this compaction a full one, or None:
    ``full-compaction.delta-commits`` writer commits since the last one, or
    ``changelog-producer=full-compaction`` (Java's streaming writers then compact fully at
    every commit: ``StoreSinkWrite``)."""
    every, setting = options.full_compaction_delta_commits, "full-compaction.delta-commits"
    if every is None and options.changelog_producer == "full-compaction":
        every, setting = 1, "changelog-producer=full-compaction"
    if every is None or not full_compaction_due(table, snapshot, every):
        return None
    return f"{every} writer commits since the last one ({setting})"


@dataclass
class _Planned:
    """What the buckets planned so far gave, the windows of partitions in any order."""

    tasks: list[CompactTask] = field(default_factory=list)
    skipped: list[tuple[tuple[bytes, int], str]] = field(default_factory=list)
    seen: int = 0
    states: dict[tuple[bytes, int], PickerState] = field(default_factory=dict)
    base: PlannedBucketsBuilder = field(default_factory=PlannedBucketsBuilder)


@dataclass
class BucketPlanner:
    """Plans one bucket at a time (``lsm.plan.plan_bucket``) with what the table's plan
    settled once: the task table, the partition filter, the expired-partition test, the
    picker states of earlier plans and the plan's moment. ``planned`` gathers the outcome."""

    table: Table
    schema: TableSchema
    snapshot: Snapshot
    spec: TaskTable
    compaction: CompactionOptions
    record_expiry: RecordExpiry | None
    expired: Callable[[bytes], bool]
    partitions: PartitionSelection | None
    previous: Mapping[tuple[bytes, int], PickerState]
    local_hour: int
    now_millis: int
    full: bool
    planned: _Planned = field(default_factory=_Planned)

    @classmethod
    def of(cls, table: Table, schema: TableSchema, options: TableOptions, snapshot: Snapshot,
           moment: datetime.datetime, partitions: PartitionSelection | None,
           picker_states: Mapping[tuple[bytes, int], PickerState] | None, *, full: bool
           ) -> BucketPlanner:
        spec = TaskTable(table.name, table.path, table.location, schema, options)
        now_millis = int(moment.timestamp() * 1000)
        record_expiry = record_expiry_of(schema, options, now_millis)
        if record_expiry is not None:  # the picker reads every file's stats with its own schema
            spec = dataclasses.replace(spec, file_schemas=tuple(
                table.schema(i) for i in table.schema_ids() if i != schema.id))
        return cls(table, schema, snapshot, spec, options.compaction, record_expiry,
                   expired_partitions(schema, options, moment), partitions,
                   picker_states or {}, moment.hour, now_millis, full)

    def plan(self, buckets: Iterable[BucketFiles], index_entries: list[IndexManifestEntry]
             ) -> list[CompactTask]:
        """The tasks of ``buckets`` (the skipped ones and picker states go to ``planned``)."""
        tasks = []
        for files in buckets:
            text = partition_text(self.schema, files.partition)
            if self.partitions and not partition_matches(text, self.partitions):
                continue
            self.planned.seen += 1
            if (skipped := self._skipped(files.partition, files.bucket, text)) is not None:
                self.planned.skipped.append(((files.partition, files.bucket), skipped))
                continue
            if (task := self._plan_bucket(files, text, index_entries)) is not None:
                tasks.append(task)
        return tasks

    def _skipped(self, partition: bytes, bucket: int, text: str) -> str | None:
        if self.expired(partition):
            return (f"{text} bucket {bucket}: partition expired "
                    "(compaction.skip-expired-partitions)")
        if bucket == BUCKET_POSTPONE:
            return f"{text} bucket-postpone (its rows are moved into real buckets first)"
        return None

    def _plan_bucket(self, files: BucketFiles, text: str,
                     index_entries: list[IndexManifestEntry]) -> CompactTask | None:
        partition, bucket = files.partition, files.bucket
        dv_index = (bucket_dv_entry(index_entries, partition, bucket)
                    if self.spec.options.deletion_vectors_enabled else None)
        snapshot_bucket = BucketSnapshot(
            self.snapshot.id, partition, text, bucket, files.total_buckets,
            bucket_path(self.table, self.schema, partition, bucket),
            tuple(f.entry for f in files.files), dv_index)
        state = dataclasses.replace(self.previous.get((partition, bucket), PickerState()),
                                    local_hour=self.local_hour, now_millis=self.now_millis)
        task, self.planned.states[(partition, bucket)] = plan_bucket(
            snapshot_bucket, self.spec, self.compaction, state, full=self.full,
            record_expiry=self.record_expiry)
        return task


def _scan_and_plan(table: Table, snapshot: Snapshot, planner: BucketPlanner,
                   window_entries: int, commit_base: bool) -> _Planned:
    """Scan the snapshot and plan its buckets: with every file's value statistics when the
    picker reads them (record expiry), else statistics-free, a window of partitions at a
    time, the tasks' files read back whole (all at once if the partitions' statistics do not
    match their files)."""
    if planner.record_expiry is not None:
        scanned = scan_snapshot(table, snapshot)
        planned = planner.planned
        planned.tasks = planner.plan(scanned.buckets().values(), scanned.index_entries)
        if commit_base:
            planned.base.add_scan(scanned, [(t.partition, t.bucket) for t in planned.tasks])
        return planned
    planned = planner.planned
    for budget in (window_entries, None):
        try:
            for live in scan_live_windows(table, snapshot, planner.schema if budget else None,
                                          budget=budget or window_entries):
                tasks = _with_full_entries(table, live,
                                           planner.plan(live.buckets(), live.index_entries))
                planned.tasks += tasks
                if commit_base:
                    planned.base.add_window(table, live, [(t.partition, t.bucket) for t in tasks],
                                            [e for t in tasks for e in t.inputs])
            break
        except PartitionStatsMismatchError:  # plan again, every file at once
            planned = planner.planned = _Planned()
    return planned


def full_compaction_due(table: Table, snapshot: Snapshot, every: int) -> bool:
    """``full-compaction.delta-commits``: Java's writers compact fully every ``every`` of
    their commits; write-only writers never do, so paimond counts them from the metadata:
    writer (APPEND) snapshots back from ``snapshot`` down to its last full compaction (a
    snapshot marked :data:`FULL_COMPACTION_PROPERTY`), or to the earliest snapshot."""
    commits = 0
    for snapshot_id in range(snapshot.id, (table.snapshots.earliest_id() or 1) - 1, -1):
        try:
            earlier = snapshot if snapshot_id == snapshot.id else table.snapshots.load(snapshot_id)
        except MissingFileError:  # expired meanwhile: nothing older counts
            break
        if (earlier.properties or {}).get(FULL_COMPACTION_PROPERTY) == "true":
            return False
        commits += earlier.commit_kind == "APPEND"
        if commits >= every:
            return True
    return False


def expired_partitions(schema: TableSchema, options: TableOptions, moment: datetime.datetime
                       ) -> Callable[[bytes], bool]:
    """Java ``CompactProcedure.nonExpiredPartitionPredicate``, negated: with
    ``compaction.skip-expired-partitions``, ``partition.expiration-time`` set and the values-time
    strategy, a partition whose time is strictly before ``moment`` minus the expiration time
    is not compacted; a value without a time, or a null one, is compacted (Java logs and
    keeps it)."""
    expiration_ms = options.partition_expiration_time_ms
    if (not options.compaction_skip_expired_partitions or expiration_ms is None
            or not schema.partition_keys
            or options.partition_expiration_strategy != "values-time"):
        return lambda partition: False
    threshold = moment - datetime.timedelta(milliseconds=expiration_ms)
    extractor = options.partition_time_extractor
    keys, types = schema.partition_keys, schema.partition_type.field_types

    def expired(partition: bytes) -> bool:
        values = decode_manifest_row(partition, types)
        texts = [None if v is None else partition_value_text(v, t, True)
                 for v, t in zip(values, types, strict=True)]
        try:
            return threshold > extractor.extract(keys, texts)
        except ValueError:  # also NullPartitionValueError
            return False

    return expired


def _with_full_entries(table: Table, live: LiveIndex, tasks: list[CompactTask]
                       ) -> list[CompactTask]:
    """The tasks with the whole manifest entries of their files (planned without stats)."""
    full = live.full_entries(table, [e for t in tasks for e in (*t.inputs, *t.lookup_files)])
    return [dataclasses.replace(t, inputs=tuple(full[e.identifier] for e in t.inputs),
                                lookup_files=tuple(full[e.identifier] for e in t.lookup_files))
            for t in tasks]


def _with_file_schemas(table: Table, task: CompactTask) -> CompactTask:
    """The task with the schemas its files were written with (the worker reads none)."""
    ids = {e.file.schema_id for e in (*task.inputs, *task.lookup_files)} - {task.schema_id}
    schemas = tuple(table.schema(i) for i in sorted(ids))
    return dataclasses.replace(task, table=dataclasses.replace(task.table, file_schemas=schemas))
