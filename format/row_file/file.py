"""``.row`` data files: zstd blocks of compact rows, a block index and a 32-byte footer.

Java: ``RowFormatWriter``, ``RowFileFooter``, ``RowBlockIndex`` and ``RowFormatReader``
(``paimon-format/.../format/row/``) and ``ZstdBlockCompressor`` (``paimon-common``), apache/paimon
2.1-SNAPSHOT at commit 5dacde5; the seed spec is ``shared/seeds/row-file-format-spec.txt``.

A block is ``rows | int32 LE offset per row | int32 LE row count``, flushed once
``data + 4 * rows + 4 >= block size`` after adding a row, and compressed as one streaming zstd
frame without a content size (Java's ``ZstdOutputStream``; python-zstandard's ``compressobj``
gives the same bytes, its one-shot ``compress`` does not). The block index and the footer
follow the blocks (``row_index``). Rows are encoded by ``row_codec``; batches convert by
``row_arrow``.

Readers raise :class:`CorruptFileError` naming the file for every malformed input; a row
number outside ``[0, row_count)`` is the caller's error and raises IndexError.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO

import pyarrow as pa
import zstandard
from pyroaring import AbstractBitMap

from paimond.errors import CodecError, CorruptFileError, UnsupportedError
from paimond.format.row_file.arrow import batch_rows, rows_batch
from paimond.format.row_file.codec import DECODE_ERRORS, row_codec
from paimond.format.row_file.index import (
    FOOTER_SIZE,
    BlockIndex,
    RowFileFooter,
    check_block_index,
    decode_block_index,
    decode_footer,
    encode_block_index,
    encode_footer,
)
from paimond.format.types.arrow_types import to_arrow_type
from paimond.format.types.data_types import RowType

DEFAULT_BLOCK_SIZE_BYTES = 65536
_INT32 = struct.Struct("<i")
_TAIL_BYTES = 16 * 1024  # footer and, usually, the index in one read


class RowFileWriter:
    """Writes one ``.row`` file to ``sink`` from its current position, taken as byte 0."""

    def __init__(self, sink: BinaryIO, row_type: RowType, *,
                 block_size_bytes: int = DEFAULT_BLOCK_SIZE_BYTES, zstd_level: int = 1) -> None:
        if block_size_bytes < 1:
            raise ValueError(f"block size must be positive, got {block_size_bytes}")
        self._sink, self._row_type, self._block_size = sink, row_type, block_size_bytes
        self._compressor = zstandard.ZstdCompressor(level=zstd_level)
        self._codec = row_codec(row_type)
        self._block, self._offsets = bytearray(), list[int]()
        self._compressed, self._uncompressed, self._starts = list[int](), list[int](), list[int]()
        self._rows = self._flushed_bytes = 0
        self._closed = False

    @property
    def bytes_written(self) -> int:
        """Compressed bytes flushed plus the pending block's uncompressed size (an estimate)."""
        pending = len(self._block) + 4 * len(self._offsets) + 4 if self._offsets else 0
        return self._flushed_bytes + pending

    @property
    def row_count(self) -> int:
        return self._rows

    def write_rows(self, rows: Iterable[Sequence[object]]) -> None:
        """Rows of Python values (``paimond.format.types.values``); ValueError/TypeError for values
        that do not fit, leaving the rows before the bad one written."""
        self._write(rows, self._codec.encode)

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Columns in ``row_type`` order; a column of another Arrow type is cast to the
        field's type first (TypeError when it does not cast)."""
        self._write(batch_rows(batch, self._row_type),
                    row_codec(self._row_type, arrow=True).encode)

    def close(self) -> RowFileFooter:
        """Flush the last block, write the index and footer; the sink stays open."""
        self._check_open()
        self._flush()
        index = encode_block_index(BlockIndex(tuple(self._compressed),
                                              tuple(self._uncompressed), tuple(self._starts)))
        footer = RowFileFooter(self._rows, len(self._compressed), self._flushed_bytes, len(index))
        self._sink.write(index + encode_footer(footer))
        self._flushed_bytes += len(index) + FOOTER_SIZE
        self._closed = True
        return footer

    def _write(self, rows: Iterable[Sequence[object]], encode: Any) -> None:
        self._check_open()
        block, offsets, block_size = self._block, self._offsets, self._block_size
        for row in rows:
            start = len(block)
            try:
                encode(block, row)
            except BaseException:
                del block[start:]
                raise
            offsets.append(start)
            self._rows += 1
            if len(block) + 4 * len(offsets) + 4 >= block_size:
                self._flush()

    def _flush(self) -> None:
        count = len(self._offsets)
        if not count:
            return
        block = self._block
        block += struct.pack(f"<{count + 1}i", *self._offsets, count)
        stream = self._compressor.compressobj()
        compressed = stream.compress(block) + stream.flush()
        self._sink.write(compressed)
        self._starts.append(self._rows - count)
        self._uncompressed.append(len(block))
        self._compressed.append(len(compressed))
        self._flushed_bytes += len(compressed)
        block.clear()
        self._offsets.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the .row writer is closed")


