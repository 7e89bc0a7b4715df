"""Java's ``hashCode`` values and ``java.util.HashMap`` iteration order (OpenJDK 8-21).

Paimon writes several structures in the iteration order of a ``HashMap`` (deletion vectors
per data file, bitmap-index dictionaries, file-index columns and index types), so producing
its bytes exactly means replaying how such a map was filled. ``HashMap`` puts an entry into
bucket ``(h ^ (h >>> 16)) & (capacity - 1)``; the table starts at 16 buckets and doubles
when it holds more than ``0.75 * capacity`` entries (or when a bucket reaches 8 entries
while the table has fewer than 64 buckets); a resize keeps each bucket's relative order.
``put`` appends a new key to its bucket and resizes afterwards, ``computeIfAbsent``
prepends it and resizes before the next call. Tree bins (a bucket of 8+ colliding keys in a
table of 64+ buckets) are modelled as plain lists; their real order also depends on key
comparison, so such pathological inputs may differ.
"""

from __future__ import annotations

import datetime
import decimal
import math
import struct
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)

_DEFAULT_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def int32(value: int) -> int:
    """``value`` wrapped to a signed 32-bit Java int."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def int64(value: int) -> int:
    """``value`` wrapped to a signed 64-bit Java long."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value & 0x8000000000000000 else value


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return int32(h)


def java_long_hash(value: int) -> int:
    """``Long.hashCode(value)``: the two halves xor-ed."""
    value &= 0xFFFFFFFFFFFFFFFF
    return int32(value ^ (value >> 32))


def java_boolean_hash(value: bool) -> int:
    """``Boolean.hashCode(value)``."""
    return 1231 if value else 1237


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


class _Table:
    """Bucket occupancy of a ``HashMap`` being filled; the order is derived at the end."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.hashes: dict[Hashable, int] = {}
        self.counts: dict[int, int] = {}

    @property
    def threshold(self) -> int:
        return int(self.capacity * 0.75)

    def resize(self) -> None:
        self.capacity *= 2
        self.counts = {}
        for h in self.hashes.values():
            bucket = h & (self.capacity - 1)
            self.counts[bucket] = self.counts.get(bucket, 0) + 1

    def insert(self, key: Hashable, h: int, treeify_at: int) -> None:
        bucket = h & (self.capacity - 1)
        before = self.counts.get(bucket, 0)
        self.hashes[key] = h
        self.counts[bucket] = before + 1
        if before >= treeify_at and self.capacity < _MIN_TREEIFY_CAPACITY:
            self.resize()  # treeifyBin on a small table resizes instead


def java_hashmap_order(calls: Iterable[K], hash_code: Callable[[K], int], *,
                       compute_if_absent: bool = False,
                       initial_capacity: int = _DEFAULT_CAPACITY) -> list[K]:
    """The iteration order of a ``HashMap`` after ``put`` (or ``computeIfAbsent``) of each
    key in ``calls``, in call order; repeated keys are calls on an existing entry.

    ``hash_code`` is the key's Java ``hashCode()``. ``initial_capacity`` is the table size
    the map starts with (a power of two; 16 for ``new HashMap<>()``)."""
    table = _Table(initial_capacity)
    inserted: list[K] = []
    for key in calls:
        if compute_if_absent:
            if len(table.hashes) > table.threshold:
                table.resize()
            if key not in table.hashes:
                table.insert(key, _spread(hash_code(key)), _TREEIFY_THRESHOLD - 1)
                inserted.append(key)
        elif key not in table.hashes:
            table.insert(key, _spread(hash_code(key)), _TREEIFY_THRESHOLD)
            inserted.append(key)
            if len(table.hashes) > table.threshold:
                table.resize()
    mask = table.capacity - 1
    # Within a bucket, put keeps insertion order and computeIfAbsent the reverse.
    sign = -1 if compute_if_absent else 1
    order = sorted(range(len(inserted)), key=lambda i: (table.hashes[inserted[i]] & mask, sign * i))
    return [inserted[i] for i in order]


def java_copy_capacity(size: int) -> int:
    """Table size of ``new HashMap<>(other)`` for an ``other`` of ``size`` entries."""
    wanted = int(size / 0.75 + 1.0)
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    return capacity


# ---- hashCode of the objects Paimon's InternalArray.ElementGetter returns --------------------

_EPOCH_DAY = datetime.date(1970, 1, 1)


def _float_bits_hash(value: float) -> int:
    """``Float.hashCode``: ``floatToIntBits`` (every NaN the canonical one)."""
    if math.isnan(value):
        return 0x7FC00000
    return int(struct.unpack(">i", struct.pack(">f", value))[0])


def _double_bits_hash(value: float) -> int:
    """``Double.hashCode``: ``doubleToLongBits`` folded (every NaN the canonical one)."""
    bits = 0x7FF8000000000000 if math.isnan(value) else struct.unpack(
        ">q", struct.pack(">d", value))[0]
    return java_long_hash(bits)


def _binary_string_hash(value: str) -> int:
    """``BinaryString.hashCode``: Paimon's Murmur hash of the UTF-8 bytes."""
    from paimond.format.file_index.hashing import murmur_hash  # strings in a set only

    return murmur_hash(value.encode("utf-8"))


