"""Sort compaction of a bucket-unaware append table: Paimon's ``compact`` procedure with
``order_strategy`` (``order``, ``zorder``, ``hilbert``) and ``order_by`` (Spark
``CompactProcedure.sortCompactUnAwareBucketTable``, apache/paimon 5dacde516b).

Every live file of each selected partition is read (through its deletion vector) and the
partition's rows are rewritten in the strategy's order (:mod:`paimond.maintenance.compact.sort_order`)
into files of ``target-file-size``, so that files' min/max statistics on the order columns
barely overlap and filters skip most files. Unlike Java, which commits the sorted rows as an
OVERWRITE of the partitions, paimond commits one COMPACT snapshot that replaces exactly the
files it read (a concurrent append survives; readers see the same rows), with file source
COMPACT and sequence numbers counted from the partition's smallest. A partition's DV index
files go with its files. Fixed-bucket tables are refused, as Java refuses them, and so are
row-tracking tables (Java's overwrite gives the rows new ids). A partition bigger than the
memory budget is sorted externally, through sorted runs spilled to a local temporary directory
(:mod:`paimond.maintenance.compact.external_sort`), as Java spills to disk. With an executor
that shuffles (Spark) the partitions are sorted by range across its tasks
(:mod:`paimond.maintenance.compact.sort_ranges`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from paimond.clock import Clock
from paimond.errors import UnsupportedError
from paimond.format.meta.deletion_vector import DeletionVector
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.lookup.deletion_vectors import deleted_positions, filter_deleted
from paimond.maintenance.compact.append_rewrite import rewrite_index_files
from paimond.maintenance.compact.external_sort import SortOrder, sorted_batches
from paimond.maintenance.compact.sort_order import check_sort_columns
from paimond.maintenance.distributed import shuffler_of
from paimond.maintenance.execution import TaskExecutor
from paimond.maintenance.job_cleanup import committed_names, recorded_job
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.data_files.arrow_io import FILE_SOURCE_COMPACT, RollingDataFileWriter, read_data_file
from paimond.table.data_files.external_paths import ExternalPaths, external_provider
from paimond.table.indexes.deletion_vectors import read_deletion_vectors
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.partition_filter import PartitionSelection
from paimond.table.scan.snapshot_scan import SnapshotFiles, bucket_path, scan_snapshot

# The rows a sort holds in memory when no budget is given (limits.memory_budget_mb, the
# daemon's, is its budget): beyond it the partition is sorted through spilled runs.
SORT_MEMORY_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SortTask:
    """One partition: every live file, and the DV index files that hold their vectors."""

    partition: bytes
    partition_text: str
    bucket: int
    total_buckets: int
    directory: str
    inputs: tuple[ManifestEntry, ...]
    dv_index_files: tuple[IndexManifestEntry, ...]
    output_level: int = 0  # incremental clustering upgrades its outputs (Java upgrade())


@dataclass(frozen=True, slots=True)
class SortPlan:
    table_name: str
    base_snapshot_id: int | None
    strategy: str
    columns: tuple[str, ...]
    tasks: tuple[SortTask, ...]

    def describe(self) -> str:
        lines = [f"{self.table_name}: {self.strategy} sort by {', '.join(self.columns)} of "
                 f"{len(self.tasks)} partitions (base snapshot {self.base_snapshot_id})"]
        lines += [f"  {t.partition_text or '-'}: {len(t.inputs)} files, "
                  f"{sum(e.file.row_count for e in t.inputs)} rows" for t in self.tasks]
        return "\n".join(lines)


def plan_sort_compaction(table: Table, strategy: str, columns: Sequence[str], *,
                         partitions: PartitionSelection | None = None,
                         snapshot: Snapshot | None = None,
                         accepted_options: Collection[str] = ()) -> SortPlan:
    """Raises RefusedError / UnsupportedError before anything is written (undecided option
    keys refuse the table unless in ``accepted_options``)."""
    schema = table.latest_schema()
    refuse(schema, "compact", table.path, accepted_options)
    options = TableOptions.of(schema)
    if schema.primary_keys:
        raise UnsupportedError("sort compaction of a primary-key table (Paimon sorts append "
                               "tables only)", table.path)
    if options.bucket_mode(schema) != "BUCKET_UNAWARE":
        raise UnsupportedError("sort compaction of a fixed-bucket table (Java: only "
                               "bucket-unaware append tables)", table.path)
    if options.flag("row-tracking.enabled"):
        raise UnsupportedError("sort compaction of a row-tracking table (Java's overwrite "
                               "gives every row a new id)", table.path)
    check_sort_columns(schema.fields, schema.partition_keys, strategy, columns)
    external = ExternalPaths.of(options)
    for root in external.roots if external else ():
        table.storage.exists(root)  # UnsupportedError: a file system the storage cannot reach
    snapshot = snapshot or table.snapshots.latest()
    if snapshot is None:
        return SortPlan(table.name, None, strategy, tuple(columns), ())
    scanned = scan_snapshot(table, snapshot)
    tasks = []
    for (partition, bucket, total_buckets), entries in live_by_bucket(
            scanned, schema, partitions).items():
        tasks.append(SortTask(partition, partition_text(schema, partition), bucket,
                              total_buckets, bucket_path(table, schema, partition, bucket),
                              tuple(entries), dv_index_files(scanned, partition)))
    return SortPlan(table.name, snapshot.id, strategy, tuple(columns), tuple(tasks))


def live_by_bucket(scanned: SnapshotFiles, schema: TableSchema,
                   partitions: PartitionSelection | None
                   ) -> dict[tuple[bytes, int, int], list[ManifestEntry]]:
    """The live files of the matching partitions by (partition, bucket, total buckets)."""
    grouped: dict[tuple[bytes, int, int], list[ManifestEntry]] = {}
    for live in scanned.files:
        entry = live.entry
        if partitions and not partition_matches(partition_text(schema, entry.partition),
                                                partitions):
            continue
        grouped.setdefault((entry.partition, entry.bucket, entry.total_buckets),
                           []).append(entry)
    return grouped


def dv_index_files(scanned: SnapshotFiles, partition: bytes
                   ) -> tuple[IndexManifestEntry, ...]:
    """The partition's deletion-vector index files."""
    return tuple(e for e in scanned.index_entries if e.partition == partition
                 and e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS)