class RowFileReader:
    """Random access and scans over one ``.row`` file in a seekable ``source``.

    The footer and index are read once. ``read_row`` costs one binary search, one seek and
    read, and one decompression; the last decompressed block is kept, and ``blocks_read`` /
    ``blocks_decompressed`` count the I/O and the decompressions. Not for concurrent use: the
    source's position and the kept block are shared."""

    def __init__(self, source: BinaryIO, row_type: RowType, *, path: str,
                 file_size: int | None = None) -> None:
        self._source, self.row_type, self.path = source, row_type, path
        self.file_size = source.seek(0, os.SEEK_END) if file_size is None else file_size
        self.blocks_read = self.blocks_decompressed = 0
        try:
            self._codec = row_codec(row_type)
        except UnsupportedError as exc:
            raise UnsupportedError(exc.what, path) from None
        self._decompressor = zstandard.ZstdDecompressor()
        self._cached: tuple[int, bytes] | None = None
        self.footer, index = self._read_metadata()
        self.row_count, self.block_count = self.footer.total_row_count, self.footer.block_count
        self._index = index
        self._offsets = [0, *itertools.accumulate(index.compressed_sizes)]
        self._starts = [*index.row_starts, self.row_count]

    # ------------------------------------------------------------ public

    def read_row(self, row_number: int) -> tuple[object, ...]:
        """Row ``row_number`` as Python values; IndexError outside ``[0, row_count)``."""
        if not 0 <= row_number < self.row_count:
            raise IndexError(f"{self.path}: row {row_number} outside [0, {self.row_count})")
        block_number = bisect.bisect_right(self._starts, row_number) - 1
        block = self._block(block_number)
        local = row_number - self._starts[block_number]
        rows = self._starts[block_number + 1] - self._starts[block_number]
        data_end = len(block) - 4 * rows - 4
        start, end = struct.unpack_from("<2i", block, data_end + 4 * local)
        if local == rows - 1:
            end = data_end
        if not 0 <= start <= end <= data_end:
            raise self._corrupt(block_number, f"row {row_number} at [{start}, {end}) is outside "
                                              f"the {data_end} row bytes")
        try:
            values, pos = self._codec.decode(block, start)
        except DECODE_ERRORS as exc:
            raise self._corrupt(block_number, f"row {row_number}: {exc}") from None
        if pos != end:
            raise self._corrupt(block_number, f"row {row_number} ends at byte {pos}, its "
                                              f"offsets say {end}")
        return tuple(values)

    def read_batches(self, *, projection: Sequence[int] | None = None,
                     selection: AbstractBitMap | None = None,
                     batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
        """Record batches of up to ``batch_rows`` rows (Arrow types of ``arrow_types``) with the
        ``projection`` columns, of the rows whose numbers are in ``selection`` (all if None).
        Blocks holding no selected row are neither read nor decompressed. An empty file or
        selection yields no batch. Raises CorruptFileError for invalid UTF-8 or a NULL map key
        and UnsupportedError for values beyond their Arrow type (TIMESTAMP(9) after 2262)."""
        arity = len(self.row_type.fields)
        columns = list(range(arity)) if projection is None else list(projection)
        if any(not 0 <= c < arity for c in columns):
            raise IndexError(f"projection {columns} outside the {arity} fields")
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be positive, got {batch_rows}")
        for column in columns:  # UnsupportedError before any I/O
            to_arrow_type(self.row_type.fields[column].type)
        return self._batches(columns, selection, batch_rows)

    def _batches(self, columns: list[int], selection: AbstractBitMap | None,
                 batch_rows: int) -> Iterator[pa.RecordBatch]:
        codec = row_codec(self.row_type, arrow=True)
        pending: list[list[Any]] = []
        for block_number in range(self.block_count):
            first, stop = self._starts[block_number], self._starts[block_number + 1]
            if selection is None:
                local: Iterable[int] = range(stop - first)
            else:
                count = selection.range_cardinality(first, stop)
                if not count:
                    continue
                local = (r - first for r in
                         itertools.islice(selection.iter_equal_or_larger(first), count))
            pending += self._decode_rows(block_number, codec.decode, local)
            while len(pending) >= batch_rows:
                yield self._batch(pending[:batch_rows], columns)
                del pending[:batch_rows]
        if pending:
            yield self._batch(pending, columns)

    # ------------------------------------------------------------ metadata

    def _read_metadata(self) -> tuple[RowFileFooter, BlockIndex]:
        size = self.file_size
        if size < FOOTER_SIZE:
            raise CorruptFileError(self.path, f"{size} bytes cannot hold the {FOOTER_SIZE}-byte "
                                              f"footer")
        tail_start = max(0, size - _TAIL_BYTES)
        tail = self._read_at(tail_start, size - tail_start, "footer")
        try:
            footer = decode_footer(tail[-FOOTER_SIZE:])
        except CodecError as exc:
            raise CorruptFileError(self.path, f"footer: {exc.reason}") from None
        start, length = footer.index_offset, footer.index_length
        if start + length > size - FOOTER_SIZE:
            raise CorruptFileError(self.path, f"block index at [{start}, {start + length}) is "
                                              f"outside the {size - FOOTER_SIZE} bytes before "
                                              f"the footer")
        if start >= tail_start:
            raw = tail[start - tail_start:start - tail_start + length]
        else:
            raw = self._read_at(start, length, "block index")
        try:
            index = decode_block_index(raw)
            check_block_index(footer, index)
        except CodecError as exc:
            raise CorruptFileError(self.path, f"block index: {exc.reason}") from None
        return footer, index

    # ------------------------------------------------------------ blocks

    def _read_at(self, offset: int, size: int, what: str) -> bytes:
        self._source.seek(offset)
        data = self._source.read(size)
        if len(data) != size:
            raise CorruptFileError(self.path, f"{what}: read {len(data)} of {size} bytes at "
                                              f"{offset} (truncated file)")
        return data

    def _block(self, block_number: int) -> bytes:
        """The decompressed block, checked for its size and row count."""
        cached = self._cached
        if cached is not None and cached[0] == block_number:
            return cached[1]
        size = self._index.compressed_sizes[block_number]
        expected = self._index.uncompressed_sizes[block_number]
        compressed = self._read_at(self._offsets[block_number], size, f"block {block_number}")
        self.blocks_read += 1
        try:
            declared = zstandard.get_frame_parameters(compressed).content_size
            if declared not in (zstandard.CONTENTSIZE_UNKNOWN, expected):
                raise self._corrupt(block_number, f"zstd frame declares {declared} bytes, the "
                                                  f"index {expected}")
            block = self._decompressor.decompress(compressed, max_output_size=expected,
                                                  allow_extra_data=False)
        except zstandard.ZstdError as exc:
            raise self._corrupt(block_number, f"zstd: {exc}") from None
        self.blocks_decompressed += 1
        rows = self._starts[block_number + 1] - self._starts[block_number]
        if len(block) != expected:
            raise self._corrupt(block_number, f"{len(block)} bytes decompressed, the index "
                                              f"says {expected}")
        (count,) = _INT32.unpack_from(block, len(block) - 4)
        if count != rows:
            raise self._corrupt(block_number, f"holds {count} rows, the index says {rows}")
        self._cached = (block_number, block)
        return block

    def _decode_rows(self, block_number: int, decode: Any,
                     local: Iterable[int]) -> list[list[Any]]:
        block = self._block(block_number)
        rows = self._starts[block_number + 1] - self._starts[block_number]
        data_end = len(block) - 4 * rows - 4
        offsets = (*struct.unpack_from(f"<{rows}i", block, data_end), data_end)
        decoded = []
        i = -1
        try:
            for i in local:
                start, end = offsets[i], offsets[i + 1]
                if start < 0 or end > data_end:
                    raise CodecError(f"offsets [{start}, {end}) outside the {data_end} row bytes")
                values, pos = decode(block, start)
                if pos != end:
                    raise CodecError(f"ends at byte {pos}, its offsets say {end}")
                decoded.append(values)
        except DECODE_ERRORS as exc:
            row_number = self._starts[block_number] + i
            raise self._corrupt(block_number, f"row {row_number}: {exc}") from None
        return decoded

    def _batch(self, rows: list[list[Any]], columns: list[int]) -> pa.RecordBatch:
        try:
            return rows_batch(rows, self.row_type, columns)
        except OverflowError as exc:  # e.g. TIMESTAMP(9) after 2262 in timestamp[ns]
            raise UnsupportedError(f"a value beyond the range of its Arrow type: {exc}",
                                   self.path) from None
        except pa.ArrowException as exc:
            raise CorruptFileError(self.path, f"values Arrow rejects: {exc}") from None

    def _corrupt(self, block_number: int, reason: str) -> CorruptFileError:
        return CorruptFileError(self.path, f"block {block_number}: {reason}")
