"""Executing one append-table compaction task: Java ``AppendCompactTask.doCompact`` and
``BaseAppendFileStoreWrite.compactRewrite`` (apache/paimon 5dacde516b).

The input files are read in the task's order (through their deletion vectors, if any) and
written, unchanged and in that order, into rolling level-0 files of the table's format and
``target-file-size``, with ``file_source`` COMPACT, the current schema, statistics and file
indexes; row sequence numbers count up from the first input's minimum sequence number (a
``row-tracking.enabled`` table's rows keep their ``_ROW_ID`` and ``_SEQUENCE_NUMBER`` instead,
written into the new files: :mod:`paimond.table.data_files.row_tracking`), in the bucket directory or,
with ``data-file.external-paths``, where :mod:`paimond.table.data_files.external_paths` puts each. A
fixed bucket's deletion vectors lose the rewritten files' entries and the bucket's DV index
file is written anew when that changed it; a bucket-unaware table's index files that held an
input's vector are deleted, the vectors of their other data files written to one new index
file each (Java ``AppendDeleteFileMaintainer``; Java rolls at
``deletion-vector.index-file.target-size``, paimond writes one file). Nothing here commits;
on any error the files written so far are deleted and the error propagates.

Reading and writing overlap: one reader thread decodes the next batch while the task's thread
hands batches to a writer thread through a short queue; memory stays at a few batches.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import pyarrow as pa

from paimond.format.meta.deletion_vector import DeletionVector
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, FILE_KIND_DELETE, ManifestEntry
from paimond.lsm.lookup.deletion_vectors import BucketDeletionVectors, deleted_positions, filter_deleted
from paimond.lsm.merge.pipeline import BackgroundWriter, Prefetch
from paimond.lsm.task import CompactResult, CompactTask
from paimond.table.catalog import Table
from paimond.table.data_files.arrow_io import FILE_SOURCE_COMPACT, RollingDataFileWriter, read_data_file
from paimond.table.data_files.external_paths import external_provider
from paimond.table.data_files.kv_layout import ROW_ID
from paimond.table.data_files.row_tracking import with_row_tracking
from paimond.table.indexes.deletion_vectors import read_deletion_vectors, write_deletion_vectors
from paimond.table.storage.interface import Storage

_WRITE_QUEUE_BYTES = 32 << 20
_PREFETCH_BATCHES = 2


def _file_format(file_name: str) -> str:
    return file_name.rsplit(".", 1)[-1].lower()


def _read_inputs(task: CompactTask, table: Table, dvs: Mapping[str, DeletionVector],
                 batch_rows: int, row_tracking: bool) -> Iterator[pa.RecordBatch]:
    schema = task.table.schema
    for entry in task.inputs:
        meta = entry.file
        path = meta.external_path or table.storage.join(task.directory, meta.file_name)
        batches = read_data_file(table.storage, path, file_format=_file_format(meta.file_name),
                                 file_schema=task.table.schema_of(meta.schema_id),
                                 read_schema=schema, key_value=False, batch_rows=batch_rows,
                                 row_tracking=row_tracking,
                                 file_row_tracking=ROW_ID.name in (meta.write_cols or ()),
                                 file_size=meta.file_size)
        if row_tracking:
            batches = with_row_tracking(batches, meta, path)
        vector = dvs.get(meta.file_name)
        if vector is not None:
            batches = filter_deleted(batches, deleted_positions(vector))
        yield from batches


def execute_append_compaction(task: CompactTask, storage: Storage, *,
                              now_millis: Callable[[], int], batch_rows: int,
                              write_buffer_bytes: int | None = None) -> CompactResult:
    """Rewrite the task's files; returns what to commit. Deletes its own files on failure.
    ``write_buffer_bytes``: what the write queue and a Parquet row group hold, at most (None:
    32 MB and 16 MB)."""
    started = time.monotonic()
    table = Table(storage, task.table_path, task.table_name)
    options = task.table.options
    dvs, unaware = _load_vectors(task, table)
    vectors = (dvs.vectors() if dvs is not None
               else {n: v for file in unaware.values() for n, v in file.items()})
    row_tracking = options.flag("row-tracking.enabled")
    writer = RollingDataFileWriter(
        storage, task.directory, task.table.schema, options, level=0, key_value=False,
        file_source=FILE_SOURCE_COMPACT, now_millis=now_millis,
        sequence_start=task.inputs[0].file.min_sequence_number, row_tracking=row_tracking,
        external=external_provider(options, task.table_path, task.directory),
        row_group_bytes=write_buffer_bytes)
    index_paths: list[str] = []
    try:
        rows_read = _copy_rows(_read_inputs(task, table, vectors, batch_rows, row_tracking),
                               writer, write_buffer_bytes or _WRITE_QUEUE_BYTES)
        written = writer.close()  # each file passed data_files.file_written
        index_added, index_deleted = _rewrite_vectors(task, table, dvs, unaware, index_paths)
    except BaseException:
        writer.abort()
        for path in index_paths:
            storage.delete(path)
        raise
    added = tuple(ManifestEntry(FILE_KIND_ADD, task.partition, task.bucket, task.total_buckets,
                                meta) for meta in written)
    return CompactResult(
        task=task, deleted=task.inputs, added=added, rows_read=rows_read,
        rows_written=sum(e.file.row_count for e in added), files_rewritten=len(task.inputs),
        duration_s=time.monotonic() - started,
        written_paths=tuple(e.file.external_path or storage.join(task.directory, e.file.file_name)
                            for e in added)
        + tuple(index_paths),
        index_added=index_added, index_deleted=index_deleted)


def _load_vectors(task: CompactTask, table: Table
                  ) -> tuple[BucketDeletionVectors | None, dict[str, dict[str, DeletionVector]]]:
    """The deletion vectors of the task's files: the bucket's index (a fixed bucket), or
    each index file's vectors by its name (``task.dv_index_files``: bucket-unaware)."""
    if task.deletion_vectors and task.dv_index_files:
        return None, {e.index_file.file_name: read_deletion_vectors(table, e)
                      for e in task.dv_index_files}
    if task.deletion_vectors:
        return BucketDeletionVectors.load(
            table, task.dv_index, bitmap64=task.table.options.deletion_vectors_bitmap64), {}
    return None, {}


