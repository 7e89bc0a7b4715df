"""Benchmark: what a file index adds to writing a data file, per index type, in one run.

For N rows (default 1M) of a BIGINT column with many distinct values and a STRING column
with 5,000, the baseline is pyarrow writing them as one zstd parquet file (what a data file
costs to write). Each index type is then built over each column from the same Arrow arrays,
the way paimond's writer feeds it, and its time is printed as a ratio to the baseline, with
the index's size.

    .venv/bin/python bench/file_index.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import io
import time


def main() -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from paimond.errors import UnsupportedError
    from paimond.format.file_index import build_file_index
    from paimond.format.types.data_types import BigIntType, VarCharType

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    ids = pa.array(rng.integers(0, args.rows * 10, args.rows))
    users = pa.array([f"user-{i}" for i in rng.integers(0, 5000, args.rows).tolist()])
    table = pa.table({"id": ids, "user": users})

    started = time.perf_counter()
    pq.write_table(table, io.BytesIO(), compression="zstd")
    baseline = time.perf_counter() - started
    print(f"{args.rows:,} rows: parquet write {baseline:.3f} s (baseline)")
    columns = {"id": (BigIntType(), ids), "user": (VarCharType(length=2**31 - 1), users)}
    for index_type in ("bloom-filter", "bitmap", "range-bitmap", "bsi"):
        for column, (data_type, values) in columns.items():
            options = {f"file-index.{index_type}.columns": column}
            started = time.perf_counter()
            try:
                container = build_file_index({column: (data_type, values)}, options)
            except UnsupportedError as error:
                print(f"  {index_type:13s} {column:5s} not supported ({error})")
                continue
            seconds = time.perf_counter() - started
            size = len(container) if container else 0
            print(f"  {index_type:13s} {column:5s} {seconds:7.3f} s = {seconds / baseline:5.2f}x "
                  f"the parquet write, {size / 1e6:7.2f} MB")


if __name__ == "__main__":
    main()
