"""Split compaction inputs into key-disjoint sections of sorted runs: Java
``IntervalPartition`` (apache/paimon 5dacde516b).

Files are ordered by (min key, max key); a section ends where the next file starts after
every key seen so far, so sections can be merged independently. Inside a section files are
packed greedily into the fewest sorted runs (a file joins the run whose last max key is the
smallest, if it starts after it).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from paimond.format.binary.key_order import SortKey, max_key_order, min_key_order
from paimond.format.meta.manifest import DataFileMeta
from paimond.format.types.data_types import DataType


@dataclass(frozen=True, slots=True)
class Section:
    """Key-disjoint from every other section; ``runs`` are each sorted and non-overlapping."""

    runs: tuple[tuple[DataFileMeta, ...], ...]

    @property
    def files(self) -> list[DataFileMeta]:
        return [f for run in self.runs for f in run]


def partition_intervals(files: Sequence[DataFileMeta],
                        key_types: Sequence[DataType]) -> list[Section]:
    min_of, max_of = min_key_order(key_types), max_key_order(key_types)
    keyed = sorted(((min_of(f), max_of(f), f) for f in files), key=lambda t: (t[0], t[1]))
    sections: list[Section] = []
    current: list[tuple[SortKey, SortKey, DataFileMeta]] = []
    bound: SortKey | None = None
    for low, high, meta in keyed:
        if current and bound is not None and low > bound:
            sections.append(_pack(current))
            current, bound = [], None
        current.append((low, high, meta))
        if bound is None or high > bound:
            bound = high
    if current:
        sections.append(_pack(current))
    return sections


def _pack(files: list[tuple[SortKey, SortKey, DataFileMeta]]) -> Section:
    # Heap of (last max key, run index); run index breaks ties deterministically.
    runs: list[list[DataFileMeta]] = [[files[0][2]]]
    heap: list[tuple[SortKey, int]] = [(files[0][1], 0)]
    for low, high, meta in files[1:]:
        last_max, index = heap[0]
        if low > last_max:
            runs[index].append(meta)
            heapq.heapreplace(heap, (high, index))
        else:
            runs.append([meta])
            heapq.heappush(heap, (high, len(runs) - 1))
    return Section(tuple(tuple(run) for run in runs))
