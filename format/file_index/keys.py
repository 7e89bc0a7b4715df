"""Index keys: the Java objects Paimon's file indexes hold for each column type, as Python.

Values (``paimond.format.types.values``) become keys the way the Java writers' value mappers do:

| Paimon type                     | key                                | bytes          |
|---------------------------------|------------------------------------|----------------|
| TINYINT, SMALLINT, INT          | int                                | 1, 2, 4 BE     |
| DATE (days), TIME (millis)      | int                                | 4 BE           |
| BIGINT                          | int                                | 8 BE           |
| TIMESTAMP(p), TIMESTAMP_LTZ(p)  | int: epoch millis (p <= 3), micros | 8 BE           |
| DECIMAL(p, s)                   | int: unscaled value                | 8 BE           |
| FLOAT, DOUBLE                   | int: ``floatToIntBits`` / ``doubleToLongBits`` | 4, 8 BE |
| BOOLEAN                         | bool                               | 1              |
| CHAR, VARCHAR                   | bytes: UTF-8 (a ``BinaryString``)  | int32 BE + bytes |
| BINARY, VARBINARY               | bytes                              | (bloom only)   |

Floating-point keys are their canonical IEEE bits, so keys compare as Java's boxed
``equals`` does (NaN equals NaN, -0.0 differs from 0.0) and sort as ``Float.compare``.
Which index accepts which type is each index's business.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from paimond.errors import CodecError, UnsupportedError
from paimond.format.binary.java_order import java_boolean_hash, java_long_hash
from paimond.format.file_index.hashing import murmur_hash
from paimond.format.types.data_types import DataType, DecimalType, LocalZonedTimestampType, TimestampType
from paimond.format.types.values import Timestamp

Key = int | bytes
_RANGES = {"b": 1 << 7, "h": 1 << 15, "i": 1 << 31, "q": 1 << 63}


def _integer(fmt: str) -> Callable[[Any], Key]:
    bound = _RANGES[fmt]

    def to_key(value: Any) -> Key:
        if isinstance(value, bool) or not isinstance(value, int) or not -bound <= value < bound:
            raise ValueError(f"{value!r} is not a {8 * struct.calcsize(fmt)}-bit integer")
        return value
    return to_key


def _float_bits(fmt: str) -> Callable[[Any], Key]:
    bits, nan = ("i", 0x7FC00000) if fmt == "f" else ("q", 0x7FF8000000000000)

    def to_key(value: Any) -> Key:
        if value != value:
            return nan  # floatToIntBits collapses every NaN
        try:
            return int(struct.unpack(">" + bits, struct.pack(">" + fmt, value))[0])
        except (struct.error, OverflowError, TypeError) as e:
            raise ValueError(f"{value!r} is not a {'FLOAT' if fmt == 'f' else 'DOUBLE'}: {e}") from None
    return to_key


def _timestamp(precision: int) -> Callable[[Any], Key]:
    def to_key(value: Any) -> Key:
        if not isinstance(value, Timestamp):
            raise ValueError(f"{value!r} is not a paimond Timestamp")
        return value.millis if precision <= 3 else value.micros
    return to_key


def _decimal(scale: int) -> Callable[[Any], Key]:
    def to_key(value: Any) -> Key:
        if not isinstance(value, Decimal | int):
            raise ValueError(f"{value!r} is not a Decimal")
        return int(Decimal(value).scaleb(scale).to_integral_value(ROUND_HALF_UP))
    return to_key


def _boolean(value: Any) -> Key:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not a bool")
    return value


def _utf8(value: Any) -> Key:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise ValueError(f"{value!r} is neither str nor bytes")


@dataclass(frozen=True, slots=True)
class KeyType:
    """How keys of one column type are made, written, hashed and ordered."""

    fmt: str  # big-endian struct code of the key, or "s" for int32-length-prefixed bytes
    to_key: Callable[[Any], Key]
    is_float: bool = False

    def pack(self, key: Key) -> bytes:
        if self.fmt == "s":
            assert isinstance(key, bytes)
            return struct.pack(">i", len(key)) + key
        if self.is_float:
            return struct.pack(">" + ("i" if self.fmt == "f" else "q"), key)
        return struct.pack(">" + self.fmt, key)

    def unpack(self, data: bytes, pos: int) -> tuple[Key, int]:
        """The key at ``data[pos]`` and the position after it."""
        if self.fmt == "s":
            length = self._fixed(data, pos, "i")
            if length < 0 or pos + 4 + length > len(data):
                raise CodecError(f"truncated index key: {length} bytes at {pos + 4} "
                                 f"of {len(data)}")
            return bytes(data[pos + 4:pos + 4 + length]), pos + 4 + length
        code = {"f": "i", "d": "q"}.get(self.fmt, self.fmt)
        return self._fixed(data, pos, code), pos + struct.calcsize(code)

    @staticmethod
    def _fixed(data: bytes, pos: int, code: str) -> Any:
        if pos < 0 or pos + struct.calcsize(code) > len(data):
            raise CodecError(f"truncated index key at byte {pos} of {len(data)}")
        return struct.unpack_from(">" + code, data, pos)[0]

    def size(self, key: Key) -> int:
        return 4 + len(key) if isinstance(key, bytes) else struct.calcsize(self.fmt)

    def java_hash(self, key: Key) -> int:
        """``hashCode()`` of the boxed Java key (``Integer``, ``Long``, ``BinaryString``...)."""
        if isinstance(key, bytes):
            return murmur_hash(key)
        if self.fmt == "?":
            return java_boolean_hash(bool(key))
        return java_long_hash(key) if self.fmt in ("q", "d") else key

    def order(self, key: Key) -> Key:
        """A sort key in Java's ``Comparator`` order (``Float.compare`` for floats)."""
        if self.is_float and isinstance(key, int) and key < 0:
            return key ^ (0x7FFFFFFF if self.fmt == "f" else 0x7FFFFFFFFFFFFFFF)
        return key


