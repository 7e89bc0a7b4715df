"""The ``bloom-filter`` file index: Java ``BloomFilterFileIndex`` over ``BloomFilter64`` with
``FastHash`` (apache/paimon ``5dacde516b``).

Payload: int32 BE number of hash functions, then the bit set (bit ``i`` is byte ``i >> 3``,
mask ``1 << (i & 7)``). Sizing: ``nb = (int)(-items * ln(fpp) / ln(2)^2)``, ``numBits = nb +
8 - nb % 8``, ``k = max(1, round(numBits / items * ln 2))``. A 64-bit hash sets bits
``c = h1 + i * h2`` (int32 wrap, ``~c`` if negative) ``mod numBits`` for i = 1..k, where h1 and
h2 are its low and high 32 bits. NULLs are not added.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CodecError, UnsupportedError
from paimond.format.binary.java_order import int32
from paimond.format.file_index.hash_arrays import thomas_wang_hashes, xxh64_hashes
from paimond.format.file_index.hashing import thomas_wang_hash, xxh64
from paimond.format.file_index.keys import IndexWriter, Key, KeyType, arrow_int_keys, key_type
from paimond.format.types.data_types import DataType

BLOOM_FILTER = "bloom-filter"
DEFAULT_ITEMS = 1_000_000
DEFAULT_FPP = 0.1


@dataclass(frozen=True, slots=True)
class BloomFilterSettings:
    """``items`` (expected distinct values) and ``fpp`` (false-positive probability)."""

    items: int = DEFAULT_ITEMS
    fpp: float = DEFAULT_FPP
_UNSUPPORTED = {"BOOLEAN": "Does not support type boolean",
                "DECIMAL": "Does not support decimal"}
_SCALARS = {"CHAR", "VARCHAR", "BINARY", "VARBINARY", "TINYINT", "SMALLINT", "INT", "BIGINT",
            "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ"}


def bloom_key_type(data_type: DataType) -> KeyType:
    """Raises UnsupportedError for the types ``FastHash`` rejects."""
    name = data_type.name
    if name not in _SCALARS:
        raise UnsupportedError(_UNSUPPORTED.get(name, f"Does not support type {name.lower()}"))
    return key_type(data_type)


def bloom_hash(key: Key) -> int:
    """``FastHash`` of a key: XXH64 of bytes, Thomas Wang's mix of anything numeric."""
    return xxh64(key) if isinstance(key, bytes) else thomas_wang_hash(int(key))


def bloom_sizing(items: int, fpp: float) -> tuple[int, int]:
    """``(number of hash functions, number of bits)`` of ``BloomFilter64(items, fpp)``."""
    if not 0 < fpp < 1 or items <= 0:
        raise UnsupportedError(f"bloom filter needs items > 0 and 0 < fpp < 1, got {items}, {fpp}")
    nb = int(-items * math.log(fpp) / (math.log(2) * math.log(2)))
    num_bits = nb + (8 - nb % 8)
    return max(1, math.floor(num_bits / items * math.log(2) + 0.5)), num_bits


def _positions(hash64: int, num_hashes: int, num_bits: int) -> list[int]:
    h1 = int32(hash64)
    h2 = int32(hash64 >> 32)
    out = []
    for i in range(1, num_hashes + 1):
        combined = int32(h1 + i * h2)
        out.append((~combined if combined < 0 else combined) % num_bits)
    return out


class BloomFilterWriter(IndexWriter):
    """Builds one column's bloom filter; ``write`` takes Python values or an Arrow array."""

    def __init__(self, data_type: DataType, settings: BloomFilterSettings | None = None) -> None:
        super().__init__(data_type, bloom_key_type(data_type))
        settings = settings or BloomFilterSettings()
        self.num_hashes, self.num_bits = bloom_sizing(settings.items, settings.fpp)
        self._bits = bytearray(self.num_bits // 8)
        self._set: np.ndarray | None = None  # bits set by write_arrow, one bool per bit

    def write_arrow(self, values: pa.Array | pa.ChunkedArray) -> None:
        """Append rows from Arrow, vectorized (each distinct string hashed once)."""
        if len(values):
            self.empty = False
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        hashes = _arrow_hashes(self.data_type, values.drop_null())
        if len(hashes) == 0:
            return
        if self._set is None:
            self._set = np.zeros(self.num_bits, dtype=bool)
        words = hashes.view(np.uint64)
        h1 = (words & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32).astype(np.int64)
        h2 = (words >> np.uint64(32)).astype(np.uint32).view(np.int32).astype(np.int64)
        for i in range(1, self.num_hashes + 1):
            combined = (h1 + i * h2).astype(np.int32).astype(np.int64)  # int32 wrap
            combined = np.where(combined < 0, ~combined, combined)
            self._set[combined % self.num_bits] = True

    def _write_keys(self, keys: Sequence[Key | None]) -> None:
        bits, num_hashes, num_bits = self._bits, self.num_hashes, self.num_bits
        for key in keys:
            if key is not None:
                for pos in _positions(bloom_hash(key), num_hashes, num_bits):
                    bits[pos >> 3] |= 1 << (pos & 7)

    def serialized_bytes(self) -> bytes:
        bits = self._bits
        if self._set is not None:
            packed = np.packbits(self._set, bitorder="little")
            bits = bytearray((np.frombuffer(bytes(bits), dtype=np.uint8) | packed).tobytes())
        return struct.pack(">i", self.num_hashes) + bytes(bits)


_BYTES = {"CHAR", "VARCHAR", "BINARY", "VARBINARY"}


def _arrow_hashes(data_type: DataType, values: pa.Array) -> np.ndarray:
    """``FastHash`` of the non-null values of ``values`` (a column of
    ``data_type``; strings deduplicated first), as ``bloom_hash`` computes each."""
    if data_type.name in _BYTES:
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            values = values.cast(pa.binary() if pa.types.is_string(values.type)
                                 else pa.large_binary())
        return xxh64_hashes(pc.unique(values))
    return thomas_wang_hashes(arrow_int_keys(values, data_type))  # hashing beats deduplicating


class BloomFilterIndex:
    """A decoded bloom filter: ``might_contain`` never answers False for a written value."""

    def __init__(self, data_type: DataType, payload: bytes) -> None:
        if len(payload) < 5:
            raise CodecError(f"bloom filter index of {len(payload)} bytes has no bits")
        (self.num_hashes,) = struct.unpack_from(">i", payload)
        self.num_bits = 8 * (len(payload) - 4)
        if not 0 < self.num_hashes <= self.num_bits:
            raise CodecError(f"bloom filter with {self.num_hashes} hash functions "
                             f"over {self.num_bits} bits")
        self._bits = payload[4:]
        self.key_type = bloom_key_type(data_type)

    def might_contain(self, value: Any) -> bool:
        """False only if no row holds ``value``; NULL may always be present."""
        if value is None:
            return True
        pos_list = _positions(bloom_hash(self.key_type.to_key(value)), self.num_hashes,
                              self.num_bits)
        return all(self._bits[pos >> 3] >> (pos & 7) & 1 for pos in pos_list)
