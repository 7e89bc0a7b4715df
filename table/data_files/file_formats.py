"""Data file formats as Arrow streams: Java ``ParquetFileFormat``, ``OrcFileFormat``,
``AvroFileFormat`` and ``RowFileFormat`` (apache/paimon 5dacde516b, ``paimon-format``).

Writers stream into a sink (a ``Storage`` output stream), holding at most a row group,
stripe or block, and report their size so the rolling writer can cut files; readers stream:
Parquet by row group (in ``batch_rows`` pieces, column chunks read through a bounded buffer),
ORC by stripe, Avro by block. Every batch read is conformed to the Arrow types of the file's Paimon row type.

Physical choices, as Java's ``ParquetSchemaConverter`` writes them: DECIMAL(p <= 9) INT32,
(10..18) INT64 (``store_decimal_as_integer``), wider FIXED_LEN_BYTE_ARRAY without a dictionary
(parquet-mr's v1 writer has none for it); TIMESTAMP(0..3) INT64 millis, (4..6) micros, (7..9)
INT96 (:mod:`paimond.format.parquet.int96`; INT64 nanos from pypaimon or older paimond still
read); field ids on every Parquet field incl. list elements and map keys/values.
ORC goes through pyarrow as pypaimon does: TIME as INT, CHAR/VARCHAR as string (Java writes
char/varchar), no ``paimon.id`` attributes and no ZSTD level (pyarrow's ORC writer has none).
``.row`` files go through :mod:`paimond.format.row_file.file` (``file.block-size``, zstd level).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from paimond.errors import UnsupportedError
from paimond.format.parquet.int96 import (
    Int96FooterSink,
    encode_int96,
    int96_paths,
    parquet_paths,
    storage_schema,
)
from paimond.format.types.data_types import RowType
from paimond.table.data_files.avro_data import AvroDataWriter, avro_codec, read_avro_batches
from paimond.table.data_files.kv_layout import conform, physical_arrow_schema
from paimond.table.data_files.parquet_bounds import ParquetBounds, bounded_type
from paimond.table.options.core import TableOptions

FORMATS = ("parquet", "orc", "avro", "row")
_PARQUET_CODECS = {"zstd": "zstd", "none": "none", "uncompressed": "none", "snappy": "snappy",
                   "gzip": "gzip", "lz4": "lz4", "brotli": "brotli"}
_ORC_CODECS = {"zstd": "zstd", "none": "uncompressed", "uncompressed": "uncompressed",
               "snappy": "snappy", "lz4": "lz4", "zlib": "zlib", "gzip": "zlib", "deflate": "zlib"}
_ROW_GROUP_BYTES = 16 << 20  # Arrow bytes buffered into one Parquet row group
_ORC_STRIPE_BYTES = 16 << 20
_PARQUET_READ_BUFFER_BYTES = 256 << 10
_DICTIONARY_SAMPLE_ROWS = 8192


class FormatWriter(Protocol):
    def write(self, batch: pa.RecordBatch) -> None: ...

    @property
    def estimated_size_bytes(self) -> int: ...

    def finish(self) -> None: ...

    def track_bounds(self, columns: Sequence[int]) -> frozenset[int]:
        """Before the first write: which of these top-level columns' min and max the file's
        own metadata will give (``bounds``) after ``finish``."""
        ...

    def bounds(self, index: int) -> tuple[Any, Any] | None:
        """After ``finish``: (min, max) of a tracked column's non-null values as
        ``pc.min_max(...).as_py()`` gives them, (None, None) if it has none, None if unknown."""
        ...


class _NoBounds:
    """Formats whose metadata paimond does not read back: statistics are computed."""

    def track_bounds(self, columns: Sequence[int]) -> frozenset[int]:
        return frozenset()

    def bounds(self, index: int) -> tuple[Any, Any] | None:
        raise KeyError(index)


def open_format_writer(file_format: str, sink: BinaryIO, row_type: RowType, *, compression: str,
                       options: TableOptions, row_group_bytes: int | None = None) -> FormatWriter:
    """A writer of one data file into ``sink`` (written from its current position; ``finish``
    writes the footer and leaves it open); batches must have ``physical_arrow_schema(row_type)``.
    ``row_group_bytes``: the Arrow bytes a Parquet row group collects before it is encoded
    (default 16 MB; less under a small memory budget). Raises UnsupportedError for a format or
    compression paimond does not write."""
    if file_format == "parquet":
        return _ParquetWriter(sink, row_type, _codec(_PARQUET_CODECS, compression, "parquet"),
                              options.file_compression_zstd_level,
                              row_group_bytes or _ROW_GROUP_BYTES)
    if file_format == "orc":
        return _OrcWriter(sink, row_type, _codec(_ORC_CODECS, compression, "orc"))
    if file_format == "avro":
        return _AvroWriter(sink, row_type, avro_codec(compression, options.avro_codec),
                           options.file_compression_zstd_level)
    if file_format == "row":
        return _RowWriter(sink, row_type, options)
    raise UnsupportedError(f"data file format {file_format!r} (paimond writes {', '.join(FORMATS)})")


def _codec(codecs: dict[str, str], compression: str, file_format: str) -> str:
    if compression not in codecs:
        raise UnsupportedError(f"file.compression {compression!r} for {file_format} data files")
    return codecs[compression]


class _ParquetWriter:
    """Row groups of about ``row_group_bytes`` Arrow bytes, each encoded into the sink as
    soon as it is complete.

    Dictionary encoding is chosen per column from the first row group: a flat column whose
    first rows hardly repeat (keys, sequence numbers, measurements) would fill the 1 MB
    dictionary, fall back to plain, and have paid for hashing every value and written both;
    it is written plain from the start. Readers see standard Parquet either way.

    Column bounds come from the statistics the writer puts in the footer
    (:mod:`paimond.table.data_files.parquet_bounds`)."""

    def __init__(self, sink: BinaryIO, row_type: RowType, codec: str, zstd_level: int,
                 row_group_bytes: int = _ROW_GROUP_BYTES) -> None:
        self._sink, self._codec, self._zstd_level = sink, codec, zstd_level
        self._row_group_bytes = row_group_bytes
        self._logical = physical_arrow_schema(row_type)
        self._int96_paths = int96_paths(self._logical)
        self._schema = storage_schema(self._logical) if self._int96_paths else self._logical
        self._footer = Int96FooterSink(sink) if self._int96_paths else None
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._bounds = ParquetBounds({})

    def track_bounds(self, columns: Sequence[int]) -> frozenset[int]:
        leaves, leaf = {}, 0
        for index, field in enumerate(self._schema):
            leaves[index] = leaf
            leaf += len(parquet_leaf_paths(field))
        int96 = {p[0] for p in self._int96_paths}
        self._bounds = ParquetBounds({
            i: (leaves[i], self._schema.field(i).type) for i in columns
            if bounded_type(self._schema.field(i).type) and self._schema.field(i).name not in int96})
        return self._bounds.columns

    def bounds(self, index: int) -> tuple[Any, Any] | None:
        return self._bounds.bounds(index)

    def write(self, batch: pa.RecordBatch) -> None:
        if self._int96_paths:
            batch = pa.RecordBatch.from_arrays(
                [encode_int96(c, f.type) for c, f in zip(batch.columns, self._schema, strict=True)],
                schema=self._schema)
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self._row_group_bytes:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending)
            if self._writer is None:
                self._writer = self._open(table)
            self._bounds.note(table)
            self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
            self._sink.flush()  # a row group is done: a local file starts going to disk
        self._pending, self._pending_bytes = [], 0

    def _open(self, first: pa.Table) -> pq.ParquetWriter:
        sample = first.slice(0, _DICTIONARY_SAMPLE_ROWS)
        int96 = {".".join(p) for p in self._int96_paths}
        # parquet-mr's v1 writer (Java's) never puts FIXED_LEN_BYTE_ARRAY in a dictionary.
        plain = int96 | {".".join(p) for p in parquet_paths(self._logical, _fixed_len_decimal)}
        dictionary = [path for field, column in zip(self._schema, sample.columns, strict=True)
                      if not _distinct_mostly(field.type, column)
                      for path in parquet_leaf_paths(field) if path not in plain]
        # INT96 columns go without statistics, as pyarrow writes INT96 (no order is defined).
        statistics: bool | list[str] = [path for field in self._schema
                                         for path in parquet_leaf_paths(field)
                                         if path not in int96] if int96 else True
        return pq.ParquetWriter(
            self._footer or self._sink, self._schema, compression=self._codec,
            compression_level=self._zstd_level if self._codec == "zstd" else None,
            store_decimal_as_integer=True, write_page_index=True, use_dictionary=dictionary,
            write_statistics=statistics)

    @property
    def estimated_size_bytes(self) -> int:
        return self._sink.tell() + self._pending_bytes

    def finish(self) -> None:
        self._flush()
        if self._writer is None:
            self._writer = self._open(self._schema.empty_table())
        if self._footer is None:
            self._writer.close()
        else:
            self._footer.capturing = True
            self._writer.close()
            self._sink.write(self._footer.declared_tail(self._int96_paths, self._logical))
        self._bounds.resolve(self._writer.writer.metadata)


def _fixed_len_decimal(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_decimal(arrow_type) and arrow_type.precision > 18)


def _distinct_mostly(arrow_type: pa.DataType, sample: pa.ChunkedArray) -> bool:
    """Are nine in ten values of a flat column's sample distinct? (About where a column of
    8-byte values would outgrow the 1 MB dictionary of a row group.)"""
    if pa.types.is_nested(arrow_type) or pa.types.is_boolean(arrow_type) or len(sample) < 2:
        return False
    distinct = pc.count_distinct(sample, mode="only_valid").as_py()
    return bool(distinct * 10 > (len(sample) - sample.null_count) * 9)


def parquet_leaf_paths(field: pa.Field) -> list[str]:
    """Dotted Parquet column paths of a field's leaves, as pyarrow names them (compliant
    nested types: ``list.element``, ``key_value.key``/``value``)."""
    arrow_type = field.type
    if pa.types.is_struct(arrow_type):
        children = [(f.name, f) for f in arrow_type]
    elif pa.types.is_map(arrow_type):
        children = [("key_value.key", arrow_type.key_field),
                    ("key_value.value", arrow_type.item_field)]
    elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        children = [("list.element", arrow_type.value_field)]
    else:
        return [field.name]
    return [f"{field.name}.{prefix}{path[len(child.name):]}"
            for prefix, child in children for path in parquet_leaf_paths(child)]


class _OrcWriter(_NoBounds):
    def __init__(self, sink: BinaryIO, row_type: RowType, codec: str) -> None:
        self._schema = physical_arrow_schema(row_type)
        self._sink = sink
        import pyarrow.orc as orc  # loaded by ORC tables only (so is the .row format's code)

        self._writer = orc.ORCWriter(sink, compression=codec, stripe_size=_ORC_STRIPE_BYTES)
        self._unflushed_bytes, self._flushed_at = 0, sink.tell()

    def write(self, batch: pa.RecordBatch) -> None:
        columns = [c.cast(_orc_type(c.type)) if _orc_type(c.type) != c.type else c
                   for c in batch.columns]
        self._writer.write(pa.Table.from_arrays(columns, names=batch.schema.names))
        if self._sink.tell() > self._flushed_at:  # a stripe went out
            self._flushed_at, self._unflushed_bytes = self._sink.tell(), 0
        self._unflushed_bytes += batch.nbytes

    @property
    def estimated_size_bytes(self) -> int:
        return self._sink.tell() + self._unflushed_bytes

    def finish(self) -> None:
        self._writer.close()


def _orc_type(arrow_type: pa.DataType) -> pa.DataType:
    """pyarrow's ORC writer has no TIME: store millis of the day as INT (pypaimon does too)."""
    if pa.types.is_time32(arrow_type):
        return pa.int32()
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_orc_type(arrow_type.value_type)))
    if pa.types.is_map(arrow_type):
        return pa.map_(arrow_type.key_field.with_type(_orc_type(arrow_type.key_type)),
                       arrow_type.item_field.with_type(_orc_type(arrow_type.item_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_orc_type(f.type)) for f in arrow_type])
    return arrow_type


