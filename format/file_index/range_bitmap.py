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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyroaring import BitMap

from paimond.errors import CodecError, UnsupportedError
from paimond.format.file_index.bit_slices import (
    compare,
    decode_bit_slices,
    encode_bit_slices,
    slice_bitmaps,
)
from paimond.format.file_index.keys import IndexWriter, Key, KeyType, key_type
from paimond.format.file_index.options import option_size
from paimond.format.types import DataType, DecimalType, LocalZonedTimestampType, TimestampType

RANGE_BITMAP = "range-bitmap"
VERSION_1 = 1
_SUPPORTED = {"CHAR", "VARCHAR", "BOOLEAN", "DECIMAL", "TINYINT", "SMALLINT", "INT", "BIGINT",
              "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ"}
_UNCHUNKED = {"BOOLEAN", "TINYINT", "SMALLINT"}


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


def _encode_dictionary(kt: KeyType, keys: Sequence[Key], limit: int) -> bytes:
    offsets: list[int] = []
    chunks: list[bytes] = []
    key_sections: list[bytes] = []
    keys_offset, code = 0, 0
    while code < len(keys):
        first, more = keys[code], []
        used = used_offsets = 0
        for key in keys[code + 1:]:
            size = kt.size(key)
            if kt.fmt == "s" and (used + size > limit or used_offsets + 4 > limit):
                break
            if kt.fmt != "s" and used + size > limit:
                break
            more.append(key)
            used, used_offsets = used + size, used_offsets + 4
        packed = b"".join(kt.pack(k) for k in more)
        if kt.fmt == "s":
            starts, at = [], 0
            for key in more:
                starts.append(at)
                at += kt.size(key)
            section = struct.pack(f">{len(more)}i", *starts) + packed
            tail = struct.pack(">ii", 4 * len(more), len(packed))
        else:
            section, tail = packed, struct.pack(">ii", len(packed), kt.size(first))
        offsets.append(sum(map(len, chunks)))
        chunks.append(struct.pack(">b", VERSION_1) + kt.pack(first)
                      + struct.pack(">iii", code, keys_offset, len(more)) + tail)
        key_sections.append(section)
        keys_offset += len(section)
        code += 1 + len(more)
    header = struct.pack(">biii", VERSION_1, len(chunks), 4 * len(chunks), sum(map(len, chunks)))
    return b"".join([struct.pack(">i", len(header)), header,
                     struct.pack(f">{len(offsets)}i", *offsets), *chunks, *key_sections])


class RangeBitmapWriter(IndexWriter):
    """Builds one column's range bitmap; option ``chunk-size``."""

    def __init__(self, data_type: DataType, options: Mapping[str, str]) -> None:
        super().__init__(data_type, range_key_type(data_type))
        default = "0b" if data_type.name in _UNCHUNKED else "16kb"
        self._chunk_size = option_size(options, "chunk-size", default)
        self._rows: dict[Key, list[int]] = {}
        self._row_count = 0

    def _write_keys(self, keys: Sequence[Key | None]) -> None:
        rows, row = self._rows, self._row_count
        for key in keys:
            if key is not None:
                rows.setdefault(key, []).append(row)
            row += 1
        self._row_count = row

    def serialized_bytes(self) -> bytes:
        kt = self.key_type
        keys = sorted(self._rows, key=kt.order)
        # Appender(0, n - 1): an empty dictionary makes max -1, hence 64 slices
        slice_count = max((len(keys) - 1).bit_length(), 1) if keys else 64
        by_code = [(code, BitMap(self._rows[k])) for code, k in enumerate(keys)]
        ebm = BitMap.union(BitMap(), *(rows for _, rows in by_code))
        slices = encode_bit_slices(ebm, slice_bitmaps(by_code, slice_count))
        dictionary = _encode_dictionary(kt, keys, self._chunk_size)
        bounds = kt.pack(keys[0]) + kt.pack(keys[-1]) if keys else b""
        header = struct.pack(">bii", VERSION_1, self._row_count, len(keys)) + bounds \
            + struct.pack(">i", len(dictionary))
        return struct.pack(">i", len(header)) + header + dictionary + slices


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
