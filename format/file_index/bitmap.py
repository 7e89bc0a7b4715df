"""The ``bitmap`` file index: Java ``BitmapFileIndex`` with ``BitmapFileIndexMeta`` (v1) and
``BitmapFileIndexMetaV2`` (v2, the default) (apache/paimon ``5dacde516b``).

One RoaringBitmap32 of row numbers per distinct value and one for NULL. A bitmap holding a
single row is not written: its offset is ``-1 - row``. Big-endian throughout.

- v1: ``version | rows | value count | has null | [null offset] | (value, offset)* | bitmaps``
- v2: ``version | rows | value count | has null | [null offset, null bitmap length] |
  block count | (first value, block offset)* | bitmap body offset | blocks | bitmaps``, each
  block ``entry count | (value, offset, length)*`` with entries sorted by value and cut at
  ``index-block-size`` (default 16kb) bytes.

The bitmaps (and v1's dictionary) follow the iteration order of the writer's
``HashMap<value, bitmap>``, filled by ``computeIfAbsent`` in row order.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from paimond.errors import CodecError, UnsupportedError
from paimond.format.binary.java_order import java_hashmap_order
from paimond.format.file_index.keys import IndexWriter, Key, KeyType, arrow_key_array, key_type
from paimond.format.roaring.bitmap32 import read_bitmap, serialize_bitmap
from paimond.format.types.data_types import DataType

BITMAP = "bitmap"
VERSION_1 = 1
VERSION_2 = 2
_SUPPORTED = {"CHAR", "VARCHAR", "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT",
              "DOUBLE", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ"}
_UNSUPPORTED = {"BINARY": "binary", "VARBINARY": "binary", "MULTISET": "mutiset"}


def bitmap_key_type(data_type: DataType) -> KeyType:
    """Raises UnsupportedError for the types ``BitmapTypeVisitor`` rejects."""
    name = data_type.name
    if name == "DECIMAL":
        raise UnsupportedError("Does not support decimal")
    if name not in _SUPPORTED:
        raise UnsupportedError(f"Does not support type {_UNSUPPORTED.get(name, name.lower())}")
    return key_type(data_type)


@dataclass(frozen=True, slots=True)
class BitmapSettings:
    """The format ``version`` (1 or 2) and version 2's ``index-block-size``."""

    version: int = VERSION_2
    index_block_size_bytes: int = 16 << 10


