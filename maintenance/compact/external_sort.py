"""Sorting a partition bigger than the memory budget: an external merge sort, as Java's sort
compaction spills to disk (Spark's external sorter).

Rows are read in batches; whenever the batches held reach half the budget they are sorted
(:class:`SortOrder`) and written to a local temporary file as one sorted run (Arrow IPC, in
small batches). A partition that never fills half the budget is sorted in memory, as before.
The runs are then merged: each holds one small batch in memory; at each step the smallest of
the runs' last rows bounds what can be emitted (every row at or below it, from every run),
those rows are sorted together and emitted, and a run whose batch is used up reads its next.
The rows come out in the order one sort of the whole partition gives; rows with equal keys may
come out in another order among themselves (Java leaves that order open too).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.types.data_types import DataField
from paimond.maintenance.compact.sort_order import sort_indices, sort_key_column

KEY_COLUMN = "_PAIMOND_SORT_KEY"
_RUN_BATCHES = 32  # a run is written in this many batches: the merge holds one of each


@dataclass(frozen=True, slots=True)
class SortOrder:
    """A sort compaction's order: the strategy (``order``, ``zorder``, ``hilbert``) on the
    columns (:mod:`paimond.maintenance.compact.sort_order`)."""

    strategy: str
    columns: tuple[str, ...]
    fields: tuple[DataField, ...]
    var_size: int = 8

    def in_memory(self, table: pa.Table) -> pa.Table:
        return table.take(sort_indices(table, self.fields, self.strategy, self.columns,
                                       self.var_size))

    def keyed(self, table: pa.Table) -> pa.Table:
        """``table`` with what the merge compares: the order columns themselves, or the
        strategy's key bytes as one more column."""
        if self.strategy == "order":
            return table
        return table.append_column(KEY_COLUMN, sort_key_column(
            table, self.fields, self.strategy, self.columns, self.var_size))

    @property
    def sort_keys(self) -> list[tuple[str, str]]:
        names = self.columns if self.strategy == "order" else (KEY_COLUMN,)
        return [(name, "ascending") for name in names]

    def indices(self, table: pa.Table) -> pa.Array:
        """The stable permutation of a keyed table."""
        return pc.sort_indices(table, sort_keys=self.sort_keys, null_placement="at_start")


def sorted_batches(batches: Iterable[pa.RecordBatch], order: SortOrder, budget_bytes: int,
                   batch_rows: int, spill_dir: str | None = None) -> Iterator[pa.RecordBatch]:
    """``batches``' rows in ``order``, in batches of at most ``batch_rows``, holding about
    ``budget_bytes`` of rows at a time (module doc); the spill files are deleted at the end."""
    held: list[pa.RecordBatch] = []
    size = 0
    directory: str | None = None
    runs: list[str] = []
    try:
        for batch in batches:
            held.append(batch)
            size += batch.nbytes
            if size >= budget_bytes // 2:
                directory = directory or tempfile.mkdtemp(prefix="paimond-sort-", dir=spill_dir)
                runs.append(_spill(order, pa.Table.from_batches(held), directory, len(runs)))
                held, size = [], 0
        if not runs:
            if held:
                yield from order.in_memory(pa.Table.from_batches(held)).to_batches(batch_rows)
            return
        if held:
            runs.append(_spill(order, pa.Table.from_batches(held), directory or "", len(runs)))
            held = []
        yield from _merge([_Run(path) for path in runs], order, batch_rows)
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def _spill(order: SortOrder, table: pa.Table, directory: str, number: int) -> str:
    keyed = order.keyed(table)
    keyed = keyed.take(order.indices(keyed))
    path = os.path.join(directory, f"run-{number}.arrow")
    rows = max(1, -(-keyed.num_rows // _RUN_BATCHES))
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, keyed.schema) as writer:
        for batch in keyed.to_batches(rows):
            writer.write_batch(batch)
    return path


class _Run:
    """A sorted run read back one batch at a time."""

    def __init__(self, path: str) -> None:
        self._file = pa.OSFile(path, "rb")
        self._reader = pa.ipc.open_file(self._file)
        self._next = 0
        self.block: pa.Table | None = None
        self.advance()

    def advance(self) -> None:
        """The next non-empty batch as ``block`` (None at the end)."""
        self.block = None
        while self._next < self._reader.num_record_batches:
            batch = self._reader.get_batch(self._next)
            self._next += 1
            if batch.num_rows:
                self.block = pa.Table.from_batches([batch])
                return
        self._file.close()


def _merge(runs: Sequence[_Run], order: SortOrder, batch_rows: int) -> Iterator[pa.RecordBatch]:
    keys = [name for name, _ in order.sort_keys]
    active = [run for run in runs if run.block is not None]
    while active:
        blocks = [run.block for run in active]
        assert all(b is not None for b in blocks)
        lasts = pa.concat_tables([b.select(keys).slice(b.num_rows - 1, 1)  # type: ignore[union-attr]
                                  for b in blocks])
        smallest = int(order.indices(lasts)[0].as_py())
        bound = lasts.slice(smallest, 1)
        pieces: list[pa.Table] = []
        for position, run in enumerate(active):
            block = run.block
            assert block is not None
            taken = block.num_rows if position == smallest else _at_or_below(block, bound, order)
            if taken:
                pieces.append(block.slice(0, taken))
            if taken == block.num_rows:
                run.advance()
            else:
                run.block = block.slice(taken)
        merged = pa.concat_tables(pieces)
        merged = merged.take(order.indices(merged))
        if KEY_COLUMN in merged.column_names:
            merged = merged.drop_columns([KEY_COLUMN])
        yield from merged.to_batches(batch_rows)
        active = [run for run in active if run.block is not None]


def _at_or_below(block: pa.Table, bound: pa.Table, order: SortOrder) -> int:
    """How many of ``block``'s first rows (sorted) are at or below ``bound``: where the bound
    lands in a stable sort of the block's keys followed by it (equal rows stay before it)."""
    keys = [name for name, _ in order.sort_keys]
    together = pa.concat_tables([block.select(keys), bound])
    permutation = order.indices(together).to_numpy()
    return int(np.flatnonzero(permutation == block.num_rows)[0])