def _copy_rows(batches: Iterator[pa.RecordBatch], writer: RollingDataFileWriter,
               queue_bytes: int) -> int:
    """Every batch into ``writer``, read ahead and written in the background (``queue_bytes``
    waiting at most); the rows."""
    rows = 0
    reader = Prefetch(batches, _PREFETCH_BATCHES)
    try:
        with BackgroundWriter(writer.write, queue_bytes) as background:
            for batch in reader:
                rows += batch.num_rows
                background.put(pa.Table.from_batches([batch]))
    finally:
        reader.close()
    return rows


def _rewrite_vectors(task: CompactTask, table: Table, dvs: BucketDeletionVectors | None,
                     unaware: Mapping[str, Mapping[str, DeletionVector]], index_paths: list[str]
                     ) -> tuple[tuple[IndexManifestEntry, ...], tuple[IndexManifestEntry, ...]]:
    """The index files added and deleted once the inputs' vectors go: the bucket's index
    rewritten if it changed, or the bucket-unaware index files holding them
    (:func:`rewrite_index_files`). Each path joins ``index_paths`` once written."""
    if unaware:
        return rewrite_index_files(task.inputs, task.dv_index_files, table, unaware, index_paths,
                                   bitmap64=task.table.options.deletion_vectors_bitmap64)
    if dvs is None:
        return (), ()
    for entry in task.inputs:
        dvs.remove(entry.file.file_name)
    if not dvs.changed:
        return (), ()
    index_entry, path = dvs.write(table, task.partition, task.bucket)
    index_paths.append(path)
    return (index_entry,), ()


def rewrite_index_files(inputs: Sequence[ManifestEntry], index_files: Sequence[IndexManifestEntry],
                        table: Table, vectors: Mapping[str, Mapping[str, DeletionVector]],
                        index_paths: list[str], *, bitmap64: bool
                        ) -> tuple[tuple[IndexManifestEntry, ...], tuple[IndexManifestEntry, ...]]:
    """Java ``AppendDeleteFileMaintainer``: each of ``index_files`` holding a vector of one of
    ``inputs`` (``vectors``: per index file name, per data file) is deleted, and the vectors
    of its other data files go to a new index file. ``index_paths`` gathers each file written
    as soon as it is (the caller deletes them on failure)."""
    names = {e.file.file_name for e in inputs}
    added, deleted = [], []
    for entry in index_files:
        held = vectors[entry.index_file.file_name]
        if not names & held.keys():
            continue  # holds no input's vector: stays as it is
        remaining = {n: v for n, v in held.items() if n not in names}
        if remaining:
            new, path = write_deletion_vectors(table, remaining, entry.partition, entry.bucket,
                                               bitmap64=bitmap64)
            index_paths.append(path)
            added.append(new)
        deleted.append(dataclasses.replace(entry, kind=FILE_KIND_DELETE))
    return tuple(added), tuple(deleted)
