"""Data files as Arrow: Java ``KeyValueFileReaderFactory`` / ``SchemaEvolutionUtil`` (read)
and ``KeyValueDataFileWriter``, ``RowDataFileWriter``, ``RollingFileWriterImpl`` (write),
apache/paimon 5dacde516b ``paimon-core/.../io`` and ``.../schema``.

Batches are in a file's physical layout (:mod:`paimond.table.data_files.kv_layout`). Reading maps the
file's columns to the read schema by field id, so renamed columns follow their id, added
ones read as null, dropped ones disappear and changed types are cast. Writing computes the
complete ``DataFileMeta`` a Java writer would, including the exact delete count and the file
index the ``file-index.*`` options ask for (:mod:`paimond.table.indexes.file_index_writer`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CodecError, CorruptFileError, UnsupportedError
from paimond.faults import crash_point
from paimond.format.binary.binary_row import EMPTY_MANIFEST_ROW, encode_manifest_row
from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import ArrayType, DataField, DataType, MapType, MultisetType, RowType
from paimond.format.types.row_kind import RowKind
from paimond.table.data_files.external_paths import ExternalPathProvider
from paimond.table.data_files.file_formats import open_format_writer, read_format_batches
from paimond.table.data_files.file_stats import (
    ColumnStatsCollector,
    encode_dense_stats,
    encode_stats,
    row_values,
    stats_modes,
)
from paimond.table.data_files.kv_layout import (
    KEY_FIELD_ID_START,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    conform,
    key_fields,
    physical_arrow_schema,
    physical_row_type,
    thin_mode,
)
from paimond.table.data_files.parquet_groups import FooterCache, read_parquet_batches
from paimond.table.indexes.file_index_writer import DataFileIndexWriter, PlacedIndex
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import Storage

FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT = 0, 1
_COMPRESSION_EXTENSIONS = {"none": None, "gzip": "gz", "bzip2": "bz2", "deflate": "deflate",
                           "snappy": "snappy", "lz4": "lz4", "zstd": "zst"}


def file_format_for_level(options: TableOptions, level: int) -> str:
    """``file.format.per.level`` for ``level``, else ``file.format``."""
    return options.file_format_per_level.get(level, options.file_format)


# ---------------------------------------------------------------- reading


def read_data_file(storage: Storage, path: str, *, file_format: str, file_schema: TableSchema,
                   read_schema: TableSchema, key_value: bool, batch_rows: int = 65536,
                   projection: Sequence[str] | None = None, row_tracking: bool = False,
                   file_row_tracking: bool = False, file_size: int | None = None,
                   footers: FooterCache | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of a data file written under ``file_schema`` in ``read_schema``'s physical
    layout (``projection``: the physical column names wanted, in that order). With
    ``row_tracking`` an append file's batches end with nullable ``_ROW_ID`` and
    ``_SEQUENCE_NUMBER``, read from the file when it holds them (``file_row_tracking``),
    null otherwise.

    Streams: Parquet row groups (small ones decoded whole, :mod:`paimond.table.data_files.parquet_groups`),
    ORC stripes and Avro blocks are read one at a time. ``file_size``: the size its manifest
    entry records (an object store then skips the HEAD before the first read). ``footers``:
    a Parquet file's parsed footer is taken from there, or kept there, by path.
    Raises CorruptFileError for a file that does not parse, UnsupportedError for a type
    change Arrow cannot cast."""
    file_row = physical_row_type(file_schema, key_value=key_value,
                                 thin=thin_mode(file_schema, TableOptions.of(file_schema)),
                                 row_tracking=file_row_tracking)
    read_row = physical_row_type(read_schema, key_value=key_value, row_tracking=row_tracking,
                                 tracking_nullable=True)
    if projection is not None:
        read_row = read_row.project(list(projection))
    if not read_row.fields:
        raise ValueError("read_data_file needs at least one column")
    sources = _field_sources(file_row, read_row)
    wanted = {f.id: f for f in sources if f is not None}
    file_subset = RowType(fields=tuple(f for f in file_row.fields if f.id in wanted))
    target = physical_arrow_schema(read_row)
    stream = storage.open_input(path, buffered=file_format != "parquet", size=file_size)
    try:
        if not file_subset.fields:  # every read column is new: count rows from any column
            file_subset = RowType(fields=file_row.fields[:1])
        if file_format == "parquet":
            batches = read_parquet_batches(stream, file_subset, batch_rows, footers, path)
        else:
            batches = read_format_batches(
                file_format, stream, file_row, file_subset, path=path,
                file_size=(file_size if file_size is not None else storage.size(path))
                if file_format == "row" else -1,
                batch_rows=batch_rows)
        for batch in batches:
            columns = [pa.nulls(batch.num_rows, t.type) if source is None
                       else _evolve(batch.column(source.name), source.type, read.type, t.type, path)
                       for source, read, t in zip(sources, read_row.fields, target, strict=True)]
            yield pa.RecordBatch.from_arrays(columns, schema=target)
    except CodecError as error:
        raise CorruptFileError(path, error.reason) from None
    except (ValueError, EOFError, OSError) as error:
        # Arrow reports unparsable bytes as ArrowInvalid (a ValueError) or as a plain OSError
        # without errno; OSError subclasses and errno-carrying ones are I/O failures.
        if isinstance(error, OSError) and (type(error) is not OSError or error.errno is not None):
            raise
        raise CorruptFileError(path, f"{type(error).__name__}: {error}") from None
    finally:
        stream.close()


