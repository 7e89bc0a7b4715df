"""The file index of a data file on storage: Java ``DataFileIndexWriter`` as
``KeyValueDataFileWriter`` and ``RowDataFileWriter`` drive it, and the placement rule it
shares with ``FileIndexProcessor`` (apache/paimon 5dacde516b, ``paimon-core/.../io`` and
``.../index``).

The index covers the value row of a data file (the table's columns; for an append table the
row itself), built batch by batch as the file is written. A container of at most
``file-index.in-manifest-threshold`` bytes is embedded in the manifest entry; a larger one is
written beside the data file as ``<data-file>.index`` and its bare name joins the entry's
extra files. Index files are created exclusively, never overwritten: when a name is taken
(an older snapshot may still read that index) the next one in Java's sequence is used,
``<data-file>-1.index``, ``-2``, and so on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from paimond.errors import UnsupportedError
from paimond.faults import crash_point
from paimond.format.types.data_types import DataField
from paimond.table.layout import FILE_INDEX_SUFFIX
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import Storage

_MAX_NAME_TRIES = 1000


@dataclass(frozen=True, slots=True)
class PlacedIndex:
    """Where a data file's index went: embedded bytes, an index file, or nowhere."""

    embedded: bytes | None = None
    file_name: str | None = None  # bare name, beside the data file

    @property
    def extra_files(self) -> tuple[str, ...]:
        return () if self.file_name is None else (self.file_name,)


def next_index_file_name(name: str) -> str:
    """Java ``createNewFileIndexFilePath``: ``x.parquet.index`` -> ``x.parquet-1.index`` ->
    ``x.parquet-2.index``."""
    dot, dash = name.rfind("."), name.rfind("-")
    number = name[dash + 1:dot] if -1 < dash < dot else ""
    if number.isascii() and number.isdigit():
        return f"{name[:dash + 1]}{int(number) + 1}{FILE_INDEX_SUFFIX}"
    return f"{name[:dot] if dot != -1 else name}-1{FILE_INDEX_SUFFIX}"


def index_file_names(data_file_name: str, current: str | None = None,
                     skip: Collection[str] = ()) -> Iterator[str]:
    """Names to try for a new index file of ``data_file_name``: after ``current`` (the
    index file it has now), else ``<data-file>.index`` first; never one of ``skip``."""
    name = current if current is not None else f"{data_file_name}{FILE_INDEX_SUFFIX}"
    if current is None and name not in skip:
        yield name
    while True:
        name = next_index_file_name(name)
        if name not in skip:
            yield name


def write_index_file(storage: Storage, directory: str, data_file_name: str, container: bytes,
                     current: str | None = None, skip: Collection[str] = ()) -> str:
    """Create the index file under the first free name of :func:`index_file_names`; returns
    that name. Raises UnsupportedError if a thousand names in a row are taken."""
    names = index_file_names(data_file_name, current, skip)
    for _ in range(_MAX_NAME_TRIES):
        name = next(names)
        if storage.create_exclusive(storage.join(directory, name), container):
            crash_point("file_index.file_written")
            return name
    raise UnsupportedError(f"no free index file name after {_MAX_NAME_TRIES} tries",
                           storage.join(directory, data_file_name))


class DataFileIndexWriter:
    """Builds the index of the data file at ``path`` from the batches written to it; only
    what the index writers need is kept (``create`` returns None when nothing is indexed).

    Nothing reaches storage before ``finish``. Raises UnsupportedError where Paimon refuses
    the index options or a column type."""

    def __init__(self, storage: Storage, path: str, fields: Sequence[DataField],
                 options: TableOptions) -> None:
        self._storage, self._path = storage, path
        from paimond.format.file_index import FileIndexBuilder  # tables with file indexes only

        self._builder = FileIndexBuilder({f.name: f.type for f in fields},
                                         options.file_index_columns)
        self._columns = self._builder.columns
        self._threshold_bytes = options.file_index_in_manifest_threshold_bytes

    @classmethod
    def create(cls, storage: Storage, path: str, fields: Sequence[DataField],
               options: TableOptions) -> DataFileIndexWriter | None:
        if not options.has_file_index:
            return None
        writer = cls(storage, path, fields, options)
        return None if writer._builder.empty else writer

    def write(self, batch: pa.RecordBatch) -> None:
        """Index the rows of ``batch``, which holds (at least) the value columns by name."""
        self._builder.write({c: batch.column(c) for c in self._columns})

    def finish(self) -> PlacedIndex:
        """Embed a small index; write a large one beside the data file (exclusively)."""
        container = self._builder.finish()
        if container is None:
            return PlacedIndex()
        if len(container) <= self._threshold_bytes:
            return PlacedIndex(embedded=container)
        directory, _, name = self._path.rpartition("/")
        return PlacedIndex(file_name=write_index_file(self._storage, directory, name, container))

    def discard(self, placed: PlacedIndex) -> None:
        """Delete the index file ``finish`` wrote (the data file was not published)."""
        if placed.file_name is not None:
            directory = self._path.rpartition("/")[0]
            self._storage.delete(self._storage.join(directory, placed.file_name))
