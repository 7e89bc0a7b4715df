"""Sorted runs spilled to local files, so that a merge never reads more than a bounded number
of runs at once (Java ``MergeSorter`` with ``sort-spill-threshold``).

A bucket whose section has more sorted runs than the memory budget lets it read together is
merged in passes: groups of runs are merged into one run each, keeping every row (no merge
engine applies: rows only take the (key, user sequence, sequence) order the final merge
sorts them in), and written to a local Arrow IPC file; the final merge then reads those files
as its runs and reduces the rows as it would have reduced the original runs. A spilled run is
written one merged table per IPC batch; a merged table holds whole keys, so a key's versions
never straddle two batches of a run, which the merge's cut needs.

A run's data-file reader holds more than its batches: per column the page it decodes (writers
cut Parquet pages at about 1 MB, so a column chunk smaller than that is one page, held whole),
a dictionary beside it and a read buffer (``table.data_files.parquet_groups``). On a wide table
that is most of what a merge holds: 500 columns of 15,000-row files, about 130 MB per run. A
merge whose runs' readers do not fit its bound together (:func:`plan_run_reading`) reads the
runs with the largest readers beforehand, each alone, into spill files, which hold no more than
their batches when read back; the other runs it reads from their files as before.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from paimond.lsm.merge.streaming import SortedSlice, arrow_of

SPILL_COMPRESSION = "lz4"
PAGE_BYTES = 1 << 20  # Parquet writers' page size (Java's and pyarrow's default)
VARIABLE_WIDTH_BYTES = 32  # a string or binary value of unknown length


def value_width(data_type: pa.DataType) -> int:
    """Decoded bytes of one value of ``data_type`` (variable width: an allowance)."""
    if pa.types.is_struct(data_type):
        return sum(value_width(f.type) for f in data_type)
    try:
        return max(1, int(data_type.bit_width) // 8)
    except ValueError:  # variable width: strings, binaries, lists, maps
        return VARIABLE_WIDTH_BYTES


def file_reader_bytes(schema: pa.Schema, rows: int, buffer_bytes: int) -> int:
    """What a reader of a data file of ``rows`` rows of ``schema`` holds besides its batches:
    per column a page (the whole column chunk when that is smaller), as much again for a
    variable-width column's dictionary, and a read buffer of ``buffer_bytes``."""
    held = 0
    for field in schema:
        width = value_width(field.type)
        page = min(PAGE_BYTES, max(1, rows) * width)
        held += page * (2 if width == VARIABLE_WIDTH_BYTES else 1) + buffer_bytes
    return held


@dataclass(frozen=True, slots=True)
class RunReading:
    """How a merge reads its runs (indexes into them): ``spilled`` groups are read beforehand,
    each into one spill file (a group of several is merged, every row kept), the others from
    their files by the merge itself."""

    spilled: tuple[tuple[int, ...], ...] = ()

    @property
    def spills(self) -> bool:
        return bool(self.spilled)


def plan_run_reading(reader_bytes: Sequence[int], limit_bytes: int | None,
                     max_runs: int | None) -> RunReading:
    """Which runs to spill so that the readers the merge holds at once stay within
    ``limit_bytes`` (None: no limit) and it reads at most ``max_runs`` runs (None: all).

    More runs than ``max_runs``: every run is spilled, in groups of consecutive runs of at
    most ``max_runs`` whose readers fit the limit together (a run alone when even two do not);
    later passes merge the spill files further. Otherwise the runs with the largest readers
    are spilled, each alone, until the rest fit."""
    count = len(reader_bytes)
    if max_runs is not None and count > max_runs:
        groups: list[tuple[int, ...]] = []
        group: list[int] = []
        held = 0
        for index, size in enumerate(reader_bytes):
            if group and (len(group) == max_runs
                          or (limit_bytes is not None and held + size > limit_bytes)):
                groups.append(tuple(group))
                group, held = [], 0
            group.append(index)
            held += size
        groups.append(tuple(group))
        return RunReading(tuple(groups))
    if limit_bytes is None or sum(reader_bytes) <= limit_bytes:
        return RunReading()
    held = sum(reader_bytes)
    alone: list[int] = []
    for index in sorted(range(count), key=lambda i: (-reader_bytes[i], i)):
        if held <= limit_bytes:
            break
        alone.append(index)
        held -= reader_bytes[index]
    return RunReading(tuple((index,) for index in sorted(alone)))


def every_row(sorted_rows: SortedSlice) -> pa.Table:
    """The merge's reducer for a spill pass: all rows, in the merge's order."""
    return sorted_rows.rows.take(arrow_of(sorted_rows.order))


class SpillDirectory:
    """A local temporary directory of spilled runs, deleted whole when closed."""

    def __init__(self, parent: str | None = None) -> None:
        self.path = tempfile.mkdtemp(prefix="paimond-merge-", dir=parent)
        self._count = 0

    def spill(self, tables: Iterable[pa.Table]) -> SpilledRun:
        """Write ``tables`` (sorted, each of whole keys) as one run."""
        path = os.path.join(self.path, f"run-{self._count}.arrow")
        self._count += 1
        options = pa.ipc.IpcWriteOptions(compression=SPILL_COMPRESSION)
        writer: pa.ipc.RecordBatchFileWriter | None = None
        schema: pa.Schema | None = None
        with pa.OSFile(path, "wb") as sink:
            try:
                for table in tables:
                    if schema is None:
                        schema = table.schema
                        writer = pa.ipc.new_file(sink, schema, options=options)
                    elif table.schema != schema:
                        table = table.cast(schema)
                    assert writer is not None
                    if table.num_rows:
                        writer.write_batch(table.combine_chunks().to_batches()[0])
            finally:
                if writer is not None:
                    writer.close()
        return SpilledRun(path if writer is not None else None)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> SpillDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SpilledRun:
    """One spilled run (``path`` None: it had no rows), read back a batch at a time."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def batches(self) -> Generator[pa.RecordBatch, None, None]:
        if self.path is None:
            return
        with pa.OSFile(self.path, "rb") as source:
            reader = pa.ipc.open_file(source)
            for index in range(reader.num_record_batches):
                yield reader.get_batch(index)
