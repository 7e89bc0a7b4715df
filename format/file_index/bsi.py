"""The ``bsi`` file index: Java ``BitSliceIndexBitmapFileIndex`` over two
``BitSliceIndexRoaringBitmap``s (apache/paimon ``5dacde516b``; deprecated in favour of
``range-bitmap`` but still written).

Values become longs (integers; DATE days; TIME millis; TIMESTAMP millis for p <= 3, else
micros; DECIMAL unscaled). Non-negative values go to the positive index, negative ones as their
absolute value to the negative index; each stores ``value - min`` bit-sliced, where ``min`` is
always 0 (the writer's statistics start at 0). Big-endian layout:
``version 1 | int32 rows | has positive | [index] | has negative | [index]``, an index being
``version 1 | int64 min | int64 max | ebm | int32 slice count | slices`` (portable roaring
bitmaps back to back, each sized by its own header). ``Long.MIN_VALUE`` cannot be stored:
Java fails with "values should be non-negative".
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from paimond.errors import CodecError, UnsupportedError
from paimond.format.file_index.bit_slices import compare
from paimond.format.file_index.keys import IndexWriter, Key, KeyType, arrow_key_array, key_type
from paimond.format.roaring.bitmap32 import bitmap_of, read_bitmap, serialize_bitmap
from paimond.format.types.data_types import DataType

BSI = "bsi"
VERSION_1 = 1
_SUPPORTED = {"DECIMAL", "TINYINT", "SMALLINT", "INT", "BIGINT", "DATE", "TIME", "TIMESTAMP",
              "TIMESTAMP_LTZ"}
_LONG_MIN = -(2**63)


def bsi_key_type(data_type: DataType) -> KeyType:
    """Raises UnsupportedError for the types the BSI value mapper rejects."""
    if data_type.name not in _SUPPORTED:
        raise UnsupportedError(f"{data_type} type is not support to build bsi index yet.")
    return key_type(data_type)


def _encode_half(values: np.ndarray, rows: np.ndarray) -> bytes:
    """``BitSliceIndexRoaringBitmap.Appender(0, max).serialize`` of non-negative ``values``
    at ``rows``."""
    top = int(values.max()) if len(values) else 0
    slices = [bitmap_of(rows[(values >> np.int64(bit)) & 1 == 1])
              for bit in range(top.bit_length())]
    return b"".join([struct.pack(">bqq", VERSION_1, 0, top), serialize_bitmap(bitmap_of(rows)),
                     struct.pack(">i", len(slices)), *map(serialize_bitmap, slices)])


class BsiWriter(IndexWriter):
    """Builds one column's BSI index (it has no settings). Values and rows are kept as
    arrays (from Arrow vectorized) and sliced with numpy at the end."""

    def __init__(self, data_type: DataType, settings: None = None) -> None:
        super().__init__(data_type, bsi_key_type(data_type))
        self._values: list[np.ndarray] = []  # per write: the non-null rows' values
        self._rows: list[np.ndarray] = []
        self._row_count = 0

    def _write_keys(self, keys: Sequence[Key | None]) -> None:
        present = [i for i, key in enumerate(keys) if key is not None]
        values = [int(keys[i]) for i in present]  # type: ignore[arg-type]
        for value in values:
            if not _LONG_MIN <= value < 2**63:
                raise UnsupportedError(f"bsi value {value} does not fit a long")
        self._append(np.array(values, dtype=np.int64),
                     np.asarray(present, dtype=np.int64) + self._row_count)
        self._row_count += len(keys)

    def write_arrow(self, values: pa.Array | pa.ChunkedArray) -> None:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        keys = arrow_key_array(values.drop_null(), self.data_type)
        if keys is None:  # DECIMAL: value by value
            super().write_arrow(values)
            return
        if len(values):
            self.empty = False
        valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        self._append(np.asarray(keys.to_numpy(), dtype=np.int64),
                     np.flatnonzero(valid) + self._row_count)
        self._row_count += len(values)

    def _append(self, values: np.ndarray, rows: np.ndarray) -> None:
        if len(values) and bool((values == _LONG_MIN).any()):
            raise UnsupportedError("values should be non-negative")  # Java's -MIN
        self._values.append(values)
        self._rows.append(rows)

    def serialized_bytes(self) -> bytes:
        values = np.concatenate(self._values) if self._values else np.zeros(0, np.int64)
        rows = np.concatenate(self._rows) if self._rows else np.zeros(0, np.int64)
        out = [struct.pack(">bi", VERSION_1, self._row_count)]
        negative = values < 0
        for half in (~negative, negative):
            out.append(b"\x01" + _encode_half(np.abs(values[half]), rows[half])
                       if half.any() else b"\x00")
        return b"".join(out)


class _Half:
    """One decoded ``BitSliceIndexRoaringBitmap`` (all rows absent when not written)."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.ebm, self.slices, self.end, self.min = BitMap(), [], pos, 0
        if pos >= len(data):
            raise CodecError(f"truncated bsi index at byte {pos} of {len(data)}")
        if not data[pos]:
            self.end = pos + 1
            return
        if pos + 18 > len(data) or data[pos + 1] != VERSION_1:
            raise CodecError(f"truncated bsi index or unknown version at byte {pos + 1}")
        self.min, _ = struct.unpack_from(">qq", data, pos + 2)
        self.ebm, at = read_bitmap(data, pos + 18)
        if at + 4 > len(data):
            raise CodecError(f"truncated bsi index at byte {at} of {len(data)}")
        (count,) = struct.unpack_from(">i", data, at)
        if not 0 <= count <= 64:
            raise CodecError(f"bsi index with {count} bit slices")
        at += 4
        for _ in range(count):
            bitmap, at = read_bitmap(data, at)
            self.slices.append(bitmap)
        self.end = at

    def compare(self, value: int) -> tuple[BitMap, BitMap, BitMap]:
        return compare(self.ebm, self.slices, value - self.min)


