"""Running a consumer over a snapshot's live files one window of partitions at a time
(:func:`paimond.table.scan.bucket_scan.scan_live_windows`), starting over in a single window when
a manifest's partition statistics turn out wrong, as the compaction planner does."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TypeVar

from paimond.errors import PartitionStatsMismatchError
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest_slim import SlimEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.scan.bucket_scan import LiveIndex, scan_live_windows
from paimond.table.scan.partition_windows import WINDOW_ENTRIES

S = TypeVar("S")


def index_by_partition(entries: Iterable[IndexManifestEntry]
                       ) -> dict[bytes, list[IndexManifestEntry]]:
    """The index manifest's entries per partition, in their order."""
    grouped: dict[bytes, list[IndexManifestEntry]] = defaultdict(list)
    for entry in entries:
        grouped[entry.partition].append(entry)
    return grouped


def over_windows(table: Table, snapshot: Snapshot, schema: TableSchema, start: Callable[[], S],
                 each: Callable[[S, LiveIndex], None], *, budget: int = WINDOW_ENTRIES,
                 parallelism: int = 8, whole: Callable[[SlimEntry], bool] | None = None) -> S:
    """``each(state, window)`` for every window, ``state`` from ``start()``; a fresh state and
    one window when a window finds an entry outside its manifest's stated range. Each window
    is dropped before the next one is read. ``whole``: as ``scan_live_windows``'s."""
    try:
        state = start()
        for live in scan_live_windows(table, snapshot, schema, parallelism=parallelism,
                                      budget=budget, whole=whole):
            each(state, live)
            del live  # not held while the next window is read
        return state
    except PartitionStatsMismatchError:
        state = start()
        for live in scan_live_windows(table, snapshot, None, parallelism=parallelism,
                                      whole=whole):
            each(state, live)
            del live
        return state
