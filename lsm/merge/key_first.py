"""Merging wide rows key first: the keys, sequence numbers and kinds of every run are merged
alone, and the value columns are then read for the rows that survive, a group of columns at
a time.

A merge of whole rows holds a batch of every run at once, so on a wide table (500 columns:
about 4 KB a row) a memory budget leaves it batches of a thousand rows, and every step of
the merge and of the Parquet decoder then costs per column, hundreds of times a batch. A
merge engine that picks whole rows by key, sequence and kind alone (deduplicate, first-row)
does not need the values to choose them:

1. **Keys.** Every run is read with the narrow columns only (keys, user sequence fields,
   ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``), each row tagged with its run and its position in
   the run, and merged by the table's reducer as usual. The survivors (narrow columns and
   origin, in key order) go to a local spill file in chunks of ``chunk_rows``.
2. **Values.** For each group of value columns small enough that every run's batches of it
   fit the working memory at full batch size, every run is read again with that group only,
   and each chunk's rows are taken from the runs where they came from (a run's survivors are
   in position order, so each run is read once, front to back). A chunk's columns of the group
   go to a spill file of the group, one batch per chunk; the last group is not spilled.
3. **Rows.** Chunk by chunk, the survivors' narrow columns and the groups' batches of the
   chunk make the merged rows, in the output's column order.

Engines that combine a key's versions column by column (partial-update, aggregation: a
column's merged value depends on that column, the versions' order and their kinds alone) go
the same way with every version kept: the keys' merge orders the versions and marks each
key's newest; the spill file holds them all, cut between keys; each group's columns are
gathered for every version and reduced by the table's reducer over that group alone, and the
narrow columns (the key's newest sequence number, the merged kind and any user sequence
field) by the reducer over the narrow columns. Sequence groups tie columns together, so
tables with them merge whole rows.

Every value column is decoded once, in batches as large as a narrow table's, and what is held
at once is the working memory (:class:`KeyFirstLayout`), whatever the width. The price is a
spill file of the merged values besides the survivors', and per group an opening of each
run's files (their Parquet footers are parsed once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from paimond.lsm.merge.changelog import changelog_mode_of
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.spill import SpillDirectory, SpilledRun, file_reader_bytes, value_width
from paimond.lsm.merge.streaming import (
    SEQUENCE_COLUMN,
    SLICE_ROWS,
    VALUE_KIND_COLUMN,
    SortedSlice,
    arrow_of,
    concat,
)
from paimond.lsm.task import CompactTask
from paimond.table.data_files.kv_layout import key_fields, physical_arrow_schema, physical_row_type
from paimond.table.data_files.parquet_groups import EAGER_BATCHES
from paimond.table.options.merge import MergeConfig

RUN_COLUMN = "_PAIMOND_RUN"
POSITION_COLUMN = "_PAIMOND_POSITION"
LAST_COLUMN = "_PAIMOND_LAST"  # a combining engine's version: is it its key's newest?
# The engines that pick whole rows by key, sequence and kind: the keys' merge keeps survivors.
PICKING_ENGINES = ("deduplicate", "first-row")
# The engines that combine a key's versions column by column: the keys' merge keeps them all.
COMBINING_ENGINES = ("partial-update", "aggregation")
# Formats that read a group of columns without decoding the others (Avro decodes whole rows,
# so every group would cost a full read).
COLUMNAR_FORMATS = ("parquet", "orc")
# Tables with this many physical columns or more are merged key first: at 64, key first took
# 0.91x the wall, 0.87x the CPU and 0.46x the peak memory of whole rows (300k keys after 20
# commits, bench/wide_table.py --columns 64), and the gap grows with the width.
KEY_FIRST_COLUMNS = 64
# What a key-first merge holds at once without a memory budget.
KEY_FIRST_BYTES = 1 << 30
MIN_KEY_FIRST_BYTES = 4 << 20
MIN_CHUNK_ROWS = 1024
MAX_CHUNK_ROWS = 32768
_BATCHES_PER_RUN = 3  # the batch taken from, the one decoded ahead and a row group's rest
_ORIGIN_BYTES = 12  # a row's run (int32) and position (int64)


class RunBatches(Protocol):
    """A run's batches, front to back; ``close`` lets its file and read-ahead go."""

    def __iter__(self) -> Iterator[pa.RecordBatch]: ...

    def __next__(self) -> pa.RecordBatch: ...

    def close(self) -> None: ...


