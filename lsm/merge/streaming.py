"""Streaming k-way merge of sorted runs on Arrow batches: the vectorized counterpart of Java
``SortMergeReader`` + ``MergeFunction`` (apache/paimon 5dacde516b).

Each run yields batches sorted by key with unique keys. The merge keeps at most a batch (and
its unmerged tail) per run in memory: it cuts every buffered run at the smallest "last
buffered key" among runs that still have data (or an earlier key, so that a slice holds at
most ``slice_rows`` rows). Rows at or below that bound can have no more versions coming, so
that slice is ordered by (key, sequence) and reduced to one row per key with Arrow kernels;
the rest waits for the next round.

Only the key, sequence and kind columns are sorted: a slice keeps its rows where they came
from plus the order, and a reducer takes each surviving row once. Runs are sorted and hold
each key once, so a stable sort by key alone, over the pieces arranged oldest first, usually
is the (key, sequence) order already; that is checked (not needed when the pieces' sequence
ranges do not overlap, as level-0 files' do not), and a full sort is the fallback.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.binary.key_order import SortKey
from paimond.format.types.row_kind import RowKind

SEQUENCE_COLUMN = "_SEQUENCE_NUMBER"
VALUE_KIND_COLUMN = "_VALUE_KIND"
SLICE_ROWS = 1 << 18

Reducer = Callable[["SortedSlice"], pa.Table]

_NULLS_PER_KEY = int(pa.__version__.split(".")[0]) >= 25


@functools.cache
def _add_kinds() -> pa.Array:
    """Built on first use, not at import: pyarrow imports pandas with its first array from
    Python values, and commands that never merge should not pay for it (bench/startup.py)."""
    return pa.array([RowKind.INSERT, RowKind.UPDATE_AFTER], pa.int8())


def arrow_of(values: np.ndarray) -> pa.Array:
    """A numpy array of numbers or booleans as an Arrow array without nulls, as
    ``pa.array(values)`` builds it, but without that call's first-use import of ``numpy.ma``
    (~0.1 CPU s of a compaction process; bench/compact_process.py)."""
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def is_add(kinds: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """+I/+U rows (retractions are -U/-D)."""
    return pc.is_in(kinds, _add_kinds())


class SortedSlice:
    """Rows of several runs for a closed key range, viewed in (key, sequence) order.

    ``rows`` stay as they came; ``order`` lists them in sorted order. Positions below are
    positions in that order. ``ends`` holds the position of the last row of every key group
    (the newest version), ascending."""

    __slots__ = ("_group_ids", "_in_order", "_sorted", "ends", "key_columns", "order", "rows")

    def __init__(self, rows: pa.Table, key_columns: Sequence[str], order: np.ndarray,
                 ends: np.ndarray) -> None:
        self.rows, self.key_columns = rows, tuple(key_columns)
        self.order, self.ends = order, ends
        self._sorted: dict[str, pa.Array] = {}
        self._group_ids: np.ndarray | None = None
        self._in_order = False

    @classmethod
    def in_order(cls, rows: pa.Table, key_columns: Sequence[str], ends: np.ndarray
                 ) -> SortedSlice:
        """A slice of ``rows`` that are in (key, sequence) order already: its columns are
        ``rows``' own, not taken again."""
        piece = cls(rows, key_columns, np.arange(rows.num_rows, dtype=np.int64), ends)
        piece._in_order = True
        return piece

    @property
    def num_rows(self) -> int:
        return len(self.order)

    @property
    def group_count(self) -> int:
        return len(self.ends)

    def last_rows(self) -> np.ndarray:
        return self.ends

    def first_rows(self) -> np.ndarray:
        return np.concatenate(([0], self.ends[:-1] + 1)) if len(self.ends) else self.ends

    @property
    def group_ids(self) -> np.ndarray:
        """Per sorted row, the index of its key group (0, 1, ...; non-decreasing)."""
        if self._group_ids is None:
            sizes = np.diff(self.ends, prepend=-1)
            self._group_ids = np.repeat(np.arange(len(self.ends), dtype=np.int64), sizes)
        return self._group_ids

    def column(self, name: str) -> pa.Array:
        """One column in sorted order (taken once, then kept)."""
        found = self._sorted.get(name)
        if found is None:
            column = self.rows.column(name)
            found = self._sorted[name] = _whole(column) if self._in_order \
                else _take(column, self.order)
        return found

    def take(self, positions: np.ndarray) -> pa.Table:
        """The whole rows at ``positions``: each taken once from where it came."""
        return self.rows.take(arrow_of(self.order[positions]))


def _whole(column: pa.ChunkedArray) -> pa.Array:
    chunks = column.chunks
    return chunks[0] if len(chunks) == 1 else column.combine_chunks()


