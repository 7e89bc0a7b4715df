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

from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.manifest import DataFileMeta
from paimond.format.types.data_types import DataType
from paimond.lsm.merge.streaming import comparable_keys

POSITION_COLUMN = "_POSITION"
WANTED_COLUMN = "_WANTED"  # row number of the matched key in the wanted table
TAG_COLUMN = "_TAG"  # which caller-side group a wanted key belongs to (e.g. its section)

ReadKeys = Callable[[DataFileMeta], Iterator[pa.RecordBatch]]


class KeyIndex(Protocol):
    def match(self, meta: DataFileMeta, wanted: pa.Table) -> pa.Table:
        """The rows of ``meta`` whose key is one of ``wanted``'s (its key columns, distinct
        keys), as int64 columns ``_POSITION`` (0-based row number in the file) and
        ``_WANTED`` (row number in ``wanted``), in any order."""
        ...


def _joinable(table: pa.Table, key_columns: Sequence[str], extra: str, values: pa.Array
              ) -> pa.Table:
    """Key columns in a form Arrow's hash join takes (temporal types as integers)."""
    return comparable_keys(table, key_columns).append_column(extra, values)


class ScanKeyIndex:
    """Reads a file's key columns (one projection read) and joins them with the wanted keys."""

    def __init__(self, read_keys: ReadKeys, key_columns: Sequence[str]) -> None:
        self._read_keys, self._key_columns = read_keys, list(key_columns)
        self.files_read = 0

    def match(self, meta: DataFileMeta, wanted: pa.Table) -> pa.Table:
        batches = list(self._read_keys(meta))
        self.files_read += 1
        keys = pa.Table.from_batches(batches) if batches else None
        if keys is None or keys.num_rows == 0:
            return _empty_matches()
        positions = pa.array(np.arange(keys.num_rows, dtype=np.int64))
        rows = pa.array(np.arange(wanted.num_rows, dtype=np.int64))
        joined = _joinable(keys, self._key_columns, POSITION_COLUMN, positions).join(
            _joinable(wanted, self._key_columns, WANTED_COLUMN, rows), keys=self._key_columns,
            join_type="inner")
        return joined.select([POSITION_COLUMN, WANTED_COLUMN])


def _empty_matches() -> pa.Table:
    return pa.table({POSITION_COLUMN: pa.array([], pa.int64()),
                     WANTED_COLUMN: pa.array([], pa.int64())})


@dataclass(frozen=True, slots=True)
class Superseded:
    """Live rows of one higher-level file superseded by level-0 keys."""

    meta: DataFileMeta
    positions: np.ndarray  # sorted int64
    wanted_rows: np.ndarray  # the matched key's row in the wanted table, per position
    tags: np.ndarray  # the matched key's tag, per position


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
        first = wanted.column(key_columns[0]).combine_chunks()
        plain = (pa.types.is_integer(first.type) or pa.types.is_floating(first.type)
                 or pa.types.is_string(first.type) or pa.types.is_large_string(first.type)
                 or pa.types.is_binary(first.type) or pa.types.is_boolean(first.type))
        self._first = first if plain else None

    def rows(self, meta: DataFileMeta) -> np.ndarray | None:
        """Rows of the wanted table that may be in ``meta`` (None: all of them)."""
        if self._first is None:
            return None
        low = decode_manifest_row(meta.min_key, self._types)[0]
        high = decode_manifest_row(meta.max_key, self._types)[0]
        if low is None or high is None:
            return None
        scalar_type = self._first.type
        inside = pc.and_(pc.greater_equal(self._first, pa.scalar(low, scalar_type)),
                         pc.less_equal(self._first, pa.scalar(high, scalar_type)))
        return np.flatnonzero(np.asarray(inside.to_numpy(zero_copy_only=False), dtype=bool))


def find_superseded(files: Sequence[DataFileMeta], wanted: pa.Table,
                    key_columns: Sequence[str], key_types: Sequence[DataType], index: KeyIndex,
                    deleted: Callable[[str], np.ndarray]) -> list[Superseded]:
    """The live rows of ``files`` (already deleted positions excluded) whose keys are in
    ``wanted``; files without any are left out."""
    if wanted.num_rows == 0:
        return []
    pruning = _FirstColumnRange(wanted, key_columns, key_types)
    all_tags = np.asarray(wanted.column(TAG_COLUMN).to_numpy(), dtype=np.int64)
    found = []
    for meta in files:
        rows = pruning.rows(meta)
        candidates = wanted if rows is None else wanted.take(pa.array(rows))
        if candidates.num_rows == 0:
            continue
        matches = index.match(meta, candidates.select(list(key_columns)))
        if matches.num_rows == 0:
            continue
        positions = np.asarray(matches.column(POSITION_COLUMN).to_numpy(), dtype=np.int64)
        matched = np.asarray(matches.column(WANTED_COLUMN).to_numpy(), dtype=np.int64)
        if rows is not None:
            matched = rows[matched]
        order = np.argsort(positions, kind="stable")
        positions, matched = positions[order], matched[order]
        live = ~np.isin(positions, deleted(meta.file_name))
        if live.any():
            found.append(Superseded(meta, positions[live], matched[live],
                                    all_tags[matched[live]]))
    return found


def no_deletions(file_name: str) -> np.ndarray:
    return np.empty(0, dtype=np.int64)


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


def without_keys(rows: pa.Table, keys: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """``rows`` minus those whose key is in ``keys``."""
    if rows.num_rows == 0 or keys.num_rows == 0:
        return rows
    numbers = pa.array(np.arange(rows.num_rows, dtype=np.int64))
    hits = _joinable(rows, key_columns, WANTED_COLUMN, numbers).join(
        comparable_keys(keys, key_columns), keys=list(key_columns), join_type="left semi")
    if hits.num_rows == 0:
        return rows
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[np.asarray(hits.column(WANTED_COLUMN).to_numpy())] = False
    return rows.filter(pa.array(keep))