class _AvroWriter(_NoBounds):
    def __init__(self, sink: BinaryIO, row_type: RowType, codec: str, zstd_level: int) -> None:
        self._sink = sink
        self._writer = AvroDataWriter(sink, row_type, codec=codec, zstd_level=zstd_level)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    @property
    def estimated_size_bytes(self) -> int:
        return self._sink.tell() + self._writer.buffered_bytes

    def finish(self) -> None:
        self._writer.close()


class _RowWriter(_NoBounds):
    def __init__(self, sink: BinaryIO, row_type: RowType, options: TableOptions) -> None:
        from paimond.format.row_file.file import RowFileWriter

        self._writer = RowFileWriter(
            sink, row_type, block_size_bytes=options.file_block_size_bytes,
            zstd_level=options.file_compression_zstd_level)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    @property
    def estimated_size_bytes(self) -> int:
        return int(self._writer.bytes_written)

    def finish(self) -> None:
        self._writer.close()


# ---------------------------------------------------------------- reading


def read_format_batches(file_format: str, source: BinaryIO, file_row: RowType, columns: RowType, *,
                        path: str, file_size: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The ``columns`` (fields of ``file_row``, the file's whole row type) of a data file, in
    batches of at most about ``batch_rows`` rows, conformed to ``physical_arrow_schema(columns)``.

    Raises CodecError (or the format library's own errors) for bytes that do not parse."""
    schema = physical_arrow_schema(columns)
    if file_format == "parquet":
        batches = _read_parquet(source, columns, batch_rows)
    elif file_format == "orc":
        batches = _read_orc(source, columns, batch_rows)
    elif file_format == "avro":
        batches = read_avro_batches(source, columns, schema, batch_rows=batch_rows)
    elif file_format == "row":
        # A .row file holds whole rows of the file's row type: project by position.
        from paimond.format.row_file.file import RowFileReader

        reader = RowFileReader(source, file_row, path=path, file_size=file_size)
        positions = {f.name: i for i, f in enumerate(file_row.fields)}
        batches = reader.read_batches(projection=[positions[n] for n in columns.field_names],
                                      batch_rows=batch_rows)
    else:
        raise UnsupportedError(f"data file format {file_format!r}", path)
    for batch in batches:
        yield pa.RecordBatch.from_arrays(
            [conform(batch.column(i), f.type) for i, f in enumerate(schema)], schema=schema)


def _read_parquet(source: BinaryIO, row_type: RowType, batch_rows: int) -> Iterator[pa.RecordBatch]:
    # A column chunk is read in pieces, not whole: a reader then holds about a page and a
    # buffer per column, however large the row group is (pre-buffering, pyarrow >= 20's
    # default, would read each chunk whole first).
    parquet = pq.ParquetFile(source, buffer_size=_PARQUET_READ_BUFFER_BYTES, pre_buffer=False)
    present = set(parquet.schema_arrow.names)
    names = [n for n in row_type.field_names if n in present]
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=names):
        yield _with_missing(batch, row_type)


def _read_orc(source: BinaryIO, row_type: RowType, batch_rows: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.orc as orc

    orc_file = orc.ORCFile(source)
    present = set(orc_file.schema.names)
    names = [n for n in row_type.field_names if n in present]
    for stripe in range(orc_file.nstripes):
        batch = _with_missing(orc_file.read_stripe(stripe, columns=names), row_type)
        for offset in range(0, batch.num_rows, batch_rows):
            yield batch.slice(offset, batch_rows)


def _with_missing(batch: pa.RecordBatch, row_type: RowType) -> pa.RecordBatch:
    """Columns the file lacks (e.g. files with ``write_cols``) read as nulls."""
    missing = [n for n in row_type.field_names if n not in batch.schema.names]
    if not missing:
        return batch
    schema = physical_arrow_schema(row_type)
    columns = [batch.column(n) if n in batch.schema.names else pa.nulls(batch.num_rows, schema.field(n).type)
               for n in row_type.field_names]
    return pa.RecordBatch.from_arrays(columns, names=row_type.field_names)
