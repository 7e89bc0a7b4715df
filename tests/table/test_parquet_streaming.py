"""A large Parquet row group is streamed, not read whole: while its first batch is out, the
reader holds about a page and a read buffer per column, not the column chunk (pyarrow 20 and
later pre-buffer whole chunks by default; a merge has one reader open per sorted run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from paimond.format.types.data_types import BigIntType, DataField, RowType, VarBinaryType
from paimond.table.data_files.parquet_groups import read_parquet_batches

ROWS = 400_000
VALUE_BYTES = 100  # 40 MB of incompressible values in one row group


def _file(tmp_path: Path) -> tuple[Path, RowType]:
    rng = np.random.default_rng(1)
    values = rng.integers(0, 256, ROWS * VALUE_BYTES, dtype=np.uint8).tobytes()
    column = pa.array([values[i * VALUE_BYTES:(i + 1) * VALUE_BYTES] for i in range(ROWS)],
                      pa.binary())
    table = pa.table({"id": pa.array(np.arange(ROWS)), "v": column})
    path = tmp_path / "one-group.parquet"
    pq.write_table(table, path, row_group_size=ROWS, compression="none",
                   use_dictionary=False, data_page_size=1 << 20)
    row_type = RowType(fields=(DataField(0, "id", BigIntType()),
                               DataField(1, "v", VarBinaryType(length=2**31 - 1))))
    return path, row_type


def _held_after_first_batch(batches: object) -> int:
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    first = next(iter(batches))  # type: ignore[call-overload]
    held = pool.bytes_allocated() - before - first.nbytes
    return int(held)


def test_the_merge_reader_streams_a_large_row_group(tmp_path: Path) -> None:
    path, row_type = _file(tmp_path)
    with open(path, "rb") as source:
        batches = read_parquet_batches(source, row_type, batch_rows=4096)
        held = _held_after_first_batch(batches)
        batches.close()
    assert held < 8 << 20, f"{held / 2**20:.1f} MiB held for a 40 MB row group"
