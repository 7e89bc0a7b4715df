"""Splitting a snapshot's manifests into windows of partitions, so that a planner holds the
live files of one window at a time: the ranges come from each manifest's partition statistics
(Java ``ManifestFileMeta.partitionStats``, the min and max of every partition field over the
manifest's entries, apache/paimon 5dacde516b), on the first partition field.

Manifests that ``merge-manifests`` or a time-partitioned writer wrote cover a narrow range;
windows are cut between such manifests once a window holds ``budget`` entries. A manifest is
read by every window its range overlaps, so a window plan that would read more than twice the
entries of one pass is not used (one window: every live file held at once, as before).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from paimond.errors import CodecError
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.binary.key_order import sort_key_function
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.schema import TableSchema

# Planning holds ~250 bytes per live file of a window: ~50 MB at this size.
WINDOW_ENTRIES = 200_000
SortKey = tuple[Any, ...]
NULL_KEY: SortKey = ((0,),)  # sort_key_function's key of a null value sorts first


@dataclass(frozen=True, slots=True)
class PartitionWindows:
    """Half-open ranges of the first partition field's sort key: window ``i`` holds the keys
    from ``bounds[i - 1]`` (inclusive; none for the first) to ``bounds[i]`` (exclusive)."""

    bounds: tuple[SortKey, ...]
    ranges: tuple[tuple[SortKey, SortKey] | None, ...]  # per manifest; None: unknown
    schema: TableSchema

    @property
    def count(self) -> int:
        return len(self.bounds) + 1

    def key(self, partition: bytes) -> SortKey:
        """The sort key of a partition's first field."""
        types = self.schema.partition_type.field_types
        return sort_key_function(types[:1])(decode_manifest_row(partition, types)[:1])

    def window_of(self, key: SortKey) -> int:
        return bisect.bisect_right(self.bounds, key)

    def manifest_windows(self, manifest: int) -> range:
        """The windows a manifest's entries may fall in."""
        bounds = self.ranges[manifest]
        if bounds is None:
            return range(self.count)
        return range(self.window_of(bounds[0]), self.window_of(bounds[1]) + 1)

    def in_range(self, manifest: int, key: SortKey) -> bool:
        """Whether a key lies in the range the manifest's statistics state."""
        bounds = self.ranges[manifest]
        return bounds is None or bounds[0] <= key <= bounds[1]


def _range(meta: ManifestFileMeta, schema: TableSchema) -> tuple[SortKey, SortKey] | None:
    types = schema.partition_type.field_types
    stats = meta.partition_stats
    try:
        low = decode_manifest_row(stats.min_values, types)[0]
        high = decode_manifest_row(stats.max_values, types)[0]
    except (CodecError, ValueError, IndexError, TypeError):
        return None
    nulls = stats.null_counts[0] if stats.null_counts else None
    if nulls is None or (low is None and not nulls) or (high is None and not nulls):
        return None
    key = sort_key_function(types[:1])
    return (NULL_KEY if nulls else key([low]), NULL_KEY if high is None else key([high]))


def partition_windows(schema: TableSchema, manifests: Sequence[ManifestFileMeta], *,
                      budget: int = WINDOW_ENTRIES) -> PartitionWindows:
    """Windows of about ``budget`` entries each (a single one when the table is unpartitioned,
    small, or its manifests' ranges overlap too much)."""
    ranges = tuple(_range(m, schema) for m in manifests) if schema.partition_keys else ()
    single = PartitionWindows((), ranges or tuple(None for _ in manifests), schema)
    sizes = [m.num_added_files + m.num_deleted_files for m in manifests]
    if not ranges or sum(sizes) <= budget:
        return single
    large = sorted((r, n) for r, n in zip(ranges, sizes, strict=True)
                   if r is not None and n >= budget // 100)
    bounds: list[SortKey] = []
    held, reach = 0, None
    for (low, high), size in large:
        if held >= budget and reach is not None and reach < low:
            bounds.append(low)
            held = 0
        held += size
        reach = high if reach is None else max(reach, high)
    windows = PartitionWindows(tuple(bounds), ranges, schema)
    reads = sum(len(windows.manifest_windows(i)) * n for i, n in enumerate(sizes))
    return windows if bounds and reads <= 2 * sum(sizes) else single
