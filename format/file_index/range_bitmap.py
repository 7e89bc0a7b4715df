"""The ``range-bitmap`` file index: Java ``RangeBitmapFileIndex`` / ``RangeBitmap`` with a
``ChunkedDictionary`` of ``FixedLengthChunk``/``VariableLengthChunk`` and a
``BitSliceIndexBitmap`` of codes (apache/paimon ``5dacde516b``).

Distinct values are sorted (Java ``Comparator`` order) and numbered 0..n-1; each row stores its
value's code in a bit-sliced index (NULL rows are absent from it). Big-endian layout:

- ``int32 header length | version 1 | int32 rows | int32 n | [min key, max key] |
  int32 dictionary length | dictionary | bit slices``
- dictionary: ``int32 header length | version 1 | int32 chunk count | int32 offsets length |
  int32 chunks length | int32 chunk offset* | chunk headers | keys``. A chunk header is
  ``version | first key | int32 code | int32 keys offset | int32 more keys |`` then
  ``int32 keys length, int32 key length`` (fixed-size keys) or ``int32 key offsets length,
  int32 keys length`` (strings, whose keys section starts with int32 offsets). Each chunk holds
  its first key plus as many more as fit in ``chunk-size`` bytes (16kb; 0b for BOOLEAN,
  TINYINT and SMALLINT, i.e. one key per chunk).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from paimond.errors import CodecError, UnsupportedError
from paimond.format.file_index.bit_slices import (
    compare,
    decode_bit_slices,
    encode_bit_slices,
)
from paimond.format.file_index.keys import IndexWriter, Key, KeyType, arrow_key_array, key_type
from paimond.format.roaring.bitmap32 import bitmap_of
from paimond.format.types.data_types import DataType, DecimalType, LocalZonedTimestampType, TimestampType

RANGE_BITMAP = "range-bitmap"
VERSION_1 = 1
_SUPPORTED = {"CHAR", "VARCHAR", "BOOLEAN", "DECIMAL", "TINYINT", "SMALLINT", "INT", "BIGINT",
              "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ"}
_UNCHUNKED = {"BOOLEAN", "TINYINT", "SMALLINT"}
_STRUCT_CODES = {"f": "i", "d": "q"}  # float keys are their IEEE bits


def range_key_type(data_type: DataType) -> KeyType:
    """Raises UnsupportedError for the types ``KeyFactory.create`` rejects."""
    if data_type.name not in _SUPPORTED:
        raise UnsupportedError(f"data type {data_type}is not supported.")  # sic, Java's text
    if isinstance(data_type, DecimalType) and data_type.precision > 18:
        raise UnsupportedError(
            "The range-bitmap index only supports DECIMAL with a precision in [0, 18].")
    if isinstance(data_type, TimestampType | LocalZonedTimestampType) and data_type.precision > 6:
        raise UnsupportedError(
            "The range-bitmap index only supports TIMESTAMP with a precision in [0, 6].")
    return key_type(data_type)


def _chunk_ends(kt: KeyType, keys: Sequence[Key], limit: int) -> list[int]:
    """Where each chunk of the dictionary ends: a chunk is its first key plus as many more
    as fit in ``limit`` bytes (and, for strings, their int32 offsets in ``limit`` too)."""
    ends, code = [], 0
    if kt.fmt != "s":
        per_chunk = 1 + max(0, limit) // kt.size(keys[0]) if keys else 1
        return list(range(per_chunk, len(keys), per_chunk)) + [len(keys)] if keys else []
    while code < len(keys):
        end, used, used_offsets = code + 1, 0, 0
        while end < len(keys):
            size = kt.size(keys[end])
            if used + size > limit or used_offsets + 4 > limit:
                break
            used, used_offsets, end = used + size, used_offsets + 4, end + 1
        ends.append(end)
        code = end
    return ends


def _encode_dictionary(kt: KeyType, keys: Sequence[Key], limit: int) -> bytes:
    offsets: list[int] = []
    chunks: list[bytes] = []
    key_sections: list[bytes] = []
    keys_offset = chunks_length = code = 0
    packed_fixed = b""
    if kt.fmt != "s" and keys:  # every key packed at once, then cut per chunk
        packed_fixed = struct.pack(f">{len(keys)}{_STRUCT_CODES.get(kt.fmt, kt.fmt)}", *keys)
    for end in _chunk_ends(kt, keys, limit):
        first, more = keys[code], keys[code + 1:end]
        if kt.fmt == "s":
            starts, at = [], 0
            for key in more:
                starts.append(at)
                at += kt.size(key)
            packed = b"".join(kt.pack(k) for k in more)
            section = struct.pack(f">{len(more)}i", *starts) + packed
            tail = struct.pack(">ii", 4 * len(more), len(packed))
        else:
            size = kt.size(first)
            section = packed_fixed[(code + 1) * size:end * size]
            tail = struct.pack(">ii", len(section), size)
        chunk = (struct.pack(">b", VERSION_1) + kt.pack(first)
                 + struct.pack(">iii", code, keys_offset, len(more)) + tail)
        offsets.append(chunks_length)
        chunks.append(chunk)
        chunks_length += len(chunk)
        key_sections.append(section)
        keys_offset += len(section)
        code = end
    header = struct.pack(">biii", VERSION_1, len(chunks), 4 * len(chunks), chunks_length)
    return b"".join([struct.pack(">i", len(header)), header,
                     struct.pack(f">{len(offsets)}i", *offsets), *chunks, *key_sections])


@dataclass(frozen=True, slots=True)
class RangeBitmapSettings:
    """``chunk-size``; None: Java's default for the column type (16 KiB, none for
    BOOLEAN/TINYINT/SMALLINT)."""

    chunk_size_bytes: int | None = None


class RangeBitmapWriter(IndexWriter):
    """Builds one column's range bitmap. Rows are kept as (key, row) arrays, from Arrow
    vectorized; values are coded and bit-sliced with numpy at the end."""

    def __init__(self, data_type: DataType, settings: RangeBitmapSettings | None = None) -> None:
        super().__init__(data_type, range_key_type(data_type))
        chunk_size = (settings or RangeBitmapSettings()).chunk_size_bytes
        if chunk_size is None:
            chunk_size = 0 if data_type.name in _UNCHUNKED else 16 << 10
        self._chunk_size = chunk_size
        self._keys: list[pa.Array | np.ndarray] = []  # per write: the non-null rows' keys
        self._rows: list[np.ndarray] = []  # ... and their row numbers
        self._row_count = 0
        self._bytes = self.key_type.fmt == "s"

    def _write_keys(self, keys: Sequence[Key | None]) -> None:
        present = [i for i, key in enumerate(keys) if key is not None]
        values = [keys[i] for i in present]
        self._keys.append(pa.array(values, pa.binary()) if self._bytes
                          else np.array(values, dtype=np.int64))
        self._rows.append(np.asarray(present, dtype=np.int64) + self._row_count)
        self._row_count += len(keys)

    def write_arrow(self, values: pa.Array | pa.ChunkedArray) -> None:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        keys = arrow_key_array(values.drop_null(), self.data_type)
        if keys is None:  # BOOLEAN, DECIMAL: value by value
            super().write_arrow(values)
            return
        if len(values):
            self.empty = False
        valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        self._keys.append(keys.cast(pa.binary()) if self._bytes
                          else np.asarray(keys.to_numpy(), dtype=np.int64))
        self._rows.append(np.flatnonzero(valid) + self._row_count)
        self._row_count += len(values)

    def _codes(self) -> tuple[list[Key], np.ndarray, np.ndarray]:
        """Distinct keys in Java's order, and every non-null row with its key's code."""
        rows = np.concatenate(self._rows) if self._rows else np.zeros(0, dtype=np.int64)
        if self._bytes:
            every = pa.concat_arrays([k for k in self._keys if isinstance(k, pa.Array)]) \
                if self._keys else pa.array([], pa.binary())
            encoded = every.dictionary_encode()
            order = np.asarray(pc.sort_indices(encoded.dictionary).to_numpy())
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            codes = rank[np.asarray(encoded.indices.to_numpy(zero_copy_only=False))]
            return encoded.dictionary.take(pa.array(order)).to_pylist(), rows, codes
        keys = np.concatenate([k for k in self._keys if isinstance(k, np.ndarray)]) \
            if self._keys else np.zeros(0, dtype=np.int64)
        ordered = keys
        if self.key_type.is_float:  # Float.compare: negative floats' bits sort reversed
            mask = 0x7FFFFFFF if self.key_type.fmt == "f" else 0x7FFFFFFFFFFFFFFF
            ordered = np.where(keys < 0, keys ^ mask, keys)
        by_order = np.argsort(ordered, kind="stable")
        first = np.ones(len(keys), dtype=bool)
        first[1:] = ordered[by_order][1:] != ordered[by_order][:-1]
        codes = np.empty(len(keys), dtype=np.int64)
        codes[by_order] = np.cumsum(first) - 1
        distinct = keys[by_order][first].tolist()
        if self.key_type.fmt == "?":
            distinct = [bool(k) for k in distinct]
        return distinct, rows, codes

    def serialized_bytes(self) -> bytes:
        kt = self.key_type
        keys, rows, codes = self._codes()
        # Appender(0, n - 1): an empty dictionary makes max -1, hence 64 slices
        slice_count = max((len(keys) - 1).bit_length(), 1) if keys else 64
        slices = [bitmap_of(rows[(codes >> bit) & 1 == 1]) for bit in range(slice_count)]
        encoded_slices = encode_bit_slices(bitmap_of(rows), slices)
        dictionary = _encode_dictionary(kt, keys, self._chunk_size)
        bounds = kt.pack(keys[0]) + kt.pack(keys[-1]) if keys else b""
        header = struct.pack(">bii", VERSION_1, self._row_count, len(keys)) + bounds \
            + struct.pack(">i", len(dictionary))
        return struct.pack(">i", len(header)) + header + dictionary + encoded_slices


def _int(data: bytes, pos: int) -> int:
    if pos < 0 or pos + 4 > len(data):
        raise CodecError(f"truncated range-bitmap index at byte {pos} of {len(data)}")
    return int(struct.unpack_from(">i", data, pos)[0])


def _decode_dictionary(kt: KeyType, data: bytes, pos: int) -> list[Key]:
    header_length = _int(data, pos)
    if header_length != 13 or data[pos + 4] != VERSION_1:
        raise CodecError(f"range-bitmap dictionary header of {header_length} bytes, "
                         f"version {data[pos + 4] if pos + 4 < len(data) else None}")
    size, offsets_length, chunks_length = (_int(data, pos + 5 + 4 * i) for i in range(3))
    if size < 0 or offsets_length != 4 * size or chunks_length < 0:
        raise CodecError(f"range-bitmap dictionary of {size} chunks, {offsets_length} offset bytes")
    chunks_at = pos + 17 + offsets_length
    keys_at = chunks_at + chunks_length
    keys: list[Key] = []
    for i in range(size):
        at = chunks_at + _int(data, pos + 17 + 4 * i)
        if data[at:at + 1] != bytes([VERSION_1]):
            raise CodecError(f"range-bitmap dictionary chunk {i}: bad version")
        first, at = kt.unpack(data, at + 1)
        code, offset, more, a, b = (_int(data, at + 4 * j) for j in range(5))
        if code != len(keys) or more < 0 or offset < 0:
            raise CodecError(f"range-bitmap chunk {i} starts at code {code}, expected {len(keys)}")
        keys.append(first)
        at = keys_at + offset
        if kt.fmt == "s":  # a = key offsets length, b = keys length
            starts = [_int(data, at + 4 * j) for j in range(more)]
            keys += [kt.unpack(data, at + a + s)[0] for s in starts]
        else:  # a = keys length, b = key length
            keys += [kt.unpack(data, at + b * j)[0] for j in range(more)]
    return keys


class RangeBitmapIndex:
    """A decoded range bitmap; queries answer the exact row numbers (``pyroaring.BitMap``)."""

    def __init__(self, data_type: DataType, payload: bytes) -> None:
        kt = self.key_type = range_key_type(data_type)
        header_length = _int(payload, 0)
        if len(payload) < 5 or payload[4] > VERSION_1:
            raise CodecError("range-bitmap index: truncated or unknown version")
        self.row_count, cardinality = _int(payload, 5), _int(payload, 9)
        pos = 13
        if cardinality > 0:
            _, pos = kt.unpack(payload, pos)
            _, pos = kt.unpack(payload, pos)
        dictionary_at = 4 + header_length
        if pos + 4 != dictionary_at:
            raise CodecError(f"range-bitmap header of {header_length} bytes does not end at {pos + 4}")
        slices_at = dictionary_at + _int(payload, pos)
        self._keys = _decode_dictionary(kt, payload, dictionary_at) if cardinality > 0 else []
        if len(self._keys) != max(cardinality, 0):
            raise CodecError(f"range-bitmap dictionary holds {len(self._keys)} keys, "
                             f"header says {cardinality}")
        self._order = [kt.order(k) for k in self._keys]
        self._ebm, self._slices = decode_bit_slices(payload, slices_at)

    def _code(self, value: Any) -> tuple[int, bool]:
        """The insertion point of ``value`` among the sorted keys, and whether it is there."""
        order = self.key_type.order(self.key_type.to_key(value))
        code = bisect.bisect_left(self._order, order)
        return code, code < len(self._order) and self._order[code] == order

    def is_null(self) -> BitMap:
        return BitMap(range(self.row_count)) - self._ebm

    def is_not_null(self) -> BitMap:
        return BitMap(self._ebm)

    def equal(self, value: Any) -> BitMap:
        if value is None:
            return BitMap()
        code, found = self._code(value)
        return compare(self._ebm, self._slices, code)[1] if found else BitMap()

    def is_in(self, values: Iterable[Any]) -> BitMap:
        return BitMap.union(BitMap(), *(self.equal(v) for v in values))

    def not_equal(self, value: Any) -> BitMap:
        return self._ebm - self.equal(value)

    def not_in(self, values: Iterable[Any]) -> BitMap:
        return self._ebm - self.is_in(values)

    def less_than(self, value: Any) -> BitMap:
        return compare(self._ebm, self._slices, self._code(value)[0])[0]

    def less_or_equal(self, value: Any) -> BitMap:
        code, found = self._code(value)
        return compare(self._ebm, self._slices, code + found)[0]

    def greater_or_equal(self, value: Any) -> BitMap:
        return self._ebm - self.less_than(value)

    def greater_than(self, value: Any) -> BitMap:
        return self._ebm - self.less_or_equal(value)

    def between(self, low: Any, high: Any) -> BitMap:
        return self.greater_or_equal(low) & self.less_or_equal(high)

    def values(self) -> list[Key]:
        """The dictionary: every distinct non-NULL key, sorted."""
        return list(self._keys)
