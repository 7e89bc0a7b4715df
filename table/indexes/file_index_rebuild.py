"""The file index of one existing data file rebuilt from its rows: the per-file step of Java
``FileIndexProcessor.process`` (apache/paimon 5dacde516b, ``paimon-core/.../index``), which
``paimond.maintenance.regenerate.rewrite_index`` runs over a table.

The file's indexed columns are read in its own schema (Java's ``colNameMapping``: a column
renamed since keeps its old name in the index, one added since is skipped), the indexes the
current options configure are built, and the result is placed as
:mod:`paimond.table.indexes.file_index_writer` places a new file's: a new index file beside the data
file (named after its current one, never a taken name), embedded, or nothing. The change is
the file's live entry and the same entry with its new extra files and embedded index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from paimond.errors import CorruptFileError, UnsupportedError
from paimond.format.file_index import FileIndexBuilder
from paimond.format.file_index.container import encode_file_index
from paimond.format.meta.manifest import DataFileMeta, ManifestEntry
from paimond.table.catalog import Table
from paimond.table.data_files.arrow_io import read_data_file
from paimond.table.indexes.file_index_writer import index_file_names, write_index_file
from paimond.table.layout import FILE_INDEX_SUFFIX
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import bucket_path

FileKey = tuple[bytes, int, str]  # partition, bucket, data file name


@dataclass(frozen=True, slots=True)
class FileIndexChange:
    """One data file whose index changes: its live entry and the same file re-indexed."""

    before: ManifestEntry
    after: ManifestEntry
    index_size_bytes: int  # of the new container; 0 for none
    written_path: str | None  # the new index file (None: embedded, none, or a dry run)


EMPTY_CONTAINER = encode_file_index({})


class FileIndexRebuild:
    """Re-indexes one live data file; returns the change, or None if its index stays.

    Where the placement rule would bring back a state the file had before (same extra files
    and embedded bytes) while the manifests still record its DELETE, readers would drop the
    file: the container goes to a fresh index file instead (an empty container if no index
    is configured), and never under a name the file had before. ``retired`` holds, per file,
    the DELETE entries the manifests still hold."""

    def __init__(self, table: Table, retired: Mapping[FileKey, tuple[ManifestEntry, ...]], *,
                 dry_run: bool, batch_rows: int, bitmap_version: int | None = None) -> None:
        self.table, self.retired, self.dry_run, self.batch_rows = (
            table, retired, dry_run, batch_rows)
        self.schema = table.latest_schema()
        self.options = dataclasses.replace(TableOptions.of(self.schema),
                                           bitmap_version_in_use=bitmap_version)
        self.threshold_bytes = self.options.file_index_in_manifest_threshold_bytes

    def __call__(self, entry: ManifestEntry) -> FileIndexChange | None:
        storage, meta = self.table.storage, entry.file
        data_path = meta.external_path or storage.join(
            bucket_path(self.table, self.schema, entry.partition, entry.bucket), meta.file_name)
        if meta.write_cols is not None:
            raise UnsupportedError("rewrite-index cannot index a data file holding only some "
                                   "columns (data evolution)", data_path)
        directory = data_path.rpartition("/")[0]
        index_names = [n for n in meta.extra_files if n.endswith(FILE_INDEX_SUFFIX)]
        extra_files = tuple(n for n in meta.extra_files if not n.endswith(FILE_INDEX_SUFFIX))
        container = self._build(meta, data_path)
        retired_entries = self.retired.get((entry.partition, entry.bucket, meta.file_name), ())
        retired = {e.identifier for e in retired_entries}
        file_bytes = None
        if container is not None and len(container) > self.threshold_bytes:
            file_bytes, container = container, None
        elif dataclasses.replace(entry, file=dataclasses.replace(
                meta, extra_files=extra_files, embedded_index=container)).identifier in retired:
            file_bytes, container = container or EMPTY_CONTAINER, None
        if self._unchanged(meta, index_names, directory, container, file_bytes):
            return None
        name = written = None
        if file_bytes is not None:
            current = index_names[0] if index_names else None
            used = {n for e in retired_entries for n in e.file.extra_files}
            if self.dry_run:
                name = next(n for n in index_file_names(meta.file_name, current, used)
                            if not storage.exists(storage.join(directory, n)))
            else:
                name = write_index_file(storage, directory, meta.file_name, file_bytes,
                                        current, used)
                written = storage.join(directory, name)
        after = dataclasses.replace(meta, extra_files=extra_files + ((name,) if name else ()),
                                    embedded_index=container)
        return FileIndexChange(entry, dataclasses.replace(entry, file=after),
                               len(file_bytes or container or b""), written)

    def _build(self, meta: DataFileMeta, data_path: str) -> bytes | None:
        file_schema = self.table.schema(meta.schema_id)
        names = None
        if file_schema.id != self.schema.id:  # Java's colNameMapping, by field id
            by_id = {f.id: f.name for f in file_schema.fields}
            names = {f.name: by_id[f.id] for f in self.schema.fields if f.id in by_id}
        builder = FileIndexBuilder({f.name: f.type for f in file_schema.fields},
                                   self.options.file_index_columns, names)
        if builder.empty:
            return None
        rows = 0
        for batch in read_data_file(
                self.table.storage, data_path, file_format=meta.file_name.rsplit(".", 1)[-1].lower(),
                file_schema=file_schema, read_schema=file_schema,
                key_value=bool(file_schema.primary_keys), batch_rows=self.batch_rows,
                projection=builder.columns, file_size=meta.file_size):
            builder.write({c: batch.column(c) for c in builder.columns})
            rows += batch.num_rows
        if rows != meta.row_count:
            raise CorruptFileError(data_path, f"has {rows} rows, its manifest entry records "
                                              f"{meta.row_count}")
        return builder.finish()

    def _unchanged(self, meta: DataFileMeta, index_names: list[str], directory: str,
                   embedded: bytes | None, file_bytes: bytes | None) -> bool:
        if file_bytes is None:
            return not index_names and meta.embedded_index == embedded
        if len(index_names) != 1 or meta.embedded_index is not None:
            return False
        path = self.table.storage.join(directory, index_names[0])
        return self.table.storage.exists(path) and self.table.storage.read_bytes(path) == file_bytes
