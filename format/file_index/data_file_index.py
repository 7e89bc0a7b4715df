"""The file index of one data file: Java ``DataFileIndexWriter`` and ``FileIndexer`` factories
(apache/paimon ``5dacde516b``).

``FileIndexBuilder`` (batch by batch) and ``build_file_index`` (all rows at once) index the
configured columns of a data file and return the container bytes Java's
``DataFileIndexWriter.close()`` produces for the same rows and options. Columns
and, per column, index types appear in the iteration order of the ``HashMap``s Java fills
(column names and index type names hashed as Java strings). Whether the bytes are embedded in
the manifest or written beside the data file is the caller's choice (the table's
``file-index.in-manifest-threshold``). The indexed columns and their settings come typed
(:data:`ColumnIndexes`), read from the table's options by ``paimond.table``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import pyarrow as pa

from paimond.errors import UnsupportedError
from paimond.format.binary.java_order import java_hashmap_order, java_string_hash
from paimond.format.file_index.bitmap import BITMAP, BitmapIndex, BitmapWriter
from paimond.format.file_index.bloom import BLOOM_FILTER, BloomFilterIndex, BloomFilterWriter
from paimond.format.file_index.bsi import BSI, BsiIndex, BsiWriter
from paimond.format.file_index.columns import ColumnIndexes, IndexSettings
from paimond.format.file_index.container import encode_file_index
from paimond.format.file_index.keys import IndexWriter, Key, key_type, keys_of
from paimond.format.file_index.range_bitmap import RANGE_BITMAP, RangeBitmapIndex, RangeBitmapWriter
from paimond.format.types.data_types import DataType, MapType

FileIndex = BloomFilterIndex | BitmapIndex | RangeBitmapIndex | BsiIndex
Values: TypeAlias = Sequence[Any] | pa.Array | pa.ChunkedArray

_WRITERS: dict[str, Callable[[DataType, Any], IndexWriter]] = {
    BLOOM_FILTER: BloomFilterWriter, BITMAP: BitmapWriter, RANGE_BITMAP: RangeBitmapWriter,
    BSI: BsiWriter}
_READERS: dict[str, Callable[[DataType, bytes], FileIndex]] = {
    BLOOM_FILTER: BloomFilterIndex, BITMAP: BitmapIndex, RANGE_BITMAP: RangeBitmapIndex,
    BSI: BsiIndex}


def create_index_writer(index_type: str, data_type: DataType,
                        settings: IndexSettings = None) -> IndexWriter:
    """``FileIndexer.create(type, dataType, options).createWriter()``.

    Raises UnsupportedError for an unknown index type or a column type it rejects."""
    writer = _WRITERS.get(index_type)
    if writer is None:
        raise UnsupportedError(f"Can't find file index for type: {index_type}")
    return writer(data_type, settings)


def decode_index(index_type: str, data_type: DataType, payload: bytes) -> FileIndex:
    """A queryable index from its payload. Raises CodecError for malformed bytes."""
    reader = _READERS.get(index_type)
    if reader is None:
        raise UnsupportedError(f"Can't find file index for type: {index_type}")
    return reader(data_type, payload)


class _MapKeyWriters:
    """``MapFileIndexMaintainer``: one writer per indexed key of a MAP<STRING, V> column."""

    def __init__(self, column: str, index_type: str, data_type: DataType) -> None:
        if not isinstance(data_type, MapType):
            raise UnsupportedError(f"Column {column} is nested column, but is not map type. "
                                   "Only should map type yet.")
        if data_type.key.name not in ("CHAR", "VARCHAR"):
            raise UnsupportedError("Only support map data type with key field of CHAR、VARCHAR、STRING.")
        self.column, self.index_type, self.value_type = column, index_type, data_type.value
        self.writers: dict[str, IndexWriter] = {}

    def add(self, key: str, settings: IndexSettings) -> None:
        self.writers[key] = create_index_writer(self.index_type, self.value_type, settings)

    def write(self, values: Values) -> None:
        for row in _map_rows(self.value_type, values):
            written = set()
            for key, value in row or ():
                writer = self.writers.get(key)
                if writer is not None:  # a key repeated in one map is written twice, as in Java
                    written.add(key)
                    writer.write_keys([value])
            for key, writer in self.writers.items():
                if key not in written:
                    writer.write_keys([None])

    def serialized(self) -> dict[str, bytes | None]:
        """``col[key] -> payload`` in the order of Java's result ``HashMap``."""
        payloads = {f"{self.column}[{k}]": None if self.writers[k].empty
                    else self.writers[k].serialized_bytes()
                    for k in java_hashmap_order(self.writers, java_string_hash)}
        return {n: payloads[n] for n in java_hashmap_order(payloads, java_string_hash)}


