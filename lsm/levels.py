"""The levels of one bucket's LSM tree: Java ``Levels``, ``SortedRun``, ``LevelSortedRun``
(apache/paimon 5dacde516b).

Level 0 holds one sorted run per file, newest first; every higher level is one sorted run of
non-overlapping files ordered by min key. Pickers see ``sorted_runs()``: the level-0 files,
then each non-empty higher level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from paimond.format.meta.manifest import DataFileMeta


@dataclass(frozen=True, slots=True)
class SortedRun:
    level: int
    files: tuple[DataFileMeta, ...]

    @property
    def size_bytes(self) -> int:
        return sum(f.file_size for f in self.files)


def level0_order(meta: DataFileMeta) -> tuple[int, int, int, str]:
    """Newest first: larger max sequence number, then smaller min sequence number, then
    creation time, then file name (Java's level-0 TreeSet comparator)."""
    return (-meta.max_sequence_number, meta.min_sequence_number,
            meta.creation_time_millis if meta.creation_time_millis is not None else 0,
            meta.file_name)


@dataclass(frozen=True, slots=True)
class Levels:
    num_levels: int
    level0: tuple[DataFileMeta, ...]
    higher: tuple[tuple[DataFileMeta, ...], ...]  # higher[i] is level i + 1

    @classmethod
    def from_files(cls, files: Iterable[DataFileMeta], num_levels: int,
                   key_order: Callable[[DataFileMeta], Any]) -> Levels:
        """``key_order`` maps a file to a sortable form of its min key (Paimon key order).

        Restored files above ``num_levels - 1`` enlarge the tree, as in Java.
        """
        files = list(files)
        restored = max([num_levels, *(f.level + 1 for f in files)])
        if restored < 2:
            raise ValueError("an LSM tree needs at least 2 levels")
        level0 = tuple(sorted((f for f in files if f.level == 0), key=level0_order))
        higher = tuple(
            tuple(sorted((f for f in files if f.level == level), key=key_order))
            for level in range(1, restored))
        return cls(restored, level0, higher)

    @property
    def max_level(self) -> int:
        return self.num_levels - 1

    def files_at(self, level: int) -> tuple[DataFileMeta, ...]:
        return self.level0 if level == 0 else self.higher[level - 1]

    def files_above(self, level: int) -> list[DataFileMeta]:
        """Every file of the levels above ``level`` (deletion-vector lookups search them)."""
        return [f for lv in range(level + 1, self.num_levels) for f in self.files_at(lv)]

    def sorted_runs(self) -> list[SortedRun]:
        runs = [SortedRun(0, (f,)) for f in self.level0]
        runs += [SortedRun(i + 1, files) for i, files in enumerate(self.higher) if files]
        return runs

    def non_empty_highest_level(self) -> int:
        """The highest level holding a file, or -1 for an empty tree."""
        for i in range(len(self.higher) - 1, -1, -1):
            if self.higher[i]:
                return i + 1
        return 0 if self.level0 else -1