def _field_sources(file_row: RowType, read_row: RowType) -> list[DataField | None]:
    """The file field each read field comes from, by id; a thin-mode file's keys come from
    the value column whose id is the key's minus ``KEY_FIELD_ID_START``."""
    by_id = {f.id: f for f in file_row.fields}
    sources = []
    for field in read_row.fields:
        source = by_id.get(field.id)
        if source is None and field.id >= KEY_FIELD_ID_START and field.id < VALUE_KIND.id:
            source = by_id.get(field.id - KEY_FIELD_ID_START)
        sources.append(source)
    return _keys_read_once(read_row, sources)


def _keys_read_once(read_row: RowType, sources: list[DataField | None]) -> list[DataField | None]:
    """A primary-key value column read with its ``_KEY_`` twin comes from the twin's column:
    Paimon writes the key as a projection of the value, so the two columns hold the same
    values, and the file's column is decoded once (bench/compact_process.py, 10M rows: peak RSS
    478 -> 420 MB, CPU -4%)."""
    read_ids = {f.id: i for i, f in enumerate(read_row.fields)}
    once = list(sources)
    for index, field in enumerate(read_row.fields):
        twin = read_ids.get(field.id + KEY_FIELD_ID_START) if field.id < KEY_FIELD_ID_START else None
        if twin is None:
            continue
        value, key = sources[index], sources[twin]
        if value is not None and key is not None and key.id >= KEY_FIELD_ID_START \
                and key.type == value.type:
            once[index] = key
    return once


def _evolve(array: pa.Array, file_type: DataType, read_type: DataType, target: pa.DataType,
            path: str) -> pa.Array:
    """A column written as ``file_type`` read as ``read_type`` (Java ``createCastExecutor``):
    rows by field id, arrays and map values element-wise, other types by cast."""
    if isinstance(file_type, RowType) and isinstance(read_type, RowType):
        by_id = {f.id: (i, f) for i, f in enumerate(file_type.fields)}
        flat = array.flatten()  # unlike field(i), flatten() applies the slice offset
        children = []
        for field, arrow_field in zip(read_type.fields, target, strict=True):
            found = by_id.get(field.id)
            children.append(pa.nulls(len(array), arrow_field.type) if found is None else
                            _evolve(flat[found[0]], found[1].type, field.type, arrow_field.type, path))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    if isinstance(file_type, ArrayType) and isinstance(read_type, ArrayType):
        offsets, (values,) = _rebased(array, array.values)
        values = _evolve(values, file_type.element, read_type.element, target.value_type, path)
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=array.is_null())
    if isinstance(file_type, MapType) and isinstance(read_type, MapType):
        offsets, (keys, items) = _rebased(array, array.keys, array.items)
        items = _evolve(items, file_type.value, read_type.value, target.item_type, path)
        keys = conform(keys, target.key_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=array.is_null())
    if isinstance(file_type, MultisetType) or type(file_type) is type(read_type):
        try:
            return conform(array, target)
        except CodecError:
            pass
    try:
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise UnsupportedError(f"reading {file_type} as {read_type}: {error}", path) from None


