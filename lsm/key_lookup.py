"""Finding, for a compaction of level-0 files, the older rows their keys supersede in the
levels above the output (Java ``LookupLevels`` as driven by
``LookupChangelogMergeFunctionWrapper`` for deletion vectors, apache/paimon 5dacde516b).

Levels >= 1 hold at most one live row per key, so a key written again at level 0 supersedes
exactly that row; compaction marks its position in the file's deletion vector. The work is
set-wise, not row by row: the level-0 keys are collected once per task, files whose key range
misses them are skipped, and each remaining file's key columns are matched against them with
one Arrow hash join (``ScanKeyIndex``). A ``KeyIndex`` that answers from a local cache
instead of the data file can replace it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.binary_row import decode_manifest_row
from paimond.format.manifest import DataFileMeta
from paimond.format.types import DataType
from paimond.lsm.merge import comparable_keys

POSITION_COLUMN = "_POSITION"
TAG_COLUMN = "_TAG"  # which caller-side group a wanted key belongs to (e.g. its section)

ReadKeys = Callable[[DataFileMeta], Iterator[pa.RecordBatch]]


class KeyIndex(Protocol):
    def match(self, meta: DataFileMeta, wanted: pa.Table) -> pa.Table:
        """The rows of ``meta`` whose key is in ``wanted`` (key columns + ``_TAG``), as a
        table of ``_POSITION`` (int64, 0-based row number) and ``_TAG``; in any order."""
        ...


def _joinable(table: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """Key columns in a form Arrow's hash join takes (temporal types as integers)."""
    keys = comparable_keys(table, key_columns)
    return keys.append_column(table.field(table.num_columns - 1), table.column(-1))


class ScanKeyIndex:
    """Reads a file's key columns (one projection read) and joins them with the wanted keys."""

    def __init__(self, read_keys: ReadKeys, key_columns: Sequence[str]) -> None:
        self._read_keys, self._key_columns = read_keys, list(key_columns)
        self.files_read = 0
        self.rows_read = 0

    def match(self, meta: DataFileMeta, wanted: pa.Table) -> pa.Table:
        batches = list(self._read_keys(meta))
        self.files_read += 1
        keys = pa.Table.from_batches(batches) if batches else None
        if keys is None or keys.num_rows == 0:
            return _empty_matches()
        self.rows_read += keys.num_rows
        keys = keys.select(self._key_columns).append_column(
            POSITION_COLUMN, pa.array(np.arange(keys.num_rows, dtype=np.int64)))
        joined = _joinable(keys, self._key_columns).join(
            _joinable(wanted, self._key_columns), keys=self._key_columns, join_type="inner")
        return joined.select([POSITION_COLUMN, TAG_COLUMN])


def _empty_matches() -> pa.Table:
    return pa.table({POSITION_COLUMN: pa.array([], pa.int64()),
                     TAG_COLUMN: pa.array([], pa.int64())})


@dataclass(frozen=True, slots=True)
class Superseded:
    """Live rows of one higher-level file superseded by level-0 keys."""

    meta: DataFileMeta
    positions: np.ndarray  # sorted int64
    tags: np.ndarray  # the wanted key's tag, per position


def wanted_keys(tables: Iterable[tuple[pa.Table, int]], key_columns: Sequence[str]) -> pa.Table:
    """The distinct keys of ``(key table, tag)`` pairs as key columns + ``_TAG``. A key is
    expected under one tag only (sections are key-disjoint); the smallest tag wins."""
    parts = [t.select(list(key_columns)).append_column(
        TAG_COLUMN, pa.array(np.full(t.num_rows, tag, dtype=np.int64))) for t, tag in tables]
    if not parts:
        raise ValueError("no keys")
    table = pa.concat_tables(parts)
    grouped = table.group_by(list(key_columns), use_threads=False).aggregate(
        [(TAG_COLUMN, "min")])
    return grouped.select([*key_columns, f"{TAG_COLUMN}_min"]).rename_columns(
        [*key_columns, TAG_COLUMN])


class _FirstColumnRange:
    """Skips files whose first key column range holds none of the wanted keys (where the
    first key column is a plain number or string; other types are never skipped)."""

    def __init__(self, wanted: pa.Table, key_columns: Sequence[str],
                 key_types: Sequence[DataType]) -> None:
        self._types = list(key_types)
        first = wanted.column(key_columns[0])
        plain = (pa.types.is_integer(first.type) or pa.types.is_floating(first.type)
                 or pa.types.is_string(first.type) or pa.types.is_large_string(first.type)
                 or pa.types.is_binary(first.type) or pa.types.is_boolean(first.type))
        self._first = first if plain else None

    def subset(self, meta: DataFileMeta, wanted: pa.Table) -> pa.Table:
        if self._first is None:
            return wanted
        low = decode_manifest_row(meta.min_key, self._types)[0]
        high = decode_manifest_row(meta.max_key, self._types)[0]
        if low is None or high is None:
            return wanted
        scalar_type = self._first.type
        inside = pc.and_(pc.greater_equal(self._first, pa.scalar(low, scalar_type)),
                         pc.less_equal(self._first, pa.scalar(high, scalar_type)))
        return wanted.filter(inside)


def find_superseded(files: Sequence[DataFileMeta], wanted: pa.Table,
                    key_columns: Sequence[str], key_types: Sequence[DataType], index: KeyIndex,
                    deleted: Callable[[str], np.ndarray]) -> list[Superseded]:
    """The live rows of ``files`` (already deleted positions excluded) whose keys are in
    ``wanted``; files without any are left out."""
    if wanted.num_rows == 0:
        return []
    pruning = _FirstColumnRange(wanted, key_columns, key_types)
    found = []
    for meta in files:
        candidates = pruning.subset(meta, wanted)
        if candidates.num_rows == 0:
            continue
        matches = index.match(meta, candidates)
        if matches.num_rows == 0:
            continue
        positions = np.asarray(matches.column(POSITION_COLUMN).to_numpy(), dtype=np.int64)
        tags = np.asarray(matches.column(TAG_COLUMN).to_numpy(), dtype=np.int64)
        order = np.argsort(positions, kind="stable")
        positions, tags = positions[order], tags[order]
        live = ~np.isin(positions, deleted(meta.file_name))
        if live.any():
            found.append(Superseded(meta, positions[live], tags[live]))
    return found


def rows_at(batches: Iterable[pa.RecordBatch], positions: np.ndarray) -> pa.Table | None:
    """The rows at sorted ``positions`` of a file read as ``batches``."""
    parts: list[Any] = []
    start = 0
    for batch in batches:
        end = start + batch.num_rows
        low, high = np.searchsorted(positions, [start, end])
        if high > low:
            parts.append(batch.take(pa.array(positions[low:high] - start)))
        start = end
        if high == len(positions):
            break
    return pa.Table.from_batches(parts) if parts else None