def key_type(data_type: DataType) -> KeyType:
    """The key type of a scalar column type. Raises UnsupportedError for any other type."""
    name = data_type.name
    if name in ("TINYINT", "SMALLINT", "INT", "DATE", "TIME", "BIGINT"):
        fmt = {"TINYINT": "b", "SMALLINT": "h", "BIGINT": "q"}.get(name, "i")
        return KeyType(fmt, _integer(fmt))
    if isinstance(data_type, TimestampType | LocalZonedTimestampType):
        return KeyType("q", _timestamp(data_type.precision))
    if isinstance(data_type, DecimalType):
        return KeyType("q", _decimal(data_type.scale))
    if name in ("FLOAT", "DOUBLE"):
        fmt = "f" if name == "FLOAT" else "d"
        return KeyType(fmt, _float_bits(fmt), is_float=True)
    if name == "BOOLEAN":
        return KeyType("?", _boolean)
    if name in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return KeyType("s", _utf8)
    raise UnsupportedError(f"no file index key for type {data_type}")


def arrow_int_keys(array: pa.Array, data_type: DataType) -> np.ndarray:
    """The int64 keys of a non-null Arrow array of an integer, date, time, timestamp, FLOAT
    or DOUBLE column, as ``key_type(data_type).to_key`` makes them one value at a time
    (floats as ``floatToIntBits``/``doubleToLongBits``, every NaN the canonical one)."""
    name = data_type.name
    if name in ("FLOAT", "DOUBLE"):
        floats = np.asarray(array.to_numpy(zero_copy_only=False),
                            dtype=np.float32 if name == "FLOAT" else np.float64)
        bits = floats.view(np.int32 if name == "FLOAT" else np.int64).astype(np.int64)
        bits[np.isnan(floats)] = 0x7FC00000 if name == "FLOAT" else 0x7FF8000000000000
        return bits
    arrow_type = array.type
    if not (pa.types.is_date(arrow_type) or pa.types.is_time(arrow_type)
            or pa.types.is_timestamp(arrow_type)):
        return np.asarray(array.to_numpy(zero_copy_only=False)).astype(np.int64)
    storage = pa.int32() if arrow_type.bit_width == 32 else pa.int64()
    values = np.asarray(array.view(storage).to_numpy(zero_copy_only=False)).astype(np.int64)
    unit = getattr(arrow_type, "unit", None)
    per_second = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[unit] if unit else 0
    if not per_second:
        return values
    wanted = 1000 if getattr(data_type, "precision", 0) <= 3 else 10**6
    if pa.types.is_time(arrow_type):
        wanted = 1000  # TIME keys are millis of the day
    if per_second >= wanted:
        return values // (per_second // wanted)
    return values * (wanted // per_second)


_NUMERIC_KEYS = {"TINYINT", "SMALLINT", "INT", "BIGINT", "DATE", "TIME", "TIMESTAMP",
                 "TIMESTAMP_LTZ", "FLOAT", "DOUBLE"}
_BYTE_KEYS = {"CHAR", "VARCHAR", "BINARY", "VARBINARY"}


def arrow_key_array(values: pa.Array, data_type: DataType) -> pa.Array | None:
    """The keys of a non-null Arrow array as Arrow (int64, or binary for strings), equal to
    what ``keys_of`` makes value by value; None for a type without this path."""
    name = data_type.name
    if name in _BYTE_KEYS:
        if pa.types.is_string(values.type):
            return values.cast(pa.binary())
        return values.cast(pa.large_binary()) if pa.types.is_large_string(values.type) \
            else values
    if name in _NUMERIC_KEYS:
        return pa.array(arrow_int_keys(values, data_type), pa.int64())
    return None


def _arrow_ints(array: pa.Array, data_type: DataType) -> list[Any]:
    """Integers of date, time and timestamp arrays in the key's unit (floor division)."""
    unit = getattr(array.type, "unit", None)
    per_second = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[unit] if unit else 0
    storage = pa.int32() if array.type.bit_width == 32 else pa.int64()
    values: list[Any] = array.view(storage).to_pylist()
    if not per_second:
        return values
    wanted = 1000 if getattr(data_type, "precision", 0) <= 3 else 10**6
    if pa.types.is_time(array.type):
        wanted = 1000  # TIME keys are millis of the day
    if per_second >= wanted:
        return [None if v is None else v // (per_second // wanted) for v in values]
    return [None if v is None else v * (wanted // per_second) for v in values]


def keys_of(data_type: DataType, values: Sequence[Any] | pa.Array | pa.ChunkedArray,
            kind: KeyType | None = None) -> list[Key | None]:
    """The key of every value (None for NULL), from Python values or an Arrow array.

    Raises ValueError for a value that does not fit the type."""
    kind = kind or key_type(data_type)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        arrow_type = values.type
        if pa.types.is_date(arrow_type) or pa.types.is_time(arrow_type) \
                or pa.types.is_timestamp(arrow_type):
            return _arrow_ints(values, data_type)
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            values = values.cast(pa.binary())
        values = values.to_pylist()
    to_key = kind.to_key
    return [None if v is None else to_key(v) for v in values]


class IndexWriter(ABC):
    """One column's index being built, row by row (Java ``FileIndexWriter``)."""

    def __init__(self, data_type: DataType, key_type: KeyType) -> None:
        self.data_type = data_type
        self.key_type = key_type
        self.empty = True  # nothing written yet, not even a NULL

    def write(self, values: Sequence[Any] | pa.Array | pa.ChunkedArray) -> None:
        """Append rows: Python values (``paimond.format.types.values``; None is NULL) or Arrow.

        Raises ValueError for a value that does not fit the column type."""
        if isinstance(values, pa.Array | pa.ChunkedArray):
            self.write_arrow(values)
        else:
            self.write_keys(keys_of(self.data_type, values, self.key_type))

    def write_arrow(self, values: pa.Array | pa.ChunkedArray) -> None:
        """Append rows from Arrow; writers with a vectorized path override this."""
        self.write_keys(keys_of(self.data_type, values, self.key_type))

    @property
    def vectorized(self) -> bool:
        """Whether ``write_arrow`` does better than keys made value by value."""
        return type(self).write_arrow is not IndexWriter.write_arrow

    def write_keys(self, keys: Sequence[Key | None]) -> None:
        """Append rows given as keys (see :func:`keys_of`)."""
        if len(keys):
            self.empty = False
        self._write_keys(keys)

    @abstractmethod
    def _write_keys(self, keys: Sequence[Key | None]) -> None: ...

    @abstractmethod
    def serialized_bytes(self) -> bytes:
        """The index payload, exactly as Java's ``serializedBytes()``."""