def _epoch_nanos(value: Any) -> int:
    if isinstance(value, datetime.datetime):
        epoch = datetime.datetime(1970, 1, 1, tzinfo=value.tzinfo)
        delta = value - epoch
        return ((delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds) * 1000
    return int(value.value)  # a pandas Timestamp (nanosecond arrays)


def _timestamp_hash(value: Any) -> int:
    """``Timestamp.hashCode``: ``31 * Long.hashCode(millis) + nanoOfMillisecond``."""
    millis, nanos = divmod(_epoch_nanos(value), 10**6)
    return int32(31 * java_long_hash(millis) + nanos)


def _big_integer_hash(value: int) -> int:
    """``BigInteger.hashCode``: the magnitude's 32-bit words folded by 31, times the sign."""
    magnitude, words = abs(value), []
    while magnitude:
        words.append(magnitude & 0xFFFFFFFF)
        magnitude >>= 32
    h = 0
    for word in reversed(words):
        h = int32(31 * h + word)
    return int32(h * (1 if value > 0 else -1 if value < 0 else 0))


def _decimal_hash(scale: int) -> Callable[[Any], int]:
    """``Decimal.hashCode``: ``BigDecimal.hashCode`` of the value at the type's scale."""

    def hash_code(value: decimal.Decimal) -> int:
        unscaled = int(value.scaleb(scale).to_integral_value())
        return int32(31 * _big_integer_hash(unscaled) + scale)

    return hash_code


def _time_hash(value: datetime.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def boxed_hash(type_: Any) -> Callable[[Any], int] | None:
    """The ``hashCode`` of a value of the Arrow type ``type_`` as Paimon boxes it (``Integer``,
    ``Long``, ``BinaryString``, ``Decimal``, ``Timestamp``, ...), taking the Python value
    ``to_pylist`` gives; None hashes to 0 as in ``HashMap``. None for types whose Java
    object has no value hash (``byte[]``: identity) or is a constructed type."""
    import pyarrow as pa  # the callers hold Arrow data already

    scalar: Callable[[Any], int] | None = None
    if pa.types.is_boolean(type_):
        scalar = java_boolean_hash
    elif pa.types.is_int8(type_) or pa.types.is_int16(type_) or pa.types.is_int32(type_):
        scalar = int
    elif pa.types.is_int64(type_):
        scalar = java_long_hash
    elif pa.types.is_float32(type_):
        scalar = _float_bits_hash
    elif pa.types.is_float64(type_):
        scalar = _double_bits_hash
    elif pa.types.is_string(type_) or pa.types.is_large_string(type_):
        scalar = _binary_string_hash
    elif pa.types.is_date32(type_):
        scalar = lambda d: (d - _EPOCH_DAY).days  # noqa: E731
    elif pa.types.is_time(type_):
        scalar = _time_hash
    elif pa.types.is_timestamp(type_):
        scalar = _timestamp_hash
    elif pa.types.is_decimal(type_):
        scalar = _decimal_hash(type_.scale)
    if scalar is None:
        return None
    hash_code = scalar
    return lambda value: 0 if value is None else hash_code(value)