def _rebased(array: pa.Array, *children: pa.Array) -> tuple[pa.Array, list[pa.Array]]:
    """Offsets from 0 and the children slices of a (possibly sliced) list or map array:
    Arrow cannot rebuild one with a null mask from sliced offsets."""
    offsets = array.offsets
    start, stop = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, start), [c.slice(start, stop - start) for c in children]


# ---------------------------------------------------------------- writing


class DataFileWriter:
    """Streams one data file of a bucket to storage; ``close`` publishes it and returns its
    metadata (None, and nothing published, if empty); ``abort`` discards it.

    Batches are in the physical layout of ``schema`` and, for primary-key files, sorted by
    key with each key once. ``sequence_start`` numbers the rows of an append file; with
    ``row_tracking`` an append file's batches end with ``_ROW_ID`` and ``_SEQUENCE_NUMBER``
    (no nulls), which give its sequence range, and ``_WRITE_COLS`` lists every column (Java
    ``RowDataFileWriter`` with a row-tracking write type)."""

    def __init__(self, storage: Storage, path: str, schema: TableSchema, options: TableOptions, *,
                 level: int, key_value: bool, file_source: int, now_millis: Callable[[], int],
                 schema_id: int | None = None, sequence_start: int = 0,
                 row_tracking: bool = False, row_group_bytes: int | None = None) -> None:
        self._storage, self._path, self._schema = storage, path, schema
        self._row_tracking = row_tracking and not key_value
        self._level, self._key_value, self._file_source = level, key_value, file_source
        self._now_millis = now_millis
        self._schema_id = schema.id if schema_id is None else schema_id
        self._dense = options.stats_dense_store
        file_format = file_format_for_level(options, level)
        self._thin = key_value and thin_mode(schema, options)
        self._row_type = physical_row_type(schema, key_value=key_value, thin=self._thin,
                                           row_tracking=self._row_tracking)
        self._arrow_schema = physical_arrow_schema(self._row_type)
        compression = options.file_compression_per_level.get(level, options.file_compression)
        self._index = DataFileIndexWriter.create(storage, path, schema.fields, options)
        self._output = storage.open_output(path)
        try:
            self._format = open_format_writer(file_format, cast(BinaryIO, self._output),
                                              self._row_type, compression=compression,
                                              options=options, row_group_bytes=row_group_bytes)
        except BaseException:
            self._output.abort()
            raise
        names = self._row_type.field_names
        modes = stats_modes(options, names, level=level if key_value else None,
                            avro_key_value=key_value and file_format == "avro",
                            thin_key_names=[f.name for f in key_fields(schema)] if self._thin else ())
        self._collectors = [ColumnStatsCollector(f.type, m)
                            for f, m in zip(self._row_type.fields, modes, strict=True)]
        # Min and max the format's own metadata gives are not computed again.
        self._bounded = self._format.track_bounds(
            [i for i, c in enumerate(self._collectors) if c.wants_bounds])
        for i in self._bounded:
            self._collectors[i].defer_bounds(self._arrow_schema.field(i).type)
        self.row_count = 0
        self._sequence_start = self._min_sequence = self._max_sequence = sequence_start
        self._delete_rows = 0
        self._first_key: list[object] | None = None
        self._last_key: list[object] = []

    @property
    def path(self) -> str:
        return self._path

    @property
    def estimated_size_bytes(self) -> int:
        return self._format.estimated_size_bytes

    def abort(self) -> None:
        """Discard the file: nothing is published."""
        self._output.abort()

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if batch.schema.names != self._arrow_schema.names:
            raise ValueError(f"batch columns {batch.schema.names} are not the physical layout "
                             f"{self._arrow_schema.names}")
        try:
            batch = pa.RecordBatch.from_arrays(
                [conform(c, f.type) for c, f in zip(batch.columns, self._arrow_schema, strict=True)],
                schema=self._arrow_schema)
        except CodecError as error:
            raise ValueError(f"batch does not fit the physical layout: {error.reason}") from None
        self._format.write(batch)
        for column, collector in zip(batch.columns, self._collectors, strict=True):
            collector.update(column)
        if self._index is not None:
            self._index.write(batch)
        if self._key_value:
            self._track_keys(batch)
        elif self._row_tracking:
            self._track_sequences(batch)
        self.row_count += batch.num_rows

    def _track_sequences(self, batch: pa.RecordBatch) -> None:
        low, high = (s.as_py() for s in pc.min_max(batch.column(SEQUENCE_NUMBER.name)).values())
        if low is None or high is None:
            raise ValueError("a row-tracking file's _SEQUENCE_NUMBER has no nulls")
        if self.row_count == 0:
            self._min_sequence, self._max_sequence = low, high
        self._min_sequence = min(self._min_sequence, low)
        self._max_sequence = max(self._max_sequence, high)

    def _track_keys(self, batch: pa.RecordBatch) -> None:
        names, types = self._key_columns()
        if self._first_key is None:
            self._first_key = row_values(batch, 0, names, types)
            self._min_sequence = self._max_sequence = batch.column(SEQUENCE_NUMBER.name)[0].as_py()
        self._last_key = row_values(batch, batch.num_rows - 1, names, types)
        low, high = (s.as_py() for s in pc.min_max(batch.column(SEQUENCE_NUMBER.name)).values())
        self._min_sequence, self._max_sequence = min(self._min_sequence, low), max(self._max_sequence, high)
        self._delete_rows += _retractions(batch.column(VALUE_KIND.name))

    def _key_columns(self) -> tuple[list[str], list[DataType]]:
        key_type = self._schema.key_type
        names = ([f.name for f in key_type.fields] if self._thin
                 else [f.name for f in key_fields(self._schema)])
        return names, key_type.field_types

    def close(self) -> DataFileMeta | None:
        """Publish the file and return its metadata (None, nothing published, if empty)."""
        if self.row_count == 0:
            self._output.abort()
            return None
        index = PlacedIndex()
        try:
            self._format.finish()
            file_size = self._output.tell()
            if self._index is not None:
                index = self._index.finish()
            self._output.close()
        except BaseException:
            self._output.abort()
            if self._index is not None:
                self._index.discard(index)
            raise
        crash_point("data_files.file_written")
        for i in self._bounded:
            self._collectors[i].set_bounds(self._format.bounds(i))
        stats = [c.result() for c in self._collectors]
        fields = self._row_type.fields
        if self._key_value:
            key_count = 0 if self._thin else len(self._schema.key_type.fields)
            value_stats = stats[key_count + 2:]
            by_name = {f.name: s for f, s in zip(fields[key_count + 2:], value_stats, strict=True)}
            key_stats = (stats[:key_count] if not self._thin
                         else [by_name[f.name] for f in self._schema.key_type.fields])
            key_types = self._schema.key_type.field_types
            value_cols, value_simple = encode_dense_stats(value_stats, self._schema.fields,
                                                          dense=self._dense)
            min_key = encode_manifest_row(self._first_key or [], key_types)
            max_key = encode_manifest_row(self._last_key, key_types)
            key_simple = encode_stats(key_stats, key_types)
            sequences, deletes = (self._min_sequence, self._max_sequence), self._delete_rows
        else:
            value_cols, value_simple = encode_dense_stats(stats, fields, dense=self._dense)
            min_key = max_key = EMPTY_MANIFEST_ROW
            key_simple = EMPTY_STATS
            sequences = (self._sequence_start, self._sequence_start + self.row_count - 1)
            if self._row_tracking:
                sequences = (self._min_sequence, self._max_sequence)
            deletes = 0
        return DataFileMeta(
            file_name=self._path.rsplit("/", 1)[-1], file_size=file_size, row_count=self.row_count,
            min_key=min_key, max_key=max_key, key_stats=key_simple, value_stats=value_simple,
            min_sequence_number=sequences[0], max_sequence_number=sequences[1],
            schema_id=self._schema_id, level=self._level, extra_files=index.extra_files,
            creation_time_millis=self._now_millis(), delete_row_count=deletes,
            embedded_index=index.embedded, file_source=self._file_source, value_stats_cols=value_cols,
            external_path=None, first_row_id=None,
            write_cols=tuple(self._row_type.field_names) if self._row_tracking else None,
            write_cols_sequences=None)


