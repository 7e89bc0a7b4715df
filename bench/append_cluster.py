"""Benchmark: filtered scans of a bucket-unaware append table before compaction, after
paimond's compaction and after its z-order (and order) sort compaction, in one run.

pypaimon writes one unpartitioned append table in N commits (one parquet file each) with two
INT columns ``a`` and ``b`` spread uniformly over [0, 1,000,000) and a string payload. Each
variant is a copy of that table: ``before`` as written, ``compacted`` after ``compact``,
``zorder`` after ``compact --zorder-by a,b``, ``order`` after ``compact --order-by a``. A point
query ``a = v`` (and ``b = v``) first skips the live files whose manifest statistics exclude
``v`` (as a Paimon reader does), then reads the rest with pyarrow's dataset filter (which
prunes row groups by their statistics). Prints, per variant, the files and the share a
query skips, the mean query time, and its ratio to ``before``; also the time of each
maintenance job.

    .venv/bin/python bench/append_cluster.py [--files 200] [--rows-per-file 5000] [--queries 30]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def generate(warehouse: Path, files: int, rows_per_file: int) -> None:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.int32()),
                        ("b", pa.int32()), ("payload", pa.string())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table("bench.t", Schema.from_pyarrow_schema(
        schema, options={"bucket": "-1", "file.format": "parquet",
                         "target-file-size": "1 mb"}), True)
    table = catalog.get_table("bench.t")
    rng = np.random.default_rng(11)
    for n in range(files):
        ids = np.arange(n * rows_per_file, (n + 1) * rows_per_file)
        data = pa.table({"id": ids, "a": rng.integers(0, 1_000_000, len(ids), dtype=np.int32),
                         "b": rng.integers(0, 1_000_000, len(ids), dtype=np.int32),
                         "payload": pa.array([f"row-{i}" for i in ids.tolist()])},
                        schema=schema)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _table(warehouse: Path) -> Any:
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    return open_table(open_storage(str(warehouse)), str(warehouse), "bench.t")


def live_files(warehouse: Path) -> list[tuple[str, dict[str, tuple[int, int]]]]:
    """(path, column -> (min, max)) of every live file, from the manifests."""
    from paimond.format.binary.binary_row import decode_manifest_row
    from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot

    table = _table(warehouse)
    schema = table.latest_schema()
    by_name = {f.name: f.type for f in schema.fields}
    out = []
    for live in scan_snapshot(table, table.snapshots.latest()).files:
        stats, names = live.meta.value_stats, live.meta.value_stats_cols
        names = list(by_name) if names is None else list(names)
        ranges = {c: (-(2**31), 2**31) for c in ("a", "b")}  # no statistics: read the file
        if stats.min_values and names:
            types = [by_name[n] for n in names]
            low = decode_manifest_row(stats.min_values, types)
            high = decode_manifest_row(stats.max_values, types)
            ranges.update({n: (low[i], high[i]) for i, n in enumerate(names)
                           if n in ("a", "b") and low[i] is not None})
        out.append((data_file_path(table, schema, live), ranges))
    return out


def query(files: list[tuple[str, dict[str, tuple[int, int]]]], column: str, value: int
          ) -> tuple[int, int]:
    """Rows matching ``column = value`` and the files opened."""
    import pyarrow.dataset as ds

    wanted = [path for path, ranges in files
              if ranges[column][0] <= value <= ranges[column][1]]
    if not wanted:
        return 0, 0
    found = ds.dataset(wanted, format="parquet").to_table(filter=ds.field(column) == value)
    return found.num_rows, len(wanted)


def measure(warehouse: Path, points: dict[str, list[int]]) -> dict[str, float]:
    files = live_files(warehouse)
    out: dict[str, float] = {"files": float(len(files))}
    for column, values in points.items():
        started = time.perf_counter()
        opened = rows = 0
        for value in values:
            found, count = query(files, column, value)
            rows += found
            opened += count
        out[f"{column}_s"] = (time.perf_counter() - started) / len(values)
        out[f"{column}_skip"] = 1 - opened / len(values) / len(files)
        out[f"{column}_rows"] = rows
    return out


def maintain(warehouse: Path, **settings: Any) -> float:
    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.jobs import JOBS, JobContext

    job = JOBS["compact"]
    started = time.perf_counter()
    job.run(_table(warehouse), job.settings(**settings), JobContext(clock=SYSTEM_CLOCK))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows-per-file", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="paimond-bench-cluster-"))
    try:
        base = root / "before"
        started = time.perf_counter()
        generate(base, args.files, args.rows_per_file)
        print(f"wrote {args.files} files x {args.rows_per_file} rows in "
              f"{time.perf_counter() - started:.1f} s")
        rng = random.Random(5)
        points = {c: [rng.randrange(1_000_000) for _ in range(args.queries)] for c in "ab"}
        variants = {"before": {}, "compacted": {}, "zorder": {"order_strategy": "zorder",
                                                            "order_by": ("a", "b")},
                    "order": {"order_strategy": "order", "order_by": ("a",)}}
        results = {}
        for name, settings in variants.items():
            warehouse = root / name
            if name != "before":
                shutil.copytree(base, warehouse)
                seconds = maintain(warehouse, **settings)
                print(f"{name}: maintenance {seconds:.2f} s")
            results[name] = measure(warehouse, points)
        reference = results["before"]
        for name, figures in results.items():
            assert figures["a_rows"] == reference["a_rows"], name  # same answers
            assert figures["b_rows"] == reference["b_rows"], name
            print(f"{name:10} files {int(figures['files']):4}  "
                  + "  ".join(f"{c}=v: skips {figures[c + '_skip']:6.1%}, "
                              f"{figures[c + '_s'] * 1000:7.1f} ms "
                              f"({reference[c + '_s'] / figures[c + '_s']:5.1f}x)"
                              for c in "ab"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
