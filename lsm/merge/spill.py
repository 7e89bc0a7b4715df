"""Sorted runs spilled to local files, so that a merge never reads more than a bounded number
of runs at once (Java ``MergeSorter`` with ``sort-spill-threshold``).

A bucket whose section has more sorted runs than the memory budget lets it read together is
merged in passes: groups of runs are merged into one run each, keeping every row (no merge
engine applies: rows only take the (key, user sequence, sequence) order the final merge
sorts them in), and written to a local Arrow IPC file; the final merge then reads those files
as its runs and reduces the rows as it would have reduced the original runs. A spilled run is
written one merged table per IPC batch; a merged table holds whole keys, so a key's versions
never straddle two batches of a run, which the merge's cut needs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator, Iterable

import pyarrow as pa

from paimond.lsm.merge.streaming import SortedSlice, arrow_of

SPILL_COMPRESSION = "lz4"


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
