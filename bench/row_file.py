"""Benchmark: .row (paimond) against Parquet (pyarrow) for point lookups and full scans.

Run: ``.venv/bin/python bench/row_file.py [rows]`` (default 1,000,000 rows; under two minutes).

Both formats hold the same rows (id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP(6),
amount DECIMAL(18, 2)) in a temporary directory, so reads come from the OS page cache; this
measures decoding work, not storage latency. Parquet is written three ways: pyarrow's defaults
(zstd, one row group per 1Mi rows), and with 64Ki-row and 8Ki-row groups plus the page index.
A Parquet point lookup is the best pyarrow offers without a custom reader: keep the file and
its metadata open, find the row group by its row counts, ``read_row_group`` it and slice one
row. pyarrow does not use the page index to read single pages, so it cannot help here.
"""

from __future__ import annotations

import bisect
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from paimond.format.row_file.file import RowFileReader, RowFileWriter
from paimond.format.types.data_types import (
    MAX_LENGTH,
    BigIntType,
    DecimalType,
    DoubleType,
    TimestampType,
    VarCharType,
    row_type,
)

ROW_TYPE = row_type(("id", BigIntType(nullable=False)), ("name", VarCharType(length=MAX_LENGTH)),
                    ("score", DoubleType()), ("ts", TimestampType(precision=6)),
                    ("amount", DecimalType(precision=18, scale=2)))
LOOKUPS = 2000
LOOKUPS_WHOLE_FILE_GROUP = 30  # a lookup in a one-row-group file decodes the whole file


def make_table(rows: int) -> pa.Table:
    rng = random.Random(42)
    start = dt.datetime(2024, 1, 1)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "name": [f"{rng.choice(words)}-{rng.randrange(100_000)}" if i % 17 else None
                 for i in range(rows)],
        "score": [rng.random() * 1000 for _ in range(rows)],
        "ts": pa.array([start + dt.timedelta(microseconds=rng.randrange(10**13))
                        for _ in range(rows)], pa.timestamp("us")),
        "amount": pa.array([Decimal(rng.randrange(-10**8, 10**8)).scaleb(-2) for _ in range(rows)],
                           pa.decimal128(18, 2)),
    })


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    begin = time.perf_counter()
    result = action()
    return time.perf_counter() - begin, result


def latencies_us(lookup: Callable[[int], Any], row_numbers: list[int]) -> tuple[float, float]:
    samples = []
    for n in row_numbers:
        begin = time.perf_counter_ns()
        lookup(n)
        samples.append((time.perf_counter_ns() - begin) / 1000)
    cuts = statistics.quantiles(samples, n=100)
    return statistics.median(samples), cuts[98]


def parquet_lookup(path: str) -> Callable[[int], Any]:
    parquet = pq.ParquetFile(path)
    starts = [0]
    for g in range(parquet.metadata.num_row_groups):
        starts.append(starts[-1] + parquet.metadata.row_group(g).num_rows)

    def lookup(row_number: int) -> Any:
        group = bisect.bisect_right(starts, row_number) - 1
        return parquet.read_row_group(group).slice(row_number - starts[group], 1).to_pylist()[0]

    return lookup


def main(rows: int) -> None:
    print(f"generating {rows:,} rows ...")
    table = make_table(rows)
    rng = random.Random(7)
    row_numbers = [rng.randrange(rows) for _ in range(LOOKUPS)]
    with tempfile.TemporaryDirectory() as directory:
        row_path = os.path.join(directory, "data.row")

        def write_row() -> None:
            with open(row_path, "wb") as sink:
                writer = RowFileWriter(sink, ROW_TYPE)
                for batch in table.to_batches(max_chunksize=65536):
                    writer.write_batch(batch)
                writer.close()

        write_s, _ = timed(write_row)
        variants = {"parquet (defaults)": {},
                    "parquet (64Ki-row groups, page index)": {"row_group_size": 65536,
                                                              "write_page_index": True},
                    "parquet (8Ki-row groups, page index)": {"row_group_size": 8192,
                                                             "write_page_index": True}}
        parquet_write_s = {}
        for name, options in variants.items():
            path = os.path.join(directory, name.replace(" ", "_") + ".parquet")
            parquet_write_s[name], _ = timed(
                lambda p=path, o=options: pq.write_table(table, p, compression="zstd", **o))
        print(f"\n{'format':42} {'size MB':>8} {'write s':>8}")
        print(f"{'.row (64 KiB blocks, zstd 1)':42} {os.path.getsize(row_path) / 1e6:8.1f} "
              f"{write_s:8.2f}")
        for name in variants:
            path = os.path.join(directory, name.replace(" ", "_") + ".parquet")
            print(f"{name:42} {os.path.getsize(path) / 1e6:8.1f} {parquet_write_s[name]:8.2f}")

        with open(row_path, "rb") as source:
            reader = RowFileReader(source, ROW_TYPE, path=row_path)
            assert reader.read_row(row_numbers[0])[0] == row_numbers[0]
            row_p50, row_p99 = latencies_us(reader.read_row, row_numbers)
            print(f"\npoint lookups ({LOOKUPS} random rows; {reader.block_count} blocks, "
                  f"{reader.blocks_decompressed} decompressed)")
            print(f"{'format':52} {'p50 us':>10} {'p99 us':>10} {'p50 ratio':>10} {'p99 ratio':>10}")
            print(f"{'.row':52} {row_p50:10.1f} {row_p99:10.1f}")
            for name in variants:
                path = os.path.join(directory, name.replace(" ", "_") + ".parquet")
                lookup = parquet_lookup(path)
                assert lookup(row_numbers[0])["id"] == row_numbers[0]
                groups = pq.ParquetFile(path).metadata.num_row_groups
                sample = row_numbers[:LOOKUPS_WHOLE_FILE_GROUP] if groups == 1 else row_numbers
                p50, p99 = latencies_us(lookup, sample)
                print(f"{name + f' [{len(sample)} rows]':52} {p50:10.1f} {p99:10.1f} "
                      f"{p50 / row_p50:10.1f} {p99 / row_p99:10.1f}")

            print(f"\nfull scan to Arrow\n{'format':42} {'s':>8} {'rows/s':>12}")
            scan_s, count = timed(lambda: sum(b.num_rows for b in reader.read_batches()))
            assert count == rows
            print(f"{'.row':42} {scan_s:8.2f} {rows / scan_s:12,.0f}")
        for name in variants:
            path = os.path.join(directory, name.replace(" ", "_") + ".parquet")
            scan_s, scanned = timed(lambda p=path: pq.read_table(p))
            assert scanned.num_rows == rows
            print(f"{name:42} {scan_s:8.2f} {rows / scan_s:12,.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