@dataclass
class SortResult:
    task: SortTask
    added: tuple[ManifestEntry, ...] = ()
    index_added: tuple[IndexManifestEntry, ...] = ()
    index_deleted: tuple[IndexManifestEntry, ...] = ()
    written_paths: tuple[str, ...] = ()
    rows: int = 0


def execute_sort(task: SortTask, table: Table, plan: SortPlan, clock: Clock,
                 batch_rows: int = 65536, memory_budget_bytes: int = SORT_MEMORY_BYTES
                 ) -> SortResult:
    """Read, sort and write one partition, holding about ``memory_budget_bytes`` of rows
    (beyond that the sort spills); deletes its own files on failure."""
    schema = table.latest_schema()
    options = TableOptions.of(schema)
    held = {entry.index_file.file_name: read_deletion_vectors(table, entry)
            for entry in task.dv_index_files}
    batch_rows = batch_rows_within(task, batch_rows, memory_budget_bytes)
    result = SortResult(task)
    writer = RollingDataFileWriter(
        table.storage, task.directory, schema, options, level=0, key_value=False,
        file_source=FILE_SOURCE_COMPACT, now_millis=clock.wall_ms,
        sequence_start=task.inputs[0].file.min_sequence_number,
        external=external_provider(options, table.path, task.directory))
    index_paths: list[str] = []
    rows = 0
    try:
        order = SortOrder(plan.strategy, plan.columns, tuple(schema.fields),
                          int(options.text("zorder.var-length-contribution") or 8))
        for batch in sorted_batches(input_batches(table, schema, task.directory, task.inputs, held,
                                                  batch_rows),
                                    order, memory_budget_bytes, batch_rows):
            rows += batch.num_rows
            writer.write(batch)
        written = writer.close()
        result.index_added, result.index_deleted = rewrite_index_files(
            task.inputs, task.dv_index_files, table, held, index_paths,
            bitmap64=options.deletion_vectors_bitmap64)
    except BaseException:
        writer.abort()
        for path in index_paths:
            table.storage.delete(path)
        raise
    result.added = tuple(ManifestEntry(FILE_KIND_ADD, task.partition, task.bucket,
                                       task.total_buckets,
                                       dataclasses.replace(meta, level=task.output_level))
                         for meta in written)
    result.written_paths = tuple(
        e.file.external_path or table.storage.join(task.directory, e.file.file_name)
        for e in result.added) + tuple(index_paths)
    result.rows = rows
    return result


