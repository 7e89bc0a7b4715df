"""Sort compaction (and incremental clustering) across an executor's tasks: a range-partitioned
sort, as Paimon's Spark sorters do it (``repartitionByRange`` on the order or the z-order /
Hilbert key, then ``sortWithinPartitions``; apache/paimon 5dacde516b,
``paimon-spark-common/.../spark/sort/ZorderSorter.java``).

1. **Sample.** One task per group of a partition's files reads the order columns alone and
   returns every k-th row's key (about ``SAMPLE_ROWS`` per task).
2. **Cut.** The driver sorts each partition's samples and cuts the partition into ranges of
   about ``target-file-size`` of input each: the keys at the quantiles are the boundaries.
3. **Shuffle.** One task per group of files reads its rows (through their deletion vectors),
   tags each with its range (``[boundary i-1, boundary i)``) and sends the rows on by range
   (:class:`~paimond.maintenance.distributed.TaskShuffler`); one task per range sorts what
   it received within the memory budget (:mod:`paimond.maintenance.compact.external_sort`)
   and writes its files through the job's journal, so what a failed attempt wrote is deleted
   when the job ends.
4. **Commit.** The driver numbers the files' sequences in range order, as one writer over
   the whole sorted partition numbers them (an append file holds no sequence column: the
   numbers are metadata), drops the inputs' vectors from the partition's DV index files and
   commits once (:class:`~paimond.maintenance.compact.sort_compact.SortCompactJob`).

The rows and their order are those of the single-process sort; only where one file ends and
the next begins differs (at range boundaries as well as at ``target-file-size``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from paimond.clock import Clock
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, DataFileMeta, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.maintenance.compact.append_rewrite import rewrite_index_files
from paimond.maintenance.compact.external_sort import SortOrder, sorted_batches
from paimond.maintenance.compact.sort_compact import (
    SortPlan,
    SortResult,
    SortTask,
    batch_rows_within,
    input_batches,
)
from paimond.maintenance.distributed import TaskShuffler
from paimond.table.catalog import Table
from paimond.table.commit.job_records import JobJournal
from paimond.table.data_files.arrow_io import FILE_SOURCE_COMPACT, RollingDataFileWriter
from paimond.table.data_files.external_paths import external_provider
from paimond.table.indexes.deletion_vectors import read_deletion_vectors
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import StorageLocation

SAMPLE_ROWS = 2_000  # keys a sampling task returns at most
GROUP_BYTES = 256 << 20  # input bytes a reading task takes (one file at least)
MAX_RANGES = 1_000  # ranges per partition at most


@dataclass(frozen=True, slots=True)
class FileGroup:
    """A reading task: some of one partition's files, the partition's DV index files, and
    (for the shuffle) its ranges' boundaries."""

    location: StorageLocation
    table_path: str
    table_name: str
    schema: TableSchema
    directory: str
    inputs: tuple[ManifestEntry, ...]
    dv_index_files: tuple[IndexManifestEntry, ...]
    order: SortOrder
    batch_rows: int
    boundaries: bytes = b""  # an Arrow IPC stream of the boundary keys; empty: one range
    first_range: int = 0  # the destination of the partition's first range

    def batches(self, projection: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        table = Table(self.location.open(), self.table_path, self.table_name)
        held = {e.index_file.file_name: read_deletion_vectors(table, e)
                for e in self.dv_index_files}
        return input_batches(table, self.schema, self.directory, self.inputs, held,
                             self.batch_rows, projection)


@dataclass(frozen=True, slots=True)
class RangeWrite:
    """A writing task: one range of one partition, written as the job writes."""

    location: StorageLocation
    table_path: str
    journal: JobJournal | None
    schema: TableSchema
    directory: str
    order: SortOrder
    batch_rows: int
    memory_budget_bytes: int
    clock: Clock


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _read_ipc(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(blob).read_all()


def _keys(order: SortOrder, table: pa.Table) -> pa.Table:
    return order.keyed(table).select([name for name, _ in order.sort_keys])


def sample_keys(group: FileGroup) -> bytes:
    """A task: every k-th row's key of the group (order columns only read), as IPC."""
    rows = sum(e.file.row_count for e in group.inputs)
    stride = max(1, rows // SAMPLE_ROWS)
    picked, seen = [], 0
    for batch in group.batches(projection=group.order.columns):
        positions = np.arange((-seen) % stride, batch.num_rows, stride)
        if len(positions):
            picked.append(batch.take(pa.array(positions)))
        seen += batch.num_rows
    if not picked:
        return b""
    return _ipc(_keys(group.order, pa.Table.from_batches(picked)))


def range_boundaries(samples: Iterable[bytes], order: SortOrder, ranges: int) -> bytes:
    """The keys cutting the sampled rows into ``ranges`` ranges of equal counts, as IPC
    (empty: one range)."""
    tables = [_read_ipc(blob) for blob in samples if blob]
    if ranges <= 1 or not tables:
        return b""
    keys = pa.concat_tables(tables)
    keys = keys.take(order.indices(keys))
    return _ipc(keys.take(pa.array([i * keys.num_rows // ranges for i in range(1, ranges)])))


def range_ids(keys: pa.Table, boundaries: pa.Table, order: SortOrder) -> np.ndarray:
    """Each row's range: how many boundaries are at or below its key. Boundaries go first
    into one stable sort with the rows, so a row equal to a boundary follows it."""
    if boundaries.num_rows == 0:
        return np.zeros(keys.num_rows, np.int64)
    together = pa.concat_tables([boundaries.cast(keys.schema), keys])
    permutation = order.indices(together).to_numpy()
    is_boundary = permutation < boundaries.num_rows
    preceding = np.cumsum(is_boundary)
    ids = np.empty(keys.num_rows, np.int64)
    ids[permutation[~is_boundary] - boundaries.num_rows] = preceding[~is_boundary]
    return ids


def split_by_range(group: FileGroup) -> Iterator[tuple[int, bytes]]:
    """A task: the group's rows, batch by batch, sent on to their ranges."""
    boundaries = _read_ipc(group.boundaries) if group.boundaries else None
    for batch in group.batches():
        table = pa.Table.from_batches([batch])
        if boundaries is None:
            yield group.first_range, _ipc(table)
            continue
        ids = range_ids(_keys(group.order, table), boundaries, group.order)
        grouped = np.argsort(ids, kind="stable")
        ids = ids[grouped]
        table = table.take(pa.array(grouped))
        starts = np.concatenate([[0], np.flatnonzero(np.diff(ids)) + 1, [len(ids)]])
        for start, end in zip(starts[:-1], starts[1:], strict=True):
            yield group.first_range + int(ids[start]), _ipc(table.slice(start, end - start))


def write_range(task: RangeWrite, blobs: Iterator[bytes]) -> tuple[DataFileMeta, ...]:
    """A task: the range's rows sorted within the budget and written, at level 0 and
    numbered from 0 (the driver numbers and levels them)."""
    storage = task.location.open()
    if task.journal is not None:
        storage = task.journal.recording(storage)
    options = TableOptions.of(task.schema)
    writer = RollingDataFileWriter(
        storage, task.directory, task.schema, options, level=0, key_value=False,
        file_source=FILE_SOURCE_COMPACT, now_millis=task.clock.wall_ms,
        external=external_provider(options, task.table_path, task.directory))
    batches = (batch for blob in blobs for batch in _read_ipc(blob).to_batches())
    try:
        for batch in sorted_batches(batches, task.order, task.memory_budget_bytes,
                                    task.batch_rows):
            writer.write(batch)
        return tuple(writer.close())
    except BaseException:
        writer.abort()
        raise


def _groups(inputs: Sequence[ManifestEntry]) -> list[tuple[ManifestEntry, ...]]:
    groups: list[list[ManifestEntry]] = [[]]
    size = 0
    for entry in inputs:
        if groups[-1] and size + entry.file.file_size > GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(entry)
        size += entry.file.file_size
    return [tuple(g) for g in groups]


def _range_count(task: SortTask, target_file_size: int) -> int:
    size = sum(e.file.file_size for e in task.inputs)
    return max(1, min(MAX_RANGES, math.ceil(size / max(1, target_file_size))))


def sort_in_tasks(shuffler: TaskShuffler, plan: SortPlan, table: Table,
                  journal: JobJournal | None, clock: Clock, memory_budget_bytes: int,
                  batch_rows: int = 65536) -> list[SortResult]:
    """The plan's partitions sorted by the shuffler's tasks (module doc); ``table`` writes
    through the job's journal, which the tasks note their files in."""
    schema = table.latest_schema()
    options = TableOptions.of(schema)
    order = SortOrder(plan.strategy, plan.columns, tuple(schema.fields),
                      int(options.text("zorder.var-length-contribution") or 8))
    groups: list[list[FileGroup]] = []
    for task in plan.tasks:
        rows = batch_rows_within(task, batch_rows, memory_budget_bytes)
        groups.append([FileGroup(table.location, table.path, table.name, schema, task.directory,
                                 inputs, task.dv_index_files, order, rows)
                       for inputs in _groups(task.inputs)])
    flat = [g for per_task in groups for g in per_task]
    samples = shuffler.map_tasks(sample_keys, flat, f"paimond sort {table.name}: sample "
                                 f"{len(flat)} file groups' keys")
    shuffled: list[FileGroup] = []
    destinations: list[RangeWrite] = []
    firsts: list[int] = []
    taken = 0
    for task, per_task in zip(plan.tasks, groups, strict=True):
        ranges = _range_count(task, options.target_file_size_bytes)
        boundaries = range_boundaries(samples[taken:taken + len(per_task)], order, ranges)
        taken += len(per_task)
        firsts.append(len(destinations))
        shuffled += [dataclasses.replace(g, boundaries=boundaries, first_range=len(destinations))
                     for g in per_task]
        destinations += [RangeWrite(table.location, table.path, journal, schema, task.directory,
                                    order, per_task[0].batch_rows, memory_budget_bytes, clock)
                         for _ in range(ranges)]
    written = shuffler.shuffle_tasks(split_by_range, shuffled, write_range, destinations,
                                     f"paimond sort {table.name}: {len(plan.tasks)} partitions "
                                     f"in {len(destinations)} ranges")
    ends = [*firsts[1:], len(destinations)]
    return [_result(task, [m for metas in written[first:end] for m in metas], table, options)
            for task, first, end in zip(plan.tasks, firsts, ends, strict=True)]


def _result(task: SortTask, written: Sequence[DataFileMeta], table: Table,
            options: TableOptions) -> SortResult:
    """One partition's files numbered in range order from its inputs' first sequence, at
    the task's level, and its DV index files without the inputs' vectors."""
    result = SortResult(task)
    sequence = task.inputs[0].file.min_sequence_number
    added = []
    for meta in written:
        added.append(ManifestEntry(FILE_KIND_ADD, task.partition, task.bucket,
                                   task.total_buckets, dataclasses.replace(
                                       meta, level=task.output_level,
                                       min_sequence_number=sequence,
                                       max_sequence_number=sequence + meta.row_count - 1)))
        sequence += meta.row_count
    held = {e.index_file.file_name: read_deletion_vectors(table, e) for e in task.dv_index_files}
    index_paths: list[str] = []
    try:
        result.index_added, result.index_deleted = rewrite_index_files(
            task.inputs, task.dv_index_files, table, held, index_paths,
            bitmap64=options.deletion_vectors_bitmap64)
    except BaseException:
        for path in index_paths:
            table.storage.delete(path)
        raise
    result.added = tuple(added)
    result.written_paths = tuple(
        e.file.external_path or table.storage.join(task.directory, e.file.file_name)
        for e in result.added) + tuple(index_paths)
    result.rows = sum(m.row_count for m in written)
    return result
