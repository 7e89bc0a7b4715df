"""Reading a partition's live key-value files whole and writing merged rows back as one sorted
run per bucket: what the rewrites that replace partitions (rescale, chain-table compaction)
share.

Reading goes through each bucket's deletion vectors: a deleted row is left out, or (``retract``)
kept as a ``-D`` of itself, as Java's chain reads expose it (``ExposeDeletionKeyValueReader``)
so that a delete compacted away in one branch still removes the key from the other. Writing is
a rolling writer per bucket at the level asked for, the rows given in key order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.lsm.lookup.deletion_vectors import BucketDeletionVectors, deleted_positions, filter_deleted
from paimond.lsm.merge.streaming import VALUE_KIND_COLUMN
from paimond.lsm.rewrite import file_format_of
from paimond.table.catalog import Table
from paimond.table.data_files.arrow_io import RollingDataFileWriter, read_data_file
from paimond.table.data_files.external_paths import external_provider
from paimond.table.data_files.kv_layout import physical_arrow_schema, physical_row_type
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import bucket_path

BATCH_ROWS = 65536
ROW_KIND_DELETE = 3  # Paimon's RowKind -D


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    """Live files of one partition as one branch's snapshot holds them, with the
    deletion-vector index files of their buckets."""

    partition: bytes
    files: tuple[ManifestEntry, ...]
    dv_entries: tuple[IndexManifestEntry, ...] = ()

    @property
    def rows(self) -> int:
        return sum(e.file.row_count for e in self.files)


def deletion_vector_entries(index_entries: Iterable[IndexManifestEntry]
                            ) -> dict[bytes, list[IndexManifestEntry]]:
    """A snapshot's deletion-vector index files by partition."""
    found: dict[bytes, list[IndexManifestEntry]] = {}
    for index in index_entries:
        if index.index_file.index_type == INDEX_TYPE_DELETION_VECTORS:
            found.setdefault(index.partition, []).append(index)
    return found


def read_partition(table: Table, read_schema: TableSchema, source: PartitionFiles, *,
                   bitmap64: bool, retract_deleted: bool = False) -> pa.Table:
    """Every row of ``source``'s files in ``read_schema``'s key-value layout, each file read
    with the schema ``table`` (its branch) wrote it in; ``bitmap64``: the table's
    ``deletion-vectors.bitmap64``."""
    batches = list(partition_batches(table, read_schema, source, bitmap64=bitmap64,
                                     retract_deleted=retract_deleted))
    if not batches:
        return physical_arrow_schema(physical_row_type(read_schema, key_value=True)).empty_table()
    return pa.Table.from_batches(batches)


def partition_batches(table: Table, read_schema: TableSchema, source: PartitionFiles, *,
                      bitmap64: bool, retract_deleted: bool = False,
                      batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """:func:`read_partition`'s rows as they are read, file after file, ``batch_rows`` at most
    at a time."""
    storage = table.storage
    vectors = {e.bucket: BucketDeletionVectors.load(table, e, bitmap64=bitmap64)
               for e in source.dv_entries}
    for entry in source.files:
        meta = entry.file
        directory = bucket_path(table, read_schema, source.partition, entry.bucket)
        path = meta.external_path or storage.join(directory, meta.file_name)
        read = read_data_file(storage, path, file_format=file_format_of(meta.file_name),
                              file_schema=table.schema(meta.schema_id), read_schema=read_schema,
                              key_value=True, batch_rows=batch_rows, file_size=meta.file_size)
        dvs = vectors.get(entry.bucket)
        vector = dvs.vector_of(meta.file_name) if dvs is not None else None
        if vector is not None:
            positions = deleted_positions(vector)
            read = (_retract(read, positions) if retract_deleted
                    else filter_deleted(read, positions))
        yield from read


def _retract(batches: Iterable[pa.RecordBatch], deleted: np.ndarray) -> Iterator[pa.RecordBatch]:
    """``batches`` of one file with the rows at ``deleted`` (sorted positions) turned into
    ``-D`` rows of themselves."""
    start = 0
    for batch in batches:
        end = start + batch.num_rows
        low, high = np.searchsorted(deleted, [start, end])
        if high > low:
            index = batch.schema.get_field_index(VALUE_KIND_COLUMN)
            kinds = batch.column(index).to_numpy(zero_copy_only=False).copy()
            kinds[deleted[low:high] - start] = ROW_KIND_DELETE
            columns = list(batch.columns)
            columns[index] = pa.array(kinds, type=batch.schema.field(index).type)
            batch = pa.RecordBatch.from_arrays(columns, schema=batch.schema)
        start = end
        yield batch


@dataclass
class RunWriter:
    """Writes buckets' merged rows, one sorted run each at ``level``, into ``table``; keeps
    the entries to commit and the paths to delete if the job fails."""

    table: Table
    schema: TableSchema
    level: int
    file_source: int
    now_millis: Callable[[], int]
    added: list[ManifestEntry]
    written_paths: list[str]

    @classmethod
    def of(cls, table: Table, schema: TableSchema, *, level: int, file_source: int,
           now_millis: Callable[[], int]) -> RunWriter:
        return cls(table, schema, level, file_source, now_millis, [], [])

    def write(self, partition: bytes, bucket: int, total_buckets: int, rows: pa.Table,
              columns: Sequence[str]) -> None:
        """``rows`` (in key order) as ``partition``'s ``bucket``; ``columns``: the file's."""
        self.write_batches(partition, bucket, total_buckets,
                           rows.select(list(columns)).to_batches(BATCH_ROWS))

    def write_batches(self, partition: bytes, bucket: int, total_buckets: int,
                      batches: Iterable[pa.RecordBatch], *,
                      row_group_bytes: int | None = None) -> None:
        """``batches`` (in key order, the file's columns) as ``partition``'s ``bucket``, written
        as they come; ``row_group_bytes``: the writer's buffer (None: the format's default)."""
        options = TableOptions.of(self.schema)
        directory = bucket_path(self.table, self.schema, partition, bucket)
        writer = RollingDataFileWriter(
            self.table.storage, directory, self.schema, options, level=self.level,
            key_value=True, file_source=self.file_source, now_millis=self.now_millis,
            external=external_provider(options, self.table.path, directory),
            row_group_bytes=row_group_bytes)
        try:
            for batch in batches:
                writer.write(batch)
            written = writer.close()
        except BaseException:
            writer.abort()
            raise
        for meta in written:
            self.added.append(ManifestEntry(FILE_KIND_ADD, partition, bucket, total_buckets, meta))
            self.written_paths.append(meta.external_path
                                      or self.table.storage.join(directory, meta.file_name))

    def delete_written(self) -> None:
        for path in self.written_paths:
            self.table.storage.delete(path)