# A run's batches of ``columns`` (physical names, in that order).
OpenRun = Callable[[int, Sequence[str]], RunBatches]
# The narrow runs merged and reduced into key-ordered tables.
MergeKeys = Callable[[list[Iterator[pa.RecordBatch]]], Iterator[pa.Table]]
# Versions of whole keys in order (``LAST_COLUMN`` marking each key's newest), reduced to a
# row per key over the value columns given.
ReduceVersions = Callable[[pa.Table, Sequence[str]], pa.Table]


@dataclass(frozen=True, slots=True)
class Combining:
    """How a combining engine's versions become a row per key: ``reduce`` them, over
    ``narrow_values`` (the narrow columns that are also value columns: user sequence fields)
    for the narrow columns, over a group for the group's."""

    reduce: ReduceVersions
    narrow_values: tuple[str, ...]


def combines_versions(task: CompactTask) -> bool:
    """Whether the task's engine combines a key's versions (else it picks one of them)."""
    return MergeConfig.of(task.table.schema).engine in COMBINING_ENGINES


def ordered_versions(piece: SortedSlice) -> pa.Table:
    """Every version of the slice in its order, each marked whether it is its key's newest:
    what a combining engine's keys' merge keeps."""
    newest = np.zeros(piece.num_rows, dtype=bool)
    newest[piece.ends] = True
    return piece.rows.take(arrow_of(piece.order)).append_column(LAST_COLUMN, arrow_of(newest))


def version_reducer(config: MergeConfig, key_columns: Sequence[str]) -> ReduceVersions:
    """The table's reducer over the value columns asked for (one per set of columns), on
    versions in order; retractions are kept (the caller drops them once the row is whole)."""
    reducers: dict[tuple[str, ...], Callable[[SortedSlice], pa.Table]] = {}

    def reduce(versions: pa.Table, columns: Sequence[str]) -> pa.Table:
        reducer = reducers.get(tuple(columns))
        if reducer is None:
            reducer = reducers[tuple(columns)] = make_reducer(config, columns, False)
        ends = np.flatnonzero(np.asarray(versions.column(LAST_COLUMN).to_numpy()))
        return reducer(SortedSlice.in_order(versions, key_columns, ends))

    return reduce


def merges_key_first(task: CompactTask) -> bool:
    """Whether the task's merges go key first: a wide table whose engine picks rows by key,
    sequence and kind alone, or combines versions column by column (no sequence groups),
    merged without changelog (changelog rows carry the values before and after), from files
    of columnar formats only."""
    schema = task.table.schema
    config = MergeConfig.of(schema)
    engine = config.engine
    if engine in COMBINING_ENGINES and config.sequence_groups:
        return False
    if engine not in (*PICKING_ENGINES, *COMBINING_ENGINES) \
            or changelog_mode_of(task, engine)[0] is not None:
        return False
    if any(entry.file.file_name.rsplit(".", 1)[-1].lower() not in COLUMNAR_FORMATS
           for entry in task.inputs):
        return False
    return len(physical_row_type(schema, key_value=True).fields) >= KEY_FIRST_COLUMNS


def narrow_columns(task: CompactTask) -> list[str]:
    """The columns the keys' merge reads: the ``_KEY_*`` ones, the user sequence fields,
    ``_SEQUENCE_NUMBER`` and ``_VALUE_KIND``."""
    keys = [field.name for field in key_fields(task.table.schema)]
    sequence = [name for name in MergeConfig.of(task.table.schema).sequence_fields
                if name not in keys]
    return [*keys, *sequence, SEQUENCE_COLUMN, VALUE_KIND_COLUMN]


def key_pass_bytes(task: CompactTask, run_rows: Sequence[int], batch_rows: int,
                   buffer_bytes: int) -> int:
    """What the keys' merge holds: per run (``run_rows``: its largest file's rows) a few
    batches of ``batch_rows`` narrow rows and their file reader."""
    schema = physical_arrow_schema(
        physical_row_type(task.table.schema, key_value=True).project(narrow_columns(task)))
    width = sum(value_width(field.type) for field in schema) + _ORIGIN_BYTES
    return sum(_BATCHES_PER_RUN * min(batch_rows, max(1, rows)) * width
               + file_reader_bytes(schema, rows, buffer_bytes) for rows in run_rows)


@dataclass(frozen=True, slots=True)
class KeyFirstLayout:
    """How a key-first merge cuts its work: the merged rows a chunk holds, the rows a run's
    batch holds, the narrow rows a step of the keys' merge sorts, and the groups of value
    columns read together."""

    chunk_rows: int
    batch_rows: int
    slice_rows: int
    groups: tuple[tuple[str, ...], ...]


