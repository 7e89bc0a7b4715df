"""Streaming k-way merge of sorted runs on Arrow batches: the vectorized counterpart of Java
``SortMergeReader`` + ``MergeFunction`` (apache/paimon 5dacde516b).

Each run yields batches sorted by key with unique keys. The merge keeps at most a batch (and
its unmerged tail) per run in memory: it cuts every buffered run at the smallest "last
buffered key" among runs that still have data. Rows at or below that bound can have no more
versions coming, so that slice is sorted by (key, sequence) and reduced to one row per key
with Arrow kernels; the rest waits for the next round.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.key_order import SortKey

SEQUENCE_COLUMN = "_SEQUENCE_NUMBER"
VALUE_KIND_COLUMN = "_VALUE_KIND"
KEY_PREFIX = "_KEY_"
KIND_INSERT, KIND_UPDATE_BEFORE, KIND_UPDATE_AFTER, KIND_DELETE = 0, 1, 2, 3

Reducer = Callable[["SortedSlice"], pa.Table]


@dataclass(frozen=True, slots=True)
class SortedSlice:
    """Rows of several runs for a closed key range, sorted by key then sequence; with the
    position of each row's key group."""

    table: pa.Table
    key_columns: tuple[str, ...]
    group_ids: pa.Array  # int64, 0.. per distinct key, non-decreasing
    group_count: int

    def last_rows(self) -> pa.Array:
        """Index of the last row of every key group (the newest version)."""
        ids = self.group_ids.to_numpy(zero_copy_only=False)
        ends = (ids[1:] != ids[:-1]).nonzero()[0]
        return pa.array([*ends.tolist(), len(ids) - 1], pa.int64())

    def first_rows(self) -> pa.Array:
        ids = self.group_ids.to_numpy(zero_copy_only=False)
        starts = (ids[1:] != ids[:-1]).nonzero()[0] + 1
        return pa.array([0, *starts.tolist()], pa.int64())


def _key_changes(table: pa.Table, key_columns: Sequence[str]) -> pa.Array:
    """Boolean per row i >= 1: does row i start a new key (differs from row i-1)?"""
    changed = None
    for name in key_columns:
        column = table.column(name).combine_chunks()
        current, previous = column.slice(1), column.slice(0, len(column) - 1)
        differs = pc.not_equal(current, previous)
        one_null = pc.xor(pc.is_null(current), pc.is_null(previous))
        differs = pc.or_(pc.fill_null(differs, False), one_null)
        changed = differs if changed is None else pc.or_(changed, differs)
    assert changed is not None
    return changed


def sort_slice(table: pa.Table, key_columns: Sequence[str],
               user_sequence: Sequence[tuple[str, str]] = ()) -> SortedSlice:
    """Sort by key (NULL first), then user sequence fields, then ``_SEQUENCE_NUMBER``, with
    retractions before additions on a tie (Java's order)."""
    is_add = pc.is_in(table.column(VALUE_KIND_COLUMN),
                      pa.array([KIND_INSERT, KIND_UPDATE_AFTER], pa.int8()))
    with_tie = table.append_column("__is_add", is_add)
    order = [(k, "ascending") for k in key_columns] + list(user_sequence)
    order += [(SEQUENCE_COLUMN, "ascending"), ("__is_add", "ascending")]
    indices = pc.sort_indices(with_tie, sort_keys=order, null_placement="at_start")
    ordered = table.take(indices)
    if ordered.num_rows == 0:
        return SortedSlice(ordered, tuple(key_columns), pa.array([], pa.int64()), 0)
    changes = _key_changes(ordered, key_columns)
    starts = pa.concat_arrays([pa.array([True]), changes.cast(pa.bool_())])
    group_ids = pc.subtract(pc.cumulative_sum(starts.cast(pa.int64())), 1)
    count = int(pc.max(group_ids).as_py()) + 1
    return SortedSlice(ordered, tuple(key_columns), group_ids, count)


def comparable_keys(table: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """Key columns with temporal types as integers, so ``as_py`` is exact and cheap (no
    nanosecond loss, no time zones)."""
    columns = []
    for name in key_columns:
        column = table.column(name)
        if pa.types.is_timestamp(column.type) or pa.types.is_time64(column.type):
            column = column.cast(pa.int64())
        elif pa.types.is_date32(column.type) or pa.types.is_time32(column.type):
            column = column.cast(pa.int32())
        columns.append(column)
    return pa.table(columns, names=list(key_columns))


class _RunCursor:
    """One sorted run's pending rows (and their keys in comparable form)."""

    def __init__(self, batches: Iterator[pa.RecordBatch], key_columns: Sequence[str],
                 sort_key: Callable[[Sequence[Any]], SortKey]) -> None:
        self._batches = batches
        self._key_columns = key_columns
        self._sort_key = sort_key
        self.pending = pa.table({})
        self._keys = pa.table({})
        self.exhausted = False

    def _key_at(self, index: int) -> SortKey:
        return self._sort_key([column[index].as_py() for column in self._keys.columns])

    def fill(self) -> None:
        while not self.exhausted and self.pending.num_rows == 0:
            batch = next(self._batches, None)
            if batch is None:
                self.exhausted = True
            elif batch.num_rows:
                self.pending = pa.Table.from_batches([batch])
                self._keys = comparable_keys(self.pending, self._key_columns)

    def last_key(self) -> SortKey | None:
        return self._key_at(self.pending.num_rows - 1) if self.pending.num_rows else None

    def take_up_to(self, bound: SortKey | None) -> pa.Table | None:
        """Remove and return the pending rows with key <= bound (all of them if None)."""
        if self.pending.num_rows == 0:
            return None
        low, high = 0, self.pending.num_rows
        if bound is None:
            low = high
        else:
            while low < high:  # first row whose key > bound
                middle = (low + high) // 2
                if self._key_at(middle) <= bound:
                    low = middle + 1
                else:
                    high = middle
        taken = self.pending.slice(0, low)
        self.pending, self._keys = self.pending.slice(low), self._keys.slice(low)
        return taken if taken.num_rows else None


def merge_sorted_runs(runs: Sequence[Iterator[pa.RecordBatch]], key_columns: Sequence[str],
                      sort_key: Callable[[Sequence[Any]], SortKey], reducer: Reducer,
                      user_sequence: Sequence[tuple[str, str]] = ()) -> Iterator[pa.Table]:
    """Merge runs (each an iterator of key-sorted batches) into reduced, key-sorted tables.

    ``sort_key`` orders key values as Paimon does; it is used only to cut runs (O(log n) row
    lookups per cut); all per-row work happens in Arrow kernels.
    """
    cursors = [_RunCursor(iter(r), key_columns, sort_key) for r in runs]
    while True:
        for cursor in cursors:
            cursor.fill()
        live = [c for c in cursors if not c.exhausted]
        bounds = [k for k in (c.last_key() for c in live) if k is not None]
        bound = min(bounds) if live else None
        pieces = [t for t in (c.take_up_to(bound) for c in cursors) if t is not None]
        if not pieces:
            if all(c.exhausted for c in cursors):
                return
            continue
        merged = pa.concat_tables(pieces, promote_options="permissive")
        reduced = reducer(sort_slice(merged, key_columns, user_sequence))
        if reduced.num_rows:
            yield reduced