def _retractions(value_kinds: pa.Array) -> int:
    """The rows ``kv_layout.retract_mask`` marks (-U, -D), counted in numpy (~15x faster than Arrow's
    two comparisons, or and sum); a null kind, were there one, counts as neither."""
    kinds = value_kinds.to_numpy(zero_copy_only=False)
    return int(np.count_nonzero((kinds == RowKind.UPDATE_BEFORE) | (kinds == RowKind.DELETE)))


class RollingDataFileWriter:
    """Writes a bucket's rows into files of about ``target-file-size`` each, named
    ``<data-file.prefix><uuid>-<n>.<format>`` in ``directory`` (or where ``external`` puts
    each, recorded as its ``external_path``); ``close`` returns their metadata in write
    order, ``abort`` deletes what was written (index files included)."""

    def __init__(self, storage: Storage, directory: str, schema: TableSchema,
                 options: TableOptions, *, level: int, key_value: bool, file_source: int,
                 now_millis: Callable[[], int], schema_id: int | None = None,
                 sequence_start: int = 0, row_tracking: bool = False,
                 external: ExternalPathProvider | None = None,
                 row_group_bytes: int | None = None) -> None:
        self._storage, self._directory, self._schema, self._options = storage, directory, schema, options
        self._row_group_bytes = row_group_bytes  # None: the format's default
        self._row_tracking, self._external = row_tracking, external
        self._level, self._key_value, self._file_source = level, key_value, file_source
        self._now_millis, self._schema_id = now_millis, schema_id
        self._next_sequence = sequence_start
        self._target_bytes = options.target_file_size_bytes
        self._uuid, self._count = uuid.uuid4(), 0
        self._current: DataFileWriter | None = None
        self._written: list[DataFileMeta] = []
        self._paths: list[str] = []  # of the files in _written

    def _file_name(self) -> str:
        file_format = file_format_for_level(self._options, self._level)
        compression = self._options.file_compression_per_level.get(self._level,
                                                                   self._options.file_compression)
        extension = f".{file_format}"
        if self._options.file_suffix_include_compression:
            compressed = _COMPRESSION_EXTENSIONS.get(compression, compression)
            extension = f".{compressed}.{file_format}" if compressed else extension
        name = f"{self._options.data_file_prefix}{self._uuid}-{self._count}{extension}"
        self._count += 1
        return name

    def write(self, batch: pa.RecordBatch) -> None:
        """Rolls on a batch boundary; large batches are cut so a file overshoots the target
        by at most a quarter of it (sizes before compression)."""
        rows = max(1, self._target_bytes * batch.num_rows // (4 * max(batch.nbytes, 1)))
        for offset in range(0, batch.num_rows, rows):
            if self._current is None:
                name = self._file_name()
                path = (self._external.next_path(name) if self._external is not None
                        else self._storage.join(self._directory, name))
                self._current = DataFileWriter(
                    self._storage, path, self._schema, self._options, level=self._level,
                    key_value=self._key_value, file_source=self._file_source,
                    now_millis=self._now_millis, schema_id=self._schema_id,
                    sequence_start=self._next_sequence, row_tracking=self._row_tracking,
                    row_group_bytes=self._row_group_bytes)
            self._current.write(batch.slice(offset, rows))
            if self._current.estimated_size_bytes >= self._target_bytes:
                self._roll()

    def _roll(self) -> None:
        current, self._current = self._current, None
        if current is not None:
            meta = current.close()
            if meta is not None:
                if self._external is not None:
                    meta = dataclasses.replace(meta, external_path=current.path)
                self._written.append(meta)
                self._paths.append(current.path)
                self._next_sequence += meta.row_count

    def close(self) -> list[DataFileMeta]:
        self._roll()
        return list(self._written)

    def abort(self) -> None:
        """Discard the open file and delete every file this writer completed."""
        current, self._current = self._current, None
        if current is not None:
            current.abort()
        for meta, path in zip(self._written, self._paths, strict=True):
            directory = path.rpartition("/")[0]
            for name in (meta.file_name, *meta.extra_files):
                self._storage.delete(self._storage.join(directory, name))
        self._written.clear()
        self._paths.clear()
