"""Changelog produced while compacting: Java ``LookupMergeFunction`` +
``LookupChangelogMergeFunctionWrapper`` (``changelog-producer = lookup``),
``FirstRowMergeFunctionWrapper`` (first-row with it) and ``FullChangelogMergeFunctionWrapper``
(``changelog-producer = full-compaction``), apache/paimon 5dacde516b, as a vectorized reducer
around the table's merge engine.

Every row entering the merge carries its file's level (``_PAIMOND_LEVEL``: 0 for level-0
files, the level of a higher file for its rows, also for rows looked up above the output).
Per key:

- lookup: the merge takes the level-0 versions and one higher version, the one of the lowest
  level (Java's ``LookupMergeFunction``: that one already holds every older version merged).
  A key with level-0 versions gets changelog: ``+I`` (no live version before), ``-D`` (the
  result retracts it), or ``-U`` before / ``+U`` after, left out when the values are equal
  and ``changelog-producer.row-deduplicate`` is on (its ignore fields not compared).
- first-row: a key without a version above level 0 gets ``+I`` of its first row (a key found
  above the output is left out of output and changelog by the caller).
- full-compaction (output at the max level): every version merges; the key's max-level
  version is "before". A key with one version only gets ``+I`` if that one is new and an
  addition, nothing else (Java leaves it unmerged).

Changelog rows are the before or after row whole, with its own sequence number and the kind
of change, in key order (``-U`` before ``+U``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.types.row_kind import RowKind
from paimond.lsm.merge.streaming import VALUE_KIND_COLUMN, Reducer, SortedSlice, is_add
from paimond.lsm.task import CompactTask
from paimond.table.data_files.arrow_io import RollingDataFileWriter
from paimond.table.data_files.external_paths import external_provider
from paimond.table.options.changelog import ChangelogOptions, changelog_file_options
from paimond.table.storage.interface import Storage

LEVEL_COLUMN = "_PAIMOND_LEVEL"
_ROW_COLUMN = "_PAIMOND_ROW"
_NONE = -1

LOOKUP, FIRST_ROW, FULL = "lookup", "first-row", "full-compaction"
FILE_SOURCE_APPEND = 0  # Java writes changelog files as FileSource.APPEND


@dataclass(frozen=True, slots=True)
class ChangelogMode:
    """How a task produces changelog. ``compared``: the value columns row-deduplicate
    compares (None: it is off, every update is emitted)."""

    kind: str  # LOOKUP, FIRST_ROW or FULL
    max_level: int
    compared: tuple[str, ...] | None = None


def changelog_mode_of(task: CompactTask, engine: str) -> tuple[ChangelogMode | None, bool]:
    """(how the task's merges are wrapped, whether they produce changelog): Java's
    ``rewriteLookupChangelog`` (output above level 0, a level-0 input) and
    ``FullChangelogMergeTreeCompactRewriter`` (output at the max level). Lookup tables (and
    ``force-lookup`` ones, without changelog) always merge as ``LookupMergeFunction``."""
    options = ChangelogOptions.of(task.table.options)
    compared = options.compared_columns(task.table.schema)
    if task.changelog_producer == FULL and task.output_level == task.max_level:
        return ChangelogMode(FULL, task.max_level, compared), True
    if task.changelog_producer != LOOKUP:
        if options.force_lookup and engine != "first-row":
            return ChangelogMode(LOOKUP, task.max_level), False
        return None, False
    produce = task.output_level > 0 and any(e.file.level == 0 for e in task.inputs)
    if engine == "first-row":
        return (ChangelogMode(FIRST_ROW, task.max_level), True) if produce else (None, False)
    return ChangelogMode(LOOKUP, task.max_level, compared), produce


class ChangelogFiles:
    """The task's changelog files, opened at the first changelog row (the output level,
    ``changelog-file.*`` options, in key order as merged)."""

    def __init__(self, storage: Storage, task: CompactTask, now_millis: Callable[[], int],
                 columns: Sequence[str], row_group_bytes: int | None = None) -> None:
        self.storage, self.task, self.now_millis = storage, task, now_millis
        self.row_group_bytes = row_group_bytes
        self.columns = list(columns)
        self.writer: RollingDataFileWriter | None = None
        self.added: list[ManifestEntry] = []

    def write(self, changelog: pa.Table) -> None:
        if self.writer is None:
            table = self.task.table
            self.writer = RollingDataFileWriter(
                self.storage, self.task.directory, table.schema,
                changelog_file_options(table.options), level=self.task.output_level,
                key_value=True, file_source=FILE_SOURCE_APPEND, now_millis=self.now_millis,
                external=external_provider(table.options, self.task.table_path,
                                           self.task.directory),
                row_group_bytes=self.row_group_bytes)
        for batch in changelog.select(self.columns).to_batches():
            self.writer.write(batch)

    def finish(self) -> None:
        if self.writer is not None:
            task = self.task
            self.added = [ManifestEntry(FILE_KIND_ADD, task.partition, task.bucket,
                                        task.total_buckets, meta) for meta in self.writer.close()]

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


def with_level(batch: pa.RecordBatch, level: int) -> pa.RecordBatch:
    """``batch`` with the level column every merged row carries here."""
    return batch.append_column(LEVEL_COLUMN, pa.array(np.full(batch.num_rows, level, np.int32)))


def levels_of(count: int, level: int) -> pa.Array:
    return pa.array(np.full(count, level, np.int32))


class ChangelogReducer:
    """Wraps the engine's reducer (made with ``drop_deletes=False``); ``__call__`` returns
    the merged rows (retractions dropped when ``drop_deletes``) and keeps the changelog of
    the slice in :attr:`changelog`, which the caller takes after each merged table."""

    def __init__(self, inner: Reducer, mode: ChangelogMode, drop_deletes: bool,
                 produce: bool = True) -> None:
        self.inner, self.mode, self.drop_deletes = inner, mode, drop_deletes
        self.produce = produce
        self.changelog: list[pa.Table] = []

    def take_changelog(self) -> pa.Table | None:
        found, self.changelog = self.changelog, []
        return pa.concat_tables(found) if found else None

    def __call__(self, piece: SortedSlice) -> pa.Table:
        rows = piece.rows.append_column(
            _ROW_COLUMN, pa.array(np.arange(piece.rows.num_rows, dtype=np.int64)))
        levels = np.asarray(piece.column(LEVEL_COLUMN).to_numpy(zero_copy_only=False))
        order, ends, group_ids = piece.order, piece.ends, piece.group_ids
        firsts = piece.first_rows()
        high = levels > 0
        if self.mode.kind == LOOKUP and len(order):
            lowest = np.minimum.reduceat(np.where(high, levels, np.iinfo(np.int32).max), firsts)
            keep = ~high | (levels == lowest[group_ids])
            # a level holds a key once; should one repeat, its newest version stands
            repeat = np.zeros(len(order), dtype=bool)
            repeat[:-1] = (group_ids[1:] == group_ids[:-1]) & high[1:] & high[:-1] \
                & (levels[1:] == levels[:-1])
            keep &= ~repeat
            order, levels, group_ids = order[keep], levels[keep], group_ids[keep]
            high = levels > 0
            ends = np.append(np.flatnonzero(group_ids[1:] != group_ids[:-1]), len(order) - 1) \
                if len(order) else ends
            firsts = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else ends
        merged = self.inner(SortedSlice(rows, piece.key_columns, order, ends))
        if self.produce and len(order):
            found = self._changelog(rows, order, levels, high, firsts, ends, merged)
            if found is not None and found.num_rows:
                self.changelog.append(found)
        if self.drop_deletes:
            merged = merged.filter(is_add(merged.column(VALUE_KIND_COLUMN)))
        return merged.drop_columns([_ROW_COLUMN])

    def _changelog(self, rows: pa.Table, order: np.ndarray, levels: np.ndarray,
                   high: np.ndarray, firsts: np.ndarray, ends: np.ndarray,
                   merged: pa.Table) -> pa.Table | None:
        groups = len(ends)
        # the merged row of each group (or none), found through the row it was taken from
        position_of = np.empty(rows.num_rows, dtype=np.int64)
        position_of[order] = np.arange(len(order), dtype=np.int64)
        group_of_position = np.repeat(np.arange(groups, dtype=np.int64), ends - firsts + 1)
        after = np.full(groups, _NONE, np.int64)
        merged_rows = np.asarray(merged.column(_ROW_COLUMN).to_numpy(), np.int64)
        after[group_of_position[position_of[merged_rows]]] = np.arange(len(merged_rows))
        merged_adds = np.asarray(is_add(merged.column(VALUE_KIND_COLUMN)).to_numpy(
            zero_copy_only=False), dtype=bool)
        after_add = np.zeros(groups, dtype=bool)
        after_add[after >= 0] = merged_adds[after[after >= 0]]
        kinds = np.asarray(is_add(rows.column(VALUE_KIND_COLUMN)).to_numpy(
            zero_copy_only=False), dtype=bool)[order]
        before = np.full(groups, _NONE, np.int64)  # a position in sorted order
        if self.mode.kind == FULL:
            top = np.flatnonzero(levels == self.mode.max_level)
            before[group_of_position[top]] = top
            single = ends == firsts
            changed = ~single | (before < 0)  # a lone max-level version is no change
            before_add = before >= 0  # the max level holds additions only
        else:
            highs = np.flatnonzero(high)
            before[group_of_position[highs]] = highs
            before_add = (before >= 0) & kinds[np.maximum(before, 0)]
            level0 = np.zeros(groups, dtype=bool)
            level0[group_of_position[np.flatnonzero(levels == 0)]] = True
            changed = level0
            if self.mode.kind == FIRST_ROW:  # only keys new to the levels above
                changed = level0 & (before < 0)
        insert = changed & ~before_add & after_add
        delete = changed & before_add & ~after_add
        update = changed & before_add & after_add
        if self.mode.kind == FIRST_ROW:
            delete[:] = update[:] = False
        if self.mode.compared is not None and update.any():
            which = np.flatnonzero(update)
            same = _equal_rows(rows.take(pa.array(order[before[which]])),
                               merged.take(pa.array(after[which])), self.mode.compared)
            update[which[same]] = False
        return _assemble(rows, order, merged, before, after, insert, delete, update)


def _assemble(rows: pa.Table, order: np.ndarray, merged: pa.Table, before: np.ndarray,
              after: np.ndarray, insert: np.ndarray, delete: np.ndarray,
              update: np.ndarray) -> pa.Table | None:
    """The changelog rows in key order: per group ``-D``/``-U`` (before) then ``+I``/``+U``."""
    old = np.flatnonzero(delete | update)
    new = np.flatnonzero(insert | update)
    if not len(old) and not len(new):
        return None
    columns = [c for c in rows.column_names if c != _ROW_COLUMN]
    old_kinds = np.where(delete[old], RowKind.DELETE, RowKind.UPDATE_BEFORE).astype(np.int8)
    new_kinds = np.where(insert[new], RowKind.INSERT, RowKind.UPDATE_AFTER).astype(np.int8)
    parts = [_with_kind(rows.take(pa.array(order[before[old]])).select(columns), old_kinds),
             _with_kind(merged.take(pa.array(after[new])).select(columns), new_kinds)]
    table = pa.concat_tables(parts, promote_options="permissive")
    rank = np.concatenate([old * 2, new * 2 + 1])
    return table.take(pa.array(np.argsort(rank, kind="stable")))


def _with_kind(table: pa.Table, kinds: np.ndarray) -> pa.Table:
    index = table.schema.get_field_index(VALUE_KIND_COLUMN)
    return table.set_column(index, VALUE_KIND_COLUMN, pa.array(kinds, pa.int8()))


def _equal_rows(left: pa.Table, right: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Per row pair: are the ``columns`` equal (NULL equals NULL, as Java's equaliser)?"""
    same = np.ones(left.num_rows, dtype=bool)
    for name in columns:
        a, b = left.column(name).combine_chunks(), right.column(name).combine_chunks()
        try:
            equal = pc.fill_null(pc.equal(a, b), False)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            column_same = np.asarray(pc.or_(equal, both_null).to_numpy(zero_copy_only=False),
                                     dtype=bool)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested types: in Python
            column_same = np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(),
                                                           strict=True)], dtype=bool)
        same &= column_same
    return same