def plan_key_first(schema: pa.Schema, narrow: Sequence[str], value_columns: Sequence[str],
                   run_rows: Sequence[int], memory_bytes: int, buffer_bytes: int,
                   batch_rows: int, parquet: bool = False) -> KeyFirstLayout:
    """The layout within ``memory_bytes``: half of it for a chunk of whole rows (read from
    the groups' spill files and handed to the writer), half for reading a group of columns
    from every run (``run_rows``: the rows of each run's largest file) at once, each run a
    few batches of ``batch_rows`` and a file reader (``lsm.merge.spill.file_reader_bytes``),
    and the chunk's columns of the group taken from them. A group holds one column at
    least. A step of the keys' merge sorts a quarter of ``memory_bytes`` of ``narrow``
    rows. ``parquet``: every file is Parquet, whose small row groups are decoded whole
    (``table.data_files.parquet_groups``): a run whose files are that small holds its
    decoded row group and, read ahead, the next file's, and no streaming reader."""
    widths = {field.name: value_width(field.type) for field in schema}
    row_width = sum(widths.values()) + 1
    chunk_rows = min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, memory_bytes // (4 * row_width)))
    narrow_width = sum(widths[name] for name in narrow) + _ORIGIN_BYTES
    slice_rows = min(SLICE_ROWS, max(MIN_CHUNK_ROWS, memory_bytes // (4 * narrow_width)))
    half = memory_bytes // 2
    eager_rows = EAGER_BATCHES * batch_rows
    groups: list[tuple[str, ...]] = []
    group: list[str] = []
    held = 0
    for name in value_columns:
        field = schema.field(name)
        column = pa.schema([field])
        cost = sum(2 * max(1, rows) * widths[name] if parquet and rows <= eager_rows
                   else _BATCHES_PER_RUN * min(batch_rows, max(1, rows)) * widths[name]
                   + file_reader_bytes(column, rows, buffer_bytes) for rows in run_rows)
        cost += 2 * chunk_rows * widths[name]
        if group and held + cost > half:
            groups.append(tuple(group))
            group, held = [], 0
        group.append(name)
        held += cost
    if group:
        groups.append(tuple(group))
    return KeyFirstLayout(chunk_rows, batch_rows, slice_rows, tuple(groups))


def with_origin(batches: Iterator[pa.RecordBatch], run: int) -> Iterator[pa.RecordBatch]:
    """The batches with each row's run and position in it (from 0) as two more columns."""
    position = 0
    for batch in batches:
        count = batch.num_rows
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, arrow_of(np.full(count, run, np.int32)),
             arrow_of(np.arange(position, position + count, dtype=np.int64))],
            names=[*batch.schema.names, RUN_COLUMN, POSITION_COLUMN])
        position += count


def merge_key_first(open_run: OpenRun, run_count: int, narrow_columns: Sequence[str],
                    merge_keys: MergeKeys, layout: KeyFirstLayout,
                    output_columns: Sequence[str], spills: SpillDirectory,
                    combining: Combining | None = None) -> Iterator[pa.Table]:
    """The merged rows of ``run_count`` runs (``open_run``), in key order, with
    ``output_columns``: ``merge_keys`` reduces the runs' ``narrow_columns`` (each run
    tagged with :func:`with_origin`), and the value columns of ``layout.groups`` are
    gathered for its survivors. With ``combining``, ``merge_keys`` keeps every version
    (:func:`ordered_versions`) and the versions of each key are reduced a group of columns
    at a time. Spill files go to ``spills``."""
    opened = [open_run(index, narrow_columns) for index in range(run_count)]
    try:
        narrow = [with_origin(run, index) for index, run in enumerate(opened)]
        survivors = spills.spill(_rechunked(merge_keys(narrow), layout.chunk_rows,
                                            whole_keys=combining is not None))
    finally:
        _close(opened)
    if survivors.path is None or not layout.groups:
        yield from _assembled(survivors, [], output_columns, combining)
        return
    spilled = [spills.spill(_gathered(open_run, run_count, group, survivors, combining))
               for group in layout.groups[:-1]]
    last = _gathered(open_run, run_count, layout.groups[-1], survivors, combining)
    yield from _assembled(survivors, [*(run.batches() for run in spilled), last],
                          output_columns, combining)


def _rechunked(tables: Iterator[pa.Table], rows: int, whole_keys: bool = False
               ) -> Iterator[pa.Table]:
    """The rows of ``tables`` in tables of ``rows`` rows (the last one: the rest);
    ``whole_keys``: cut after a key's newest version only (``LAST_COLUMN``), as close below
    ``rows`` as there is one (a key of more versions is a chunk of its own)."""
    held: list[pa.Table] = []
    count = 0
    for table in tables:
        held.append(table)
        count += table.num_rows
        while count >= rows:
            whole = pa.concat_tables(held)
            cut = _key_end(whole, rows) if whole_keys else rows
            if not cut:  # no key ends yet
                break
            yield whole.slice(0, cut)
            rest = whole.slice(cut)
            held, count = [rest], rest.num_rows
    if count:
        yield pa.concat_tables(held)


