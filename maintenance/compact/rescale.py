"""Rescale: rewrite partitions of a primary-key table into another number of buckets (Paimon's
``rescale`` procedure, Spark ``RescaleProcedure`` and the ``rescale-bucket`` guide;
apache/paimon 5dacde516b).

What Java does: read the partitions' rows (a batch read of the real buckets: every key once,
merged), write them into ``bucket_num`` buckets with the table's bucket function, and commit
an OVERWRITE of those partitions in strict mode (any commit since the snapshot read fails it:
that commit's rows would be lost). Refused as Java refuses: no snapshot; a postpone-bucket
table without a bucket number. Refused by paimond with the reason:

- ``bucket = -1`` tables (dynamic buckets: a key's bucket is in the hash index, not a
  function of the key) and append tables;
- a fixed-bucket table whose ``bucket`` option is not the new number: writers would keep
  writing the old number into the partition (Paimon's guide alters the option first);
- a partition that still holds postpone files: their rows are not in the real buckets Java
  reads, and the overwrite would delete them; compact first;
- with ``changelog-producer`` lookup or full-compaction, a partition with files below the max
  level: their changelog, which compaction produces, would never be written; compact fully
  first;
- the delta branch of a chain table: Java's OVERWRITE commit there truncates the same
  partitions in the snapshot branch (``ChainTableOverwriteCommitCallback``).

paimond's rewrite: per partition, every live file of its real buckets read (through its
deletion vectors), merged with the table's merge engine as a full compaction merges them
(retractions dropped, each row keeps its sequence number), assigned to buckets by
:mod:`paimond.table.bucketing`, and written as one sorted run per bucket at the max level,
``file_source`` COMPACT; the partition's deletion-vector index entries are deleted. Readers see
the same rows; no changelog is written (nothing changed). One OVERWRITE snapshot requires the
snapshot the plan read to be the latest.

Memory: a partition bigger than the memory budget is never held whole. Its rows are read in
batches, each row tagged with its new bucket, and sorted by (new bucket, key) through the
external sort of :mod:`paimond.maintenance.compact.external_sort` (sorted runs spilled to a
local temporary directory beyond half the budget). The sorted stream is merged a batch at a
time (the last key of a batch waits for the next, so a key's versions are merged together) and
written bucket after bucket, one writer open at a time.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.clock import Clock
from paimond.errors import RefusedError
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_DELETE, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.streaming import sort_slice
from paimond.maintenance.compact.external_sort import SortOrder, sorted_batches
from paimond.maintenance.compact.memory import write_buffer_bytes
from paimond.maintenance.compact.partition_rewrite import (
    BATCH_ROWS,
    PartitionFiles,
    RunWriter,
    partition_batches,
)
from paimond.maintenance.compact.sort_compact import SORT_MEMORY_BYTES
from paimond.maintenance.job_cleanup import RecordedJob, committed_names, recorded_job
from paimond.table.bucketing import bucket_function_of
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.commit.job_records import JobJournal
from paimond.table.commit.requirements import RequireSnapshot
from paimond.table.data_files.arrow_io import FILE_SOURCE_COMPACT
from paimond.table.data_files.kv_layout import key_fields, physical_row_type, thin_mode
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions
from paimond.table.options.merge import MergeConfig
from paimond.table.options.semantic import refuse
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import StorageLocation

if TYPE_CHECKING:  # the executor's protocol (its module loads file-index code)
    from paimond.maintenance.distributed import TaskMapper

JOB = "rescale"
BUCKET_COLUMN = "_PAIMOND_NEW_BUCKET"


@dataclass(frozen=True, slots=True)
class RescalePartition:
    partition: bytes
    text: str
    files: tuple[ManifestEntry, ...]  # every live file of its real buckets
    buckets_before: tuple[int, ...]  # the total buckets its files record
    dv_entries: tuple[IndexManifestEntry, ...] = ()  # its buckets' deletion-vector index files

    @property
    def rows(self) -> int:
        return sum(e.file.row_count for e in self.files)

    def describe(self, bucket_num: int) -> str:
        before = ", ".join(str(b) for b in self.buckets_before)
        return (f"{self.text or '-'}: {len(self.files)} files, {self.rows} rows in {before} "
                f"bucket(s) -> {bucket_num}")


@dataclass(frozen=True, slots=True)
class RescalePlan:
    table_name: str
    snapshot: Snapshot
    schema: TableSchema
    bucket_num: int
    partitions: tuple[RescalePartition, ...]

    def describe(self) -> str:
        head = (f"{self.table_name}: rescale {len(self.partitions)} partition(s) to "
                f"{self.bucket_num} buckets (base snapshot {self.snapshot.id})")
        if not self.partitions:
            return f"{self.table_name}: no partition to rescale (base snapshot {self.snapshot.id})"
        return "\n".join([head, *(f"  {p.describe(self.bucket_num)}" for p in self.partitions)])


@dataclass
class RescaleSummary:
    plan: RescalePlan
    snapshot: Snapshot | None = None
    rows_read: int = 0
    rows_written: int = 0
    files_written: int = 0
    duration_s: float = 0.0

    def describe(self) -> str:
        if self.snapshot is None:
            return self.plan.describe() + "\n  nothing committed"
        return "\n".join([
            self.plan.describe(),
            f"  snapshot {self.snapshot.id} (OVERWRITE): {self.rows_read} rows read, "
            f"{self.rows_written} written in {self.files_written} files, "
            f"{self.duration_s:.2f} s"])


def plan_rescale(table: Table, bucket_num: int | None, *,
                 partitions: Mapping[str, str] | None = None) -> RescalePlan:
    """What a rescale would rewrite; RefusedError names why a table cannot be rescaled."""
    snapshot = table.snapshots.latest()
    # read after the snapshot: none of its files was written with a newer schema (writers
    # write the schema first); the rows are read and written in it
    schema = table.latest_schema()
    refuse(schema, "compact", table.path)  # it merges rows as compaction does
    options = TableOptions.of(schema)
    if options.chain_table_enabled and table.branch == schema.options.get(
            "scan.fallback-delta-branch"):
        raise RefusedError(JOB, "the delta branch of a chain table: Java's OVERWRITE commit "
                           "there also truncates the partitions in the snapshot branch "
                           "(ChainTableOverwriteCommitCallback), which paimond does not",
                           table.path)
    bucket_num = _bucket_number(table, schema, options, bucket_num)
    if snapshot is None:
        raise RefusedError(JOB, f"{table.name} has no snapshot: nothing to rescale", table.path)
    scan = scan_snapshot(table, snapshot)
    files: dict[bytes, list[ManifestEntry]] = defaultdict(list)
    postpone: dict[bytes, int] = defaultdict(int)
    for live in scan.files:
        entry = live.entry
        if entry.bucket == BUCKET_POSTPONE:
            postpone[entry.partition] += entry.file.row_count
        else:
            files[entry.partition].append(entry)
    dv_entries: dict[bytes, list[IndexManifestEntry]] = defaultdict(list)
    for index in scan.index_entries:
        if index.index_file.index_type == INDEX_TYPE_DELETION_VECTORS:
            dv_entries[index.partition].append(index)
    planned = []
    for partition in sorted(files.keys() | postpone.keys()):
        text = partition_text(schema, partition)
        if partitions and not partition_matches(text, partitions):
            continue
        if postpone.get(partition):
            raise RefusedError(JOB, f"partition {text or '-'} holds {postpone[partition]} rows "
                               "in bucket-postpone, which the rewrite would drop: run "
                               "`paimond compact` first", table.path)
        entries = files[partition]
        pending = [e for e in entries if e.file.level < options.num_levels - 1]
        if options.changelog_producer in ("lookup", "full-compaction") and pending:
            raise RefusedError(JOB, f"partition {text or '-'} has {len(pending)} files below the "
                               f"max level whose changelog (changelog-producer="
                               f"{options.changelog_producer}) the rewrite would never produce: "
                               "run `paimond compact --full` first", table.path)
        planned.append(RescalePartition(
            partition, text, tuple(entries),
            tuple(sorted({e.total_buckets for e in entries})), tuple(dv_entries[partition])))
    return RescalePlan(table.name, snapshot, schema, bucket_num, tuple(planned))


def _bucket_number(table: Table, schema: TableSchema, options: TableOptions,
                   bucket_num: int | None) -> int:
    if not schema.primary_keys:
        raise RefusedError(JOB, "an append table: paimond rescales primary-key tables only",
                           table.path)
    if options.bucket <= 0 and options.bucket != BUCKET_POSTPONE:
        raise RefusedError(JOB, f"bucket={options.bucket}: a dynamic-bucket table keeps each "
                           "key's bucket in its hash index; rescale serves fixed-bucket and "
                           "postpone-bucket tables", table.path)
    if bucket_num is not None and bucket_num <= 0:
        raise RefusedError(JOB, f"the bucket number must be positive, got {bucket_num}",
                           table.path)
    if options.bucket == BUCKET_POSTPONE:
        if bucket_num is None:
            raise RefusedError(JOB, "When rescaling postpone bucket tables, you must provide "
                               "the resulting bucket number.", table.path)
        return bucket_num
    if bucket_num is not None and bucket_num != options.bucket:
        raise RefusedError(JOB, f"the table's bucket option is {options.bucket}: writers would "
                           f"keep writing {options.bucket} buckets into a partition of "
                           f"{bucket_num}; set the option first (ALTER TABLE ... SET "
                           f"('bucket' = '{bucket_num}')), then rescale", table.path)
    return options.bucket


class _Rewriter:
    """Merges partitions' rows and writes them into ``bucket_num`` buckets, holding about
    ``memory_budget_bytes`` of rows (module doc)."""

    def __init__(self, table: Table, schema: TableSchema, bucket_num: int,
                 now_millis: Callable[[], int], memory_budget_bytes: int) -> None:
        self.table, self.schema, self.bucket_num = table, schema, bucket_num
        self.options = TableOptions.of(schema)
        self.bucket_function = bucket_function_of(schema, self.options)
        config = MergeConfig.of(schema)
        self.reducer = make_reducer(config, schema.field_names, drop_deletes=True)
        order = "descending" if config.sequence_descending else "ascending"
        self.user_sequence = [(name, order) for name in config.sequence_fields]
        self.key_columns = [f.name for f in key_fields(schema)]
        self.output_columns = physical_row_type(
            schema, key_value=True, thin=thin_mode(schema, self.options)).field_names
        self.writer = RunWriter.of(table, schema, level=self.options.num_levels - 1,
                                   file_source=FILE_SOURCE_COMPACT, now_millis=now_millis)
        self.budget_bytes = memory_budget_bytes
        self.rows_read = self.rows_written = 0

    def rewrite_all(self, partitions: Sequence[RescalePartition]) -> Rewritten:
        """Every partition rewritten; what was written is deleted if one fails."""
        try:
            for partition in partitions:
                self.rewrite(partition)
        except BaseException:
            self.writer.delete_written()
            raise
        return Rewritten(tuple(self.writer.added), tuple(self.writer.written_paths),
                         self.rows_read, self.rows_written)

    def rewrite(self, partition: RescalePartition) -> None:
        pieces = self._merged(partition)
        for bucket, group in itertools.groupby(pieces, key=lambda piece: piece[0]):
            batches = (batch for _, rows in group
                       for batch in rows.select(self.output_columns).to_batches(BATCH_ROWS))
            self.writer.write_batches(partition.partition, bucket, self.bucket_num, batches,
                                      row_group_bytes=write_buffer_bytes(self.budget_bytes))

    def _merged(self, partition: RescalePartition) -> Iterator[tuple[int, pa.Table]]:
        """The partition's merged rows as (new bucket, rows in key order), bucket after
        bucket; a bucket's rows may come in several pieces, one after another."""
        batch_rows = self._batch_rows(partition)
        read = partition_batches(
            self.table, self.schema,
            PartitionFiles(partition.partition, partition.files, partition.dv_entries),
            bitmap64=self.options.deletion_vectors_bitmap64, batch_rows=batch_rows)
        tagged = (batch.append_column(BUCKET_COLUMN, pa.array(
            self.bucket_function.buckets(batch, self.bucket_num))) for batch in read)
        order = SortOrder("order", (BUCKET_COLUMN, *self.key_columns), ())
        waiting: pa.Table | None = None  # the last key's versions, until its next batch
        for batch in sorted_batches(tagged, order, self.budget_bytes, batch_rows):
            self.rows_read += batch.num_rows
            if not batch.num_rows:
                continue
            rows = pa.Table.from_batches([batch])
            if waiting is not None:
                rows = pa.concat_tables([waiting, rows])
            last = _last_key_start(rows, self.key_columns)
            waiting = rows.slice(last)
            yield from self._reduced(rows.slice(0, last))
        if waiting is not None:
            yield from self._reduced(waiting)

    def _reduced(self, rows: pa.Table) -> Iterator[tuple[int, pa.Table]]:
        if not rows.num_rows:
            return
        rows = rows.drop_columns([BUCKET_COLUMN])
        merged = self.reducer(sort_slice([rows], self.key_columns, self.user_sequence))
        self.rows_written += merged.num_rows
        yield from self.bucket_function.split(merged, self.bucket_num)

    def _batch_rows(self, partition: RescalePartition) -> int:
        """Rows per batch: a sixteenth of the budget at most (a decoded row taken as four
        times its share of the files' bytes), never under 1,024."""
        rows = max(1, partition.rows)
        row_bytes = max(1, 4 * sum(e.file.file_size for e in partition.files) // rows)
        return max(1024, min(BATCH_ROWS, self.budget_bytes // 16 // row_bytes))


def _last_key_start(rows: pa.Table, key_columns: Sequence[str]) -> int:
    """Where the versions of the last row's key begin in ``rows`` (sorted by key: they are
    the last rows). Primary keys are never NULL."""
    same = np.ones(rows.num_rows, dtype=bool)
    for name in key_columns:
        column = rows.column(name)
        same &= pc.equal(column, column[-1]).to_numpy(zero_copy_only=False)
    return int(np.flatnonzero(~same)[-1]) + 1 if not same.all() else 0


@dataclass(frozen=True, slots=True)
class RescaleTask:
    """One partition's rewrite as plain data, for an executor's task (Spark)."""

    location: StorageLocation
    table_path: str
    table_name: str
    journal: JobJournal
    schema: TableSchema
    bucket_num: int
    partition: RescalePartition
    clock: Clock
    memory_budget_bytes: int = SORT_MEMORY_BYTES


@dataclass(frozen=True, slots=True)
class Rewritten:
    added: tuple[ManifestEntry, ...]
    written_paths: tuple[str, ...]
    rows_read: int
    rows_written: int


def rescale_partition(task: RescaleTask) -> Rewritten:
    """A task: one partition rewritten; its own files deleted if it fails."""
    storage = task.journal.recording(task.location.open())
    table = Table(storage, task.table_path, task.table_name)
    rewriter = _Rewriter(table, task.schema, task.bucket_num, task.clock.local_ms,
                         task.memory_budget_bytes)
    return rewriter.rewrite_all([task.partition])


def rescale(table: Table, bucket_num: int | None, *, clock: Clock,
            partitions: Mapping[str, str] | None = None, dry_run: bool = False,
            mapper: TaskMapper | None = None, memory_budget_bytes: int = SORT_MEMORY_BYTES
            ) -> RescalePlan | RescaleSummary:
    """Plan (``dry_run``: only that) and run a rescale as a recorded job: a run killed midway
    leaves files the next run deletes; a commit since the plan fails it (CommitConflictError),
    its files deleted. ``mapper``: an executor that runs one task per partition (Spark);
    ``memory_budget_bytes``: the rows a partition's rewrite holds (beyond them, it spills)."""
    plan = plan_rescale(table, bucket_num, partitions=partitions)
    if dry_run:
        return plan
    with recorded_job(table, JOB, clock) as recorded:
        return _run(recorded, plan, clock, mapper, memory_budget_bytes)


def _run(recorded: RecordedJob, plan: RescalePlan, clock: Clock, mapper: TaskMapper | None,
         memory_budget_bytes: int) -> RescaleSummary:
    started = time.monotonic()
    summary = RescaleSummary(plan)
    if not plan.partitions:
        return summary
    table = recorded.table
    if mapper is None:
        parts = [_Rewriter(table, plan.schema, plan.bucket_num, clock.local_ms,
                           memory_budget_bytes).rewrite_all(plan.partitions)]
    else:  # a failed task fails the run; the job's journal has the files it wrote
        tasks = [RescaleTask(table.location, table.path, table.name, recorded.journal,
                             plan.schema, plan.bucket_num, p, clock, memory_budget_bytes)
                 for p in plan.partitions]
        parts = mapper.map_tasks(rescale_partition, tasks, f"paimond rescale {table.name}: "
                                 f"{len(tasks)} partition(s) into {plan.bucket_num} buckets")
    added = [e for part in parts for e in part.added]
    try:
        changes = CommitChanges(
            deleted=[e for p in plan.partitions for e in p.files], added=added,
            index_deleted=[_deleted(e) for p in plan.partitions for e in p.dv_entries],
            requirements=[RequireSnapshot(plan.snapshot.id)])
        recorded.keep(committed_names(changes))
        summary.snapshot = Committer(table, commit_kind="OVERWRITE", clock=clock,
                                     journal=recorded).commit(changes)
    except BaseException:
        for path in (p for part in parts for p in part.written_paths):
            table.storage.delete(path)
        raise
    summary.rows_read = sum(part.rows_read for part in parts)
    summary.rows_written = sum(part.rows_written for part in parts)
    summary.files_written = len(added)
    summary.duration_s = time.monotonic() - started
    return summary


def _deleted(entry: IndexManifestEntry) -> IndexManifestEntry:
    return replace(entry, kind=FILE_KIND_DELETE)