def _take(column: pa.ChunkedArray, indices: np.ndarray) -> pa.Array:
    return _whole(column).take(arrow_of(indices))


def _int_keys(table: pa.Table, key_columns: Sequence[str]) -> np.ndarray | None:
    """The one integer key column as numpy, when that is what the key is (no nulls)."""
    if len(key_columns) != 1:
        return None
    column = table.column(key_columns[0])
    if not pa.types.is_integer(column.type) or column.null_count:
        return None
    if column.num_chunks == 1:
        return np.asarray(column.chunk(0).to_numpy())
    return np.concatenate([c.to_numpy() for c in column.chunks]) if column.num_chunks else \
        np.empty(0, np.int64)


def _numpy(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.combine_chunks().to_numpy(zero_copy_only=False))


def _key_changes(sorted_keys: Sequence[pa.Array]) -> np.ndarray:
    """Boolean per row i >= 1: does sorted row i start a new key (differs from row i-1)?"""
    changed: pa.Array | None = None
    for column in sorted_keys:
        current, previous = column.slice(1), column.slice(0, len(column) - 1)
        differs = pc.not_equal(current, previous)
        one_null = pc.xor(pc.is_null(current), pc.is_null(previous))
        differs = pc.or_(pc.fill_null(differs, False), one_null)
        changed = differs if changed is None else pc.or_(changed, differs)
    assert changed is not None
    return np.asarray(changed.to_numpy(zero_copy_only=False), dtype=bool)


SequenceRange = tuple[int, int]
Piece: TypeAlias = pa.Table | pa.RecordBatch  # rows of one run for a slice


def _sequence_range(table: pa.Table | pa.RecordBatch) -> SequenceRange | None:
    """The lowest and highest ``_SEQUENCE_NUMBER`` of ``table`` (None if one is NULL)."""
    column = table.column(SEQUENCE_COLUMN)
    if column.null_count or not len(column):
        return None
    low, high = pc.min_max(column).values()
    return low.as_py(), high.as_py()


def _oldest_first(pieces: Sequence[Piece],
                  bounds: Sequence[SequenceRange | None] | None = None) -> tuple[pa.Table, bool]:
    """The pieces concatenated by ascending first sequence number, and whether their
    sequence ranges are then disjoint and ascending (each piece's last below the next one's
    first: level-0 files, one per commit, always are).

    ``bounds``: per piece, a range holding its sequence numbers (the batch it was cut from),
    or None. When those ranges are disjoint, so are the pieces', and the pieces are not read:
    a merge of 20 runs cuts about 16 pieces per run and batch."""
    known = [b for b in bounds or () if b is not None]
    if len(known) == len(pieces) and _disjoint_ascending(sorted(known)):
        ranking = sorted(range(len(pieces)), key=lambda i: known[i][0])
        return concat([pieces[i] for i in ranking]), True
    ranges = [_sequence_range(piece) for piece in pieces]
    ranking = sorted(range(len(pieces)), key=lambda i: _low(ranges[i], pieces[i]))
    ordered = [r for r in (ranges[i] for i in ranking) if r is not None]
    disjoint = len(ordered) == len(pieces) and _disjoint_ascending(ordered)
    rows = concat([pieces[i] for i in ranking])
    return rows, disjoint


def concat(pieces: Sequence[Piece]) -> pa.Table:
    """The pieces as one table. Their schemas are nearly always the same, which is checked
    once per column; unifying them (a piece of a file written before a column's type was
    widened) costs as much for every piece, which adds up on a wide table cut into many."""
    first = pieces[0].schema
    if all(piece.schema.equals(first) for piece in pieces[1:]):
        if all(isinstance(piece, pa.RecordBatch) for piece in pieces):
            return pa.Table.from_batches(pieces)
        return pa.concat_tables([_table(piece) for piece in pieces])
    return pa.concat_tables([_table(piece) for piece in pieces], promote_options="permissive")


def _table(piece: Piece) -> pa.Table:
    return pa.Table.from_batches([piece]) if isinstance(piece, pa.RecordBatch) else piece


def _low(found: SequenceRange | None, piece: Piece) -> Any:
    """A piece's lowest sequence number, for ordering (pieces with a NULL one: its min)."""
    return found[0] if found is not None else pc.min(piece.column(SEQUENCE_COLUMN)).as_py()


def _disjoint_ascending(ranges: Sequence[SequenceRange]) -> bool:
    return all(before[1] < after[0] for before, after in itertools.pairwise(ranges))


