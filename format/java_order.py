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

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

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
