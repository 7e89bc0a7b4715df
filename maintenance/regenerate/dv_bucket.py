"""``rebuild-dv``'s step for one bucket, as plain data a task can carry.

:func:`rebuild_bucket` computes a bucket's vectors from its level >= 1 files (and the vectors
it had). :class:`DvRebuildTask` is that step on an executor that maps tasks (Spark): the
table's storage location, the job's journal (so the DV file a task writes is noted before it
is written), the bucket's files and its DV index entry; the task writes the bucket's new DV
file when the vectors changed and returns it with the outcome. The driver plans which
buckets, then commits every task's file once (``maintenance/regenerate/rebuild_dv.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CorruptFileError, MissingFileError
from paimond.format.meta.deletion_vector import DeletionVector
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.lsm.lookup.deletion_vectors import BucketDeletionVectors, deleted_positions, vector_of
from paimond.lsm.merge.streaming import VALUE_KIND_COLUMN
from paimond.table.catalog import Table
from paimond.table.commit.job_records import JobJournal
from paimond.table.data_files.arrow_io import read_data_file
from paimond.table.data_files.kv_layout import key_fields, retract_mask
from paimond.table.indexes.deletion_vectors import read_deletion_vectors, write_deletion_vectors
from paimond.table.layout import partition_text
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import LiveFile, data_file_path
from paimond.table.storage.interface import StorageLocation

_LEVEL, _FILE, _POS = "__level", "__file", "__pos"


@dataclass(frozen=True, slots=True)
class BucketRebuild:
    partition_text: str
    partition: bytes
    bucket: int
    base: IndexManifestEntry | None
    vectors: dict[str, DeletionVector]
    rows_before: int  # deleted rows the old vectors held (of live files)
    rows_after: int
    dropped_positions: int  # positions past a file's end or of files no longer live
    changed: bool

    def describe(self) -> str:
        where = f"{self.partition_text or '-'} bucket {self.bucket}"
        dropped = f", {self.dropped_positions} stale positions dropped" \
            if self.dropped_positions else ""
        return (f"{where}: deleted rows {self.rows_before} -> {self.rows_after} in "
                f"{len(self.vectors)} files{dropped}")


def rebuild_bucket(table: Table, schema: TableSchema, partition: bytes, bucket: int,
                   files: list[LiveFile], base: IndexManifestEntry | None, *,
                   discard_existing: bool, lost: bool) -> BucketRebuild:
    """The bucket's vectors from its level >= 1 ``files`` (lowest level first) and its DV
    index entry ``base``; ``lost``: a missing DV file starts from nothing."""
    options = TableOptions.of(schema)
    old: dict[str, DeletionVector] = {}
    unreadable = False
    if base is not None:
        try:
            old = read_deletion_vectors(table, base)
        except (MissingFileError, CorruptFileError) as error:
            if not (discard_existing or (lost and isinstance(error, MissingFileError))):
                raise
            unreadable = True  # lost or corrupt: replaced whatever the result
    rows = {f.meta.file_name: f.meta.row_count for f in files}
    kept: dict[str, DeletionVector] = {}
    dropped = sum(len(v) for name, v in old.items() if name not in rows)
    before = 0
    for name, vector in old.items():
        if name in rows:
            before += len(vector)
            positions = deleted_positions(vector)  # in the table's layout, whatever the file's
            inside = vector_of(positions[positions < rows[name]],
                               bitmap64=options.deletion_vectors_bitmap64)
            dropped += len(vector) - len(inside)
            kept[name] = inside
    vectors = BucketDeletionVectors({} if discard_existing else kept,
                                    bitmap64=options.deletion_vectors_bitmap64, base=base)
    for meta_name, positions in _superseded(table, schema, files).items():
        vectors.mark(meta_name, positions)
    result = {n: v for n, v in vectors.vectors().items() if v}
    changed = unreadable or set(old) != set(result) or any(
        not np.array_equal(deleted_positions(old[n]), deleted_positions(result[n]))
        for n in result)
    return BucketRebuild(partition_text(schema, partition), partition, bucket, base, result,
                         before, sum(len(v) for v in result.values()), dropped, changed)


@dataclass(frozen=True, slots=True)
class DvRebuildTask:
    """One bucket's rebuild, written through the job's journal (None: a dry run, nothing
    written)."""

    location: StorageLocation
    table_path: str
    table_name: str
    journal: JobJournal | None
    schema: TableSchema
    partition: bytes
    bucket: int
    files: tuple[LiveFile, ...]
    base: IndexManifestEntry | None
    discard_existing: bool
    lost: bool


@dataclass(frozen=True, slots=True)
class DvRebuildOutcome:
    rebuild: BucketRebuild
    written: tuple[IndexManifestEntry, str] | None  # the new DV file's entry and path


def rebuild_dv_bucket(task: DvRebuildTask) -> DvRebuildOutcome:
    """A task: the bucket's vectors, and its new DV file written when they changed."""
    storage = task.location.open()
    table = Table(storage, task.table_path, task.table_name)
    rebuild = rebuild_bucket(table, task.schema, task.partition, task.bucket, list(task.files),
                             task.base, discard_existing=task.discard_existing, lost=task.lost)
    if task.journal is None or not rebuild.changed or not rebuild.vectors:
        return DvRebuildOutcome(rebuild, None)
    writing = Table(task.journal.recording(storage), task.table_path, task.table_name)
    written = write_deletion_vectors(
        writing, rebuild.vectors, task.partition, task.bucket,
        bitmap64=TableOptions.of(task.schema).deletion_vectors_bitmap64)
    return DvRebuildOutcome(rebuild, written)


def _superseded(table: Table, schema: TableSchema, files: list[LiveFile]
                ) -> dict[str, np.ndarray]:
    """Per file name, the positions of rows that are not the newest live row of their key."""
    key_columns = [f.name for f in key_fields(schema)]
    parts = []
    for number, live in enumerate(files):
        path = data_file_path(table, schema, live)
        batches = list(read_data_file(
            table.storage, path, file_format=path.rsplit(".", 1)[-1],
            file_schema=table.schema(live.meta.schema_id), read_schema=schema, key_value=True,
            projection=[*key_columns, VALUE_KIND_COLUMN], file_size=live.meta.file_size))
        if not batches:
            continue
        keys = pa.Table.from_batches(batches)
        count = keys.num_rows
        parts.append(keys.append_column(_LEVEL, pa.array(np.full(count, live.meta.level,
                                                                 dtype=np.int32)))
                     .append_column(_FILE, pa.array(np.full(count, number, dtype=np.int32)))
                     .append_column(_POS, pa.array(np.arange(count, dtype=np.int64))))
    if not parts:
        return {}
    rows = pa.concat_tables(parts)
    newest = rows.group_by(key_columns, use_threads=False).aggregate([(_LEVEL, "min")])
    joined = rows.join(newest, keys=key_columns, join_type="inner")
    older = pc.greater(joined.column(_LEVEL), joined.column(f"{_LEVEL}_min"))
    deleted = joined.filter(pc.or_(older, retract_mask(joined.column(VALUE_KIND_COLUMN))))
    out: dict[str, np.ndarray] = {}
    file_numbers = np.asarray(deleted.column(_FILE).to_numpy())
    positions = np.asarray(deleted.column(_POS).to_numpy())
    for number in np.unique(file_numbers):
        out[files[int(number)].meta.file_name] = np.sort(positions[file_numbers == number])
    return out
