"""Benchmark: paimond's full compaction of one bucket against two baselines, in one run.

For each size (default 2M and 10M rows), pypaimon writes one bucket of a deduplicate table in
20 commits of random, overlapping keys. Then, each in a fresh process (so peak RSS is its own):
  - paimond: full compaction of the bucket (read, merge, write, commit);
  - rewrite: plain pyarrow read of the same data files and one parquet rewrite (no merge);
  - pypaimon: pypaimon's merged read of the table (no write).
Prints seconds, rows/s, peak RSS and the ratios the targets are stated in.

    .venv/bin/python bench/compact.py [--rows 2000000 10000000] [--commits 20]
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

SCHEMA_FIELDS = (("id", "int64", False), ("name", "string", True), ("score", "float64", True),
                 ("rk", "string", True))


def generate(warehouse: Path, rows: int, commits: int) -> None:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field(n, getattr(pa, t)(), nullable=null) for n, t, null in SCHEMA_FIELDS])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table("bench.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "rk",
                                              "target-file-size": "512 mb"}), True)
    table = catalog.get_table("bench.t")
    rng = np.random.default_rng(7)
    per_commit = rows // commits
    for _ in range(commits):
        ids = np.unique(rng.integers(0, rows, per_commit))
        data = pa.table({
            "id": ids, "name": pa.array([f"name-{i % 9973}" for i in ids.tolist()]),
            "score": rng.random(len(ids)), "rk": pa.array(["+I"] * len(ids)),
        }, schema=schema)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _data_files(warehouse: Path) -> list[Path]:
    return sorted((warehouse / "bench.db" / "t" / "bucket-0").glob("data-*.parquet"))


def run_paimond(warehouse: Path) -> dict[str, float]:
    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.compact.job import CompactJob
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    table = open_table(open_storage(str(warehouse)), str(warehouse), "bench.t")
    started = time.perf_counter()
    summary = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
    elapsed = time.perf_counter() - started
    assert summary.snapshot is not None and not summary.failures, summary.describe()
    return {"seconds": elapsed, "rows_in": summary.rows_read, "rows_out": summary.rows_written}


def run_rewrite(warehouse: Path) -> dict[str, float]:
    import pyarrow.parquet as pq

    started = time.perf_counter()
    rows = 0
    with pq.ParquetWriter(str(warehouse / "rewrite.parquet"),
                          pq.read_schema(str(_data_files(warehouse)[0])),
                          compression="zstd") as writer:
        for path in _data_files(warehouse):
            for batch in pq.ParquetFile(str(path)).iter_batches(batch_size=65536):
                writer.write_batch(batch)
                rows += batch.num_rows
    return {"seconds": time.perf_counter() - started, "rows_in": rows, "rows_out": rows}


def run_pypaimon(warehouse: Path) -> dict[str, float]:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table("bench.t")
    started = time.perf_counter()
    builder = table.new_read_builder()
    result = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return {"seconds": time.perf_counter() - started, "rows_in": -1, "rows_out": result.num_rows}


CONTENDERS = {"paimond": run_paimond, "rewrite": run_rewrite, "pypaimon": run_pypaimon}


def _peak_rss_mb() -> float:
    """This process's peak RSS. Linux's ru_maxrss survives exec, so a child would report the
    benchmark parent's RSS at fork time (pypaimon just generated the data) whenever that is
    higher than its own; VmHWM belongs to the address space exec created."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(name: str, warehouse: str) -> None:
    result = CONTENDERS[name](Path(warehouse))
    result["peak_rss_mb"] = _peak_rss_mb()
    print(json.dumps(result))


def measure(name: str, source: Path, scratch: Path) -> dict[str, float]:
    copy = scratch / name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    out = subprocess.run([sys.executable, __file__, "--child", name, str(copy)], check=True,
                         capture_output=True, text=True)
    shutil.rmtree(copy, ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 10_000_000])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    paimond_rss: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="paimond-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        for rows in args.rows:
            source = scratch / f"source-{rows}"
            started = time.perf_counter()
            generate(source, rows, args.commits)
            print(f"\n== {rows:,} rows in {args.commits} commits (generated in "
                  f"{time.perf_counter() - started:.1f} s, {len(_data_files(source))} files)")
            results = {name: measure(name, source, scratch) for name in CONTENDERS}
            for name, r in results.items():
                rate = rows / r["seconds"]
                print(f"  {name:<9} {r['seconds']:8.2f} s  {rate:12,.0f} input rows/s  "
                      f"peak RSS {r['peak_rss_mb']:7.1f} MB  rows out {int(r['rows_out']):,}")
            p, rw, py = (results[n]["seconds"] for n in ("paimond", "rewrite", "pypaimon"))
            print(f"  paimond / rewrite baseline time: {p / rw:.2f}x (target <= 0.8x)")
            print(f"  pypaimon merged read / paimond time: {py / p:.1f}x (target >= 20x)")
            paimond_rss[rows] = results["paimond"]["peak_rss_mb"]
            shutil.rmtree(source, ignore_errors=True)
    if len(paimond_rss) > 1:
        (small, rss_small), (large, rss_large) = sorted(paimond_rss.items())[0], sorted(
            paimond_rss.items())[-1]
        growth = (rss_large - rss_small) / ((large - small) / 1e6)
        print(f"\npaimond peak RSS growth: {growth:.1f} MB per extra million rows "
              f"(target < 25); at {large:,} rows {rss_large:.0f} MB (target < 600)")


if __name__ == "__main__":
    main()