def batch_rows_within(task: SortTask, batch_rows: int, budget_bytes: int) -> int:
    """Rows per batch read and written: a sixteenth of the budget at most (an Arrow row taken
    as four times its share of the input files' bytes), never under 1,024."""
    rows = sum(e.file.row_count for e in task.inputs)
    row_bytes = max(1, 4 * sum(e.file.file_size for e in task.inputs) // max(1, rows))
    return max(1024, min(batch_rows, budget_bytes // 16 // row_bytes))


def input_batches(table: Table, schema: TableSchema, directory: str,
                  inputs: Sequence[ManifestEntry],
                  held: Mapping[str, Mapping[str, DeletionVector]], batch_rows: int,
                  projection: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of ``inputs`` (files of ``directory``), file by file, less those their
    deletion vectors (``held``: per index file, per data file) mark deleted; ``projection``:
    only those columns."""
    vectors = {name: vector for found in held.values() for name, vector in found.items()}
    for data_entry in inputs:
        meta = data_entry.file
        path = meta.external_path or table.storage.join(directory, meta.file_name)
        read = read_data_file(table.storage, path, file_format=meta.file_name.rsplit(".", 1)[-1],
                              file_schema=table.schema(meta.schema_id), read_schema=schema,
                              key_value=False, batch_rows=batch_rows, file_size=meta.file_size,
                              projection=projection)
        vector = vectors.get(meta.file_name)
        yield from filter_deleted(read, deleted_positions(vector)) if vector else read


@dataclass
class SortSummary:
    table_name: str
    plan: SortPlan | None = None
    snapshot: Snapshot | None = None
    results: list[SortResult] = field(default_factory=list)
    attempts: int = 0
    duration_s: float = 0.0

    @property
    def files_in(self) -> int:
        return sum(len(r.task.inputs) for r in self.results)

    @property
    def files_out(self) -> int:
        return sum(len(r.added) for r in self.results)

    def describe(self) -> str:
        if self.plan is not None and not self.plan.tasks:
            return f"{self.table_name}: nothing to sort"
        committed = f"snapshot {self.snapshot.id}" if self.snapshot else "nothing committed"
        strategy = f"{self.plan.strategy} by {', '.join(self.plan.columns)}" if self.plan else ""
        return (f"{self.table_name}: {committed} after {self.attempts} attempt(s) in "
                f"{self.duration_s:.2f} s\n  {strategy}: {len(self.results)} partitions, "
                f"files {self.files_in} -> {self.files_out}, rows "
                f"{sum(r.rows for r in self.results)}")


@dataclass
class SortCompactJob:
    """``planner``: another plan of sort tasks (incremental clustering) instead of the
    whole partitions'."""

    table: Table
    strategy: str
    columns: tuple[str, ...]
    clock: Clock
    partitions: PartitionSelection | None = None
    max_attempts: int = 3
    planner: Callable[[], SortPlan] | None = None
    accepted_options: tuple[str, ...] = ()  # undecided option keys the operator accepts
    memory_budget_bytes: int = SORT_MEMORY_BYTES  # rows held per sort; beyond it, spills
    executor: TaskExecutor | None = None  # one that shuffles (Spark): a range-partitioned sort

    def plan(self) -> SortPlan:
        if self.planner is not None:
            return self.planner()
        return plan_sort_compaction(self.table, self.strategy, self.columns,
                                    partitions=self.partitions,
                                    accepted_options=self.accepted_options)

    def run(self) -> SortSummary:
        started = time.monotonic()
        self.plan()  # refusals before any record
        summary = SortSummary(self.table.name)
        with recorded_job(self.table, "compact", self.clock) as recorded:
            committer = Committer(self.table, clock=self.clock, journal=recorded)

            def attempt(number: int) -> Attempt:
                summary.attempts = number
                summary.plan = plan = self.plan()
                shuffler = shuffler_of(self.executor)
                if shuffler is not None and plan.tasks:
                    from paimond.maintenance.compact.sort_ranges import sort_in_tasks

                    summary.results = sort_in_tasks(shuffler, plan, recorded.table,
                                                    recorded.journal, self.clock,
                                                    self.memory_budget_bytes)
                else:
                    summary.results = [execute_sort(
                        t, recorded.table, plan, self.clock,
                        memory_budget_bytes=self.memory_budget_bytes) for t in plan.tasks]
                if not summary.results:
                    return Attempt()
                results = summary.results
                changes = CommitChanges(
                    deleted=[e for r in results for e in r.task.inputs],
                    added=[e for r in results for e in r.added],
                    index_added=[e for r in results for e in r.index_added],
                    index_deleted=[e for r in results for e in r.index_deleted])

                def discard() -> None:
                    for result in results:
                        for path in result.written_paths:
                            self.table.storage.delete(path)
                    summary.results = []

                recorded.keep(committed_names(changes))
                return Attempt(lambda: committer.commit(changes), discard)

            summary.snapshot, _ = commit_with_replan(attempt, self.max_attempts)
        summary.duration_s = time.monotonic() - started
        return summary
