"""Postpone-bucket tables (``bucket = -2``): the rows writers left in ``bucket-postpone`` moved
into real buckets, as Paimon's postpone compactor does (Java ``PostponeUtils``,
``PostponeBucketFileStoreWrite``, ``BucketFiles``, Spark ``SparkPostponeCompactProcedure``;
apache/paimon 5dacde516b). Readers skip the postpone bucket, so until this runs those rows
are invisible.

Per partition holding postpone files:

1. **The bucket number** (Java ``PostponeUtils.determineBucketNum``): the partition's real
   buckets keep theirs (every live file of a real bucket records ``total_buckets``; two
   different numbers in one partition is an error); a partition without real buckets takes
   ``postpone.default-bucket-num`` if set, else ``ceil(rows / postpone.target-row-num-per-bucket)``
   if that is set, else ``ceil(bytes / postpone.target-size-per-bucket)`` (1 GiB) over its
   postpone files, at least 1. From then on the partition keeps it.
2. **The order of the rows.** Postpone writers do not restore state, so their sequence
   numbers mean nothing across files; Java reads a writer's files (the name prefix up to
   ``-w-``) in creation-time order, record by record, and hands them to the real buckets'
   writers, which number them anew. paimond reads the partition's files in creation-time
   order (the scan order on a tie) -- the same order within each writer, and the order
   writers committed in across them, where Java promises none.
3. **The bucket of each row**: :mod:`paimond.table.bucketing` on the bucket key.
4. **Each bucket's new rows** get sequence numbers after the bucket's highest (Java's
   writer restores it; with ``write.sequence-number-init-mode = snapshot`` after the
   snapshot's recorded highest too, if that is higher), are merged with the table's merge
   engine as a writer's buffer merges them (one row per key, retractions kept) and written
   as level-0 files of the table's format, ``file_source`` APPEND, ``total_buckets`` the
   partition's number.

One COMPACT snapshot deletes the postpone files and adds the new ones (Java ``BucketFiles``
turns the new files into the compaction's ``compactAfter``). The LSM compaction that
follows in the same ``compact`` run picks the new level-0 files as Java's
``compact(partition, bucket, false)`` does. A conflict (the postpone files compacted
meanwhile) deletes the new files and plans again.

With ``changelog-producer = input`` the real buckets' writers of Java write every row they
are handed as changelog when they flush (``MergeTreeWriter``): each bucket's rows, in key and
sequence order, unmerged, go to changelog files of the same commit (the postpone writers write
none).

Memory: a partition's postpone rows are read in file order and moved a chunk at a time, a
chunk being as many rows as ``chunk_bytes`` (a quarter of the memory budget; unbounded without
one) holds as Arrow columns: each chunk's rows of a bucket are merged and written as that
bucket's level-0 files, their sequence numbers after the previous chunk's, as a Java writer
flushes its write buffer into a level-0 file whenever it fills. The chunks' files merge in the
LSM compaction that follows, to the rows one chunk would have given. What paimond does
not do for these tables (``bucket-function.type=hive``) is refused at plan time
(``paimond.table.options.semantic``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from paimond.clock import Clock
from paimond.errors import CorruptFileError, RefusedError
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.streaming import SEQUENCE_COLUMN, sort_slice
from paimond.lsm.rewrite import file_format_of
from paimond.maintenance.compact.memory import use_returning_memory_pool
from paimond.maintenance.job_cleanup import RecordedJob, committed_names
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.bucketing import BucketFunction, bucket_function_of
from paimond.table.catalog import Table
from paimond.table.commit.committer import (
    MAX_SEQUENCE_NUMBER_PROPERTY,
    CommitChanges,
    Committer,
)
from paimond.table.commit.job_records import JobJournal
from paimond.table.data_files.arrow_io import (
    FILE_SOURCE_APPEND,
    RollingDataFileWriter,
    read_data_file,
)
from paimond.table.data_files.external_paths import external_provider
from paimond.table.data_files.kv_layout import (
    key_fields,
    physical_row_type,
    thin_mode,
)
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options.changelog import changelog_file_options
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions
from paimond.table.options.merge import MergeConfig
from paimond.table.options.semantic import refuse
from paimond.table.partition_filter import PartitionSelection
from paimond.table.scan.snapshot_scan import SnapshotFiles, bucket_path, scan_snapshot
from paimond.table.storage.interface import StorageLocation

if TYPE_CHECKING:  # the executor's protocol (its module loads file-index code)
    from paimond.maintenance.distributed import TaskMapper

BATCH_ROWS = 65536
_CHUNK_BATCH_ROWS = 4096  # batches read under a memory budget


@dataclass(frozen=True, slots=True)
class PostponePartition:
    """One partition's postpone files and where their rows go."""

    partition: bytes
    text: str
    files: tuple[ManifestEntry, ...]  # in the order their rows are taken
    num_buckets: int
    decided_by: str  # what gave ``num_buckets``
    # real bucket -> its highest sequence number (a bucket without files is absent)
    max_sequences: Mapping[int, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(e.file.row_count for e in self.files)

    @property
    def bytes(self) -> int:
        return sum(e.file.file_size for e in self.files)

    def describe(self) -> str:
        return (f"{self.text or '-'} bucket-postpone: {len(self.files)} files, {self.rows} rows "
                f"({self.bytes} bytes) -> {self.num_buckets} buckets ({self.decided_by})")


@dataclass(frozen=True, slots=True)
class PostponePlan:
    table_name: str
    snapshot: Snapshot
    schema: TableSchema
    partitions: tuple[PostponePartition, ...]
    scan: SnapshotFiles  # what the plan read: the commit's conflict check starts there
    # ``write.sequence-number-init-mode = snapshot``: the snapshot's highest sequence number,
    # which a real bucket's writer starts after as well (Java ``startingMaxSequenceNumber``)
    sequence_floor: int = -1

    def describe(self) -> str:
        lines = [f"{self.table_name}: {len(self.partitions)} partition(s) with postpone rows "
                 f"to move into real buckets (base snapshot {self.snapshot.id})"]
        return "\n".join(lines + [f"  {p.describe()}" for p in self.partitions])


@dataclass
class PostponeMoved:
    """What moving one partition wrote; ``added`` are ADD entries in real buckets,
    ``changelog`` the input changelog's files (``changelog-producer = input``)."""

    partition: PostponePartition
    added: list[ManifestEntry] = field(default_factory=list)
    changelog: list[ManifestEntry] = field(default_factory=list)
    written_paths: list[str] = field(default_factory=list)
    rows_read: int = 0
    rows_written: int = 0
    duration_s: float = 0.0

    @property
    def buckets(self) -> int:
        return len({e.bucket for e in self.added})


def plan_postpone(table: Table, schema: TableSchema, snapshot: Snapshot, *,
                  partitions: PartitionSelection | None = None) -> PostponePlan:
    """Every partition of ``snapshot`` with live postpone files (``partitions`` filters by
    path components, like the compaction plan), with its bucket number decided."""
    options = TableOptions.of(schema)
    scan = scan_snapshot(table, snapshot)
    postpone: dict[bytes, list[ManifestEntry]] = defaultdict(list)
    totals: dict[bytes, set[int]] = defaultdict(set)  # the total buckets its files record
    max_sequences: dict[bytes, dict[int, int]] = defaultdict(dict)
    for live in scan.files:
        entry = live.entry
        if entry.bucket == BUCKET_POSTPONE:
            postpone[entry.partition].append(entry)
            continue
        if entry.bucket >= 0 and entry.total_buckets > 0:
            totals[entry.partition].add(entry.total_buckets)
        bucket_max = max_sequences[entry.partition]
        bucket_max[entry.bucket] = max(bucket_max.get(entry.bucket, -1),
                                       entry.file.max_sequence_number)
    planned = []
    for partition, entries in postpone.items():
        text = partition_text(schema, partition)
        if partitions and not partition_matches(text, partitions):
            continue
        if len(totals[partition]) > 1:
            raise CorruptFileError(table.path, f"partition {text or '-'} has files of "
                                   f"different bucket numbers {sorted(totals[partition])}")
        num_buckets, decided_by = _bucket_number(options, entries, next(iter(totals[partition]),
                                                                         None))
        ordered = sorted(range(len(entries)),
                         key=lambda i: (entries[i].file.creation_time_millis or 0, i))
        planned.append(PostponePartition(partition, text, tuple(entries[i] for i in ordered),
                                         num_buckets, decided_by,
                                         dict(max_sequences.get(partition, {}))))
    planned.sort(key=lambda p: p.partition)
    return PostponePlan(table.name, snapshot, schema, tuple(planned), scan,
                        _sequence_floor(table, options, snapshot))


def _sequence_floor(table: Table, options: TableOptions, snapshot: Snapshot) -> int:
    """The snapshot's recorded highest sequence number on a snapshot-mode table, else -1."""
    known = (snapshot.properties or {}).get(MAX_SEQUENCE_NUMBER_PROPERTY)
    if options.sequence_number_init_mode != "snapshot" or known is None:
        return -1
    try:
        return int(known)
    except ValueError:
        raise CorruptFileError(table.snapshots.path(snapshot.id), f"property "
                               f"{MAX_SEQUENCE_NUMBER_PROPERTY} = {known!r} is not a number"
                               ) from None


def _bucket_number(options: TableOptions, entries: Sequence[ManifestEntry],
                   known: int | None) -> tuple[int, str]:
    """Java ``PostponeUtils.determineBucketNum`` with its size estimate."""
    if known is not None:
        return known, "the partition's buckets"
    if options.postpone_default_bucket_num is not None:
        return options.postpone_default_bucket_num, "postpone.default-bucket-num"
    target_rows = options.postpone_target_row_num_per_bucket
    if target_rows is not None:
        rows = sum(e.file.row_count for e in entries)
        return _ceil_at_least_one(rows, target_rows), "postpone.target-row-num-per-bucket"
    size = sum(e.file.file_size for e in entries)
    return (_ceil_at_least_one(size, options.postpone_target_size_per_bucket_bytes),
            "postpone.target-size-per-bucket")


def _ceil_at_least_one(value: int, per_bucket: int) -> int:
    buckets = 1 if value <= 0 else (value - 1) // per_bucket + 1
    if buckets > 2**31 - 1:
        raise RefusedError("compact", f"{buckets} buckets exceed Java's int: raise the "
                           "postpone target per bucket")
    return buckets


class PostponeMover:
    """Moves the rows of partitions of a table whose schema is ``schema``; everything it
    wrote is in ``moved`` (the caller deletes those files if the commit does not land).
    ``sequence_floor``: :attr:`PostponePlan.sequence_floor`."""

    def __init__(self, table: Table, schema: TableSchema, sequence_floor: int,
                 now_millis: Callable[[], int], batch_rows: int = BATCH_ROWS,
                 chunk_bytes: int | None = None) -> None:
        self.table, self.schema, self.sequence_floor = table, schema, sequence_floor
        self.now_millis, self.batch_rows = now_millis, batch_rows
        self.chunk_bytes = chunk_bytes  # the rows moved at once, at most (None: a partition)
        if chunk_bytes is not None:
            self.batch_rows = min(batch_rows, _CHUNK_BATCH_ROWS)
        self.options = TableOptions.of(schema)
        self.bucket_function: BucketFunction = bucket_function_of(schema, self.options)
        config = MergeConfig.of(schema)
        self.reducer = make_reducer(config, schema.field_names, drop_deletes=False)
        order = "descending" if config.sequence_descending else "ascending"
        self.user_sequence = [(name, order) for name in config.sequence_fields]
        self.key_columns = [f.name for f in key_fields(schema)]
        self.output_columns = physical_row_type(
            schema, key_value=True, thin=thin_mode(schema, self.options)).field_names
        self.moved: list[PostponeMoved] = []

    def move_all(self, partitions: Sequence[PostponePartition]) -> list[PostponeMoved]:
        for partition in partitions:
            self.move(partition)
        return self.moved

    def move(self, partition: PostponePartition) -> PostponeMoved:
        started = time.monotonic()
        moved = PostponeMoved(partition)
        self.moved.append(moved)
        next_sequences: dict[int, int] = {}  # a bucket -> its next row's sequence number
        for rows in self._chunks(partition):
            moved.rows_read += rows.num_rows
            for bucket, rows_of_bucket in self.bucket_function.split(rows,
                                                                     partition.num_buckets):
                self._write_bucket(moved, bucket, rows_of_bucket,  # in the files' order
                                   next_sequences)
        moved.duration_s = time.monotonic() - started
        return moved

    def _chunks(self, partition: PostponePartition) -> Iterator[pa.Table]:
        """The partition's postpone rows in file order, ``chunk_bytes`` of them at a time."""
        schema, storage = self.schema, self.table.storage
        directory = bucket_path(self.table, schema, partition.partition, BUCKET_POSTPONE)
        batches: list[pa.RecordBatch] = []
        held = 0
        for entry in partition.files:
            meta = entry.file
            path = meta.external_path or storage.join(directory, meta.file_name)
            for batch in read_data_file(
                    storage, path, file_format=file_format_of(meta.file_name),
                    file_schema=self.table.schema(meta.schema_id), read_schema=schema,
                    key_value=True, batch_rows=self.batch_rows, file_size=meta.file_size):
                batches.append(batch)
                held += batch.nbytes
                if self.chunk_bytes is not None and held >= self.chunk_bytes:
                    yield pa.Table.from_batches(batches)
                    batches, held = [], 0
        if batches:
            yield pa.Table.from_batches(batches)

    def _write_bucket(self, moved: PostponeMoved, bucket: int, rows: pa.Table,
                      next_sequences: dict[int, int]) -> None:
        partition = moved.partition
        first = next_sequences.get(bucket)
        if first is None:
            first = max(partition.max_sequences.get(bucket, -1), self.sequence_floor) + 1
        next_sequences[bucket] = first + rows.num_rows
        sequences = pa.array(np.arange(first, first + rows.num_rows, dtype=np.int64))
        rows = rows.set_column(rows.schema.get_field_index(SEQUENCE_COLUMN), SEQUENCE_COLUMN,
                               sequences)
        ordered = sort_slice([rows], self.key_columns, self.user_sequence)
        merged = self.reducer(ordered)
        directory = bucket_path(self.table, self.schema, partition.partition, bucket)
        moved.added += self._write(moved, directory, bucket, merged, self.options)
        if self.options.changelog_producer == "input":  # every row, as a writer's flush
            every = ordered.take(np.arange(ordered.num_rows))
            moved.changelog += self._write(moved, directory, bucket, every,
                                           changelog_file_options(self.options))
        moved.rows_written += merged.num_rows

    def _write(self, moved: PostponeMoved, directory: str, bucket: int, rows: pa.Table,
               options: TableOptions) -> list[ManifestEntry]:
        """``rows`` (key-sorted) as level-0 files of ``options``; their ADD entries."""
        partition = moved.partition
        writer = RollingDataFileWriter(
            self.table.storage, directory, self.schema, options, level=0,
            key_value=True, file_source=FILE_SOURCE_APPEND, now_millis=self.now_millis,
            external=external_provider(options, self.table.path, directory))
        try:
            for batch in rows.select(self.output_columns).to_batches(self.batch_rows):
                writer.write(batch)
            written = writer.close()
        except BaseException:
            writer.abort()
            raise
        moved.written_paths += [meta.external_path or self.table.storage.join(directory, meta.file_name)
                                for meta in written]
        return [ManifestEntry(FILE_KIND_ADD, partition.partition, bucket, partition.num_buckets,
                              meta) for meta in written]


@dataclass(frozen=True, slots=True)
class PostponeTask:
    """One partition's move as plain data, for an executor's task (Spark): where the table's
    storage is, the job's journal (every file noted before it is written), what the plan
    settled and the driver's clock (the files' creation time)."""

    location: StorageLocation
    table_path: str
    table_name: str
    journal: JobJournal
    schema: TableSchema
    sequence_floor: int
    partition: PostponePartition
    clock: Clock
    chunk_bytes: int | None = None  # PostponeMover's


def move_partition(task: PostponeTask) -> PostponeMoved:
    """A task: one partition's postpone rows moved; its own files deleted if it fails."""
    storage = task.journal.recording(task.location.open())
    table = Table(storage, task.table_path, task.table_name)
    use_returning_memory_pool()
    mover = PostponeMover(table, task.schema, task.sequence_floor, task.clock.local_ms,
                          chunk_bytes=task.chunk_bytes)
    try:
        return mover.move(task.partition)
    except BaseException:
        _delete_paths(table, mover.moved)
        raise


@dataclass
class PostponeSummary:
    """One ``compact`` run's move of postpone rows (``snapshot``: the commit, None: nothing)."""

    plan: PostponePlan | None = None
    moved: list[PostponeMoved] = field(default_factory=list)
    snapshot: Snapshot | None = None
    attempts: int = 0

    @property
    def rows_read(self) -> int:
        return sum(m.rows_read for m in self.moved)

    @property
    def rows_written(self) -> int:
        return sum(m.rows_written for m in self.moved)

    @property
    def bytes_in(self) -> int:
        return sum(m.partition.bytes for m in self.moved)

    @property
    def bytes_out(self) -> int:
        return sum(e.file.file_size for m in self.moved for e in m.added)

    def describe(self) -> str:
        if self.snapshot is None:
            return "  postpone bucket: nothing to move"
        lines = [f"  postpone bucket: snapshot {self.snapshot.id} moved {self.rows_read} rows of "
                 f"{sum(len(m.partition.files) for m in self.moved)} files into "
                 f"{sum(m.buckets for m in self.moved)} real buckets ({self.rows_written} rows "
                 f"after merging) in {self.attempts} attempt(s)"]
        lines += [f"    {m.partition.describe()}" for m in self.moved]
        return "\n".join(lines)


def move_postponed_rows(recorded: RecordedJob, schema: TableSchema, clock: Clock, *,
                        partitions: PartitionSelection | None = None,
                        max_attempts: int = 3, mapper: TaskMapper | None = None,
                        accepted_options: tuple[str, ...] = (),
                        chunk_bytes: int | None = None) -> PostponeSummary:
    """Plan, move and commit the postpone rows of ``recorded``'s table (files written
    through its journal, so a killed run leaves nothing behind); re-planned on a conflict.
    ``schema``: the one the run refused; a newer one is refused again before it is used (less
    the undecided option keys the operator accepted: ``accepted_options``).
    ``mapper``: an executor that runs one task per partition (Spark), else they run here.
    ``chunk_bytes``: the rows moved at once, at most (:class:`PostponeMover`)."""
    table = recorded.table
    committer = Committer(table, clock=clock, journal=recorded)
    summary = PostponeSummary()

    checked = schema

    def attempt(number: int) -> Attempt:
        nonlocal checked
        summary.attempts = number
        snapshot = table.snapshots.latest()
        if snapshot is None:
            return Attempt()
        # read after the snapshot: no file of it was written with a newer schema (a writer
        # writes the schema first); rows are read and written in it, whatever evolved
        current = table.latest_schema()
        if current.id != checked.id:
            refuse(current, "compact", table.path, accepted_options)
            checked = current
        summary.plan = plan_postpone(table, current, snapshot, partitions=partitions)
        if not summary.plan.partitions:
            return Attempt()
        plan = summary.plan
        if mapper is not None:  # a failed task fails the run; the journal has its files
            tasks = [PostponeTask(table.location, table.path, table.name, recorded.journal,
                                  current, plan.sequence_floor, p, clock, chunk_bytes)
                     for p in plan.partitions]
            summary.moved = mapper.map_tasks(
                move_partition, tasks, f"paimond compact {table.name}: the postpone rows of "
                f"{len(tasks)} partition(s) into real buckets")
        else:
            mover = PostponeMover(table, current, plan.sequence_floor, clock.local_ms,
                                  chunk_bytes=chunk_bytes)
            try:
                summary.moved = mover.move_all(plan.partitions)
            except BaseException:
                _delete_paths(table, mover.moved)
                raise
        changes = CommitChanges(
            deleted=[e for p in summary.plan.partitions for e in p.files],
            added=[e for m in summary.moved for e in m.added],
            changelog=[e for m in summary.moved for e in m.changelog], base=summary.plan.scan)

        def discard() -> None:
            _delete_paths(table, summary.moved)
            summary.moved = []

        recorded.keep(committed_names(changes))
        return Attempt(lambda: committer.commit(changes), discard)

    summary.snapshot, _ = commit_with_replan(attempt, max_attempts)
    return summary


def _delete_paths(table: Table, moved: Sequence[PostponeMoved]) -> None:
    for m in moved:
        for path in m.written_paths:
            table.storage.delete(path)