class BsiIndex:
    """A decoded BSI index; queries answer the exact row numbers (``pyroaring.BitMap``)."""

    def __init__(self, data_type: DataType, payload: bytes) -> None:
        self.key_type = bsi_key_type(data_type)
        if len(payload) < 5 or payload[0] != VERSION_1:
            raise CodecError("bsi index: truncated or unknown version")
        (self.row_count,) = struct.unpack_from(">i", payload, 1)
        self._positive = _Half(payload, 5)
        self._negative = _Half(payload, self._positive.end)
        if self._negative.end != len(payload):
            raise CodecError(f"bsi index has {len(payload) - self._negative.end} trailing bytes")

    def _long(self, value: Any) -> int:
        return int(self.key_type.to_key(value))

    def is_not_null(self) -> BitMap:
        return self._positive.ebm | self._negative.ebm

    def is_null(self) -> BitMap:
        return BitMap(range(self.row_count)) - self.is_not_null()

    def equal(self, value: Any) -> BitMap:
        if value is None:
            return BitMap()
        v = self._long(value)
        return (self._negative.compare(-v) if v < 0 else self._positive.compare(v))[1]

    def is_in(self, values: Iterable[Any]) -> BitMap:
        return BitMap.union(BitMap(), *(self.equal(v) for v in values))

    def not_equal(self, value: Any) -> BitMap:
        return self.is_not_null() - self.equal(value)

    def not_in(self, values: Iterable[Any]) -> BitMap:
        return self.is_not_null() - self.is_in(values)

    def less_than(self, value: Any) -> BitMap:
        v = self._long(value)
        if v < 0:  # larger magnitudes among the negatives
            return self._negative.compare(-v)[2]
        return self._positive.compare(v)[0] | self._negative.ebm

    def less_or_equal(self, value: Any) -> BitMap:
        return self.less_than(value) | self.equal(value)

    def greater_than(self, value: Any) -> BitMap:
        return self.is_not_null() - self.less_or_equal(value)

    def greater_or_equal(self, value: Any) -> BitMap:
        return self.is_not_null() - self.less_than(value)

    def between(self, low: Any, high: Any) -> BitMap:
        return self.greater_or_equal(low) & self.less_or_equal(high)
