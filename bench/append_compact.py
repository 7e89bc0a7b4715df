"""Benchmark: paimond's compaction of a bucket-unaware append table of many small files
against a plain pyarrow read + write of the same files, in one run.

pypaimon writes one unpartitioned append table (``bucket=-1``) in N small commits (one parquet
file each). Then, each in a fresh process (so peak RSS is its own):
  - paimond-1, paimond: the ``compact`` job (plan, read every small file, write rolling
    files with statistics, commit) with one task at a time, and with the default pool;
  - rewrite: pyarrow reads the same data files and writes them as one parquet file (no
    planning, no Paimon statistics, no commit): the floor for the same bytes moved.
Prints seconds, rows/s, files before and after, peak RSS and the ratio.

    .venv/bin/python bench/append_compact.py [--files 2000] [--rows-per-file 500]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def generate(warehouse: Path, files: int, rows_per_file: int) -> None:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()),
                        ("score", pa.float64()), ("day", pa.string())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table("bench.t", Schema.from_pyarrow_schema(
        schema, options={"bucket": "-1", "file.format": "parquet"}), True)
    table = catalog.get_table("bench.t")
    rng = np.random.default_rng(7)
    for n in range(files):
        ids = np.arange(n * rows_per_file, (n + 1) * rows_per_file)
        data = pa.table({"id": ids, "name": pa.array([f"name-{i % 9973}" for i in ids.tolist()]),
                         "score": rng.random(len(ids)),
                         "day": pa.array(["2026-11-25"] * len(ids))}, schema=schema)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _data_files(warehouse: Path) -> list[Path]:
    return sorted((warehouse / "bench.db" / "t" / "bucket-0").glob("data-*.parquet"))


def run_paimond(warehouse: Path, parallelism: int | None = None) -> dict[str, float]:
    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.jobs import JOBS, JobContext
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    table = open_table(open_storage(str(warehouse)), str(warehouse), "bench.t")
    job = JOBS["compact"]
    started = time.perf_counter()
    report = job.run(table, job.settings(parallelism=parallelism), JobContext(clock=SYSTEM_CLOCK))
    seconds = time.perf_counter() - started
    summary = report.result
    return {"seconds": seconds, "rows": float(summary.rows_read),
            "files_in": float(summary.files_in), "files_out": float(summary.files_out)}


def run_rewrite(warehouse: Path) -> dict[str, float]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = _data_files(warehouse)
    started = time.perf_counter()
    table = pa.concat_tables([pq.read_table(path) for path in files])
    pq.write_table(table, str(warehouse / "rewrite.parquet"))
    rows = table.num_rows
    return {"seconds": time.perf_counter() - started, "rows": float(rows),
            "files_in": float(len(files)), "files_out": 1.0}


def child(kind: str, warehouse: str) -> None:
    runs = {"paimond": run_paimond, "paimond-1": lambda w: run_paimond(w, 1),
            "rewrite": run_rewrite}
    result = runs[kind](Path(warehouse))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def _in_child(kind: str, warehouse: Path) -> dict[str, float]:
    """Runs on a copy: compaction changes the table."""
    copy = warehouse.parent / f"copy-{kind}"
    shutil.copytree(warehouse, copy)
    out = subprocess.run([sys.executable, __file__, "--child", kind, str(copy)],
                         check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rows-per-file", type=int, default=500)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory() as directory:
        warehouse = Path(directory) / "wh"
        started = time.perf_counter()
        generate(warehouse, args.files, args.rows_per_file)
        print(f"== {args.files:,} files of {args.rows_per_file:,} rows (generated in "
              f"{time.perf_counter() - started:.1f} s)")
        results = {kind: _in_child(kind, warehouse) for kind in ("rewrite", "paimond-1", "paimond")}
        for name, r in results.items():
            print(f"  {name:<9} {r['seconds']:8.2f} s  {r['rows'] / r['seconds']:12,.0f} rows/s  "
                  f"files {r['files_in']:.0f} -> {r['files_out']:.0f}  "
                  f"peak RSS {r['peak_rss_mb']:.0f} MB")
        baseline = results["rewrite"]["seconds"]
        for kind in ("paimond-1", "paimond"):
            print(f"  {kind} / pyarrow read+write time: "
                  f"{results[kind]['seconds'] / baseline:.2f}x")


if __name__ == "__main__":
    main()