def _key_end(versions: pa.Table, rows: int) -> int:
    """The rows up to the last key's end within the first ``rows`` (or the first key's end
    after them; 0 if no key ends)."""
    ends = np.flatnonzero(np.asarray(versions.column(LAST_COLUMN).to_numpy()))
    within = ends[ends < rows]
    if len(within):
        return int(within[-1]) + 1
    return int(ends[0]) + 1 if len(ends) else 0


def _gathered(open_run: OpenRun, run_count: int, group: Sequence[str],
              survivors: SpilledRun, combining: Combining | None) -> Iterator[pa.Table]:
    """Per chunk of ``survivors``, its rows' ``group`` columns, in its order (``combining``:
    each key's versions reduced to one row)."""
    opened = [open_run(index, group) for index in range(run_count)]
    try:
        for chunk, rows in _taken(opened, survivors):
            if combining is None:
                yield rows
            else:
                versions = pa.table([*chunk.columns, *rows.columns],
                                    names=[*chunk.schema.names, *rows.schema.names])
                yield combining.reduce(versions, group).select(list(group))
    finally:  # a run's batch read ahead is let go with the group, not with the merge
        _close(opened)


def _close(runs: Sequence[RunBatches]) -> None:
    for run in runs:
        run.close()


def _taken(opened: Sequence[RunBatches], survivors: SpilledRun
           ) -> Iterator[tuple[pa.RecordBatch, pa.Table]]:
    """Per chunk, the chunk and its rows of the runs: each run's rows from the first to the
    last position the chunk takes of it, side by side, and one take from them all."""
    run_count = len(opened)
    cursors = [_ValueCursor(run) for run in opened]
    for chunk in survivors.batches():
        runs = np.asarray(chunk.column(RUN_COLUMN).to_numpy())
        positions = np.asarray(chunk.column(POSITION_COLUMN).to_numpy())
        first = np.full(run_count, np.iinfo(np.int64).max, np.int64)
        last = np.full(run_count, -1, np.int64)
        np.minimum.at(first, runs, positions)
        np.maximum.at(last, runs, positions)
        taken = np.flatnonzero(last >= 0)
        windows = [cursors[run].window(int(first[run]), int(last[run])) for run in taken]
        starts = np.zeros(run_count, np.int64)
        starts[taken] = np.cumsum([0, *(w.num_rows for w in windows[:-1])])
        rows = concat(windows)
        yield chunk, rows.take(arrow_of(starts[runs] + positions - first[runs]))


class _ValueCursor:
    """One run's batches of a group of columns, read front to back as windows of positions
    are asked for (ascending across calls); the rows before a window's end are let go."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._held: list[pa.RecordBatch] = []
        self._start = 0  # the position of the first held row
        self._end = 0  # the position after the last held row

    def window(self, first: int, last: int) -> pa.Table:
        """The rows at positions ``first`` to ``last``, both included."""
        while self._end <= last:
            batch = next(self._batches, None)
            if batch is None:
                raise ValueError(f"a run ended at row {self._end} before row {last}: "
                                 "its files changed between its reads")
            self._held.append(batch)
            self._end += batch.num_rows
        pieces = []
        offset = self._start
        for batch in self._held:
            low, high = max(first, offset), min(last + 1, offset + batch.num_rows)
            if high > low:
                pieces.append(batch.slice(low - offset, high - low))
            offset += batch.num_rows
        while self._held and self._start + self._held[0].num_rows <= last + 1:
            self._start += self._held.pop(0).num_rows
        return concat(pieces)


def _assembled(survivors: SpilledRun, groups: Sequence[Iterator[pa.Table | pa.RecordBatch]],
               output_columns: Sequence[str], combining: Combining | None
               ) -> Iterator[pa.Table]:
    """Chunk by chunk, the survivors' narrow columns (``combining``: their versions reduced
    to a row per key) beside the groups' columns."""
    for chunk in survivors.batches():
        narrow: pa.Table | pa.RecordBatch = chunk if combining is None else \
            combining.reduce(pa.Table.from_batches([chunk]), combining.narrow_values)
        columns = dict(zip(narrow.schema.names, narrow.columns, strict=True))
        for group in groups:
            part = next(group)
            columns.update(zip(part.schema.names, part.columns, strict=True))
        yield pa.table([columns[name] for name in output_columns], names=list(output_columns))