class BitmapWriter(IndexWriter):
    """Builds one column's bitmap index."""

    def __init__(self, data_type: DataType, settings: BitmapSettings | None = None) -> None:
        super().__init__(data_type, bitmap_key_type(data_type))
        settings = settings or BitmapSettings()
        self._version = settings.version
        self._block_size = settings.index_block_size_bytes
        self._rows: dict[Key, list[int]] = {}
        self._nulls = BitMap()
        self._row_count = 0
        self._called_after_last_new = False  # a computeIfAbsent after the last new key

    def _write_keys(self, keys: Sequence[Key | None]) -> None:
        rows, row = self._rows, self._row_count
        for key in keys:
            if key is None:
                self._nulls.add(row)
            else:
                found = rows.get(key)
                if found is None:
                    rows[key] = [row]
                    self._called_after_last_new = False
                else:
                    found.append(row)
                    self._called_after_last_new = True
            row += 1
        self._row_count = row

    def write_arrow(self, values: pa.Array | pa.ChunkedArray) -> None:
        """Append rows from Arrow: rows are grouped by value with Arrow's dictionary encoding
        (codes in order of first appearance, as ``computeIfAbsent`` meets the values)."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        keys = arrow_key_array(values.drop_null(), self.data_type)
        if keys is None:
            super().write_arrow(values)
            return
        if len(values):
            self.empty = False
        start = self._row_count
        self._row_count += len(values)
        valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        positions = np.flatnonzero(valid) + start
        if values.null_count:
            self._nulls.update((np.flatnonzero(~valid) + start).tolist())
        if not len(keys):
            return
        encoded = keys.dictionary_encode()
        codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False))
        grouped = positions[np.argsort(codes, kind="stable")]
        bounds = np.zeros(len(encoded.dictionary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(codes, minlength=len(encoded.dictionary)), out=bounds[1:])
        last_new_row = -1
        for code, key in enumerate(encoded.dictionary.to_pylist()):
            rows = grouped[bounds[code]:bounds[code + 1]].tolist()
            found = self._rows.get(key)
            if found is None:
                self._rows[key] = rows
                last_new_row = rows[0]
            else:
                found.extend(rows)
        # computeIfAbsent found an existing value after the last new one?
        self._called_after_last_new = last_new_row < 0 or int(positions[-1]) > last_new_row

    def _java_order(self) -> list[Key]:
        calls: list[Key] = list(self._rows)
        if self._called_after_last_new:
            calls.append(calls[-1])
        return java_hashmap_order(calls, self.key_type.java_hash, compute_if_absent=True)

    def serialized_bytes(self) -> bytes:
        if self._version not in (VERSION_1, VERSION_2):
            raise UnsupportedError(f"invalid version: {self._version}")
        null_bytes = serialize_bitmap(self._nulls)
        offset = 0 if len(self._nulls) <= 1 else len(null_bytes)
        entries: list[tuple[Key, int, int]] = []  # value, offset, length (-1: single row)
        bodies = []
        for key in self._java_order():
            rows = self._rows[key]
            if len(rows) == 1:
                entries.append((key, -1 - rows[0], -1))
            else:
                body = serialize_bitmap(BitMap(rows))
                entries.append((key, offset, len(body)))
                bodies.append(body)
                offset += len(body)
        null_offset = -1 - self._nulls.min() if len(self._nulls) == 1 else 0
        head = struct.pack(">biib", self._version, self._row_count, len(entries),
                           bool(self._nulls))
        if self._version == VERSION_1:
            if self._nulls:
                head += struct.pack(">i", null_offset)
            head += b"".join(self.key_type.pack(k) + struct.pack(">i", o) for k, o, _ in entries)
        else:
            if self._nulls:
                head += struct.pack(">ii", null_offset, len(null_bytes))
            head += self._v2_blocks(entries)
        return b"".join([head, null_bytes if len(self._nulls) > 1 else b"", *bodies])

    def _v2_blocks(self, entries: list[tuple[Key, int, int]]) -> bytes:
        kt, limit = self.key_type, self._block_size
        blocks: list[list[tuple[Key, int, int]]] = []
        block_bytes = 0
        for entry in sorted(entries, key=lambda e: kt.order(e[0])):
            size = 8 + kt.size(entry[0])
            if not blocks or block_bytes + size > limit:
                if 4 + size > limit:
                    raise UnsupportedError(f"bitmap index value of {size - 8} bytes does not fit "
                                           f"an index block of {limit} bytes (index fail)")
                blocks.append([])
                block_bytes = 4
            blocks[-1].append(entry)
            block_bytes += size
        encoded = [struct.pack(">i", len(b)) + b"".join(
            kt.pack(k) + struct.pack(">ii", o, n) for k, o, n in b) for b in blocks]
        starts = [sum(map(len, encoded[:i])) for i in range(len(encoded))]
        directory = b"".join(kt.pack(b[0][0]) + struct.pack(">i", s)
                             for b, s in zip(blocks, starts, strict=True))
        return (struct.pack(">i", len(blocks)) + directory
                + struct.pack(">i", sum(map(len, encoded))) + b"".join(encoded))


class BitmapIndex:
    """A decoded bitmap index; queries answer the exact row numbers (``pyroaring.BitMap``)."""

    def __init__(self, data_type: DataType, payload: bytes) -> None:
        self.key_type = bitmap_key_type(data_type)
        self._data = payload
        if len(payload) < 10:
            raise CodecError(f"truncated bitmap index: {len(payload)} bytes")
        version, self.row_count, count, has_null = struct.unpack_from(">biib", payload)
        if version not in (VERSION_1, VERSION_2):
            raise CodecError(f"unknown bitmap index version {version}")
        if count < 0 or self.row_count < 0:
            raise CodecError(f"bitmap index with {count} values over {self.row_count} rows")
        pos, self._null = 10, None
        if has_null:
            null_offset = self._int(pos)
            self._null = (null_offset, self._int(pos + 4) if version == VERSION_2 else None)
            pos += 8 if version == VERSION_2 else 4
        if version == VERSION_1:
            self._entries, self._body = self._v1_entries(pos, count)
        else:
            self._entries, self._body = self._v2_entries(pos, count)

    def _int(self, pos: int) -> int:
        if pos + 4 > len(self._data):
            raise CodecError(f"truncated bitmap index at byte {pos} of {len(self._data)}")
        return int(struct.unpack_from(">i", self._data, pos)[0])

    def _v1_entries(self, pos: int, count: int) -> tuple[dict[Key, tuple[int, int | None]], int]:
        entries: dict[Key, tuple[int, int | None]] = {}
        for _ in range(count):
            key, pos = self.key_type.unpack(self._data, pos)
            entries[key] = (self._int(pos), None)
            pos += 4
        return entries, pos

    def _v2_entries(self, pos: int, count: int) -> tuple[dict[Key, tuple[int, int | None]], int]:
        kt, block_count = self.key_type, self._int(pos)
        pos += 4
        starts = []
        for _ in range(max(block_count, 0)):
            _, pos = kt.unpack(self._data, pos)
            starts.append(self._int(pos))
            pos += 4
        body_offset, index_start = self._int(pos), pos + 4
        entries: dict[Key, tuple[int, int | None]] = {}
        for start in starts:
            at = index_start + start
            size, at = self._int(at), at + 4
            for _ in range(max(size, 0)):
                key, at = kt.unpack(self._data, at)
                entries[key] = (self._int(at), self._int(at + 4))
                at += 8
        if len(entries) != count:
            raise CodecError(f"bitmap index blocks hold {len(entries)} values, header says {count}")
        return entries, index_start + body_offset

    def _bitmap(self, offset: int, length: int | None) -> BitMap:
        if offset < 0:
            return BitMap([-1 - offset])
        if self._body + offset > len(self._data):
            raise CodecError(f"bitmap at {self._body + offset} beyond the {len(self._data)}-byte index")
        return read_bitmap(self._data, self._body + offset, None if length == -1 else length)[0]

    def is_null(self) -> BitMap:
        return BitMap() if self._null is None else self._bitmap(*self._null)

    def is_not_null(self) -> BitMap:
        return BitMap(range(self.row_count)) - self.is_null()

    def equal(self, value: Any) -> BitMap:
        """Rows holding ``value`` (compared as Java's boxed keys: NaN == NaN, -0.0 != 0.0)."""
        if value is None:
            return BitMap()
        found = self._entries.get(self.key_type.to_key(value))
        return BitMap() if found is None else self._bitmap(*found)

    def is_in(self, values: Iterable[Any]) -> BitMap:
        return BitMap.union(BitMap(), *(self.equal(v) for v in values))

    def not_equal(self, value: Any) -> BitMap:
        return self.is_not_null() - self.equal(value)

    def not_in(self, values: Iterable[Any]) -> BitMap:
        return self.is_not_null() - self.is_in(values)

    def values(self) -> list[Key]:
        """Every distinct non-NULL key, in file order."""
        return list(self._entries)