def _map_rows(value_type: DataType, values: Values) -> list[list[tuple[str, Key | None]] | None]:
    """MAP rows as ``(key, value key)`` lists (None for a NULL map), from Python or Arrow."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.MapArray):
        offsets = values.offsets.to_pylist()
        names = values.keys.to_pylist()
        items = keys_of(value_type, values.items)
        return [None if not valid else list(zip(names[a:b], items[a:b], strict=True))
                for valid, a, b in zip(values.is_valid().to_pylist(), offsets, offsets[1:],
                                       strict=False)]
    to_key = key_type(value_type).to_key
    return [None if row is None else [(k, None if v is None else to_key(v)) for k, v in row]
            for row in values]


def _maintainers(types: Mapping[str, DataType], indexes: ColumnIndexes,
                 column_names: Mapping[str, str] | None
                 ) -> dict[str, dict[str, IndexWriter | _MapKeyWriters]]:
    """Index type -> column -> maintainer, in the order ``DataFileIndexWriter`` holds them."""
    by_type: dict[str, dict[str, IndexWriter | _MapKeyWriters]] = {}
    type_calls: list[str] = []
    for column, index_types in indexes.items():
        name = column.name if column_names is None else column_names.get(column.name)
        if name is None:
            continue  # a column the data file's schema does not have yet
        if name not in types:
            raise UnsupportedError(f"{name} does not exist in column fields")
        for index_type, settings in index_types.items():
            type_calls.append(index_type)
            maintainers = by_type.setdefault(index_type, {})
            if column.nested_key is None:
                if name not in maintainers:
                    maintainers[name] = create_index_writer(index_type, types[name], settings)
                continue
            found = maintainers.get(name)
            if not isinstance(found, _MapKeyWriters):
                found = maintainers[name] = _MapKeyWriters(name, index_type, types[name])
            found.add(column.nested_key, settings)
    order = java_hashmap_order(type_calls, java_string_hash, compute_if_absent=True)
    return {t: {c: by_type[t][c] for c in java_hashmap_order(by_type[t], java_string_hash)}
            for t in order}


class FileIndexBuilder:
    """``DataFileIndexWriter`` fed a data file's rows batch by batch: it keeps only the
    index writers' state, never the rows.

    ``types`` maps the data file's column names to their types. ``column_names`` maps the
    column names of ``indexes`` to the data file's (Java's ``colNameMapping`` for a file of
    an older schema; an option column it lacks is skipped); None uses them as they are.
    Raises UnsupportedError where Paimon refuses a column or its type."""

    def __init__(self, types: Mapping[str, DataType], indexes: ColumnIndexes,
                 column_names: Mapping[str, str] | None = None) -> None:
        self._types = dict(types)
        self._maintainers = _maintainers(self._types, indexes, column_names)

    @property
    def empty(self) -> bool:
        """No index configured (for this file's columns): ``finish`` returns None."""
        return not self._maintainers

    @property
    def columns(self) -> list[str]:
        """The data file columns the indexes read, in file order."""
        wanted = {c for by_column in self._maintainers.values() for c in by_column}
        return [c for c in self._types if c in wanted]

    def write(self, columns: Mapping[str, Values]) -> None:
        """Append rows: each indexed column's values (more columns may be given, all of
        one length). Raises ValueError for a value that does not fit its column type."""
        lengths = {len(columns[c]) for c in self.columns}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        keys: dict[str, list[Key | None]] = {}
        for by_column in self._maintainers.values():
            for column, maintainer in by_column.items():
                if isinstance(maintainer, _MapKeyWriters):
                    maintainer.write(columns[column])
                    continue
                values = columns[column]
                if maintainer.vectorized and isinstance(values, pa.Array | pa.ChunkedArray):
                    maintainer.write_arrow(values)  # no keys made value by value
                    continue
                if column not in keys:  # every index type of a column makes the same keys
                    data_type = self._types[column]
                    keys[column] = keys_of(data_type, columns[column], key_type(data_type))
                maintainer.write_keys(keys[column])

    def finish(self) -> bytes | None:
        """The container of everything written, or None when no index is configured."""
        if not self._maintainers:
            return None
        serialized: list[tuple[str, str, bytes | None]] = []
        for index_type, by_column in self._maintainers.items():
            for column, maintainer in by_column.items():
                if isinstance(maintainer, _MapKeyWriters):
                    serialized += [(n, index_type, b) for n, b in maintainer.serialized().items()]
                else:
                    serialized.append((column, index_type, maintainer.serialized_bytes()))
        names = java_hashmap_order((n for n, _, _ in serialized), java_string_hash,
                                   compute_if_absent=True)
        container: dict[str, dict[str, bytes | None]] = {n: {} for n in names}
        for name in names:
            types = [t for n, t, _ in serialized if n == name]
            payloads = {t: b for n, t, b in serialized if n == name}
            for index_type in java_hashmap_order(types, java_string_hash):
                container[name][index_type] = payloads[index_type]
        return encode_file_index(container)


def build_file_index(columns: Mapping[str, tuple[DataType, Values]],
                     indexes: ColumnIndexes) -> bytes | None:
    """The file index container of a data file, or None when no index is configured.

    ``columns`` maps column names to their type and the column's values (Python values as
    in ``paimond.format.types.values``, or an Arrow array); every column has one value per row.
    Raises UnsupportedError where Paimon refuses a column or its type, ValueError for a
    value that does not fit its column type."""
    builder = FileIndexBuilder({n: t for n, (t, _) in columns.items()}, indexes)
    if builder.empty:
        return None
    builder.write({n: values for n, (_, values) in columns.items()})
    return builder.finish()