def stable_int_order(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, keys[order])`` of a stable argsort of integer ``keys``.

    When the keys' range leaves room, each key (less the smallest) is packed with its
    position into one int64 and those are sorted by value: equal keys then order by
    position, as a stable sort does, and numpy's value sort is 2-3x faster than its stable
    argsort (14-17% of the merge's samples at 10M rows). Otherwise the stable argsort."""
    count = len(keys)
    if count > 1 and (keys.dtype.kind == "i" or int(keys.max()) < 1 << 62):
        low, high = int(keys.min()), int(keys.max())
        bits = (count - 1).bit_length()
        if high - low < 1 << (62 - bits):
            packed = keys.astype(np.int64) - low
            packed <<= bits
            packed |= np.arange(count, dtype=np.int64)
            packed.sort()
            return packed & ((1 << bits) - 1), (packed >> bits) + low
    order = np.argsort(keys, kind="stable")
    return order, keys[order]


def _presorted(rows: pa.Table, key_columns: Sequence[str], disjoint: bool = False
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """(order, key changes) from a stable sort by key alone, if that order is already
    strictly ascending in (sequence, is add) within every key; else None.

    ``disjoint``: ``rows`` are pieces of runs (each in key order, a key's versions in
    sequence order) whose sequence ranges ascend without overlap, so the stable sort orders
    every key's versions by sequence, without ties, and nothing needs checking."""
    keys = _int_keys(rows, key_columns)
    if keys is not None:
        order, sorted_keys = stable_int_order(keys)
        changes = sorted_keys[1:] != sorted_keys[:-1]
    else:
        order = _sort_indices(rows.select(list(key_columns)),
                              [(k, "ascending") for k in key_columns])
        changes = _key_changes([_take(rows.column(k), order) for k in key_columns])
    repeats = np.empty(0, np.int64) if disjoint else np.flatnonzero(~changes)
    if len(repeats):  # sorted row i + 1 has the key of row i
        earlier, later = order[repeats], order[repeats + 1]
        sequences = _numpy(rows.column(SEQUENCE_COLUMN))
        before, after = sequences[earlier], sequences[later]
        if not np.all(after >= before):
            return None
        ties = np.flatnonzero(after == before)
        if len(ties):  # only a retraction then an addition is in order
            adds = _numpy(is_add(rows.column(VALUE_KIND_COLUMN)))
            if not np.all(~adds[earlier[ties]] & adds[later[ties]]):
                return None
    return order, changes


def sort_slice(pieces: Sequence[Piece], key_columns: Sequence[str],
               user_sequence: Sequence[tuple[str, str]] = (),
               bounds: Sequence[SequenceRange | None] | None = None) -> SortedSlice:
    """Order the rows of ``pieces`` by key (NULL first), then user sequence fields, then
    ``_SEQUENCE_NUMBER``, with retractions before additions on a tie (Java's order); rows
    equal in all of these keep the order of ``pieces``. ``bounds``: see ``_oldest_first``."""
    if not user_sequence and sum(p.num_rows for p in pieces):
        rows, disjoint = _oldest_first(pieces, bounds)
        found = _presorted(rows, key_columns, disjoint)
        if found is not None:
            return _sorted_slice(rows, key_columns, *found)
    rows = concat(pieces)
    if rows.num_rows == 0:
        empty = np.empty(0, np.int64)
        return SortedSlice(rows, key_columns, empty, empty)
    with_tie = rows.select([*key_columns, *(n for n, _ in user_sequence),
                            SEQUENCE_COLUMN]).append_column(
        "__is_add", is_add(rows.column(VALUE_KIND_COLUMN)))
    sort_keys = [(k, "ascending") for k in key_columns] + list(user_sequence)
    sort_keys += [(SEQUENCE_COLUMN, "ascending"), ("__is_add", "ascending")]
    order = _sort_indices(with_tie, sort_keys)
    changes = _key_changes([_take(rows.column(k), order) for k in key_columns])
    return _sorted_slice(rows, key_columns, order, changes)


def _sort_indices(table: pa.Table, sort_keys: Sequence[tuple[str, str]]) -> np.ndarray:
    """Row order by ``sort_keys``, NULL first in every key. pyarrow >= 25 takes the null
    placement per key (its table-wide option is deprecated there)."""
    if _NULLS_PER_KEY:
        keys = [(name, order, "at_start") for name, order in sort_keys]
        return np.asarray(pc.sort_indices(table, sort_keys=keys).to_numpy())
    return np.asarray(pc.sort_indices(table, sort_keys=sort_keys, null_placement="at_start").to_numpy())


def _sorted_slice(rows: pa.Table, key_columns: Sequence[str], order: np.ndarray,
                  changes: np.ndarray) -> SortedSlice:
    ends = np.append(np.flatnonzero(changes), len(order) - 1)
    return SortedSlice(rows, key_columns, order.astype(np.int64, copy=False),
                       ends.astype(np.int64, copy=False))


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
    """One sorted run's pending rows (and their keys in comparable form). A single integer
    key without nulls is searched in numpy; other keys through ``sort_key`` row by row.

    The pending rows are the current batch from ``_start`` on: taking rows slices only what
    is taken, as a batch (a slice costs per column, a table's three times a batch's, and a
    wide table has hundreds), and a run ahead of the bound is left as it is."""

    def __init__(self, batches: Iterator[pa.RecordBatch], key_columns: Sequence[str],
                 sort_key: Callable[[Sequence[Any]], SortKey]) -> None:
        self._batches = batches
        self._key_columns = key_columns
        self._sort_key = sort_key
        self._plain_ints = sort_key([1]) == ((1, 1),) if len(key_columns) == 1 else False
        self._batch: pa.RecordBatch | None = None
        self._start = 0
        self._keys = pa.table({})  # the pending rows' keys
        self._ints: np.ndarray | None = None  # or, a plain integer key's, as numpy
        self.exhausted = False
        self.sequences: SequenceRange | None = None  # bounds the pending rows' sequences

    @property
    def pending_rows(self) -> int:
        return 0 if self._batch is None else self._batch.num_rows - self._start

    def _key_at(self, index: int) -> SortKey:
        if self._ints is not None:
            return ((1, int(self._ints[index])),)
        return self._sort_key([column[index].as_py() for column in self._keys.columns])

    def fill(self) -> None:
        while not self.exhausted and self.pending_rows == 0:
            batch = next(self._batches, None)
            if batch is None:
                self.exhausted = True
            elif batch.num_rows:
                self._batch, self._start = batch, 0
                self.sequences = _sequence_range(batch) \
                    if SEQUENCE_COLUMN in batch.schema.names else None
                keys = pa.table([batch.column(k) for k in self._key_columns],
                                names=list(self._key_columns))
                self._ints = _int_keys(keys, self._key_columns) if self._plain_ints else None
                if self._ints is None:
                    self._keys = comparable_keys(keys, self._key_columns)

    def key_within(self, rows: int) -> SortKey | None:
        """Key of the last of the first ``rows`` pending rows (of the last, if fewer)."""
        pending = self.pending_rows
        return self._key_at(min(rows, pending) - 1) if pending else None

    def take_up_to(self, bound: SortKey | None) -> pa.RecordBatch | None:
        """Remove and return the pending rows with key <= bound (all of them if None)."""
        pending = self.pending_rows
        if pending == 0:
            return None
        low, high = 0, pending
        if bound is None:
            low = high
        elif self._ints is not None:
            # (0,) is a NULL key, below every integer
            low = 0 if bound[0] == (0,) else int(np.searchsorted(self._ints, bound[0][1], "right"))
        else:
            while low < high:  # first row whose key > bound
                middle = (low + high) // 2
                if self._key_at(middle) <= bound:
                    low = middle + 1
                else:
                    high = middle
        if low == 0 or self._batch is None:
            return None
        whole = self._start == 0 and low == pending
        taken = self._batch if whole else self._batch.slice(self._start, low)
        self._start += low
        if low == pending:  # the batch is done: let it go
            self._batch, self._start, self._keys, self._ints = None, 0, pa.table({}), None
        elif self._ints is not None:
            self._ints = self._ints[low:]
        else:
            self._keys = self._keys.slice(low)
        return taken


def merge_sorted_runs(runs: Sequence[Iterator[pa.RecordBatch]], key_columns: Sequence[str],
                      sort_key: Callable[[Sequence[Any]], SortKey], reducer: Reducer,
                      user_sequence: Sequence[tuple[str, str]] = (), *,
                      slice_rows: int = SLICE_ROWS) -> Iterator[pa.Table]:
    """Merge runs (each an iterator of key-sorted batches) into reduced, key-sorted tables.

    ``sort_key`` orders key values as Paimon does; it is used only to cut runs (O(log n) row
    lookups per cut); all per-row work happens in Arrow kernels. A slice takes at most
    ``slice_rows / runs`` rows of each run (at least one), so its sort and the merged table
    stay small even when batches are large.
    """
    cursors = [_RunCursor(iter(r), key_columns, sort_key) for r in runs]
    while True:
        for cursor in cursors:
            cursor.fill()
        live = [c for c in cursors if not c.exhausted]
        per_run = max(1, slice_rows // max(1, len(live)))
        bounds = [k for k in (c.key_within(per_run) for c in live) if k is not None]
        bound = min(bounds) if live else None
        cut = [(c.take_up_to(bound), c.sequences) for c in cursors]
        pieces = [piece for piece, _ in cut if piece is not None]
        if not pieces:
            if all(c.exhausted for c in cursors):
                return
            continue
        reduced = reducer(sort_slice(pieces, key_columns, user_sequence,
                                     [sequences for piece, sequences in cut if piece is not None]))
        if reduced.num_rows:
            yield reduced
